"""Leaderboard correlation, bias by family and the SVG plot.

tests/data/runs_tiny holds four runs A-D over queries q1-q4. Each query has documents
r (relevant for gold and prediction), g (relevant for gold only), p (relevant for the
prediction only), n (relevant for neither) and u (judged 0 by gold, unlabelled in the
prediction; only run D retrieves it). Top documents, which decide P@1:

    run  q1 q2 q3 q4        P@1 gold (q1-q3)   P@1 prediction (q1-q3)
    A    r  r  g  n         3/3                2/3
    B    r  r  p  n         2/3                3/3
    C    r  n  n  n         1/3                1/3
    D    n  n  u  p         0                  0

So gold ranks A > B > C > D and the prediction B > A > C > D: one swap, at the top.
q4 is labelled only in the prediction; it must be ignored (else D would score 1/4 there).
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import ir_measures
import numpy as np
import pytest
from scipy import stats

from judgeblender.errors import InputError
from judgeblender.evaluate import (
    RunSet,
    bootstrap_intervals,
    bootstrap_query_counts,
    correlate,
    evaluate_runs,
    grid_svg,
    group_bias,
    leaderboard_scatter,
    parse_measures,
    read_groups,
    report_bias,
    scatter_svg,
    tau_ap,
    tau_ap_symmetric,
)
from judgeblender.evaluate.rank_correlation import average_ranks, pairwise_rows, spearman_rows
from judgeblender.pairs import read_qrels, read_run, read_runs_dir

TESTS = Path(__file__).parent
RUNS_TINY = TESTS / "data" / "runs_tiny"
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

GOLD = {q: {f"{q}r": 2, f"{q}g": 3, f"{q}p": 0, f"{q}n": 0, f"{q}u": 0} for q in ("q1", "q2", "q3")}
PRED = {q: {f"{q}r": 2, f"{q}g": 0, f"{q}p": 3, f"{q}n": 0} for q in ("q1", "q2", "q3", "q4")}


def write_qrels_text(path: Path, qrels: dict) -> Path:
    path.write_text("".join(f"{q} 0 {d} {l}\n" for q, docs in qrels.items() for d, l in docs.items()))
    return path


@pytest.fixture
def tiny_runs():
    return read_runs_dir(RUNS_TINY)


# --- tau_AP -------------------------------------------------------------------------------

def test_tau_ap_by_hand_top_swap_costs_more_than_bottom_swap():
    gold = [4, 3, 2, 1]  # A > B > C > D
    # estimate B > A > C > D: p(2) = 0/1 (B above A is wrong), p(3) = 2/2, p(4) = 3/3
    assert tau_ap(gold, [3, 4, 2, 1]) == pytest.approx(2 / 3 * (0 + 1 + 1) - 1)  # 1/3
    # estimate A > B > D > C: p(2) = 1, p(3) = 2/2, p(4) = 2/3 (D above C is wrong)
    assert tau_ap(gold, [4, 3, 1, 2]) == pytest.approx(2 / 3 * (1 + 1 + 2 / 3) - 1)  # 7/9
    # Kendall's tau cannot tell the two swaps apart
    top_swap, bottom_swap = stats.kendalltau(gold, [3, 4, 2, 1]), stats.kendalltau(gold, [4, 3, 1, 2])
    assert top_swap.statistic == pytest.approx(bottom_swap.statistic)


def test_tau_ap_extremes_and_asymmetry():
    assert tau_ap([1, 2, 3, 4, 5], [10, 20, 30, 40, 50]) == pytest.approx(1.0)
    assert tau_ap([1, 2, 3, 4, 5], [5, 4, 3, 2, 1]) == pytest.approx(-1.0)
    a, b = [5, 4, 3, 2, 1], [5, 2, 4, 3, 1]
    assert tau_ap(a, b) != pytest.approx(tau_ap(b, a))
    assert tau_ap_symmetric(a, b) == pytest.approx((tau_ap(a, b) + tau_ap(b, a)) / 2)


def test_tau_ap_ties():
    assert tau_ap([1, 1, 2], [1, 1, 2]) == pytest.approx(1.0)  # tied in both: agreement
    # estimate ties the top two that gold orders: that pair counts half.
    # order by estimate: x(9), y(9), z(1); p(2) = 0.5, p(3) = 2/2 -> 2/2 * 1.5 - 1
    assert tau_ap([3, 2, 1], [9, 9, 1]) == pytest.approx(0.5)


def test_vectorised_correlations_equal_scipy_with_ties():
    rng = np.random.default_rng(7)
    x = rng.integers(0, 6, size=(40, 12)).astype(float)  # many ties
    y = x + rng.integers(-2, 3, size=x.shape)
    tau_b, tau_ap_rows = pairwise_rows(x, y)
    rho = spearman_rows(x, y)
    for k in range(len(x)):
        assert tau_b[k] == pytest.approx(stats.kendalltau(x[k], y[k]).statistic)
        assert rho[k] == pytest.approx(stats.spearmanr(x[k], y[k]).statistic)
        assert tau_ap_rows[k] == pytest.approx(tau_ap(x[k], y[k]))


def test_average_ranks_equal_scipy_rankdata():
    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 37, 300):  # 300: past the pairwise-count limit, scipy ranks them
        tied = rng.integers(0, 4, size=(25, n)).astype(float)
        plain = rng.random((25, n))
        for x in (tied, plain):
            assert np.array_equal(average_ranks(x), stats.rankdata(x, axis=1))


def test_correlate_point_estimates_equal_scipy(tiny_runs):
    rng = np.random.default_rng(5)
    for _ in range(5):  # random predictions over the tiny runs' documents, ties included
        pred = {q: {f"{q}{d}": int(rng.integers(0, 4)) for d in "rgpnu"} for q in ("q1", "q2", "q3")}
        (rep,) = correlate(GOLD, {"pred": pred}, tiny_runs, ["nDCG@10"], bootstrap=0)
        g, p = rep.gold_scores, rep.pred_scores
        assert rep.kendall_tau == pytest.approx(stats.kendalltau(g, p).statistic, nan_ok=True)
        assert rep.spearman_rho == pytest.approx(stats.spearmanr(g, p).statistic, nan_ok=True)


# --- evaluation -----------------------------------------------------------------------------

def test_per_query_scores_match_ir_measures(tiny_runs):
    measures = parse_measures(["P@1", "nDCG@10", "AP(rel=2)"])
    queries = sorted(GOLD)
    pq = evaluate_runs(RunSet(tiny_runs, queries), GOLD, measures)
    assert pq["P@1"].tolist() == [[1, 1, 1], [1, 1, 0], [1, 0, 0], [0, 0, 0]]
    for r, run in enumerate(tiny_runs):
        expected = ir_measures.calc_aggregate(measures, GOLD, run.scores())
        for m in measures:
            assert pq[str(m)][r].mean() == pytest.approx(expected[m])


def test_cut_runs_give_the_full_depth_values_even_with_ties_at_the_cutoff(tmp_path):
    # 30 documents, scores tied in blocks of 4 so that ranks 9-12 (d08-d11) share one score.
    # d08 and d09 are unjudged: which two of the tied block make the top 10 changes Judged@10
    # (ir_measures' Judged provider breaks ties by docid ascending, trec_eval by docid descending:
    # judgeblender's Judged@10 counts trec_eval's top 10, d11 and d10, both judged).
    qrels = {"q": {f"d{i:02d}": (i * 7) % 4 for i in range(30) if i not in (8, 9)}}
    run_file = tmp_path / "tied.run"
    run_file.write_text("".join(f"q Q0 d{i:02d} {i + 1} {float(30 - i // 4 * 4)} t\n" for i in range(30)))
    run = read_run(run_file)
    measures = parse_measures(["nDCG@10", "P@10", "Judged@10", "AP"])
    pq = evaluate_runs(RunSet([run], ["q"]), qrels, measures)
    expected = ir_measures.calc_aggregate(measures[:2] + measures[3:], qrels, run.scores())
    for m in measures[:2] + measures[3:]:
        assert pq[str(m)][0, 0] == pytest.approx(expected[m])
    assert pq["Judged@10"][0, 0] == 1.0


# --- correlate ------------------------------------------------------------------------------

def test_correlate_tiny_leaderboards_known_by_hand(tiny_runs):
    (rep,) = correlate(GOLD, {"pred": PRED}, tiny_runs, ["P@1"], bootstrap=0)
    assert rep.runs == ["A", "B", "C", "D"]
    assert rep.n_queries == 3 and rep.n_runs == 4  # q4 is not in gold: not evaluated
    assert rep.gold_scores == pytest.approx([1, 2 / 3, 1 / 3, 0])
    assert rep.pred_scores == pytest.approx([2 / 3, 1, 1 / 3, 0])
    assert rep.kendall_tau == pytest.approx(2 / 3)  # 5 concordant, 1 discordant of 6 pairs
    assert rep.spearman_rho == pytest.approx(1 - 6 * 2 / (4 * 15))  # rank differences 1, 1
    assert rep.tau_ap == pytest.approx(1 / 3)  # the swap is at the top of the prediction
    # D puts one prediction-unlabelled document in its top 5 for q1-q3: 0.2 of 4 runs
    assert rep.unjudged_at_10 == pytest.approx(0.2 / 4)
    assert all(math.isnan(v) for v in rep.kendall_tau_ci)


def test_correlate_default_measures_one_report_per_file_and_measure(tiny_runs):
    reps = correlate(GOLD, {"a": PRED, "b": GOLD}, tiny_runs, bootstrap=50)
    assert [(r.name, r.measure) for r in reps] == [
        ("a", "nDCG@10"), ("a", "AP(rel=2)"), ("b", "nDCG@10"), ("b", "AP(rel=2)")]
    # gold against itself: perfect, in every bootstrap sample too
    for r in reps[2:]:
        assert r.kendall_tau == pytest.approx(1.0) and r.tau_ap == pytest.approx(1.0)
        assert r.kendall_tau_ci == pytest.approx((1.0, 1.0))


def test_bootstrap_is_deterministic_for_a_seed(tiny_runs):
    def cis(seed):
        (r,) = correlate(GOLD, {"p": PRED}, tiny_runs, ["P@1"], bootstrap=200, seed=seed)
        return r.kendall_tau_ci, r.spearman_rho_ci, r.tau_ap_ci

    assert cis(3) == cis(3)
    lo, hi = cis(3)[0]
    assert -1 <= lo <= hi <= 1
    assert any(cis(3) != cis(s) for s in (4, 5, 6))


def test_bootstrap_intervals_are_percentiles_of_scipy_over_explicit_resamples():
    rng = np.random.default_rng(11)
    gold = rng.random((6, 8))  # 6 runs x 8 queries
    pred = gold + 0.4 * rng.random((6, 8))
    counts = bootstrap_query_counts(8, 300, seed=5)
    assert (counts.sum(axis=1) == 8).all()  # each sample draws 8 queries with replacement
    taus, rhos, taps = [], [], []
    for row in counts.astype(int):
        drawn = np.repeat(np.arange(8), row)  # the resampled queries, repeats included
        g, p = gold[:, drawn].mean(axis=1), pred[:, drawn].mean(axis=1)
        taus.append(stats.kendalltau(g, p).statistic)
        rhos.append(stats.spearmanr(g, p).statistic)
        taps.append(tau_ap(g, p))
    ci = bootstrap_intervals(gold, pred, counts, confidence=0.9)
    assert ci["kendall_tau"] == pytest.approx(tuple(np.percentile(taus, [5, 95])))
    assert ci["spearman_rho"] == pytest.approx(tuple(np.percentile(rhos, [5, 95])))
    assert ci["tau_ap"] == pytest.approx(tuple(np.percentile(taps, [5, 95])))


def test_bad_measure_is_a_clear_error(tiny_runs):
    from judgeblender.errors import JudgeblenderError

    with pytest.raises(JudgeblenderError, match="cannot parse measure 'nDCG@@10'"):
        correlate(GOLD, {"p": PRED}, tiny_runs, ["nDCG@@10"])


# --- bias and plot ----------------------------------------------------------------------------

def test_group_bias_signs(tiny_runs):
    (rep,) = correlate(GOLD, {"pred": PRED}, tiny_runs, ["P@1"], bootstrap=0)
    groups = {"A": "alpha", "B": "beta", "C": "rest"}  # D unlisted
    bias = {b.group: b for b in report_bias(rep, groups)}
    assert set(bias) == {"alpha", "beta", "rest", "(ungrouped)"}
    # A loses 1/3 under the prediction and drops from rank 1 to 2; B the reverse
    assert bias["alpha"].mean_score_diff == pytest.approx(-1 / 3)
    assert bias["alpha"].mean_rank_shift == pytest.approx(+1)
    assert bias["beta"].mean_score_diff == pytest.approx(+1 / 3)
    assert bias["beta"].mean_rank_shift == pytest.approx(-1)
    assert bias["rest"].mean_score_diff == 0 and bias["rest"].mean_rank_shift == 0
    assert bias["(ungrouped)"].runs == ["D"]


def test_group_bias_averages_over_the_group_with_tied_ranks():
    res = group_bias(["a", "b", "c"], [0.3, 0.2, 0.1], [0.1, 0.2, 0.2], {"a": "x", "b": "y", "c": "y"})
    by = {g.group: g for g in res}
    # prediction ranks: b and c tie for 1.5, a is 3; gold ranks 1, 2, 3
    assert by["x"].mean_rank_shift == pytest.approx(3 - 1)
    assert by["y"].mean_rank_shift == pytest.approx(((1.5 - 2) + (1.5 - 3)) / 2)
    assert by["y"].mean_score_diff == pytest.approx((0.0 + 0.1) / 2)


def test_read_groups_errors_name_file_and_line(tmp_path):
    ok = tmp_path / "g.tsv"
    ok.write_text("# family of each run\nA\tneural\n\nB\tlexical bm25\n")
    assert read_groups(ok) == {"A": "neural", "B": "lexical bm25"}
    bad = tmp_path / "bad.tsv"
    bad.write_text("A\tneural\nB lexical\n")
    with pytest.raises(InputError, match=r"bad\.tsv:2"):
        read_groups(bad)
    clash = tmp_path / "clash.tsv"
    clash.write_text("A\tneural\nA\tlexical\n")
    with pytest.raises(InputError, match=r"clash\.tsv:2.*one group per run"):
        read_groups(clash)


def test_scatter_svg_is_well_formed_with_points_diagonal_and_legend(tiny_runs):
    (rep,) = correlate(GOLD, {"pred & <co>": PRED}, tiny_runs, ["P@1"], bootstrap=0)
    svg = scatter_svg(leaderboard_scatter(rep, {"A": "alpha", "B": "beta"}))
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg"
    titles = [t.text for t in root.iter(f"{ns}title")]
    assert sum(t.startswith(("A:", "B:", "C:", "D:")) for t in titles) == 4  # one point per run
    assert "y = x" in titles
    texts = {t.text for t in root.iter(f"{ns}text")}
    assert {"alpha", "beta", "(ungrouped)"} <= texts  # legend
    assert "P@1, human labels" in texts and "P@1, pred & <co>" in texts  # axis labels, escaped


def test_grid_svg_holds_one_panel_per_report(tiny_runs):
    reps = correlate(GOLD, {"a": PRED, "b": GOLD}, tiny_runs, ["P@1", "nDCG@10"], bootstrap=0)
    root = ET.fromstring(grid_svg([leaderboard_scatter(r) for r in reps], columns=2))
    assert root.get("width") == str(2 * 560) and root.get("height") == str(2 * 400)
    assert len([c for c in root if c.tag.endswith("g")]) == 4


# --- the published figure -----------------------------------------------------------------------

@pytest.mark.skipif(not SHARED_DATA.exists(), reason=f"shared data not found at {SHARED_DATA}")
def test_dl19_fourprompts_flant5_large_tau_matches_published_figure():
    dl19 = SHARED_DATA / "trec-dl-2019"
    gold = read_qrels(dl19 / "qrels.txt")
    pred = read_qrels(SHARED_DATA / "llm-labels" / "trec-dl-2019" / "fourprompts-flant5-large.qrels")
    runs = read_runs_dir(dl19 / "runs")
    (rep,) = correlate(gold, {"fourprompts-flant5-large": pred}, runs, ["nDCG@10"], bootstrap=0)
    assert rep.n_runs == 37 and rep.n_queries == 43
    assert rep.kendall_tau == pytest.approx(0.904, abs=0.002)
