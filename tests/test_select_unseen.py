"""Seats earned on unseen queries (issue 37): the default's decision is made out of sample in the
library, with a small order family as the fallback for many judges; coverage counts; degenerate
seeds and judges keep plain `calibrate`'s contract under `--select`.

The juries here are built so the right answer is known: judges right with a probability and
otherwise guessing (independent errors, so a vote helps), judges that copy each other, judges
that label only some pairs, coin flips, and gold labels that are all one value."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from judgeblender.blend import BallotTable
from judgeblender.blend.seed_rules import MIN_PAIRS, MIN_QUERIES, NO_CHANCE
from judgeblender.blend.select import (DECISION_Z, MANY_JUDGES, MIN_OUTER_QUERIES, ORDER_RULES, PROCEDURES,
                                       apply_choice, decide, fit_choice, gold_array, scored, select)
from judgeblender.blend.votes import ABSTAIN

from test_select_honest import decent, jury, write_seed

SRC = str(Path(__file__).resolve().parents[1] / "src")


def coin(g, rng):
    return rng.integers(0, 4, len(g))


def sparse(share):
    """Perfect on a `share` of the pairs, abstaining (-1) on the rest."""
    return lambda g, rng: np.where(rng.random(len(g)) < share, g, ABSTAIN)


def cli(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "250"}
    return subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=600, cwd=cwd)


# ---- part 1: the decision is made out of sample, in the library ----

def test_a_blend_that_wins_out_of_sample_is_seated_and_the_reason_says_by_how_much():
    table, gold = jury({f"decent{i}": decent(0.45) for i in range(5)}, n_queries=20, per_query=15)
    sel = select(table, gold)
    d = sel.decision
    assert d.baseline == "single" and d.procedure in ("order", "rich") and len(sel.chosen.judges) > 1
    gain, se = d.gains[d.procedure]
    assert gain - DECISION_Z * se > 0  # the rule: more than DECISION_Z standard errors of the paired difference
    assert f"out of sample by {gain:+.3f}" in d.reason
    assert d.estimates[d.procedure].kappa > d.estimates["single"].kappa + 0.1


def test_a_panel_that_only_ties_the_best_judge_out_of_sample_does_not_take_the_seats():
    # one good judge and near-copies of it: every blend is the judge give or take a few labels
    rng = np.random.default_rng(3)
    base = {}

    def good(g, r):
        base["a"] = np.where(r.random(len(g)) < 0.6, g, r.integers(0, 4, len(g)))
        return base["a"]

    def near(g, r):
        return np.where(rng.random(len(g)) < 0.05, rng.integers(0, 4, len(g)), base["a"])

    table, gold = jury({"good": good, "near1": near, "near2": near, "near3": near}, n_queries=20, per_query=15)
    sel = select(table, gold)
    assert sel.decision.procedure == "single" and sel.chosen.label == "member good"
    assert "no other procedure beat it out of sample" in sel.decision.reason


def test_the_decision_is_the_librarys_the_cli_and_python_seat_the_same_panel(tmp_path):
    table, gold = jury({"a": decent(0.5), "b": decent(0.4), "c": decent(0.4), "d": coin}, n_queries=14, per_query=15)
    qrels, args = write_seed(tmp_path, table, gold)
    out = tmp_path / "panel.toml"
    done = cli("calibrate", "--select", "--gold", qrels, *args, "-o", out)
    assert done.returncode == 0, done.stderr
    sel = select(table, gold)
    record = tomllib.loads(out.read_text())["selection"]
    assert record["chosen"] == sel.chosen.label and record["decision"]["procedure"] == sel.decision.procedure
    assert record["decision"]["reason"] == sel.decision.reason
    # 14 queries: under 20, the comparison still decides (5 outer folds of 2-3 queries)
    assert MIN_OUTER_QUERIES <= 14 and record["decision"]["outer_folds"] == 5


def test_with_many_judges_the_order_family_is_the_baseline_and_one_judge_must_beat_it():
    # 12 alike decent judges: the top-k vote is the fallback; no single one of them beats it
    table, gold = jury({f"j{i:02d}": decent(0.45) for i in range(12)}, n_queries=20, per_query=15)
    assert len(table.judges) > MANY_JUDGES
    sel = select(table, gold)
    d = sel.decision
    assert d.baseline == "order" and d.procedure in ("order", "rich") and len(sel.chosen.judges) > 1
    assert d.estimates["order"].kappa > d.estimates["single"].kappa
    assert "more than 8: a vote of the top judges is the baseline" in d.reason or d.procedure == "rich"


def test_coverage_counts_in_the_decision_and_in_the_candidates():
    # "sparse" is perfect on the 15% of pairs it labels; "steady" labels all, right 55% of the time.
    # Scored only where each labels, sparse would win; at scale its abstentions are holes.
    table, gold = jury({"sparse": sparse(0.15), "steady": decent(0.55)}, n_queries=20, per_query=15)
    sel = select(table, gold)
    assert sel.chosen.coverage == 1.0  # steady alone, or a panel that falls back on steady where sparse is silent
    members = {m.judges[0]: m for m in sel.members}
    assert members["sparse"].value < members["steady"].value  # perfect where it speaks, yet behind
    assert 0.05 < members["sparse"].coverage < 0.25 and members["steady"].coverage == 1.0
    # the decision's figures count a hole as a disagreement too: the one-judge procedure never sat sparse
    assert all(fold["single"] == "member steady" for fold in sel.decision.folds)
    y = gold_array(table, gold)
    assert scored(np.array([ABSTAIN, ABSTAIN, ABSTAIN, ABSTAIN]), np.array([0, 1, 2, 3])).tolist() == [3, 3, 0, 0]
    fitted = fit_choice(members["sparse"], table, gold)
    assert (apply_choice(fitted, table) == ABSTAIN).sum() > 0.8 * (y >= 0).sum()


def test_below_the_comparisons_minimum_the_baseline_is_seated_and_the_reason_says_so():
    table, gold = jury({"a": decent(0.6), "b": decent(0.3), "c": decent(0.3)}, n_queries=MIN_OUTER_QUERIES - 1,
                       per_query=15)
    sel = select(table, gold)
    assert sel.decision.skipped and sel.decision.procedure == "single" and sel.chosen.label == "member a"
    assert f"{MIN_OUTER_QUERIES - 1} labelled queries, under the {MIN_OUTER_QUERIES}" in sel.decision.reason
    off = select(table, gold, outer=0)
    assert "outer folds turned off" in off.decision.reason


# ---- part 2: a small default family ----

def test_the_order_family_is_small_and_grows_with_the_judges_only_by_k():
    for n in (3, 12):
        table, gold = jury({f"j{i:02d}": decent(0.45) for i in range(n)}, n_queries=10, per_query=10)
        sel = select(table, gold, family="order", rule="best")
        assert len(sel.candidates) == 1 + len(ORDER_RULES) * (n - 1)
        assert {c.name for c in sel.candidates} == {"member", *(name for name, _, _ in ORDER_RULES)}
        assert all(c.kind in ("member", "fixed") for c in sel.candidates)  # nothing learned beyond the ranking and k


def test_the_decision_weighs_the_three_procedures_simplest_first():
    assert PROCEDURES == ("single", "order", "rich")


# ---- part 4: say what was chosen and why ----

def test_when_the_seed_cannot_tell_the_chosen_from_its_runner_up_one_line_says_how_many_more_queries_would(tmp_path):
    # two judges of one quality with independent errors, 12 queries: one of them alone, or a blend of the
    # two, and nothing on this seed tells which is better
    table, gold = jury({"a": decent(0.5), "b": decent(0.5)}, n_queries=12, per_query=15, seed=1)
    qrels, args = write_seed(tmp_path, table, gold)
    done = cli("calibrate", "--select", "--gold", qrels, *args, "-o", tmp_path / "panel.toml")
    assert done.returncode == 0, done.stderr
    sel = select(table, gold)
    assert sel.decision.tell_apart and "more labelled queries would" in sel.decision.tell_apart
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: {sel.decision.tell_apart}"]
    record = tomllib.loads((tmp_path / "panel.toml").read_text())["selection"]["decision"]
    assert record["tell_apart"] == sel.decision.tell_apart
    for key in ("single", "order", "rich", "vote"):
        assert set(record[key]) == {"kappa", "kappa_ci", "alpha", "alpha_ci"}


# ---- part 5: degenerate seeds and judges keep plain calibrate's contract ----

@pytest.mark.parametrize("select_flag", [[], ["--select"]])
def test_a_seed_below_the_minimum_writes_no_panel_with_one_error_line(tmp_path, select_flag):
    table, gold = jury({"a": decent(0.6), "b": decent(0.5)}, n_queries=MIN_QUERIES - 1, per_query=MIN_PAIRS)
    qrels, args = write_seed(tmp_path, table, gold)
    done = cli("calibrate", *select_flag, "--gold", qrels, *args, "-o", tmp_path / "panel.toml")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: no panel written: the seed set is too small to choose: {MIN_QUERIES - 1} queries and "
                      f"{(MIN_QUERIES - 1) * MIN_PAIRS} labelled pairs (need at least {MIN_QUERIES} queries and "
                      f"{MIN_PAIRS} labelled pairs); label more pairs"]
    assert not (tmp_path / "panel.toml").exists()
    sel = select(table, gold)
    assert sel.chosen is None and sel.alerts()[0].startswith("the seed set is too small")


@pytest.mark.parametrize("select_flag", [[], ["--select"]])
@pytest.mark.parametrize("case", ["coin flips", "gold all one value"])
def test_a_seed_that_teaches_nothing_gets_the_no_chance_warning_and_a_marked_panel(tmp_path, select_flag, case):
    if case == "coin flips":
        table, gold = jury({"coin": coin, "dice": coin}, n_queries=12, per_query=20)
    else:  # every human label 0; the judges say 0 or 1
        table, gold = jury({"a": lambda g, r: r.integers(0, 2, len(g)), "b": lambda g, r: r.integers(0, 2, len(g))},
                           n_queries=12, per_query=15, gold_p=(1.0, 0, 0, 0))
    qrels, args = write_seed(tmp_path, table, gold)
    out = tmp_path / "panel.toml"
    done = cli("calibrate", *select_flag, "--gold", qrels, *args, "-o", out)
    assert done.returncode == 0, done.stderr
    chance = [line for line in done.stderr.splitlines() if line.startswith("warning:") and NO_CHANCE in line]
    assert len(chance) == 1 and f"{out} is written anyway, marked with a `warning` key" in chance[0]
    assert tomllib.loads(out.read_text())["warning"].startswith(NO_CHANCE)


def test_a_judge_with_no_seed_labels_is_left_out_with_a_note_never_an_error(tmp_path):
    table, gold = jury({"a": decent(0.6), "b": decent(0.4)}, n_queries=12, per_query=15)
    qrels, args = write_seed(tmp_path, table, gold)
    elsewhere = tmp_path / "elsewhere.qrels"  # labels pairs of other queries only
    elsewhere.write_text("".join(f"z{q} 0 d{d} 1\n" for q in range(3) for d in range(5)))
    done = cli("calibrate", "--select", "--gold", qrels, *args, "--labels", elsewhere, "-o", tmp_path / "panel.toml")
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note:") and "elsewhere" in line]
    assert notes == [f"note: elsewhere labelled none of the {12 * 15} labelled seed pairs: left out"]
    record = tomllib.loads((tmp_path / "panel.toml").read_text())["selection"]
    assert record["notes"] == [notes[0].removeprefix("note: ")]
    assert "elsewhere" not in record["chosen"]


def test_judges_with_identical_labels_are_seated_once_with_a_note(tmp_path):
    table, gold = jury({"a": decent(0.5), "b": decent(0.5)}, n_queries=12, per_query=15)
    twin = BallotTable(table.pairs, (*table.judges, "a-copy"), np.hstack([table.labels, table.labels[:, :1]]))
    sel = select(twin, gold)
    assert sel.notes == ["a-copy gives the same label as a on every pair: considered once, as a"]
    assert all("a-copy" not in c.judges for c in sel.candidates)
    assert all("a-copy" not in fold[p] for fold in sel.decision.folds for p in fold)
    qrels, args = write_seed(tmp_path, twin, gold)
    done = cli("calibrate", "--select", "--gold", qrels, *args, "-o", tmp_path / "panel.toml")
    assert done.returncode == 0, done.stderr
    assert f"note: {sel.notes[0]}" in done.stderr.splitlines()


def test_decide_needs_no_cli():
    # the decision is a library function: select(family="auto") is decide() on the screened judges
    table, gold = jury({"a": decent(0.6), "b": decent(0.3)}, n_queries=10, per_query=15)
    via_select = select(table, gold)
    direct = decide(table, gold, judges=table.judges, folds=5, costs={"a": 1.0, "b": 1.0}, rule="paired-bound",
                    optimise="kappa", exhaustive_max=8, time_limit=120.0, slow=False, seed=0, outer=None)
    assert direct.chosen.label == via_select.chosen.label and direct.decision.reason == via_select.decision.reason
