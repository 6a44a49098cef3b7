"""Panels: presets, panel files, every member's label kept, and the blended label."""

import json

import pytest
from typer.testing import CliRunner

from judgeblender.cli import app
from judgeblender.errors import InputError, JudgeblenderError
from judgeblender.judges import build_judge, judge_pairs
from judgeblender.panels.panel import ballots_from_run, blend_run, get_panel, load_panel
from judgeblender.pairs import Pair, read_corpus, read_queries

# thomas says 3 for goldfish food, multicriteria says 1, sun says Yes then 2: a three-way tie.
RULES = [
    {"contains": "A person typed this query", "output": "Final score: 3"},
    {"contains": "Exactness: 1\nTopicality: 1", "output": "1"},
    {"contains": "criterion", "output": "1"},
    {"contains": "The passage below was found to be relevant", "output": "Grade: 2"},
    {"contains": "Does the passage contain an answer", "output": "Yes"},
]


@pytest.fixture
def data(tiny):
    return read_queries(tiny / "queries.tsv"), read_corpus(tiny / "corpus.jsonl")


def test_promptblender_preset_runs_three_prompts_on_one_model(mock_model, data):
    mock_model.rules = RULES
    panel = get_panel("promptblender", ["mock:m"], "generate", {})
    assert [s.prompt for s in panel.judges] == ["thomas", "multicriteria", "sun-two-step"]
    run = judge_pairs([build_judge(s) for s in panel.judges], [Pair("q1", "d1")], *data)
    table = ballots_from_run(run)
    assert table.labels.tolist() == [[3, 1, 2]]
    result = blend_run(run, panel)  # mv with ties broken by the rounded mean of the tied labels: (3+1+2)/3 = 2
    assert result.labels == [2]


def test_an_invalid_member_abstains_and_does_not_vote(mock_model, data):
    mock_model.rules = [{"contains": "A person typed this query", "output": "no idea"}] + RULES[1:]
    panel = get_panel("promptblender", ["mock:m"], "generate", {})
    run = judge_pairs([build_judge(s) for s in panel.judges], [Pair("q1", "d1")], *data)
    table = ballots_from_run(run)
    assert table.labels.tolist() == [[-1, 1, 2]]
    assert table.invalid[panel.judges[0].id] == 1


def test_panel_file(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('name = "mine"\n[aggregator]\nmethod = "weighted"\ntie = "max"\n'
                    '[[judges]]\nmodel = "scripted:a.json"\nprompt = "thomas"\nweight = 2.0\nid = "a"\n'
                    '[[judges]]\nmodel = "scripted:b.json"\nprompt = "umbrela"\nmode = "logprobs"\nid = "b"\n')
    panel = load_panel(path, "generate", {"n_threads": 2})
    assert panel.method == "weighted" and panel.weights() == {"a": 2.0, "b": 1.0}
    assert [s.mode for s in panel.judges] == ["generate", "logprobs"]
    assert panel.judges[0].options == {}  # the command's n_threads: a scripted model declares no threads


@pytest.mark.parametrize("body,expected", [
    ('[[judges]]\nmodel = "llamacpp:default"\nprompt = "nonexistent"\n', "bad.toml:3: expected judge 1: a known prompt"),
    ('[[judges]]\nmodel = "gpt4"\n', "bad.toml:2: expected judge 1: a model string PREFIX:MODEL"),
    ('[[judges]]\nmodel = "llamacpp:default"\n\n[[judges]]\nmodel = "llamacpp:default"\ntemperature = 1\n',
     "bad.toml:6: expected judge 2: only the keys"),
    ('judges = [{model = "gpt4"}]\n', "bad.toml: expected judge 1: a model string"),  # inline: no line to name
    ('name = "x"\n', "bad.toml: expected at least one [[judges]] table"),
    ('name = "x"\nblender = "mv"\n[[judges]]\nmodel = "llamacpp:default"\n', "bad.toml:2: expected only the keys"),
    ('[aggregator]\nmethod = "mv"\n  tie_rule = "avg"\n[[judges]]\nmodel = "llamacpp:default"\n',
     "bad.toml:3: expected [aggregator]: only the keys"),
    ('[[judges]\nmodel = 1\n', "bad.toml:1: expected valid TOML"),
])
def test_bad_panel_files_name_file_line_and_problem(tmp_path, body, expected):
    path = tmp_path / "bad.toml"
    path.write_text(body)
    with pytest.raises(InputError) as err:
        load_panel(path, "generate", {})
    assert str(err.value).startswith(str(path.parent) + "/") and expected in str(err.value)


def test_unknown_aggregator_fails_before_any_judging(tmp_path):
    path = tmp_path / "agg.toml"
    path.write_text('[aggregator]\nmethod = "telepathy"\n[[judges]]\nmodel = "llamacpp:default"\n')
    with pytest.raises(JudgeblenderError, match="telepathy"):
        load_panel(path, "generate", {})


def test_cli_judge_with_panel_keeps_every_member_label(mock_model, tiny, tmp_path):
    mock_model.rules = RULES + [{"contains": "", "output": "0"}]
    out = tmp_path / "blended.qrels"
    result = CliRunner().invoke(app, [
        "judge", "-q", str(tiny / "queries.tsv"), "-c", str(tiny / "corpus.jsonl"), "-p", str(tiny / "qrels.txt"),
        "--panel", "promptblender", "--panel-model", "mock:m", "-o", str(out), "--store", str(tmp_path / "s.sqlite"),
        "--no-progress"])
    assert result.exit_code == 0, result.output
    assert out.read_text().splitlines()[0] == "q1 0 d1 2"
    details = [json.loads(l) for l in (tmp_path / "blended.qrels.details.jsonl").read_text().splitlines()]
    assert len(details[0]["judges"]) == 3
    assert details[0]["blend"]["method"] == "mv"
    assert {j["label"] for j in details[0]["judges"].values()} == {3, 1, 2}


def test_run_panel_from_the_library_blends_and_writes_without_the_cli(mock_model, data, tmp_path):
    from judgeblender.panels.run_panel import run_panel, write_panel_run
    from judgeblender.store import CallStore

    mock_model.rules = RULES
    panel = get_panel("promptblender", ["mock:m"], "generate", {})
    with CallStore(tmp_path / "s.sqlite") as store:
        result = run_panel(panel, [Pair("q1", "d1")], *data, store=store)
    assert result.labels == {Pair("q1", "d1"): 2}  # three-way tie 3/1/2, broken by the rounded mean
    assert result.extra[Pair("q1", "d1")]["tied"] == [1, 2, 3]
    assert result.blend_info == {"panel": "promptblender", "method": "mv", "tie": "avg", "seed": 0}
    assert result.batch_queue is None and result.flagged == {}
    n, details = write_panel_run(result, tmp_path / "out.qrels")
    assert n == 1 and (tmp_path / "out.qrels").read_text() == "q1 0 d1 2\n"
    assert details == tmp_path / "out.qrels.details.jsonl"
    assert len(json.loads(details.read_text())["judges"]) == 3
