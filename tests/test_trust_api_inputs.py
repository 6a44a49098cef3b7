"""The library checks its inputs as the CLI does (issue 20, part 5).

A notebook hands over whatever its DataFrame holds. A passage or query that is NaN, None,
pandas' <NA>, blank or not a string is an error naming the pair, made before any model call
and before a store file exists (or, with skip_missing, a reported skip); it is never rendered
into a prompt as "nan". The check is the engine's `resolve_pairs`, which the CLI uses too, so
the same input gives the same error text. Ballots in any shape follow the qrels files' rule:
one judge's identical repeated vote is kept once with a warning saying how many, a conflicting
one is an error, and a label that is not an integer of the scale is an error naming its row.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pandas as pd
import pytest

import judgeblender as jb
from judgeblender.errors import InputError, JudgeblenderError
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.jury import Jury
from judgeblender.backends.scripted import ScriptedBackend
from judgeblender.pairs import Pair

QUERIES = {"q1": "what do goldfish eat", "q2": "how tall is the eiffel tower"}
PASSAGES = {"d1": "Goldfish eat flakes and pellets.", "d2": "The tower is 330 metres tall.",
            "d3": "Kettles boil water."}
PAIRS = [("q1", "d1"), ("q1", "d3"), ("q2", "d2")]


def frame(**changes) -> pd.DataFrame:
    """The pairs as a DataFrame; changes={"d3": value} replaces d3's passage, "q2" q2's query."""
    df = pd.DataFrame([{"qid": q, "docid": d, "query": QUERIES[q], "passage": PASSAGES[d]} for q, d in PAIRS],
                      dtype=object)
    for n, (q, d) in enumerate(PAIRS):  # set cell by cell: pandas would turn a None into NaN
        for key, column in ((q, "query"), (d, "passage")):
            if key in changes:
                df.at[n, column] = changes[key]
    return df


def judge_frame(df, model, tmp_path, **kw):
    return jb.judge(df, judges=[model], prompt="umbrela", mode="generate", store=tmp_path / "s.sqlite", **kw)


NOT_A_PASSAGE = [
    pytest.param(float("nan"), "missing (NaN)", id="nan"),
    pytest.param(None, "missing (None)", id="none"),
    pytest.param(pd.NA, "missing (<NA>)", id="pd-na"),
    pytest.param("", "blank", id="empty"),
    pytest.param(" \t\n ", "blank", id="whitespace"),
    pytest.param(5, "not text (int 5)", id="int"),
    pytest.param(b"bytes", "not text (bytes b'bytes')", id="bytes"),
]


# --- passages and queries -------------------------------------------------------------------
@pytest.mark.parametrize("value, problem", NOT_A_PASSAGE)
def test_a_passage_that_is_not_text_is_an_error_naming_the_pair_before_any_call(value, problem, mock_model, tmp_path):
    mock_model.default = "##final score: 2"
    with pytest.raises(JudgeblenderError) as caught:
        judge_frame(frame(d3=value), "mock:m", tmp_path)
    assert f"pair (q1, d3): its passage is {problem}, expected a non-blank string" in str(caught.value)
    assert mock_model.calls == []
    assert not (tmp_path / "s.sqlite").exists()


@pytest.mark.parametrize("value, problem", NOT_A_PASSAGE[:5])
def test_a_query_that_is_missing_or_blank_is_an_error_naming_the_pair(value, problem, mock_model, tmp_path):
    mock_model.default = "##final score: 2"
    with pytest.raises(JudgeblenderError, match=rf"pair \(q2, d2\): its query is {problem.replace('(', '.').replace(')', '.')}"):
        judge_frame(frame(q2=value), "mock:m", tmp_path)
    assert mock_model.calls == []


def test_texts_given_as_mappings_are_checked_the_same_way(mock_model, tmp_path):
    mock_model.default = "##final score: 2"
    with pytest.raises(JudgeblenderError, match=r"pair \(q1, d1\): its passage is missing \(NaN\)"):
        jb.judge(PAIRS, judges=["mock:m"], queries=QUERIES, corpus={**PASSAGES, "d1": float("nan")})
    with pytest.raises(JudgeblenderError, match=r"pair \(q1, d1\): its query is blank"):
        jb.judge(PAIRS, judges=["mock:m"], queries={**QUERIES, "q1": "  "}, corpus=PASSAGES)
    assert mock_model.calls == []


def test_with_skip_missing_a_nan_passage_is_a_reported_skip_and_never_a_prompt_about_nan(mock_model, tmp_path):
    mock_model.default = "##final score: 2"
    run = judge_frame(frame(d3=float("nan"), q2="   "), "mock:m", tmp_path, skip_missing=True)
    assert run.run.skipped == [(Pair("q1", "d3"), "passage missing (NaN)"), (Pair("q2", "d2"), "query blank")]
    assert list(run.labels["docno"]) == ["d1"]
    prompts = [m.content for call in mock_model.calls for m in call.messages]
    assert len(mock_model.calls) == 1 and not any("nan" in p.lower().split() for p in prompts)


def test_a_passage_that_is_not_a_string_is_an_error_even_with_skip_missing(mock_model, tmp_path):
    mock_model.default = "##final score: 2"
    with pytest.raises(JudgeblenderError, match=r"pair \(q1, d3\): its passage is not text \(int 42\)"):
        judge_frame(frame(d3=42), "mock:m", tmp_path, skip_missing=True)
    assert mock_model.calls == []


def test_the_engine_that_the_cli_uses_refuses_the_same_input_with_the_same_text(mock_model):
    """judge_pairs (the CLI's and the panels' path) gives jb.judge's error, word for word."""
    corpus = {**PASSAGES, "d3": float("nan")}
    with pytest.raises(JudgeblenderError) as from_engine:
        judge_pairs([Judge(JudgeSpec(model="mock:m"), backend=mock_model)], [Pair(*p) for p in PAIRS], QUERIES, corpus)
    with pytest.raises(JudgeblenderError) as from_api:
        jb.judge(PAIRS, judges=["mock:m"], queries=QUERIES, corpus=corpus)
    assert str(from_engine.value) == str(from_api.value)
    assert mock_model.calls == []


def test_a_passage_missing_from_the_corpus_gives_the_cli_error_text_in_the_library(mock_model, tmp_path):
    (tmp_path / "q.tsv").write_text("q1\twhat do goldfish eat\n", encoding="utf-8")
    (tmp_path / "c.jsonl").write_text('{"docid": "d1", "text": "Goldfish eat flakes."}\n', encoding="utf-8")
    (tmp_path / "p.tsv").write_text("q1\td1\nq1\td9\n", encoding="utf-8")
    (tmp_path / "m.json").write_text('{"default": "##final score: 1"}', encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "judgeblender", "judge", "-q", str(tmp_path / "q.tsv"),
                           "-c", str(tmp_path / "c.jsonl"), "-p", str(tmp_path / "p.tsv"), "-o",
                           str(tmp_path / "o.qrels"), "-j", f"scripted:{tmp_path / 'm.json'}", "--store", str(tmp_path / "s.sqlite")],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "300"})
    assert proc.returncode == 2, proc.stderr
    with pytest.raises(JudgeblenderError) as caught:
        jb.judge(tmp_path / "p.tsv", judges=["mock:m"], queries=tmp_path / "q.tsv", corpus=tmp_path / "c.jsonl")
    # the same words, the argument told as the command line's flag (cli/usage.py `told`)
    assert "pass skip_missing=True to judge the rest" in str(caught.value)
    told = str(caught.value).replace("skip_missing=True", "--skip-missing")
    assert f"error: {told}" in proc.stderr.replace("\n", " ")
    assert mock_model.calls == []


def test_one_pair_given_twice_with_two_passages_is_an_error_naming_both(mock_model, tmp_path):
    df = pd.concat([frame(), frame(d3="Another text about kettles.").iloc[[1]]])
    with pytest.raises(JudgeblenderError, match=r"pairs \(q1, d3\) and \(q1, d3\): the docid 'd3' comes with two "
                                                 r"different passage texts"):
        judge_frame(df, "mock:m", tmp_path)
    assert mock_model.calls == []


def test_one_pair_given_twice_with_the_same_nan_passage_is_refused_for_the_nan_not_the_repeat(mock_model, tmp_path):
    df = pd.concat([frame(d3=float("nan")), frame(d3=float("nan")).iloc[[1]]])
    with pytest.raises(JudgeblenderError, match=r"its passage is missing \(NaN\)"):
        judge_frame(df, "mock:m", tmp_path)


@pytest.mark.parametrize("qid", [float("nan"), None, "  "], ids=["nan", "none", "blank"])
def test_a_pair_without_a_qid_is_an_error_naming_its_row(qid, mock_model, tmp_path):
    df = frame()
    df["qid"] = df["qid"].astype(object)
    df.loc[2, "qid"] = qid
    with pytest.raises(JudgeblenderError, match="pairs: row 2: expected a qid"):
        judge_frame(df, "mock:m", tmp_path)
    assert mock_model.calls == []


def test_a_jury_item_whose_field_is_nan_is_an_error_naming_the_item_before_any_call():
    backend = ScriptedBackend(default='{"reason": "fine", "score": 1}')
    jury = Jury([Judge(JudgeSpec(model="scripted:j", prompt="factual-accuracy"), backend=backend)])
    items = [{"id": "paris", "input": "Capital of France?", "output": "Paris.", "reference": "Paris"},
             {"id": "empty", "input": "Who wrote Hamlet?", "output": float("nan"), "reference": "Shakespeare"}]
    with pytest.raises(InputError, match=r"items:2: expected the fields .* as non-blank strings \(item empty\), "
                                          r"got 'output missing \(NaN\)'"):
        jury.score(items)
    with pytest.raises(InputError, match=r"got 'reference not text \(int 3\)'"):
        jury.score([{**items[0], "reference": 3}])
    assert backend.calls == []


# --- ballots ----------------------------------------------------------------------------------
def ballots_frame(rows):
    return pd.DataFrame(rows, columns=["qid", "docid", "judge", "label"])


VOTES = [("q1", "d1", "A", 2), ("q1", "d1", "B", 3), ("q1", "d2", "A", 0), ("q1", "d2", "B", 0)]


def test_one_judges_identical_repeated_vote_counts_once_with_a_warning_saying_how_many(caplog):
    with caplog.at_level(logging.WARNING):
        repeated = jb.blend_labels(ballots_frame(VOTES + [VOTES[0], VOTES[0]]), "av")
    assert repeated.equals(jb.blend_labels(ballots_frame(VOTES), "av"))  # not 3 votes of A for 2
    assert "judge A: 2 repeated identical labels kept once (row 4, 1 more)" in caplog.text


@pytest.mark.parametrize("shape", ["frame", "tuples", "ir_measures"])
def test_one_judges_conflicting_votes_on_a_pair_are_an_error_in_every_shape(shape):
    from ir_measures import Qrel

    rows = [("q1", "d1", 2), ("q1", "d2", 0), ("q1", "d1", 1)]
    given = {"frame": pd.DataFrame(rows, columns=["qid", "docid", "label"]), "tuples": rows,
             "ir_measures": [Qrel(*r) for r in rows]}[shape]
    where = "row 2" if shape == "frame" else "row 3"
    with pytest.raises(JudgeblenderError, match=rf"judge A: {where}: expected one label per pair \(q1 d1 was "
                                                 r"labelled 2 before\), got 1"):
        jb.blend_labels({"A": given, "B": rows[:2]})


def test_an_invalid_vote_and_a_label_on_the_same_pair_conflict():
    with pytest.raises(JudgeblenderError, match=r"q1 d1 was labelled None before\), got 2"):
        jb.blend_labels(ballots_frame([("q1", "d1", "A", float("nan")), ("q1", "d1", "A", 2)]))


def test_a_qrels_file_and_a_frame_break_the_one_label_rule_with_the_same_words(tmp_path):
    (tmp_path / "a.qrels").write_text("q1 0 d1 2\nq1 0 d1 1\n", encoding="utf-8")
    with pytest.raises(JudgeblenderError) as from_file:
        jb.blend_labels({"A": tmp_path / "a.qrels"})
    with pytest.raises(JudgeblenderError) as from_frame:
        jb.blend_labels({"A": [("q1", "d1", 2), ("q1", "d1", 1)]})
    rule = "expected one label per pair (q1 d1 was labelled 2 before)"
    assert rule in str(from_file.value) and rule in str(from_frame.value)


@pytest.mark.parametrize("label", [2.5, "2", True, 5, -1, "two"], ids=["fraction", "text", "bool", "five", "minus", "word"])
def test_a_ballot_label_that_is_not_an_integer_of_the_scale_is_an_error_naming_its_row(label):
    rows = VOTES[:2] + [("q1", "d2", "A", label)]
    with pytest.raises(JudgeblenderError, match=rf"judge A: row 2 \(q1 d2\): a label must be an integer in "
                                                 rf"\[0, 1, 2, 3\], got {label!r}"):
        jb.blend_labels(ballots_frame(rows))


def test_a_float_label_column_with_nan_still_reads_as_labels_and_invalid_votes():
    table = jb.ballots(ballots_frame([("q1", "d1", "A", 2.0), ("q1", "d1", "B", float("nan"))]))
    assert table.invalid == {"A": 0, "B": 1}
    assert list(jb.blend_labels(table)["label"]) == [2]


def test_a_ballot_row_without_a_judge_is_an_error_not_a_dropped_vote():
    with pytest.raises(JudgeblenderError, match="row 1 has no judge"):
        jb.blend_labels(ballots_frame([("q1", "d1", "A", 2), ("q1", "d1", None, 3)]))


def test_a_gold_label_that_is_missing_is_an_error_where_a_label_is_required():
    gold = pd.DataFrame([("q1", "d1", 2), ("q1", "d2", float("nan"))], columns=["qid", "docid", "label"])
    pred = pd.DataFrame([("q1", "d1", 2), ("q1", "d2", 1)], columns=["qid", "docid", "label"])
    with pytest.raises(JudgeblenderError, match=r"gold: row 1 \(q1 d2\): a label is required, got nan"):
        jb.agreement(gold, pred)
    pred.loc[1, "label"] = None  # an invalid prediction is counted, not an error
    assert jb.agreement(gold.iloc[:1], pred, bootstrap=0).invalid == 1


def test_a_passage_with_a_lone_surrogate_is_refused_as_the_corpus_reader_refuses_it(mock_model, tmp_path):
    """The CLI's corpus reader refuses "\\ud800" (text no UTF-8 writer or tokenizer takes): so does
    the library, even with skip_missing, since the text is there but unusable."""
    with pytest.raises(JudgeblenderError, match=r"pair \(q1, d3\): its passage is not Unicode text \(a lone surrogate\)"):
        judge_frame(frame(d3="kettles \ud800 boil"), "mock:m", tmp_path, skip_missing=True)
    assert mock_model.calls == []


@pytest.mark.parametrize("text", ["\u200b\u200b", "\ufeff", " \u200d\u2060 "])
def test_a_passage_of_only_invisible_characters_is_blank(text):
    from judgeblender.pairs.texts import text_problem

    assert text_problem(text) == "blank"
    assert text_problem("a\u200bb") is None
