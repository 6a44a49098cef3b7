"""Reading juries: one qrels file per judge, or a details JSONL file; abstentions kept as such."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from judgeblender.blend import ABSTAIN, BallotTable, Vote, load_ballots, load_details, load_qrels_ballots
from judgeblender.blend.load import judge_id_for
from judgeblender.errors import InputError


def write(path, text):
    path.write_text(text)
    return path


@pytest.fixture
def three_judges(tmp_path):
    a = write(tmp_path / "sun.qrels", "q1 0 d1 2\nq1 0 d2 0\nq2 0 d3 1\n")
    b = write(tmp_path / "thomas.qrels", "q1 0 d1 3\nq2 0 d3 1\n")
    c = write(tmp_path / "mc.txt", "q1 0 d2 1\nq3 0 d4 0\n")
    return a, b, c


def test_one_judge_per_file_named_after_the_file(three_judges):
    table = load_qrels_ballots(three_judges)
    assert table.judges == ("sun", "thomas", "mc")
    # pairs in order of first appearance over the files
    assert table.pairs == (("q1", "d1"), ("q1", "d2"), ("q2", "d3"), ("q3", "d4"))
    assert table.labels.tolist() == [
        [2, 3, ABSTAIN],
        [0, ABSTAIN, 1],   # thomas has no line for q1 d2: it abstained
        [1, 1, ABSTAIN],
        [ABSTAIN, ABSTAIN, 0],
    ]
    assert table.abstentions() == {"sun": 1, "thomas": 2, "mc": 2}
    assert table.probs is None


def test_judge_ids_drop_gz_and_one_suffix():
    assert judge_id_for("runs/sun-then-decomposed.qrels.gz") == "sun-then-decomposed"
    assert judge_id_for("x/thomas.txt") == "thomas"
    assert judge_id_for("plain") == "plain"


def test_gzipped_qrels_are_read(tmp_path):
    path = tmp_path / "z.qrels.gz"
    path.write_bytes(gzip.compress(b"q1 0 d1 3\n"))
    assert load_qrels_ballots([path]).labels.tolist() == [[3]]


def test_two_files_with_the_same_name_are_refused(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    first = write(tmp_path / "x" / "judge.qrels", "q1 0 d1 1\n")
    second = write(tmp_path / "y" / "judge.qrels", "q1 0 d1 2\n")
    with pytest.raises(InputError, match=r"give NAME=PATH to rename\) but two share an id \(judge: "):
        load_qrels_ballots([first, second])
    # NAME=PATH disambiguates
    table = load_qrels_ballots([f"x={first}", f"y={second}"])
    assert table.judges == ("x", "y") and table.labels.tolist() == [[1, 2]]


def test_a_label_outside_0_to_3_names_file_and_line(tmp_path):
    path = write(tmp_path / "j.qrels", "q1 0 d1 1\nq1 0 d2 4\n")
    with pytest.raises(InputError, match=r"j\.qrels:2: expected a label in \[0, 1, 2, 3\]"):
        load_qrels_ballots([path])


def test_unreadable_labels_can_count_as_abstentions(tmp_path):
    # a real published file has "1." labels; asked to, the judge abstains there and it is counted
    path = write(tmp_path / "j.qrels", "q1 0 d1 1\nq1 0 d2 1.\nq1 0 d3 7\n")
    table = load_qrels_ballots([path], invalid_labels="abstain")
    assert table.labels.tolist() == [[1], [ABSTAIN], [ABSTAIN]]
    assert table.invalid == {"j": 2}
    with pytest.raises(InputError, match=r"j\.qrels:2"):
        load_qrels_ballots([path])


def test_lenient_reading_still_needs_four_columns(tmp_path):
    path = write(tmp_path / "j.qrels", "q1 0 d1 1\nq1 d2 1\n")
    with pytest.raises(InputError, match=r"j\.qrels:2: expected 4 columns"):
        load_qrels_ballots([path], invalid_labels="abstain")


DETAILS = [
    {"qid": "q1", "docid": "d1", "judges": {
        "llama": {"label": 2, "probs": {"0": 0.1, "1": 0.1, "2": 0.6, "3": 0.2}},
        "gemma": {"label": None, "probs": None},
        "mistral": {"label": 1}}},
    # numeric ids are accepted as text; probs missing a label mean 0 for it, then rescaled
    {"qid": 7, "docid": "d2", "judges": {
        "llama": {"label": 0, "probs": {"0": 0.6, "1": 0.2}},
        "gemma": {"label": 3, "probs": None}}},
]


def details_file(tmp_path, rows, extra_lines=""):
    path = tmp_path / "details.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + extra_lines)
    return path


def test_details_carry_labels_probabilities_and_abstentions(tmp_path):
    table = load_details(details_file(tmp_path, DETAILS))
    assert table.judges == ("llama", "gemma", "mistral")
    assert table.pairs == (("q1", "d1"), ("7", "d2"))
    # gemma's null label is an abstention; mistral is absent from line 2: also an abstention
    assert table.labels.tolist() == [[2, ABSTAIN, 1], [0, 3, ABSTAIN]]
    assert table.invalid == {"llama": 0, "gemma": 1, "mistral": 0}
    assert np.allclose(table.probs[0, 0], [0.1, 0.1, 0.6, 0.2])
    assert np.allclose(table.probs[1, 0], [0.75, 0.25, 0, 0])  # 0.6, 0.2 rescaled by 0.8
    assert np.isnan(table.probs[0, 2]).all()  # a label without a distribution
    assert table.votes(0) == {"llama": Vote(2, (0.1, 0.1, 0.6, 0.2)), "mistral": Vote(1)}


@pytest.mark.parametrize("line,expected", [
    ("{not json", "one JSON object per line"),
    ('{"qid": "q9", "docid": "d9"}', "'judges'"),
    ('{"qid": "q9", "docid": "d9", "judges": {"x": {"label": 4}}}', r"judge x: a label in \[0, 1, 2, 3\] or null"),
    ('{"qid": "q9", "docid": "d9", "judges": {"x": {"label": true}}}', "judge x: a label"),
    ('{"qid": "q9", "docid": "d9", "judges": {"x": {"probs": null}}}', "an object with 'label'"),
    ('{"qid": "q9", "docid": "d9", "judges": {"x": {"label": 1, "probs": {"4": 1}}}}', "probability keys"),
    ('{"qid": "q9", "docid": "d9", "judges": {"x": {"label": 1, "probs": {"1": -0.5, "2": 1}}}}', "non-negative"),
    ('{"qid": "q9", "docid": "d9", "judges": {"x": {"label": 1, "probs": {"1": 0}}}}', "some mass"),
    ('{"qid": null, "docid": "d9", "judges": {}}', "a string 'qid'"),
    ('{"qid": "q1", "docid": "d1", "judges": {}}', "each pair once .*line 1"),
])
def test_bad_details_lines_name_file_and_line(tmp_path, line, expected):
    path = details_file(tmp_path, DETAILS[:1], line + "\n")
    with pytest.raises(InputError, match=r"details\.jsonl:2: .*" + expected):
        load_details(path)


def test_a_skipped_pair_in_details_is_a_pair_nobody_voted_on(tmp_path):
    # the judge command writes such lines for pairs it could not judge (e.g. passage missing)
    skipped = '{"qid": "q5", "docid": "d5", "label": null, "skipped": "passage missing"}'
    table = load_details(details_file(tmp_path, DETAILS, skipped + "\n"))
    assert table.pairs[-1] == ("q5", "d5")
    assert table.labels[-1].tolist() == [ABSTAIN, ABSTAIN, ABSTAIN]


def test_qrels_and_details_judges_side_by_side(tmp_path, three_judges):
    table = load_ballots(three_judges[:1], [details_file(tmp_path, DETAILS)])
    assert table.judges == ("sun", "llama", "gemma", "mistral")
    assert table.pairs == (("q1", "d1"), ("q1", "d2"), ("q2", "d3"), ("7", "d2"))
    assert table.labels[0].tolist() == [2, 2, ABSTAIN, 1]
    assert table.labels[3].tolist() == [ABSTAIN, 0, 3, ABSTAIN]


def test_the_same_judge_from_two_inputs_is_refused(tmp_path):
    path = write(tmp_path / "llama.qrels", "q1 0 d1 1\n")
    with pytest.raises(InputError, match="llama"):
        load_ballots([path], [details_file(tmp_path, DETAILS)])


def test_votes_check_their_labels_and_distributions():
    with pytest.raises(ValueError):
        Vote(4)
    with pytest.raises(ValueError):
        Vote(1, (0.5, 0.5))
    assert Vote(2, (0.2, 0.2, 0.4, 0)).probs == (0.25, 0.25, 0.5, 0.0)


def test_a_table_can_be_restricted_to_pairs_and_judges():
    table = BallotTable.from_votes([(("q1", "d1"), {"a": 1, "b": 2}), (("q2", "d2"), {"a": 0})])
    assert table.select([1]).pairs == (("q2", "d2"),)
    assert table.only_judges(["b"]).labels.tolist() == [[2], [ABSTAIN]]
