"""The `agree` and `correlate` commands, run through typer's test runner."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from judgeblender.cli import agree, correlate
from judgeblender.errors import InputError

RUNS_TINY = Path(__file__).parent / "data" / "runs_tiny"  # described in test_leaderboard.py
GOLD_LABELS = {"r": 2, "g": 3, "p": 0, "n": 0, "u": 0}
PRED_LABELS = {"r": 2, "g": 0, "p": 3, "n": 0}
GOLD = "".join(f"{q} 0 {q}{d} {l}\n" for q in ("q1", "q2", "q3") for d, l in GOLD_LABELS.items())
PRED = "".join(f"{q} 0 {q}{d} {l}\n" for q in ("q1", "q2", "q3", "q4") for d, l in PRED_LABELS.items())

AGREE_KEYS = {"name", "n", "kappa", "kappa_binary", "alpha_ordinal", "weighted_kappa_linear",
              "weighted_kappa_quadratic", "confusion", "coverage", "accuracy", "per_level_accuracy"}
CORRELATE_KEYS = {"name", "measure", "kendall_tau", "spearman_rho", "tau_ap", "n_runs", "kendall_tau_ci",
                  "spearman_rho_ci", "tau_ap_ci", "n_queries", "unjudged_at_10"}


@pytest.fixture
def app():
    app = typer.Typer()
    agree.register(app)
    correlate.register(app)
    return app


@pytest.fixture
def qrels(tmp_path):
    gold, pred = tmp_path / "human.qrels", tmp_path / "llm.qrels"
    gold.write_text(GOLD)
    pred.write_text(PRED)
    return gold, pred


def invoke(app, args):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=True)


# --- agree --------------------------------------------------------------------------------------

def test_agree_table_counts_only_shared_pairs(app, qrels):
    gold, pred = qrels
    res = invoke(app, ["agree", "--gold", gold, pred])
    assert res.exit_code == 0, res.output
    # 15 gold pairs; the prediction labels 12 of them (not u) and 4 on q4 that gold lacks
    row = next(line for line in res.output.splitlines() if line.strip("│ ").startswith("llm"))
    assert row.split()[1] == "12"  # the pairs column
    assert "80.0%" in row  # coverage 12/15
    assert "Only pairs labelled in both files count" in res.output


def test_agree_json_lines_one_per_file(app, qrels, tmp_path):
    gold, pred = qrels
    same = tmp_path / "copy.qrels"
    same.write_text(GOLD)
    res = invoke(app, ["agree", "--gold", gold, pred, same, "--json"])
    assert res.exit_code == 0, res.output
    lines = [json.loads(line) for line in res.output.splitlines()]
    assert [d["name"] for d in lines] == ["llm", "copy"]
    assert all(AGREE_KEYS <= d.keys() for d in lines)
    llm, copy = lines
    assert llm["n"] == 12 and copy["n"] == 15 and copy["kappa"] == 1.0
    # rows = gold: gold 3 (the g documents) are all predicted 0; gold 0 p documents predicted 3
    assert llm["confusion"] == [[3, 0, 0, 3], [0, 0, 0, 0], [0, 0, 3, 0], [3, 0, 0, 0]]


def test_agree_confusion_option_prints_matrices(app, qrels):
    gold, pred = qrels
    res = invoke(app, ["agree", "--gold", gold, pred, "--confusion"])
    assert res.exit_code == 0, res.output
    assert "rows = gold label, columns = predicted label" in res.output
    assert "per-level accuracy" in res.output


def test_agree_rejects_labels_outside_0_to_3_with_file_and_line(app, qrels, tmp_path):
    gold, _ = qrels
    bad = tmp_path / "bad.qrels"
    bad.write_text("q1 0 q1r 2\nq1 0 q1g 5\n")
    res = invoke(app, ["agree", "--gold", gold, bad])
    assert isinstance(res.exception, InputError)
    assert "bad.qrels:2" in str(res.exception)


def test_agree_invalid_labels_abstain_counts_them_instead_of_stopping(app, qrels, tmp_path):
    gold, _ = qrels
    odd = tmp_path / "odd.qrels"
    odd.write_text("q1 0 q1r 2\nq1 0 q1g 1.\nq1 0 q1p 0\n")  # '1.' as in a real LLM output
    res = invoke(app, ["agree", "--gold", gold, odd])
    assert isinstance(res.exception, InputError) and "odd.qrels:2" in str(res.exception)
    res = invoke(app, ["agree", "--gold", gold, odd, "--invalid-labels", "abstain", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["n"] == 2 and d["invalid"] == 1


# --- correlate -------------------------------------------------------------------------------------

def test_correlate_json_keys_and_default_measures(app, qrels):
    gold, pred = qrels
    res = invoke(app, ["correlate", "--gold", gold, "--runs", RUNS_TINY, pred, "--json", "--bootstrap", "100"])
    assert res.exit_code == 0, res.output
    lines = [json.loads(line) for line in res.output.splitlines()]
    assert [(d["name"], d["measure"]) for d in lines] == [("llm", "nDCG@10"), ("llm", "AP(rel=2)")]
    for d in lines:
        assert CORRELATE_KEYS <= d.keys()
        assert d["n_runs"] == 4 and d["n_queries"] == 3
        lo, hi = d["kendall_tau_ci"]
        assert -1 <= lo <= hi <= 1


def test_correlate_p1_values_and_no_bootstrap(app, qrels):
    gold, pred = qrels
    res = invoke(app, ["correlate", "--gold", gold, "--runs", RUNS_TINY, pred, "-m", "P@1",
                       "--json", "--bootstrap", "0", "--per-run"])
    assert res.exit_code == 0, res.output
    (d,) = [json.loads(line) for line in res.output.splitlines()]
    assert d["kendall_tau"] == pytest.approx(2 / 3) and d["tau_ap"] == pytest.approx(1 / 3)
    assert d["kendall_tau_ci"] == [None, None]
    assert [r["run"] for r in d["runs"]] == ["A", "B", "C", "D"]


def test_correlate_table_groups_and_plot(app, qrels, tmp_path):
    gold, pred = qrels
    groups = tmp_path / "groups.tsv"
    groups.write_text("A\talpha\nB\tbeta\nC\trest\nD\trest\nZ\tgone\n")
    plot = tmp_path / "out" / "plot.svg"
    res = invoke(app, ["correlate", "--gold", gold, "--runs", RUNS_TINY, pred, "-m", "P@1",
                       "--bootstrap", "50", "--seed", "1", "--groups", groups, "--plot", plot])
    assert res.exit_code == 0, res.output
    assert "4 runs, 3 queries of the gold qrels" in res.output
    assert "0.667" in res.output and "95% bootstrap interval over queries (50 samples, seed 1)" in res.output
    assert "Bias by system family" in res.output
    alpha = next(line for line in res.output.splitlines() if "alpha" in line)
    assert "-0.3333" in alpha and "+1.00" in alpha
    assert "1 run(s) in" in res.output  # Z is not a run: warned about (stderr is mixed in here)
    root = ET.parse(plot).getroot()
    assert root.tag.endswith("svg")


def test_correlate_json_with_groups_carries_bias(app, qrels, tmp_path):
    gold, pred = qrels
    groups = tmp_path / "groups.tsv"
    groups.write_text("A\talpha\nB\tbeta\n")
    res = invoke(app, ["correlate", "--gold", gold, "--runs", RUNS_TINY, pred, "-m", "P@1",
                       "--bootstrap", "0", "--groups", groups, "--json"])
    (d,) = [json.loads(line) for line in res.output.splitlines()]
    bias = {b["group"]: b for b in d["bias"]}
    assert bias["beta"]["mean_rank_shift"] == -1.0
    assert bias["(ungrouped)"]["runs"] == ["C", "D"]


def test_agree_prints_bootstrap_intervals_and_json_carries_them(app, qrels, tmp_path):
    gold, pred = qrels
    same = tmp_path / "copy.qrels"
    same.write_text(GOLD)
    res = invoke(app, ["agree", "--gold", gold, pred, same, "--bootstrap", "200", "--seed", "3", "--confidence", "0.9"])
    assert res.exit_code == 0, res.output
    assert "90% intervals, bootstrap over the 3 gold queries" in res.output
    assert "200 samples" in res.output and "seed 3" in res.output
    assert "[1.00, 1.00]" in res.output  # the copy agrees perfectly on every query
    table = res.output[res.output.index("90% intervals"):].splitlines()
    assert max(len(line) for line in table if line.startswith(("┃", "│"))) <= 80
    lines = [json.loads(x) for x in invoke(app, ["agree", "--gold", gold, pred, same, "--json", "--bootstrap", "200",
                                                   "--seed", "3"]).output.splitlines()]
    llm, copy = lines
    assert copy["kappa_ci"] == [1.0, 1.0] and copy["bootstrap"] == 200 and copy["seed"] == 3
    assert llm["kappa_ci"][0] <= llm["kappa"] <= llm["kappa_ci"][1]
    assert {"kappa_binary_ci", "alpha_ordinal_ci", "weighted_kappa_linear_ci", "weighted_kappa_quadratic_ci"} <= llm.keys()
    off = invoke(app, ["agree", "--gold", gold, pred, "--bootstrap", "0"])
    assert "intervals" not in off.output
    assert json.loads(invoke(app, ["agree", "--gold", gold, pred, "--bootstrap", "0", "--json"]).output)["kappa_ci"] == [None, None]
