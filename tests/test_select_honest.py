"""Juries that earn their seats (issue 32): the default selection rule on juries whose answer is
known, the nested estimate on by default (and skipped with one line below its minimum), alpha
beside kappa checked against the krippendorff package, the warning line, and the figures the
panel file records."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import krippendorff
import numpy as np
import pytest

from judgeblender.blend import BallotTable
from judgeblender.blend.select import fast_labels, nested_select, select

from conftest import SHARED_DATA

SRC = str(Path(__file__).resolve().parents[1] / "src")


def jury(judges, n_queries=30, per_query=20, seed=0, gold_p=(0.5, 0.25, 0.15, 0.1)):
    """A seed set: gold labels mostly 0 (as in TREC), each judge's labels made from them."""
    rng = np.random.default_rng(seed)
    pairs = [(f"q{q:02d}", f"d{d}") for q in range(n_queries) for d in range(per_query)]
    g = rng.choice(4, size=len(pairs), p=list(gold_p))
    labels = np.stack([make(g, rng) for make in judges.values()], axis=1).astype(np.int8)
    gold: dict = {}
    for (q, d), v in zip(pairs, g):
        gold.setdefault(q, {})[d] = int(v)
    return BallotTable(tuple(pairs), tuple(judges), labels), gold


def decent(p):
    """Right with probability p, else a uniformly random label: independent errors, so a vote helps."""
    return lambda g, rng: np.where(rng.random(len(g)) < p, g, rng.integers(0, 4, len(g)))


def junk(g, rng):
    return rng.integers(0, 4, len(g))


def perfect(g, rng):
    return g.copy()


def write_seed(tmp_path, table, gold):
    qrels = tmp_path / "human.qrels"
    qrels.write_text("".join(f"{q} 0 {d} {v}\n" for q, docs in gold.items() for d, v in docs.items()))
    args = []
    for j, judge in enumerate(table.judges):
        path = tmp_path / f"{judge}.qrels"
        path.write_text("".join(f"{q} 0 {d} {table.labels[i, j]}\n" for i, (q, d) in enumerate(table.pairs)
                                if table.labels[i, j] >= 0))  # an abstention: no line
        args += ["--labels", path]
    return qrels, args


def cli(*args):
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=600)


# ---- the default rule, where the answer is known ----

@pytest.mark.parametrize("n_junk", [3, 6])
def test_the_default_seats_the_decent_judges_and_leaves_the_junk_out(n_junk):
    # 5 judges right 45% of the time with independent errors, and n_junk judges guessing: the vote of
    # the five beats each of them by far, and a guesser only dilutes it. 8 judges: every subset is
    # searched; 11: the ranked family.
    judges = {**{f"decent{i}": decent(0.45) for i in range(5)}, **{f"junk{i}": junk for i in range(n_junk)}}
    table, gold = jury(judges)
    sel = select(table, gold)
    assert (sel.family, sel.rule, sel.optimise) == ("subsets" if n_junk == 3 else "ranked", "paired-bound", "kappa")
    assert sorted(sel.chosen.judges) == [f"decent{i}" for i in range(5)]
    assert sel.chosen.value > sel.best_member.value + 0.2
    # on queries it did not choose on (issue 37: the decision's own figures), the blend beats both
    est = sel.decision.estimates
    assert sel.decision.procedure == "rich"
    assert est["rich"].kappa > est["single"].kappa + 0.2 and est["rich"].kappa > est["vote"].kappa + 0.1


def test_one_perfect_judge_among_many_guessers_sits_alone():
    # 11 judges, more than MANY_JUDGES: the order family is the baseline, and its top 1 is the perfect judge
    table, gold = jury({"perfect": perfect, **{f"junk{i}": junk for i in range(10)}})
    sel = select(table, gold)
    assert sel.decision.baseline == "order" and sel.decision.procedure == "order"
    assert sel.chosen.judges == ("perfect",) and sel.chosen.value == 1.0


def test_a_blend_that_beats_the_best_judge_by_less_than_its_noise_does_not_take_the_seats():
    # two copies of one judge and a third that differs a little: every blend equals or barely moves
    # the member, so the paired bound keeps the member (the best pooled figure may still be a blend)
    rng = np.random.default_rng(5)
    base = {}

    def first(g, r):
        base["a"] = np.where(r.random(len(g)) < 0.5, g, r.integers(0, 4, len(g)))
        return base["a"]

    def nudged(g, r):
        return np.where(r.random(len(g)) < 0.03, rng.integers(0, 4, len(g)), base["a"])

    table, gold = jury({"a": first, "b": lambda g, r: base["a"], "c": nudged})
    sel = select(table, gold)
    assert sel.chosen.kind == "member"
    assert select(table, gold, rule="best").chosen.value >= sel.chosen.value


def test_optimise_alpha_prefers_the_judge_that_is_never_far_off():
    # "near" is off by one 70% of the time (good ordinal alpha, poor kappa); "exact-or-far" is exact
    # 55% of the time and else the mirror label (better kappa, poor alpha)
    def near(g, rng):
        return np.clip(g + rng.choice([-1, 0, 1], size=len(g), p=[0.35, 0.3, 0.35]), 0, 3)

    def exact_or_far(g, rng):
        return np.where(rng.random(len(g)) < 0.55, g, 3 - g)

    table, gold = jury({"near": near, "exact-or-far": exact_or_far})
    by_alpha = select(table, gold, optimise="alpha")
    by_kappa = select(table, gold, optimise="kappa")
    assert by_alpha.chosen.judges == ("near",)
    assert "exact-or-far" in by_kappa.chosen.judges
    members = {m.judges[0]: m for m in by_alpha.members}
    assert members["near"].pooled("alpha") > members["exact-or-far"].pooled("alpha")
    assert members["near"].pooled("kappa") < members["exact-or-far"].pooled("kappa")
    assert by_alpha.chosen.value == by_alpha.chosen.pooled("alpha")


def test_bad_selection_arguments_name_the_python_argument():
    from judgeblender.errors import ArgumentError

    table, gold = jury({"a": perfect, "b": junk}, n_queries=6)
    for kwargs, argument in (({"family": "everything"}, "family"), ({"rule": "luck"}, "rule"),
                             ({"optimise": "tau"}, "optimise"), ({"folds": 1}, "folds"),
                             ({"candidates": ["zz"]}, "candidates")):
        with pytest.raises(ArgumentError) as err:
            select(table, gold, **kwargs)
        assert str(err.value).startswith(f"{argument}: expected"), err.value
    with pytest.raises(ArgumentError, match="^outer: expected"):
        nested_select(table, gold, outer=1)
    with pytest.raises(ArgumentError, match="^gold: expected"):
        select(table, {"q00": gold["q00"]})


# ---- alpha beside kappa, from the confusion counts ----

def test_alpha_of_candidates_and_of_the_nested_estimate_equals_the_krippendorff_package():
    table, gold = jury({"a": decent(0.5), "b": decent(0.4), "c": junk, "d": decent(0.3)}, n_queries=24)
    y = np.array([gold[q][d] for q, d in table.pairs])
    sel = select(table, gold)

    def package(pred, rows=slice(None)):
        return krippendorff.alpha(reliability_data=np.vstack([y[rows], pred[rows]]).astype(float),
                                  level_of_measurement="ordinal", value_domain=[0, 1, 2, 3])

    for j, member in enumerate(sel.members):
        assert member.pooled("alpha") == pytest.approx(package(table.labels[:, j].astype(int)), abs=1e-12)
    vote = fast_labels(table.labels.astype(int), "mv", "avg")
    assert sel.all_vote.pooled("alpha") == pytest.approx(package(vote), abs=1e-12)
    fixed = [c for c in sel.candidates if c.kind == "fixed"][:20]
    for c in fixed:
        cols = [table.judges.index(j) for j in c.judges]
        assert c.pooled("alpha") == pytest.approx(package(fast_labels(table.labels[:, cols].astype(int), c.method,
                                                                      c.tie)), abs=1e-12)
    rep = nested_select(table, gold)
    assert rep.vote.alpha == pytest.approx(package(vote), abs=1e-12)  # every pair is scored here
    lo, hi = rep.chosen.alpha_ci
    assert lo <= rep.chosen.alpha <= hi and lo < hi


# ---- the CLI: nested estimate on by default, skipped with one line, the warning, the record ----

def test_calibrate_select_prints_the_librarys_decision_and_records_it_in_the_panel_file(tmp_path):
    judges = {**{f"decent{i}": decent(0.45) for i in range(5)}, **{f"junk{i}": junk for i in range(3)}}
    table, gold = jury(judges, n_queries=24, per_query=15)
    qrels, args = write_seed(tmp_path, table, gold)
    out = tmp_path / "panel.toml"
    done = cli("calibrate", "--select", "--gold", qrels, *args, "-o", out)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    decision = select(table, gold).decision  # the same defaults, in Python: the same decision and figures
    assert decision.procedure == "rich" and decision.baseline == "single"
    for key, est in decision.estimates.items():
        line = next(line for line in lines if line.strip().startswith(f"{key} ") and "kappa" in line)
        assert (f"kappa {est.kappa:.3f} [{est.kappa_ci[0]:.3f}, {est.kappa_ci[1]:.3f}]  alpha {est.alpha:.3f} "
                f"[{est.alpha_ci[0]:.3f}, {est.alpha_ci[1]:.3f}]") in line
    assert any(line.startswith("Decision, out of sample: each procedure re-run inside each of 5 outer query folds")
               for line in lines)
    assert any(line.strip() == f"Chosen: {decision.reason}." for line in lines)
    header = next(line for line in lines if line.startswith("┃"))  # the table: coverage, kappa and alpha columns
    assert [c.strip() for c in header.strip("┃ ").split("┃")][:5] == ["candidate", "cost", "coverage", "kappa", "alpha"]
    assert "warning:" not in done.stderr and "skipped" not in done.stderr

    record = tomllib.loads(out.read_text())["selection"]
    assert (record["family"], record["family_option"], record["rule"]) == ("subsets", "auto", "paired-bound")
    assert record["seed_queries"] == 24 and record["seed_pairs"] == 360 and record["coverage"] == 1.0
    recorded = record["decision"]
    assert (recorded["procedure"], recorded["baseline"], recorded["reason"]) == ("rich", "single", decision.reason)
    assert (recorded["outer_folds"], recorded["inner_folds"], recorded["queries"]) == (5, 5, 24)
    for key, est in decision.estimates.items():
        assert recorded[key]["kappa"] == pytest.approx(est.kappa, abs=1e-6)
        assert recorded[key]["kappa_ci"] == pytest.approx(list(est.kappa_ci), abs=1e-6)
    diff, ci = decision.differences["single"]["kappa"]
    assert recorded["chosen_minus_single_kappa"] == pytest.approx(diff, abs=1e-6) and diff > 0.1
    assert recorded["chosen_minus_single_kappa_ci"] == pytest.approx(list(ci), abs=1e-6)
    # the record is no obstacle to using the panel
    blended = cli("blend", "--panel", out, *args[1::2], "-o", tmp_path / "b.qrels")
    assert blended.returncode == 0, blended.stderr


def test_below_the_minimum_no_comparison_runs_and_one_judge_is_seated_saying_so(tmp_path):
    table, gold = jury({"a": decent(0.5), "b": decent(0.5), "c": junk}, n_queries=8)
    qrels, args = write_seed(tmp_path, table, gold)
    out = tmp_path / "panel.toml"
    done = cli("calibrate", "--select", "--gold", qrels, *args, "-o", out)
    assert done.returncode == 0, done.stderr
    reason = ("one judge (the best seed kappa): no out-of-sample comparison ran (8 labelled queries, under the 10 the "
              "nested estimate needs (5 outer folds would each hold out a single query)), so the baseline is seated")
    assert f"Decision: {reason}." in done.stdout.splitlines()
    record = tomllib.loads(out.read_text())["selection"]
    assert record["decision"]["reason"] == reason and record["decision"]["skipped"].startswith("8 labelled queries")
    assert tomllib.loads(out.read_text())["selection"]["chosen"].startswith("member ")
    forced = cli("calibrate", "--select", "--gold", qrels, *args, "-o", out, "--outer-folds", "3")
    assert forced.returncode == 0 and "each of 3 outer query folds" in forced.stdout
    off = cli("calibrate", "--select", "--gold", qrels, *args, "-o", out, "--outer-folds", "0")
    assert off.returncode == 0 and "no out-of-sample comparison ran (outer folds turned off)" in off.stdout
    bad = cli("calibrate", "--select", "--gold", qrels, *args, "-o", out, "--outer-folds", "1")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [
        "error: --outer-folds: expected 0 (no nested estimate) or an integer of at least 2, got 1"]
    # a named family keeps its honest figure (the nested estimate), skipped below the minimum with one line
    named = cli("calibrate", "--select", "--family", "subsets", "--gold", qrels, *args, "-o", out)
    assert [line for line in named.stderr.splitlines() if "skipped" in line] == [
        "nested estimate skipped: 8 labelled queries, under the 10 the nested estimate needs (5 outer folds would "
        "each hold out a single query)"]


def test_too_few_queries_for_the_folds_is_one_error_line_not_a_traceback(tmp_path):
    # 2 labelled queries: outer folds would leave one query to choose on (a traceback before), and the
    # seed is below plain calibrate's minimum; 1 labelled query: nothing to hold out at all
    table, gold = jury({"a": decent(0.5), "b": perfect}, n_queries=2)
    qrels, args = write_seed(tmp_path, table, gold)
    done = cli("calibrate", "--select", "--gold", qrels, *args, "-o", tmp_path / "p.toml", "--outer-folds", "2")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: --outer-folds: expected outer folds that leave each fold's selection at least 2 of the 2 labelled "
        "queries, got 2"]
    one = tmp_path / "one.qrels"
    one.write_text("".join(f"q00 0 {d} {v}\n" for d, v in gold["q00"].items()))
    done = cli("calibrate", "--select", "--gold", one, *args, "-o", tmp_path / "p.toml")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"error: {one}: expected human labels on pairs of at least 2 queries that the judges labelled (--select "
        f"scores candidates on held-out queries), got '1 such query'"]
    from judgeblender.errors import ArgumentError

    with pytest.raises(ArgumentError, match="^outer: expected outer folds that leave"):
        nested_select(table, gold, outer=2)


def test_optimise_alpha_on_the_command_line_is_recorded_and_shown(tmp_path):
    table, gold = jury({"a": decent(0.5), "b": decent(0.4), "c": junk}, n_queries=10)
    qrels, args = write_seed(tmp_path, table, gold)
    out = tmp_path / "panel.toml"
    done = cli("calibrate", "--select", "--gold", qrels, *args, "-o", out, "--optimise", "alpha")
    assert done.returncode == 0, done.stderr
    assert "held-out alpha" in done.stderr and "alpha fold mean" in done.stdout
    assert tomllib.loads(out.read_text())["selection"]["optimise"] == "alpha"
    bad = cli("calibrate", "--select", "--gold", qrels, *args, "-o", out, "--optimise", "tau")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


# ---- the speed-up of learned cut points keeps their values ----

def reference_thresholds(scores, gold, start=(0.5, 1.5, 2.5)):
    """learn_thresholds as defined: re-cut every score per trial (the code before the speed-up)."""
    from judgeblender.blend.calibrate import MAX_CANDIDATES
    from judgeblender.kappa import cohen_kappa

    distinct = np.unique(scores)
    mids = (distinct[1:] + distinct[:-1]) / 2
    if len(mids) > MAX_CANDIDATES:
        mids = np.unique(np.quantile(mids, np.linspace(0, 1, MAX_CANDIDATES)))
    cuts = list(start)
    best = cohen_kappa(gold, np.searchsorted(cuts, scores, side="right"))
    for _ in range(20):
        moved = False
        for k in range(3):
            low = cuts[k - 1] if k else -np.inf
            high = cuts[k + 1] if k < 2 else np.inf
            for c in mids[(mids > low) & (mids < high)]:
                trial = cuts[:k] + [float(c)] + cuts[k + 1:]
                kappa = cohen_kappa(gold, np.searchsorted(trial, scores, side="right"))
                if kappa > best + 1e-12:
                    best, cuts, moved = kappa, trial, True
        if not moved:
            break
    return tuple(float(c) for c in cuts)


def test_learned_thresholds_equal_the_plain_definition_on_random_scores():
    from judgeblender.blend.calibrate import learn_thresholds

    rng = np.random.default_rng(11)
    for trial in range(40):
        n = int(rng.integers(5, 800))
        gold = rng.integers(0, 4, n)
        scores = [(gold + rng.normal(0, 1, n)).round(1), rng.integers(0, 4, (n, 3)).mean(axis=1),
                  gold * 0.7 + rng.random(n) * 2][trial % 3]
        assert learn_thresholds(scores, gold) == reference_thresholds(scores, gold), trial


# ---- on real judges ----

@pytest.mark.slow
@pytest.mark.skipif(not SHARED_DATA.exists(), reason=f"shared data not found at {SHARED_DATA}")
def test_on_llmjudge_dev_the_default_seats_its_best_judge_alone_because_no_panel_beat_it_out_of_sample():
    from judgeblender.blend import load_qrels_ballots
    from judgeblender.pairs import read_qrels

    files = sorted((SHARED_DATA / "llm-labels" / "llmjudge-dev").glob("*.qrels"))
    table = load_qrels_ballots(files, invalid_labels="abstain")
    gold = read_qrels(SHARED_DATA / "llmjudge-dev" / "qrels.txt", allowed=range(4))
    sel = select(table, gold)
    d = sel.decision
    assert d.n_pairs == 7263 and d.n_queries == 25 and d.procedure == "single"
    assert sel.chosen.label == "member sum-of-decomposed"
    # the rich family's min of three was no better out of sample (+0.001, inside its noise): the seed cannot tell
    gain, se = d.gains["rich"]
    assert abs(gain) < 0.005 and gain - se < 0
    assert d.estimates["single"].kappa > d.estimates["vote"].kappa + 0.05
    assert d.tell_apart.startswith("the seed cannot tell single from rich apart")
