"""Ties are broken one way everywhere judgeblender ranks (issue 20, part 9).

The pool, the holes (`pool --exclude`, `compare`), Judged@k and the fast measures all take a
run's top k from pairs/runs.py's trec_eval_ranking: trec_eval's rule (the rank column ignored;
score descending, equal scores by docid descending), with scores compared as float32, as the
trec_eval inside pytrec_eval compares them. The runs below are handmade TREC run files whose
ties straddle the cut at 10, some exact, some only beyond float32 precision, with rank columns
that disagree with the rule; the qrels judge the documents a wrong rule would pick, not the
ones trec_eval picks, so every place that breaks a tie another way shows a different hole.
"""

from __future__ import annotations

import json
import random

import ir_measures
import numpy as np
import pytest
from typer.testing import CliRunner

from judgeblender import convert
from judgeblender.cli import build_app
from judgeblender.evaluate import RunSet, evaluate_runs, parse_measures
from judgeblender.pairs import read_run, read_runs_dir
from judgeblender.pairs.pool import exclude_judged, pool_runs
from judgeblender.pairs.runs import Run, _read_lines, rank_scores, tied, trec_eval_ranking

# 1.0000000001 and 1.0 are one float32 (and two float64s): trec_eval-in-pytrec_eval ties them
NEAR = 1.0000000001


def run_lines(name: str) -> list[str]:
    """Two queries, each with nine clear leaders and a tie across ranks 10-11 (q1 exact: three
    documents at 1.0; q2: "aa" only beyond float32 above "zz"). Rank column: docid ascending."""
    rows = [("q1", f"m{i}", 20.0 - i) for i in range(1, 10)] + [("q1", d, 1.0) for d in ("p", "q", "r")]
    rows += [("q2", f"n{i}", 20.0 - i) for i in range(1, 10)] + [("q2", "aa", NEAR), ("q2", "zz", 1.0)]
    rows += [("q1", "tail", 0.5), ("q2", "tail", 0.5)]
    lines, rank = [], {}
    for q, d, s in sorted(rows, key=lambda r: (r[0], -round(r[2], 6), r[1])):
        rank[q] = rank.get(q, 0) + 1
        lines.append(f"{q} Q0 {d} {rank[q]} {s!r} {name}\n")
    return lines


# trec_eval's top 10: q1 keeps r (docid descending among p, q, r); q2 keeps zz (aa ties it in float32)
TREC_EVAL_TENTH = {"q1": "r", "q2": "zz"}
OTHER_TENTH = {"q1": "p", "q2": "aa"}  # rank column, docid ascending, or float64


def qrels() -> dict[str, dict[str, int]]:
    """Every leader judged, and the document a wrong rule puts 10th; trec_eval's 10th unjudged."""
    out = {q: {f"{'m' if q == 'q1' else 'n'}{i}": i % 4 for i in range(1, 10)} for q in ("q1", "q2")}
    for q, d in OTHER_TENTH.items():
        out[q][d] = 3
    return out


@pytest.fixture
def runs_dir(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    for name in ("tied", "shuffled"):
        lines = run_lines(name)
        if name == "shuffled":
            random.Random(0).shuffle(lines)
        (folder / f"{name}.run").write_text("".join(lines))
    return folder


def write_qrels(path) -> None:
    path.write_text("".join(f"{q} 0 {d} {label}\n" for q, docs in qrels().items() for d, label in docs.items()))


def test_the_ranking_rule_is_trec_eval_s_at_float32_precision():
    entries = [("aa", NEAR), ("zz", 1.0), ("b", 2.0), ("c", 2.0), ("d", 1e300), ("e", 2e300)]
    assert [d for d, _ in trec_eval_ranking(entries)] == ["e", "d", "c", "b", "zz", "aa"]
    assert trec_eval_ranking(entries)[-1] == ("aa", NEAR)  # scores kept as given
    assert tied(NEAR, 1.0) and not tied(1.0, 1.0 + 1e-6) and tied(1e300, 2e300)  # beyond float32: inf
    assert rank_scores([NEAR]).dtype == np.float32


def test_every_reader_ranks_a_tied_run_the_same_way(runs_dir):
    fast = read_run(runs_dir / "shuffled.run")
    slow = _read_lines(runs_dir / "shuffled.run")
    given = convert.runs({"df": {q: dict(docs) for q, docs in slow.items()}})[0]
    assert fast.columns().ranking() == slow == given.ranking == read_run(runs_dir / "tied.run").ranking
    for q, tenth in TREC_EVAL_TENTH.items():
        assert fast.top(q, 10)[-1] == tenth and OTHER_TENTH[q] not in fast.top(q, 10)


def test_pool_holes_judged_and_ndcg_see_the_same_top_10_of_a_tied_run(runs_dir, tmp_path):
    runs = read_runs_dir(runs_dir)
    judged = qrels()
    pooled = pool_runs(runs, 10)
    holes = exclude_judged(pooled, judged)
    # the pool holds trec_eval's 10th documents, and they are the only holes
    assert {(p.qid, p.docid) for p in holes} == set(TREC_EVAL_TENTH.items())
    assert not {(p.qid, p.docid) for p in pooled} & set(OTHER_TENTH.items())

    measures = parse_measures(["nDCG@10", "Judged@10", "P@10"])
    got = evaluate_runs(RunSet(runs, ["q1", "q2"]), judged, measures)
    # Judged@10: the share of the pooled top 10 that is judged, the complement of the holes
    assert got["Judged@10"].tolist() == [[0.9, 0.9], [0.9, 0.9]]
    # nDCG@10 and P@10 as pytrec_eval (trec_eval 9.0.8, float32 scores) gives them, bit for bit
    for r, run in enumerate(runs):
        want = {(str(m.measure), m.query_id): m.value
                for m in ir_measures.pytrec_eval.iter_calc(parse_measures(["nDCG@10", "P@10"]), judged, run.scores())}
        for name in ("nDCG@10", "P@10"):
            assert [want[name, q] for q in ("q1", "q2")] == got[name][r].tolist(), name
    assert got["P@10"][0].tolist() == [0.7, 0.7]  # 7 relevant leaders; trec_eval's 10th is unjudged

    # `compare` flags the same holes: Judged@10 0.9 for both runs
    write_qrels(tmp_path / "q.qrels")
    res = CliRunner().invoke(build_app(["compare"]), ["compare", "--qrels", str(tmp_path / "q.qrels"), "--runs",
                                                      str(runs_dir), "--json", "--min-judged", "0.95"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert {r["run"]: (r["Judged@10"], r["holes"]) for r in rows} == {"tied": (0.9, True), "shuffled": (0.9, True)}


def test_ir_measures_own_judged_provider_breaks_the_tie_the_other_way(runs_dir):
    """Why Judged@k is computed here: ir_measures' Judged provider takes the other documents."""
    run = read_run(runs_dir / "tied.run")
    theirs = {m.query_id: m.value for m in ir_measures.judged.iter_calc(parse_measures(["Judged@10"]), qrels(),
                                                                        run.scores())}
    assert theirs == {"q1": 1.0, "q2": 1.0}  # it counts p and aa, which trec_eval ranks 11th


def test_judged_at_k_counts_trec_eval_s_top_k_whatever_the_labels(runs_dir):
    """Labels off the int8 range (here -1 and 200) still count trec_eval's top k, not ir_measures'."""
    judged = qrels()
    judged["q1"]["m1"], judged["q2"]["n1"] = -1, 200
    got = evaluate_runs(RunSet(read_runs_dir(runs_dir), ["q1", "q2"]), judged, parse_measures(["Judged@10"]))
    assert got["Judged@10"].tolist() == [[0.9, 0.9], [0.9, 0.9]]


def test_a_run_cut_for_ir_measures_keeps_every_document_tied_in_float32_with_the_kth(runs_dir):
    """Measures outside the fast set (R@10) see the run cut at 10; the float32 tie must survive the
    cut, or pytrec_eval would rank "aa" 10th in the cut run and 11th in the whole one."""
    runset = RunSet([read_run(runs_dir / "tied.run")], ["q1", "q2"])
    cut = runset.scored(10)[0]
    assert set(cut["q2"]) >= {"aa", "zz"} and set(cut["q1"]) >= {"p", "q", "r"} and "tail" not in cut["q1"]
    measures = parse_measures(["R@10"])
    got = evaluate_runs(runset, qrels(), measures)
    want = {m.query_id: m.value for m in ir_measures.iter_calc(measures, qrels(), runset.runs[0].scores())}
    assert got["R@10"][0].tolist() == [want["q1"], want["q2"]] == [0.875, 0.875]
