"""One number, whichever way you ask (issue 31): every route gives the same human, filled and llm figures.

The issue's case on the real DL19 data: BM25-like runs (bm25base_p, bm25tuned_p, UNH_bm25), NIST's
labels with 30% of the pairs hidden by a fixed seed, and the published Llama-3-70B labels as the
jury. Each route computes what it exposes of nDCG@10, AP(rel=2), P@10 and Judged@10 in both scopes:

* jb.experiment, and the `experiment` command's --json: human, filled, llm, judged@10;
* pyterrier.fill_qrels, scored by pt.Experiment: filled (and by judgeblender's own evaluator);
* `fill` then `compare`: filled;
* the report (with --min-judged 0, so that its human leaderboard is computed on these holed
  labels): human and llm for nDCG@10 and AP(rel=2), the human Judged@10, the llm nDCG@10 of its
  method comparison;
* `estimate` (PPI++, not filled): its LLM-only figure is the llm column, and its PPI++ estimate is
  jb.experiment's with the same seed.

Then the scope's promise: with scope labels a system's figures do not depend on which other
systems are in the table; with scope pool they may (two systems pool fewer pairs than three).
And the query set: every route counts the same queries and drops the same ones for the same reason.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import judgeblender as jb
from judgeblender.pairs import read_qrels, read_queries, write_qrels
from judgeblender.pairs.design import draw_query_design, write_design
from judgeblender.errors import ArgumentError
from judgeblender.report.data import ReportInputs, collect

from conftest import SHARED_DATA

pytestmark = pytest.mark.shared_data

DL19 = SHARED_DATA / "trec-dl-2019"
LLAMA = SHARED_DATA / "llm-labels" / "trec-dl-2019" / "fourprompts-llama3-70b.qrels"
SYSTEMS = ("bm25base_p", "bm25tuned_p", "UNH_bm25")
MEASURES = ("nDCG@10", "AP(rel=2)", "P@10")


def cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done


def hide(qrels: dict, share: float, seed: int = 31) -> dict:
    rng = random.Random(seed)
    return {q: {d: v for d, v in docs.items() if rng.random() >= share} for q, docs in qrels.items()}


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    if not (DL19.is_dir() and LLAMA.is_file()):
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    d = tmp_path_factory.mktemp("one")
    (d / "runs").mkdir()
    for name in SYSTEMS:
        (d / "runs" / f"{name}.run.gz").write_bytes((DL19 / "runs" / f"{name}.run.gz").read_bytes())
    nist = read_qrels(DL19 / "qrels.txt")
    human = hide(nist, 0.3)
    write_qrels(d / "human.qrels", human)
    topics = read_queries(DL19 / "queries.tsv")
    # a seed of 10 whole queries with NIST's labels, and its design: PPI++ for both scopes
    design = draw_query_design(sorted(nist), 10, 7)
    write_design(d / "seed.design.json", design)
    write_qrels(d / "seed.qrels", {q: nist[q] for q in design.seed})
    return {"dir": d, "nist": nist, "human": human, "topics": topics,
            "systems": {name: d / "runs" / f"{name}.run.gz" for name in SYSTEMS}}


def experiment_rows(table) -> dict:
    """{(system, measure): {column: value}} of a jb.experiment table."""
    return {(r["system"], r["measure"]): r for r in table.to_dict(orient="records")}


def same(a: float, b: float) -> bool:
    return a == pytest.approx(b, abs=1e-12)


@pytest.fixture(scope="module", params=["labels", "pool"])
def routes(case, request):
    """Every route's figures for one scope: {route: {(system, measure, column): value}}."""
    scope, d = request.param, case["dir"]
    out: dict[str, dict] = {}
    table = jb.experiment(case["systems"], case["topics"], qrels=case["human"], llm_labels=LLAMA,
                          measures=MEASURES, scope=scope, seed=d / "seed.qrels")
    assert table.attrs["scope"] == scope and table.attrs["queries"] == 43 and table.attrs["dropped_queries"] == {}
    out["jb.experiment"] = {(r["system"], r["measure"], col): r[col] for r in table.to_dict(orient="records")
                            for col in ("human", "filled", "llm", "judged@10")}
    ppi = {(r["system"], r["measure"]): r["ppi"] for r in table.to_dict(orient="records")}

    done = cli("experiment", "--runs", d / "runs", "--topics", DL19 / "queries.tsv", "--qrels", d / "human.qrels",
               "--llm", LLAMA, *(a for m in MEASURES for a in ("-m", m)), "--scope", scope, "--json", cwd=d)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[-1]["kind"] == "summary" and lines[-1]["scope"] == scope
    out["experiment"] = {(x["system"], x["measure"], col): x[col] for x in lines if x["kind"] == "system"
                         for col in ("human", "filled", "llm", "judged@10")}

    if _has_pyterrier():  # the [pyterrier] extra: fill_qrels, then pt.Experiment
        from judgeblender.pyterrier import fill_qrels

        filled = fill_qrels(case["systems"], case["topics"], qrels=case["human"], llm_labels=LLAMA, scope=scope)
        assert filled.attrs["scope"] == scope
        out["fill_qrels"] = _pt_experiment(filled, case)

    # the notebook's routes (workflow.py): jb.fill scored by judgeblender's evaluator, and the
    # per-query rows of jb.experiment averaged over each system's queries
    from judgeblender.evaluate.leaderboard import RunSet, evaluate_runs, parse_measures
    from judgeblender.pairs import read_run

    filled = jb.fill(case["systems"], case["topics"], qrels=case["human"], llm_labels=LLAMA, scope=scope)
    qrels: dict = {}
    for q, doc, label in filled[["qid", "docno", "label"]].itertuples(index=False):
        qrels.setdefault(q, {})[doc] = int(label)
    runs = [read_run(path, name=name) for name, path in case["systems"].items()]
    counted = [q for q in case["topics"] if q in case["human"]]  # the 43 the table counts (none dropped)
    assert len(counted) == table.attrs["queries"]
    scores = evaluate_runs(RunSet(runs, counted), qrels, parse_measures(MEASURES))
    out["jb.fill"] = {(run.name, m, "filled"): float(scores[m][i].mean()) for m in MEASURES
                      for i, run in enumerate(runs)}
    rows = jb.experiment(case["systems"], case["topics"], qrels=case["human"], llm_labels=LLAMA,
                         measures=MEASURES, scope=scope, perquery=True)
    means = rows.groupby(["name", "measure"])[["value", "human", "llm"]].mean()
    out["jb.experiment perquery"] = {(name, m, col): float(means.loc[(name, m), src])
                                     for name in case["systems"] for m in MEASURES
                                     for col, src in (("filled", "value"), ("human", "human"), ("llm", "llm"))}

    cli("fill", "--gold", d / "human.qrels", "--llm", LLAMA, "-o", d / f"filled-{scope}.qrels", "--scope", scope,
        *(("--runs", d / "runs") if scope == "pool" else ()), cwd=d)
    done = cli("compare", "--qrels", d / f"filled-{scope}.qrels", "--runs", d / "runs",
               *(a for m in MEASURES for a in ("-m", m)), "--json", cwd=d)
    out["fill + compare"] = {(x["run"], m, "filled"): x[m] for x in map(json.loads, done.stdout.splitlines())
                             for m in MEASURES}

    data = collect(ReportInputs(gold=d / "human.qrels", preds=[LLAMA], runs_dir=d / "runs", bootstrap=0,
                                min_judged=0.0, scope=scope))
    report: dict = {}
    for c in (c for c in data.correlations if c.measure in MEASURES):
        for run, g, p in zip(c.runs, c.gold_scores, c.pred_scores):
            report[(run, c.measure, "human")], report[(run, c.measure, "llm")] = g, p
    for run, value in zip(data.runs, data.judged["human"]):
        report[(run, "nDCG@10", "judged@10")] = value
    method = data.methods[LLAMA.stem]
    for run in method.runs:
        report[(run, "nDCG@10", "llm")] = method.scores[run]["nDCG@10"]
    assert data.basis.queries and len(data.basis.queries) == 43
    out["report"] = report

    done = cli("estimate", "--llm", LLAMA, "--human", d / "seed.qrels", "--runs", d / "runs",
               *(a for m in MEASURES for a in ("-m", m)), "--scope", scope, "--json", cwd=d)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    method_line = lines[-1]
    assert method_line["kind"] == "method" and method_line["scope"] == scope and method_line["restricted"] is None
    out["estimate"] = {(x["run"], x["measure"], "llm"): x["llm_only"] for x in lines if x["kind"] == "run"}
    out["estimate PPI++"] = {(x["run"], x["measure"]): x["estimate"] for x in lines if x["kind"] == "run"}
    est = jb.estimate(case["systems"], llm_labels=LLAMA, seed=d / "seed.qrels", measures=MEASURES, scope=scope)
    assert est.attrs["method"]["scope"] == scope
    out["jb.estimate"] = {(r["name"], r["measure"], "llm"): r["llm_only"] for r in est.to_dict(orient="records")}
    out["jb.estimate PPI++"] = {(r["name"], r["measure"]): r["estimate"] for r in est.to_dict(orient="records")}
    out["jb.experiment PPI++"] = ppi
    return scope, out


def _has_pyterrier() -> bool:
    try:
        import pyterrier  # noqa: F401
    except ImportError:
        return False
    return True


def _pt_experiment(filled, case) -> dict:
    """pt.Experiment on the filled qrels, with the runs as result frames: the filled column."""
    import pandas as pd
    import pyterrier as pt

    from judgeblender.pairs import read_run

    topics = pd.DataFrame({"qid": list(case["topics"]), "query": list(case["topics"].values())})
    frames = []
    for name, path in case["systems"].items():
        run = read_run(path, name=name)
        frames.append(pd.DataFrame([(q, d, s) for q, docs in run.ranking.items() for d, s in docs],
                                   columns=["qid", "docno", "score"]))
    import ir_measures

    exp = pt.Experiment(frames, topics, filled[["qid", "docno", "label"]],
                        eval_metrics=[ir_measures.parse_measure(m) for m in MEASURES], names=list(case["systems"]))
    return {(row["name"], m, "filled"): row[m] for row in exp.to_dict(orient="records") for m in MEASURES}


def test_every_route_gives_the_same_human_filled_and_llm_figures(routes):
    scope, out = routes
    reference = out["jb.experiment"]
    compared = 0
    for route, figures in out.items():
        if "PPI++" in route:
            continue
        for key, value in figures.items():
            assert same(value, reference[key]), (scope, route, key, value, reference[key])
            compared += 1
    # every column is checked against a second route at least
    seen = {(m, col) for figures in out.values() for (_, m, *rest) in figures for col in rest[:1]}
    for m in MEASURES:
        assert {(m, "filled"), (m, "llm"), (m, "human")} <= seen
    assert ("nDCG@10", "judged@10") in seen and compared > 50


def test_estimate_and_jb_experiment_give_the_same_ppi_figures(routes):
    scope, out = routes
    ours = out["jb.experiment PPI++"]
    for route in ("estimate PPI++", "jb.estimate PPI++"):
        theirs = out[route]
        assert set(ours) == set(theirs), route
        for key in ours:
            assert same(ours[key], theirs[key]), (scope, route, key)


def test_human_and_llm_are_like_for_like(routes, case):
    """The llm column scores the LLM labels of the pairs the human column scores (the scope's), not the pool's
    LLM labels beside every human label: with the same labels on both sides the two would be equal."""
    scope, out = routes
    table = jb.experiment(case["systems"], case["topics"], qrels=read_qrels(LLAMA), llm_labels=LLAMA,
                          measures=["nDCG@10"], scope=scope)
    assert (table.human == table.llm).all() and (table.human == table.filled).all()


def test_scope_labels_does_not_depend_on_the_systems_and_scope_pool_may(case):
    two = {name: case["systems"][name] for name in SYSTEMS[:2]}
    figures = {}
    for scope in ("labels", "pool"):
        for label, systems in (("two", two), ("three", case["systems"])):
            table = jb.experiment(systems, case["topics"], qrels=case["human"], llm_labels=LLAMA,
                                  measures=["nDCG@10"], scope=scope).set_index("system")
            figures[(scope, label)] = table.loc["bm25base_p", ["human", "filled", "llm"]].to_numpy(dtype=float)
    assert np.array_equal(figures[("labels", "two")], figures[("labels", "three")])
    assert not np.array_equal(figures[("pool", "two")], figures[("pool", "three")])  # a third system's pairs joined


def test_the_three_bm25_figures_of_the_issue_are_one(case, tmp_path):
    """The issue's three "filled nDCG@10" of BM25: fill_qrels with two systems, jb.experiment with three, `fill`
    then `compare`. In the default scope they are one value."""
    pytest.importorskip("pyterrier")
    from judgeblender.pyterrier import fill_qrels

    two = {name: case["systems"][name] for name in SYSTEMS[:2]}
    filled = fill_qrels(two, case["topics"], qrels=case["human"], llm_labels=LLAMA)
    by_fill_qrels = _pt_experiment(filled, {**case, "systems": two})[("bm25base_p", "nDCG@10", "filled")]
    table = jb.experiment(case["systems"], case["topics"], qrels=case["human"], llm_labels=LLAMA).set_index("system")
    cli("fill", "--gold", case["dir"] / "human.qrels", "--llm", LLAMA, "-o", tmp_path / "merged.qrels", cwd=tmp_path)
    done = cli("compare", "--qrels", tmp_path / "merged.qrels", "--runs", case["dir"] / "runs", "--json", cwd=tmp_path)
    by_compare = next(x for x in map(json.loads, done.stdout.splitlines()) if x["run"] == "bm25base_p")["nDCG@10"]
    assert same(by_fill_qrels, table.loc["bm25base_p", "filled"]) and same(by_compare, by_fill_qrels)


# -- one query set -------------------------------------------------------------------------------

def test_every_route_counts_the_same_queries_and_drops_the_same_ones_for_the_same_reason(case, tmp_path):
    """NIST's labels without one query, the LLM's with it: agree, correlate, the report and the experiment
    each count the other 42 and name the missing one with one reason; on the full labels every route, estimate
    too, counts all 43 (one unlabelled passage in one run's top 10, 87181's, drops nothing)."""
    nist, d = case["nist"], case["dir"]
    gone = sorted(nist)[5]
    gold = {q: docs for q, docs in nist.items() if q != gone}
    write_qrels(tmp_path / "gold.qrels", gold)
    reason = "no label in the human labels"
    report = jb.agreement(gold, LLAMA, bootstrap=0)
    assert report.queries == 42 and report.dropped_queries == {gone: reason}
    done = cli("agree", "--gold", tmp_path / "gold.qrels", LLAMA, "--bootstrap", 0, cwd=tmp_path)
    assert f"note ({LLAMA.stem}): 42 queries count; 1 query does not: {gone} ({reason})" in done.stdout
    done = cli("agree", "--gold", tmp_path / "gold.qrels", LLAMA, "--bootstrap", 0, "--json", cwd=tmp_path)
    assert json.loads(done.stdout)["dropped_queries"] == {gone: reason}
    corr = jb.correlate(gold, {"llama": LLAMA}, DL19 / "runs", measures=["nDCG@10"], bootstrap=0)
    assert corr.n_queries.tolist() == [42] and corr.dropped_queries[0] == {gone: reason}
    done = cli("correlate", "--gold", tmp_path / "gold.qrels", LLAMA, "--runs", DL19 / "runs", "-m", "nDCG@10",
               "--bootstrap", 0, "--json", cwd=tmp_path)
    assert json.loads(done.stdout)["dropped_queries"] == {gone: reason}
    data = collect(ReportInputs(gold=tmp_path / "gold.qrels", preds=[LLAMA], runs_dir=DL19 / "runs", bootstrap=0))
    assert len(data.basis.queries) == 42 and data.basis.dropped == {gone: reason}
    assert any(gone in note and reason in note for note in data.scope_notes)
    table = jb.experiment(case["systems"], case["topics"], qrels=gold, llm_labels=LLAMA)
    assert table.attrs["queries"] == 42 and table.attrs["dropped_queries"] == {gone: reason}
    assert any(gone in note and reason in note for note in table.attrs["notes"])
    # the full labels: 43 everywhere, the same tau from correlate and the report
    full = jb.correlate(nist, {"llama": LLAMA}, DL19 / "runs", measures=["nDCG@10"], bootstrap=0)
    data = collect(ReportInputs(gold=DL19 / "qrels.txt", preds=[LLAMA], runs_dir=DL19 / "runs", bootstrap=0))
    (tau,) = [c.kendall_tau for c in data.correlations if c.measure == "nDCG@10"]
    assert full.n_queries.tolist() == [43] and len(data.basis.queries) == 43 and data.basis.dropped == {}
    assert tau == full.kendall_tau[0]
    assert jb.agreement(nist, LLAMA, bootstrap=0).queries == 43
    done = cli("estimate", "--llm", LLAMA, "--human", d / "seed.qrels", "--runs", d / "runs", "--no-pairs", "--json",
               cwd=tmp_path)
    assert json.loads(done.stdout.splitlines()[-1])["queries"] == 43


def test_a_gold_that_labels_a_few_pairs_per_query_drops_them_from_correlate_as_from_the_report(case, tmp_path):
    """The report's reason for not ranking runs on a seed of pairs holds for correlate too: one decision."""
    nist = case["nist"]
    rng = random.Random(3)
    sparse = {q: dict(rng.sample(sorted(docs.items()), 5)) for q, docs in nist.items()}
    keep = sorted(nist)[:12]
    gold = {**sparse, **{q: nist[q] for q in keep}}
    write_qrels(tmp_path / "gold.qrels", gold)
    corr = jb.correlate(gold, {"llama": LLAMA}, DL19 / "runs", measures=["nDCG@10"], bootstrap=0)
    data = collect(ReportInputs(gold=tmp_path / "gold.qrels", preds=[LLAMA], runs_dir=DL19 / "runs", bootstrap=0))
    assert set(data.basis.queries) == set(keep) and corr.n_queries.tolist() == [12]
    assert corr.dropped_queries[0] == data.basis.dropped and len(data.basis.dropped) == 31
    assert set(data.basis.dropped.values()) == {"the human labels label less than 90% of the runs' top 10 there"}
    assert jb.correlate(gold, {"llama": LLAMA}, DL19 / "runs", measures=["nDCG@10"], bootstrap=0,
                        min_judged=0).n_queries.tolist() == [43]


# -- bad scopes ----------------------------------------------------------------------------------

def test_a_bad_scope_is_one_error_naming_the_argument_before_any_work(case, tmp_path):
    with pytest.raises(ArgumentError, match=r"^scope: expected one of 'labels', 'pool', got 'pooled'"):
        jb.experiment({"x": Path("/nonexistent.run")}, case["topics"], qrels=case["human"], llm_labels=LLAMA,
                      scope="pooled")
    nowhere = {"x": Path("/nonexistent.run")}  # read after the scope is checked: never reached
    for call in (lambda: jb.fill(nowhere, case["topics"], qrels=case["human"], llm_labels=LLAMA, scope="pooled"),
                 lambda: jb.experiment(nowhere, case["topics"], qrels=case["human"], llm_labels=LLAMA,
                                       scope="pooled", perquery=True),
                 lambda: jb.estimate(nowhere, llm_labels=LLAMA, seed=Path("/nonexistent.qrels"), scope="pooled"),
                 lambda: jb.write_report(case["human"], {"llama": LLAMA}, nowhere, tmp_path / "r.html",
                                         scope="pooled")):
        with pytest.raises(ArgumentError, match=r"^scope: expected one of 'labels', 'pool', got 'pooled'"):
            call()
    assert not (tmp_path / "r.html").exists()
    for args in (["fill", "--gold", case["dir"] / "human.qrels", "--llm", LLAMA, "-o", tmp_path / "o.qrels",
                  "--scope", "pool"],
                 ["estimate", "--llm", LLAMA, "--human", case["dir"] / "seed.qrels", "--runs", case["dir"] / "runs",
                  "--scope", "all"]):
        done = subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], capture_output=True, text=True,
                              timeout=300)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: --"), done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "o.qrels").exists()
