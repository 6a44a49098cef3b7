"""`judgeblender estimate`: query-level PPI++ estimates of run scores from LLM labels on every
query and human labels on a random seed of whole queries.

The small collection below has 8 queries of 6 documents each. Human labels are fixed by a
seeded generator; the LLM is lenient (it adds one grade to most labels), so LLM-only scores
are biased upwards. Three runs rank the documents in different orders.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from judgeblender.cli import main
from judgeblender.errors import JudgeblenderError
from judgeblender.evaluate.estimate import estimate, holm, query_ppi
from judgeblender.pairs.design import Design, design_path_for, read_design, write_design
from judgeblender.pairs.qrels import read_qrels, write_qrels
from judgeblender.pairs.runs import read_runs_dir

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
QUERIES = [f"q{i}" for i in range(1, 9)]
DOCS = [f"d{j}" for j in range(1, 7)]


def human_labels() -> dict[str, dict[str, int]]:
    rng = np.random.default_rng(3)
    return {q: {d: int(rng.integers(0, 4)) for d in DOCS} for q in QUERIES}


def llm_labels() -> dict[str, dict[str, int]]:
    rng = np.random.default_rng(4)
    return {q: {d: min(3, v + int(rng.random() < 0.7)) for d, v in docs.items()} for q, docs in human_labels().items()}


@pytest.fixture
def files(tmp_path):
    """llm.qrels (every pair), seed.qrels (whole queries q1, q3, q5, q7), runs/ (3 runs)."""
    write_qrels(tmp_path / "llm.qrels", llm_labels())
    human = human_labels()
    write_qrels(tmp_path / "seed.qrels", {q: human[q] for q in ("q1", "q3", "q5", "q7")})
    runs = tmp_path / "runs"
    runs.mkdir()
    for r, name in enumerate(("A", "B", "C")):
        rng = np.random.default_rng(10 + r)
        lines = []
        for q in QUERIES:
            for rank, j in enumerate(rng.permutation(len(DOCS)), start=1):
                lines.append(f"{q} Q0 {DOCS[j]} {rank} {10 - rank} {name}\n")
        (runs / f"{name}.run").write_text("".join(lines))
    return tmp_path


def run_main(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    """The real entry point (errors become `error:` lines and exit code 2)."""
    monkeypatch.setattr(sys, "argv", ["judgeblender", *map(str, args)])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def estimate_args(d: Path, *extra) -> list:
    return ["estimate", "--llm", d / "llm.qrels", "--human", d / "seed.qrels", "--runs", d / "runs", *extra]


# --- the estimator ------------------------------------------------------------------------------

def random_population(rng, rows=5, big_n=40):
    f = rng.random((rows, big_n))
    y = 0.6 * f + 0.1 + 0.15 * rng.standard_normal((rows, big_n))
    return y, f


def test_superpopulation_interval_equals_ppi_python_computed_directly():
    ppi_py = pytest.importorskip("ppi_py")
    rng = np.random.default_rng(0)
    y, f = random_population(rng)
    seeded = np.zeros(40, dtype=bool)
    seeded[rng.choice(40, 12, replace=False)] = True
    ours = query_ppi(y, f, seeded, target="superpopulation", confidence=0.9)
    for i in range(len(y)):
        lo, hi = ppi_py.ppi_mean_ci(y[i][seeded], f[i][seeded], f[i][~seeded], alpha=0.1)
        point = ppi_py.ppi_mean_pointestimate(y[i][seeded], f[i][seeded], f[i][~seeded])
        assert ours["ci_low"][i] == pytest.approx(float(np.ravel(lo)[0]), abs=1e-12)
        assert ours["ci_high"][i] == pytest.approx(float(np.ravel(hi)[0]), abs=1e-12)
        assert ours["estimate"][i] == pytest.approx(float(np.ravel(point)[0]), abs=1e-12)
        p = ppi_py.ppi_mean_pval(y[i][seeded], f[i][seeded], f[i][~seeded], lam=float(ours["lam"][i]))
        assert ours["p"][i] == pytest.approx(float(np.ravel(p)[0]), rel=1e-9)


def test_collection_interval_is_the_difference_estimator_with_finite_population_correction():
    from scipy import stats

    rng = np.random.default_rng(1)
    y, f = random_population(rng, rows=1, big_n=30)
    y, f = y[0], f[0]
    seeded = np.zeros(30, dtype=bool)
    seeded[:10] = True
    got = query_ppi(y, f, seeded, target="collection", confidence=0.95)
    ys, fs = y[:10], f[:10]
    lam = np.clip(np.cov(ys, fs)[0, 1] / np.var(fs, ddof=1), 0, 1)
    est = ys.mean() + lam * (f.mean() - fs.mean())
    resid = (ys - ys.mean()) - lam * (fs - fs.mean())
    se = np.sqrt((1 - 10 / 30) * (resid ** 2).sum() / 8 / 10)  # n - 2: lambda was fitted
    half = stats.t.ppf(0.975, 8) * se
    assert float(got["lam"]) == pytest.approx(lam)
    assert float(got["estimate"]) == pytest.approx(est)
    assert float(got["ci_low"]) == pytest.approx(est - half)
    assert float(got["ci_high"]) == pytest.approx(est + half)


def test_collection_point_estimate_is_ppi_pythons_with_the_whole_collection_as_unlabelled_set():
    ppi_py = pytest.importorskip("ppi_py")
    rng = np.random.default_rng(6)
    y, f = random_population(rng, rows=3, big_n=30)
    seeded = np.zeros(30, dtype=bool)
    seeded[rng.choice(30, 9, replace=False)] = True
    ours = query_ppi(y, f, seeded, target="collection")
    for i in range(3):
        theirs = ppi_py.ppi_mean_pointestimate(y[i][seeded], f[i][seeded], f[i], lam=float(ours["lam"][i]))
        assert ours["estimate"][i] == pytest.approx(float(np.ravel(theirs)[0]), abs=1e-12)


def test_collection_interval_covers_a_known_collection_mean_at_the_nominal_rate():
    rng = np.random.default_rng(2)
    big_n, n, sims = 60, 20, 4000
    f = rng.random(big_n)
    y = 0.5 * f + 0.05 + 0.1 * rng.standard_normal(big_n)  # LLM scores biased and noisy
    truth = y.mean()
    seeded = np.zeros((sims, big_n), dtype=bool)
    picks = np.argsort(rng.random((sims, big_n)), axis=1)[:, :n]
    np.put_along_axis(seeded, picks, True, axis=1)
    ppi = query_ppi(y, f, seeded, target="collection", confidence=0.9)
    human = query_ppi(y, f, seeded, target="collection", confidence=0.9, lam=0.0)
    covered = (ppi["ci_low"] <= truth) & (truth <= ppi["ci_high"])
    assert 0.87 <= covered.mean() <= 0.93
    assert abs(ppi["estimate"].mean() - truth) < 0.002  # (nearly) unbiased, unlike the LLM-only mean
    assert abs(f.mean() - truth) > 0.1
    # the LLM scores carry information: the interval is narrower than the seed's alone
    assert (ppi["ci_high"] - ppi["ci_low"]).mean() < 0.8 * (human["ci_high"] - human["ci_low"]).mean()


def test_a_seed_of_every_query_gives_the_exact_collection_mean_with_no_width():
    rng = np.random.default_rng(5)
    y, f = random_population(rng, rows=2, big_n=10)
    got = query_ppi(y, f, np.ones(10, dtype=bool), target="collection")
    assert np.allclose(got["estimate"], y.mean(axis=1))
    assert np.allclose(got["ci_high"] - got["ci_low"], 0)


def test_holm_adjusts_the_smallest_p_value_by_the_number_of_tests_and_stays_monotone():
    assert holm(np.array([0.01, 0.04, 0.03, 0.5])).tolist() == pytest.approx([0.04, 0.09, 0.09, 0.5])


def test_a_tuned_interval_needs_three_seed_queries_and_a_confidence_inside_0_1():
    with pytest.raises(JudgeblenderError, match="at least 3 seed queries"):
        query_ppi(np.ones(5), np.ones(5), np.array([True, True, False, False, False]))
    assert query_ppi(np.ones(5), np.ones(5), np.array([True, True, False, False, False]), lam=0.0)["n"] == 2
    with pytest.raises(JudgeblenderError, match="between 0 and 1"):
        query_ppi(np.ones(5), np.ones(5), np.ones(5, dtype=bool), confidence=1.0)


# --- the library call on files ------------------------------------------------------------------

def test_estimate_scores_every_run_with_llm_only_human_only_and_ppi(files):
    llm, human = read_qrels(files / "llm.qrels"), read_qrels(files / "seed.qrels")
    runs = read_runs_dir(files / "runs")
    result = estimate(llm, human, runs, ["P@3"], confidence=0.9)
    assert [r.run for r in result.runs] == ["A", "B", "C"]
    full = human_labels()
    for r in result.runs:
        # LLM-only: the mean of P@3 over all 8 queries under the lenient labels
        ranking = next(run for run in runs if run.name == r.run).ranking
        llm_p = np.mean([sum(llm[q][d] >= 1 for d, _ in ranking[q][:3]) / 3 for q in QUERIES])
        seed_p = np.mean([sum(full[q][d] >= 1 for d, _ in ranking[q][:3]) / 3 for q in ("q1", "q3", "q5", "q7")])
        assert r.llm_only == pytest.approx(llm_p)
        assert r.human_only == pytest.approx(seed_p)
        assert r.ci_low <= r.estimate <= r.ci_high
        assert (r.n_seed, r.n_queries) == (4, 8)
    assert len(result.pairs) == 3
    assert "finite population" in result.method["estimand"]


# --- the command --------------------------------------------------------------------------------

def test_estimate_json_gives_one_object_per_run_and_measure_then_pairs_then_method(files, monkeypatch, capsys):
    code, out, err = run_main(monkeypatch, capsys, *estimate_args(files, "-m", "P@3", "-m", "nDCG@3", "--json"))
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    runs = [r for r in rows if r["kind"] == "run"]
    assert len(runs) == 6
    assert {"run", "measure", "estimate", "ci_low", "ci_high", "llm_only", "human_only"} <= set(runs[0])
    assert sum(r["kind"] == "pair" for r in rows) == 6
    method = rows[-1]
    assert method["kind"] == "method" and "Holm" in method["pairwise"]
    assert any("not fitted to the seed" in a for a in method["assumptions"])


def test_estimate_table_names_the_estimand_method_and_assumptions(files, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "160")
    code, out, err = run_main(monkeypatch, capsys, *estimate_args(files, "-m", "P@3"))
    assert code == 0, err
    assert "estimated: each run's mean score over the collection's 8 queries" in out
    assert "Holm" in out and "assumes:" in out


def test_a_seed_label_for_a_pair_the_llm_did_not_label_is_an_error_naming_the_seed_line(files, monkeypatch, capsys):
    with open(files / "seed.qrels", "a") as fh:
        fh.write("q1 0 d99 2\n")
    code, out, err = run_main(monkeypatch, capsys, *estimate_args(files))
    assert code == 2
    assert err.startswith("error: ") and f"{files / 'seed.qrels'}:25:" in err
    assert "Traceback" not in err


def test_a_run_that_ranks_no_seed_query_is_an_error_naming_the_run_file(files, monkeypatch, capsys):
    (files / "runs" / "D.run").write_text("q2 Q0 d1 1 5 D\nq4 Q0 d2 1 5 D\n")
    code, out, err = run_main(monkeypatch, capsys, *estimate_args(files))
    assert code == 2
    assert "error: " in err and "D.run" in err and "seed query" in err


@pytest.mark.parametrize("confidence", ["0", "1", "1.5", "-0.2"])
def test_a_confidence_outside_0_1_is_an_error(files, monkeypatch, capsys, confidence):
    code, out, err = run_main(monkeypatch, capsys, *estimate_args(files, "--confidence", confidence))
    assert code == 2
    assert err.strip() == f"error: --confidence: expected a number in (0, 1), got {confidence!r}"


def test_a_seed_of_part_of_a_query_without_design_is_refused_with_the_reason(files, monkeypatch, capsys):
    human = human_labels()
    write_qrels(files / "seed.qrels", {"q1": human["q1"], "q3": dict(list(human["q3"].items())[:4])})
    code, out, err = run_main(monkeypatch, capsys, *estimate_args(files))
    assert code == 2
    assert "whole queries" in err and "query q3 has human labels for 4 of the 6 pairs" in err


def test_a_design_file_beside_the_seed_is_read_and_must_match_its_queries(files, monkeypatch, capsys):
    design = Design("queries", QUERIES, ["q1", "q3", "q5", "q7"], random_seed=0)
    write_design(design_path_for(files / "seed.qrels"), design)
    code, out, err = run_main(monkeypatch, capsys, *estimate_args(files, "--json"))
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["design"].endswith("seed.design.json")
    write_design(design_path_for(files / "seed.qrels"), Design("queries", QUERIES, ["q1", "q2"], random_seed=0))
    code, out, err = run_main(monkeypatch, capsys, *estimate_args(files))
    assert code == 2 and "seed.design.json" in err and "as its seed" in err


def test_a_pair_level_design_is_refused_with_the_reason(files, monkeypatch, capsys):
    (files / "pairs.design.json").write_text(json.dumps({"design": "pairs-stratified", "strata": []}))
    code, out, err = run_main(monkeypatch, capsys, *estimate_args(files, "--design", files / "pairs.design.json"))
    assert code == 2
    assert "pairs.design.json" in err and "whole queries" in err


def test_pool_sample_queries_draws_whole_queries_and_writes_the_design_that_estimate_reads(files, monkeypatch,
                                                                                             capsys):
    code, out, err = run_main(monkeypatch, capsys, "pool", "--runs", files / "runs", "--depth", "6",
                              "--out", files / "pool.tsv", "--sample-queries", "3", "--sample-out",
                              files / "seed.tsv", "--seed", "7", "--json")
    assert code == 0, err
    design = read_design(files / "seed.design.json")
    assert design.kind == "queries" and sorted(design.population) == QUERIES and len(design.seed) == 3
    data = json.loads((files / "seed.design.json").read_text())
    assert set(data["inclusion_probability"].values()) == {3 / 8}
    pairs = [line.split("\t") for line in (files / "seed.tsv").read_text().splitlines()]
    assert sorted({q for q, _ in pairs}) == sorted(design.seed) and len(pairs) == 3 * 6  # every pair of each
    # the people label the seed pairs; estimate finds the design beside their qrels
    human = human_labels()
    write_qrels(files / "seed.qrels", {q: human[q] for q in design.seed})
    code, out, err = run_main(monkeypatch, capsys, *estimate_args(files, "--json"))
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["seed_queries"] == 3


def test_pool_sample_writes_a_stratified_pair_design_with_inclusion_probabilities(files, monkeypatch, capsys):
    code, out, err = run_main(monkeypatch, capsys, "pool", "--runs", files / "runs", "--depth", "6",
                              "--out", files / "pool.tsv", "--sample", "10", "--sample-out", files / "few.tsv")
    assert code == 0, err
    data = json.loads((files / "few.design.json").read_text())
    assert data["design"] == "pairs-stratified"
    assert sum(s["drawn"] for s in data["strata"]) == 10 == len(data["seed"])
    assert all(s["inclusion_probability"] == s["drawn"] / s["size"] for s in data["strata"])


# --- the shared DL19 data -----------------------------------------------------------------------

def test_on_dl19_ppi_narrows_the_human_only_interval_and_corrects_the_lenient_llm():
    dl19, labels = SHARED_DATA / "trec-dl-2019", SHARED_DATA / "llm-labels" / "trec-dl-2019"
    if not dl19.is_dir():
        pytest.skip("shared data not found")
    human = read_qrels(dl19 / "qrels.txt")
    llm = read_qrels(labels / "fourprompts-llama3-70b.qrels")
    runs = read_runs_dir(dl19 / "runs")
    seed_q = sorted(human)[::4]  # 11 of 43 queries, a fixed spread
    seed = {q: {d: v for d, v in human[q].items() if d in llm[q]} for q in seed_q}
    result = estimate(llm, seed, runs, ["nDCG@10"], confidence=0.9, pairs=False)
    ppi_width = np.mean([r.ci_high - r.ci_low for r in result.runs])
    human_width = np.mean([r.human_only_high - r.human_only_low for r in result.runs])
    assert ppi_width < 0.9 * human_width
    assert np.mean([r.llm_only - r.estimate for r in result.runs]) > 0.1  # the judge is lenient


def test_runs_that_differ_on_two_seed_queries_fail_cochrans_rule_and_are_not_declared_ordered(files):
    # per-query differences: zero on 18 of 20 seed queries, large on 2 -> skewness ~3, 25 g1^2 >> 20
    y = np.zeros(40)
    y[[0, 1]] = [0.4, 0.3]
    f = np.zeros(40)
    seeded = np.zeros(40, dtype=bool)
    seeded[:20] = True
    got = query_ppi(y, f, seeded, lam=0.0)
    assert not bool(got["normal_ok"]) and float(got["skewness"]) > 2
    spread = query_ppi(np.random.default_rng(0).random(40), f, seeded, lam=0.0)
    assert bool(spread["normal_ok"])
    # in `estimate`, a pair is significant only where Holm rejects and the rule holds
    llm, human = read_qrels(files / "llm.qrels"), read_qrels(files / "seed.qrels")
    result = estimate(llm, human, read_runs_dir(files / "runs"), ["P@3"], confidence=0.9)
    assert all(p.significant == (p.p_holm < 0.1 and p.normal_ok) for p in result.pairs)


def test_plan_gives_the_smallest_seed_whose_interval_reaches_the_target_width():
    from scipy import stats

    from judgeblender.evaluate.estimate import queries_needed

    def width(n, s2=0.04, big_n=43):
        return 2 * stats.t.ppf(0.95, n - 2) * np.sqrt((1 - n / big_n) * s2 / n)

    (n,) = queries_needed(np.array([0.04]), 43, 0.1, 0.9, tuned=True)
    assert width(n) <= 0.1 < width(n - 1)
    assert queries_needed(np.array([0.04]), 43, 1e-9, 0.9, tuned=True) == [43]  # only the census is exact
    assert queries_needed(np.array([0.0]), 43, 0.1, 0.9, tuned=True) == [3]


def test_estimate_plan_json_gives_queries_and_pairs_needed_per_run(files, monkeypatch, capsys):
    code, out, err = run_main(monkeypatch, capsys, *estimate_args(files, "-m", "P@3", "--plan", "--target-width",
                                                                  "0.2", "--json"))
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["run"] for r in rows] == ["A", "B", "C"] and all(r["kind"] == "plan" for r in rows)
    for r in rows:
        assert 3 <= r["queries_needed"] <= 8 and r["pairs_needed"] == r["queries_needed"] * 6
    code, out, err = run_main(monkeypatch, capsys, *estimate_args(files, "--plan"))
    assert code == 2 and "--plan and --target-width go together" in err


# --- part 3: pairs drawn with known probabilities -----------------------------------------------

def test_pair_design_estimator_is_unbiased_and_covers_at_the_nominal_rate_in_simulation():
    from judgeblender.evaluate.pair_design import inclusion_probabilities, poisson_estimate

    rng = np.random.default_rng(8)
    n_pairs, sims = 400, 4000
    w = rng.random((3, n_pairs)) * (rng.random((3, n_pairs)) < 0.3)
    w /= w.sum(1, keepdims=True)
    llm = (rng.random(n_pairs) < 0.5).astype(float)
    human = np.where(rng.random(n_pairs) < 0.8, llm, 1 - llm)  # the LLM is right 80% of the time
    truth = w @ human
    pi = inclusion_probabilities(np.sqrt((w ** 2).sum(0)) + 1e-3, 120)
    assert pi.max() <= 1 and pi.sum() == pytest.approx(120)
    drawn = rng.random((sims, n_pairs)) < pi
    got = poisson_estimate(w, llm, human, drawn, pi, confidence=0.9, lam=1.0)
    assert np.abs(got["estimate"].mean(0) - truth).max() < 0.004  # Horvitz-Thompson: unbiased
    covered = (got["ci_low"] <= truth) & (truth <= got["ci_high"])
    assert np.all((0.86 <= covered.mean(0)) & (covered.mean(0) <= 0.94))
    # the variance estimate is unbiased too: its mean matches the spread of the estimates
    assert np.allclose((got["se"] ** 2).mean(0), got["estimate"].var(0), rtol=0.1)


def test_pair_weights_reproduce_the_evaluators_precision_per_run(files):
    from judgeblender.evaluate.estimate import per_query_scores
    from judgeblender.evaluate.pair_design import gains, linear_weights

    runs = read_runs_dir(files / "runs")
    human = human_labels()
    pairs, w = linear_weights(runs, QUERIES, "precision", 3)
    p_at_3 = per_query_scores(runs, QUERIES, {"h": human}, ["P(rel=2)@3"])["h"]["P(rel=2)@3"].mean(1)
    assert np.allclose(w @ gains(human, pairs, "precision", 2), p_at_3)


def test_a_seed_of_pairs_from_pool_sample_pairs_is_estimated_for_precision_and_refused_for_ndcg(files, monkeypatch,
                                                                                               capsys):
    code, out, err = run_main(monkeypatch, capsys, "pool", "--runs", files / "runs", "--depth", "3",
                              "--out", files / "pool.tsv", "--sample-pairs", "12", "--sample-out",
                              files / "seed.tsv", "--seed", "1", "--json")
    assert code == 0, err
    data = json.loads((files / "seed.design.json").read_text())
    assert data["design"] == "pairs-poisson" and data["expected_pairs"] == pytest.approx(12)
    drawn = [tuple(line.split("\t")) for line in (files / "seed.tsv").read_text().splitlines()]
    assert [(p["query"], p["docid"]) for p in data["seed"]] == drawn
    human = human_labels()
    write_qrels(files / "seed.qrels", {q: {d: human[q][d] for qq, d in drawn if qq == q} for q in {q for q, _ in drawn}})
    code, out, err = run_main(monkeypatch, capsys, *estimate_args(files, "-m", "P(rel=2)@3", "--json"))
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    runs = [r for r in rows if r["kind"] == "run"]
    assert [r["run"] for r in runs] == ["A", "B", "C"]
    assert all(r["ci_low"] <= r["estimate"] <= r["ci_high"] and r["n_seed"] == len(drawn) for r in runs)
    assert "Horvitz-Thompson" in rows[-1]["estimator"]
    code, out, err = run_main(monkeypatch, capsys, *estimate_args(files, "-m", "nDCG@3"))
    assert code == 2 and "nDCG@3: a seed of pairs supports measures linear in the labels" in err


def test_a_seed_of_every_pooled_pair_gives_the_exact_precision_with_no_width(files, monkeypatch, capsys):
    # depth 3 pools at most 8 x 6 pairs: asking for all of them draws each with probability 1
    run_main(monkeypatch, capsys, "pool", "--runs", files / "runs", "--depth", "3", "--out", files / "pool.tsv")
    n_pool = len((files / "pool.tsv").read_text().splitlines())
    code, out, err = run_main(monkeypatch, capsys, "pool", "--runs", files / "runs", "--depth", "3", "--out",
                              files / "pool.tsv", "--sample-pairs", str(n_pool), "--sample-out", files / "seed.tsv")
    assert code == 0, err
    write_qrels(files / "seed.qrels", human_labels())
    (files / "seed.qrels").write_text("".join(
        line for line in (files / "seed.qrels").read_text().splitlines(keepends=True)
        if tuple(line.split()[::2][:2]) in {tuple(x.split("\t")) for x in (files / "seed.tsv").read_text().splitlines()}))
    code, out, err = run_main(monkeypatch, capsys, *estimate_args(files, "-m", "P(rel=2)@3", "--json"))
    assert code == 0, err
    from judgeblender.evaluate.estimate import per_query_scores

    truth = per_query_scores(read_runs_dir(files / "runs"), QUERIES, {"h": human_labels()}, ["P(rel=2)@3"])["h"]
    runs = [json.loads(line) for line in out.splitlines() if '"kind": "run"' in line]
    assert [r["estimate"] for r in runs] == pytest.approx(truth["P(rel=2)@3"].mean(1).tolist())
    assert all(r["ci_high"] - r["ci_low"] == pytest.approx(0) for r in runs)


def test_the_superpopulation_target_without_ppi_python_names_the_extra_to_install(files, monkeypatch, capsys):
    import importlib

    real = importlib.import_module

    def no_ppi(name, *args, **kwargs):
        if name == "ppi_py":
            raise ImportError("No module named 'ppi_py'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", no_ppi)
    code, out, err = run_main(monkeypatch, capsys, *estimate_args(files, "--target", "superpopulation"))
    assert code == 2
    assert "pip install 'judgeblender[estimate]'" in err
