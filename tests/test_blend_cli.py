"""`judgeblender blend` end to end on small qrels files, with its exact report."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from judgeblender.blend import METHODS, TIE_RULES
from judgeblender.cli.blend import register
from judgeblender.errors import InputError


@pytest.fixture
def app():
    app = typer.Typer()
    register(app)

    @app.command("noop")  # a second command keeps `blend` a sub-command, as in the real CLI
    def noop() -> None:
        pass

    return app


@pytest.fixture
def jury(tmp_path):
    files = {
        "a": "q1 0 d1 2\nq1 0 d2 0\nq2 0 d3 1\n",
        "b": "q1 0 d1 2\nq1 0 d2 1\nq2 0 d3 3\n",
        # c's "1." cannot be read: with --invalid-labels abstain, c abstains on q4 d9
        "c": "q1 0 d1 0\nq1 0 d2 3\nq3 0 d4 1\nq4 0 d9 1.\n",
    }
    paths = []
    for name, text in files.items():
        (tmp_path / f"{name}.qrels").write_text(text)
        paths.append(str(tmp_path / f"{name}.qrels"))
    return paths


def run(app, *args):
    return CliRunner().invoke(app, ["blend", *args])


def plain(output: str) -> str:
    """Usage errors come in a rich box wrapped at 80 columns: keep only the words."""
    return " ".join(output.translate({ord(c): " " for c in "│╭╮╰╯─"}).split())


def test_blend_writes_qrels_and_reports_pairs_abstentions_and_ties(app, jury, tmp_path):
    out = tmp_path / "blended.qrels"
    result = run(app, *jury, "--method", "mv", "--tie", "avg", "--invalid-labels", "abstain", "--out", str(out))
    assert result.exit_code == 0, result.output
    # q1 d1: 2 2 0 -> 2.  q1 d2: 0 1 3, a three-way tie -> mean 4/3 -> 1.
    # q2 d3: 1 3 (c abstains) -> tie -> mean 2.  q3 d4: only c, 1.  q4 d9: nobody -> unjudged.
    assert out.read_text() == "q1 0 d1 2\nq1 0 d2 1\nq2 0 d3 2\nq3 0 d4 1\n"
    assert result.stderr.splitlines() == [
        "judges: 3 (a, b, c)",
        "method: mv: the label most judges gave (plurality); ties go to the tie rule",
        "pairs: 5",
        "pairs judged: 4",
        "pairs with no valid vote: 1 (left unjudged)",
        "abstentions: a 2, b 2, c 2 (1 invalid)",
        "ties: 2, broken by avg: the mean of the tied labels, rounded half up (1.5 -> 2, 0.5 -> 1)",
        "  tied {0, 1, 3}: 1 -> 1 x1",
        "  tied {1, 3}: 1 -> 2 x1",
        f"wrote {out} (4 pairs)",
    ]
    assert result.stdout == ""


def test_tie_rule_max_and_min(app, jury, tmp_path):
    out = tmp_path / "o.qrels"
    assert run(app, *jury, "--tie", "max", "--invalid-labels", "abstain", "-o", str(out)).exit_code == 0
    assert out.read_text() == "q1 0 d1 2\nq1 0 d2 3\nq2 0 d3 3\nq3 0 d4 1\n"
    assert run(app, *jury, "--tie", "min", "--invalid-labels", "abstain", "-o", str(out)).exit_code == 0
    assert out.read_text() == "q1 0 d1 2\nq1 0 d2 0\nq2 0 d3 1\nq3 0 d4 1\n"


def test_weighted_blend_with_weights_option(app, jury, tmp_path):
    out = tmp_path / "o.qrels"
    # q1 d1: 2 gets a+b = 2, 0 gets c = 3 -> 0.  q1 d2: 0:1, 1:1, 3:3 -> 3.  q2 d3: 1:1, 3:1 -> tie, min 1
    result = run(app, *jury[:2], f"c={jury[2]}", "--method", "weighted", "--weights", "a=1,b=1,c=3",
                 "--tie", "min", "--invalid-labels", "abstain", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_text() == "q1 0 d1 0\nq1 0 d2 3\nq2 0 d3 1\nq3 0 d4 1\n"


def test_random_ties_depend_on_the_seed_only(app, tmp_path):
    # 40 pairs where four judges say 0, 1, 2, 3
    paths = []
    for label in range(4):
        p = tmp_path / f"j{label}.qrels"
        p.write_text("".join(f"q1 0 d{i} {label}\n" for i in range(40)))
        paths.append(str(p))
    outs = []
    for seed in ("5", "5", "6"):
        out = tmp_path / f"o{len(outs)}.qrels"
        assert run(app, *paths, "--tie", "random", "--seed", seed, "-o", str(out)).exit_code == 0
        outs.append(out.read_text())
    assert outs[0] == outs[1] and outs[0] != outs[2]
    assert len({line.split()[3] for line in outs[0].splitlines()}) == 4


def test_details_input_with_probabilities(app, tmp_path):
    details = tmp_path / "details.jsonl"
    rows = [
        {"qid": "q1", "docid": "d1", "judges": {"x": {"label": 0, "probs": {"0": 0.6, "1": 0.4}},
                                                "y": {"label": 1, "probs": {"1": 0.5, "2": 0.5}}}},
        {"qid": "q1", "docid": "d2", "judges": {"x": {"label": None}, "y": {"label": None}}},
    ]
    details.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "o.qrels"
    result = run(app, "--details", str(details), "--method", "prob-argmax", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_text() == "q1 0 d1 1\n"  # (.3 .45 .25 0) -> 1; q1 d2 has no valid vote
    assert "pairs with no valid vote: 1 (left unjudged)" in result.stderr.splitlines()
    assert "votes without a distribution (taken as certain of their label): 0" in result.stderr.splitlines()


def test_list_shows_every_method_and_tie_rule(app):
    result = run(app, "--list")
    assert result.exit_code == 0
    names = [line.split()[0] for line in result.stdout.splitlines() if line.startswith("  ")]
    assert names == [*METHODS, *TIE_RULES]


@pytest.mark.parametrize("args,message", [
    (["--method", "mode"], "unknown blend method 'mode'"),
    (["--tie", "coin"], "unknown tie rule 'coin'"),
    (["--method", "weighted", "--weights", "a=1,b=1"], "no weight given for judges: c"),
    (["--method", "weighted", "--weights", "a=1,a=2"], "weight given twice for a"),
    (["--method", "weighted", "--weights", "a:1"], "expected NAME=NUMBER"),
    (["--method", "mv", "--weights", "a=1"], "does not use weights"),
])
def test_bad_options_are_usage_errors(app, jury, tmp_path, args, message):
    result = run(app, *jury, "--invalid-labels", "abstain", *args, "-o", str(tmp_path / "o.qrels"))
    assert result.exit_code == 2
    assert message in plain(result.output)
    assert not (tmp_path / "o.qrels").exists()


def test_an_unreadable_label_stops_the_run_by_default(app, jury, tmp_path):
    result = run(app, *jury, "-o", str(tmp_path / "o.qrels"))
    assert isinstance(result.exception, InputError)
    assert str(result.exception).endswith("c.qrels:4: expected an integer label in column 4, got '1.'")
    assert not (tmp_path / "o.qrels").exists()


def test_out_is_required(app, jury):
    result = run(app, *jury)
    assert result.exit_code == 2 and "Invalid value for --out" in plain(result.output)
