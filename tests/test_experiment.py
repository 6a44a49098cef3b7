"""jb.experiment and the ecosystem's column names, on the real DL19 runs and labels.

NIST's labels are the truth; a share of them is hidden to make holes, the published Llama-3-70B
labels (or a scripted judge that answers NIST's label) fill them, and every figure of the table is
checked against ir_measures and scipy computed here from the same qrels, on queries where no run
ties at the cut (judgeblender and ir_measures may order ties differently).
"""

from __future__ import annotations

import json
import logging
import random
import subprocess
import sys
from pathlib import Path

import ir_measures
import numpy as np
import pandas as pd
import pytest
from scipy import stats

import judgeblender as jb
from judgeblender import convert
from judgeblender.errors import JudgeblenderError
from judgeblender.pairs import read_qrels, read_queries, read_run, write_qrels
from judgeblender.pairs.design import draw_query_design, write_design
from judgeblender.pairs.pool import pool_runs

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DL19 = SHARED / "trec-dl-2019"
LLAMA70B = SHARED / "llm-labels" / "trec-dl-2019" / "fourprompts-llama3-70b.qrels"
RUNS = ("ICT-BERT2", "bm25base_p", "p_bert")
NDCG = ir_measures.parse_measure("nDCG@10")


def untied_queries(runs, k=10):
    """Queries where no run ties in score among its top k + 1."""
    out = []
    for q in runs[0].queries():
        if all(len({s for _, s in r.ranking.get(q, [])[:k + 1]}) == len(r.ranking.get(q, [])[:k + 1]) for r in runs):
            out.append(q)
    return out


def hide(qrels, share, seed=7):
    """NIST's qrels with a seeded share of their pairs removed: the holes."""
    rng = random.Random(seed)
    return {q: {d: v for d, v in docs.items() if rng.random() >= share} for q, docs in qrels.items()}


def frame(qrels, names=("query_id", "doc_id", "relevance")):
    return pd.DataFrame([(q, d, v) for q, docs in qrels.items() for d, v in docs.items()], columns=list(names))


@pytest.fixture(scope="module")
def dl19():
    if not DL19.is_dir():
        pytest.skip("shared data not found")
    runs = [read_run(DL19 / "runs" / f"{name}.run.gz") for name in RUNS]
    nist = read_qrels(DL19 / "qrels.txt")
    queries = read_queries(DL19 / "queries.tsv")
    topics = {q: queries[q] for q in untied_queries(runs)}
    assert len(topics) >= 10
    return {"runs": runs, "nist": nist, "human": hide(nist, 0.3), "topics": topics}


def per_query(qrels, run, topics, measure=NDCG):
    """ir_measures' per-query values, the independent computation, over `topics`."""
    scores = {q: dict(docs) for q, docs in run.ranking.items() if q in topics}
    values = {m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, scores)}
    return np.array([values.get(q, 0.0) for q in topics])


def filled_everywhere(human, llm):
    """Human labels, plus the LLM's for every pair people did not label (the default scope, labels)."""
    out = {q: dict(docs) for q, docs in human.items()}
    for q, docs in llm.items():
        for d, v in docs.items():
            out.setdefault(q, {}).setdefault(d, v)
    return out


def filled_by_hand(human, llm, runs, topics, k=10):
    """Human labels, plus the LLM's for the pooled pairs people did not label: written out here."""
    out = {q: dict(docs) for q, docs in human.items()}
    for run in runs:
        for q in topics:
            for d in run.top(q, k):
                if d not in out.get(q, {}) and d in llm.get(q, {}):
                    out.setdefault(q, {})[d] = llm[q][d]
    return out


# -- part 4: the ecosystem's column names ----------------------------------------------------

def test_ir_measures_and_pyterrier_qrels_frames_read_as_the_same_labels():
    ours = pd.DataFrame({"qid": ["1", "1"], "docid": ["a", "b"], "label": [2, 0]})
    ir_m = ours.rename(columns={"qid": "query_id", "docid": "doc_id", "label": "relevance"})
    pyt = ours.rename(columns={"docid": "docno"})
    assert convert.qrels(ours, scale=convert.SCALE) == convert.qrels(ir_m, scale=convert.SCALE) \
        == convert.qrels(pyt, scale=convert.SCALE) == {"1": {"a": 2, "b": 0}}


def test_a_pyterrier_result_frame_is_a_run_ranked_by_its_score():
    res = pd.DataFrame({"qid": ["1"] * 3, "docid": [7, 8, 9], "docno": ["a", "b", "c"], "score": [1.0, 3.0, 2.0],
                        "rank": [2, 0, 1], "query": ["q"] * 3})
    (run,) = convert.runs({"bm25": res})
    assert run.top("1", None) == ["b", "c", "a"]


def test_a_frame_with_two_names_for_one_column_says_which_it_used(caplog):
    res = pd.DataFrame({"qid": ["1"], "docid": [7], "docno": ["a"], "label": [1]})
    with caplog.at_level(logging.WARNING, logger="judgeblender.inputs"):
        assert convert.qrels(res, "the frame", scale=convert.SCALE) == {"1": {"a": 1}}
    assert "the frame: columns 'docno' and 'docid' name the same thing; used 'docno'" in caplog.text


def test_a_pyterrier_frame_with_text_is_judged_by_docno(mock_model):
    mock_model.rules = [{"contains": "Passage: zebra crossing\n", "output": "##final score: 3"},
                        {"contains": "", "output": "##final score: 0"}]
    res = pd.DataFrame({"qid": ["1", "1"], "query": ["zebra"] * 2, "docno": ["a", "b"],
                        "text": ["zebra crossing", "yellow kettle"], "score": [2.0, 1.0], "rank": [0, 1]})
    labels = jb.judge(res, ["mock:x"]).labels
    assert labels.set_index("docno").label.to_dict() == {"a": 3, "b": 0}


# -- jb.experiment -------------------------------------------------------------------------------

def test_importing_judgeblender_and_reaching_experiment_does_not_import_pyterrier():
    code = "import sys, judgeblender as jb; jb.experiment; assert 'pyterrier' not in sys.modules, 'imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_pyterrier_transformer_as_a_system_without_pyterrier_is_an_error_naming_the_extra(monkeypatch):
    class Retriever:  # what a PyTerrier transformer looks like from outside
        def transform(self, topics):
            raise AssertionError("not to be run")

    monkeypatch.setitem(sys.modules, "pyterrier", None)  # as if the extra were not installed
    with pytest.raises(JudgeblenderError, match=r"pip install 'judgeblender\[pyterrier\]'"):
        jb.experiment({"bm25": Retriever()}, {"1": "a query"}, qrels={"1": {"a": 1}}, llm_labels={"1": {"a": 1}})


def test_experiment_scores_match_ir_measures_under_human_filled_and_llm_labels(dl19):
    runs, topics, human = dl19["runs"], dl19["topics"], dl19["human"]
    llm = read_qrels(LLAMA70B)
    table = jb.experiment({r.name: r.path for r in runs}, topics, qrels=frame(human), llm_labels=LLAMA70B,
                          measures=["nDCG@10"])
    filled = filled_everywhere(human, llm)
    pool = {(p.qid, p.docid) for p in pool_runs(runs, 10, set(topics))}
    judged = ir_measures.parse_measure("Judged@10")
    for run, row in zip(runs, table.itertuples()):
        assert row.system == run.name
        assert row.human == pytest.approx(per_query(human, run, topics).mean(), abs=1e-12)
        assert row.filled == pytest.approx(per_query(filled, run, topics).mean(), abs=1e-12)
        assert row.llm == pytest.approx(per_query(llm, run, topics).mean(), abs=1e-12)
        assert getattr(row, "_6") == pytest.approx(per_query(human, run, topics, judged).mean(), abs=1e-12)
        top = [(q, d) for q in topics for d in run.top(q, 10)]
        assert row.filled_pairs == sum(d not in human.get(q, {}) and d in llm.get(q, {}) for q, d in top)
    assert list(table.columns[:7]) == ["system", "measure", "human", "filled", "llm", "judged@10", "filled_pairs"]
    holes = {(q, d) for q, d in pool if d not in human.get(q, {})}
    assert table.attrs["holes"] == len(holes) > 0
    # the filled labels are closer to NIST's full labels than the holed ones
    full = [per_query(dl19["nist"], r, topics).mean() for r in runs]
    assert np.abs(table.filled - full).sum() < np.abs(table.human - full).sum()


def test_against_a_baseline_a_paired_t_test_with_holm_by_default_matches_scipy(dl19):
    runs, topics, human = dl19["runs"], dl19["topics"], dl19["human"]
    llm = read_qrels(LLAMA70B)
    table = jb.experiment({r.name: r.path for r in runs}, topics, qrels=human, llm_labels=LLAMA70B,
                          baseline="bm25base_p")
    assert table.attrs["correction"] == "holm"
    filled = filled_everywhere(human, llm)
    scores = {r.name: per_query(filled, r, topics) for r in runs}
    p = {n: stats.ttest_rel(scores[n], scores["bm25base_p"]).pvalue for n in ("ICT-BERT2", "p_bert")}
    lo, hi = sorted(p, key=p.get)
    holm = {lo: min(1, 2 * p[lo]), hi: min(1, max(2 * p[lo], p[hi]))}
    rows = table.set_index("system")
    for name in p:
        assert rows.loc[name, "p"] == pytest.approx(p[name], rel=1e-9)
        assert rows.loc[name, "p_adjusted"] == pytest.approx(holm[name], rel=1e-9)
        assert rows.loc[name, "delta"] == pytest.approx(scores[name].mean() - scores["bm25base_p"].mean())
    assert np.isnan(rows.loc["bm25base_p", "p"])
    bonf = jb.experiment({r.name: r.path for r in runs}, topics, qrels=human, llm_labels=LLAMA70B,
                         baseline="bm25base_p", correction="bonferroni").set_index("system")
    assert bonf.loc[hi, "p_adjusted"] == pytest.approx(min(1, 2 * p[hi]), rel=1e-9)


def test_without_human_labels_the_llm_labels_everything_and_the_human_column_is_empty(dl19):
    runs, topics = dl19["runs"], dl19["topics"]
    table = jb.experiment({r.name: r.path for r in runs}, topics, llm_labels=LLAMA70B)
    assert table.human.isna().all() and table["judged@10"].isna().all()
    assert (table.filled == table.llm).all()
    pool = pool_runs(runs, 10, set(topics))
    assert table.attrs["holes"] == len(pool)


def test_an_unknown_correction_or_baseline_is_an_error_before_any_work(dl19):
    systems = {r.name: r.path for r in dl19["runs"]}
    with pytest.raises(JudgeblenderError, match="correction must be one of holm, bonferroni, none"):
        jb.experiment(systems, dl19["topics"], qrels=dl19["human"], llm_labels=LLAMA70B, baseline="p_bert",
                      correction="fdr_bh")
    with pytest.raises(JudgeblenderError, match="baseline 'BM25' is none of the systems"):
        jb.experiment(systems, dl19["topics"], qrels=dl19["human"], llm_labels=LLAMA70B, baseline="BM25")


def test_with_a_seed_and_its_design_the_table_carries_the_estimate_commands_ppi_intervals(dl19, tmp_path,
                                                                                            capsys, monkeypatch):
    from judgeblender.cli import main

    runs, topics, nist = dl19["runs"], dl19["topics"], dl19["nist"]
    pool = pool_runs(runs, 10, set(topics))
    design = draw_query_design(sorted({p.qid for p in pool}), 8, 3)
    write_design(tmp_path / "seed.design.json", design)
    seed = {q: {p.docid: nist[q][p.docid] for p in pool if p.qid == q} for q in design.seed}
    write_qrels(tmp_path / "seed.qrels", seed)
    table = jb.experiment({r.name: r.path for r in runs}, topics, qrels=dl19["human"], llm_labels=LLAMA70B,
                          seed=tmp_path / "seed.qrels", baseline="bm25base_p")
    # the same estimate from files, through the CLI: the LLM labels of the pool, the seed, the runs
    llm = read_qrels(LLAMA70B)
    write_qrels(tmp_path / "llm.qrels", {q: {p.docid: llm[q][p.docid] for p in pool if p.qid == q} for q in topics})
    (tmp_path / "runs").mkdir()
    for r in runs:
        (tmp_path / "runs" / f"{r.name}.run").write_bytes((DL19 / "runs" / f"{r.name}.run.gz").read_bytes())
    monkeypatch.setattr(sys, "argv", ["judgeblender", "estimate", "--llm", str(tmp_path / "llm.qrels"), "--human",
                                      str(tmp_path / "seed.qrels"), "--runs", str(tmp_path / "runs"),
                                      "--json"])  # both at the one default level (evaluate/intervals.py)
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code in (0, None)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    rows = table.set_index("system")
    for r in (x for x in lines if x["kind"] == "run"):
        assert rows.loc[r["run"], "ppi"] == pytest.approx(r["estimate"], abs=1e-12)
        assert (rows.loc[r["run"], "ppi_low"], rows.loc[r["run"], "ppi_high"]) == pytest.approx(
            (r["ci_low"], r["ci_high"]), abs=1e-12)
    pairs = {(x["run_a"], x["run_b"]): x for x in lines if x["kind"] == "pair"}
    for name in ("ICT-BERT2", "p_bert"):
        x = pairs.get((name, "bm25base_p")) or pairs[("bm25base_p", name)]
        sign = 1 if x["run_a"] == name else -1
        assert rows.loc[name, "ppi_delta"] == pytest.approx(sign * x["difference"], abs=1e-12)


def test_holes_the_jury_answers_carry_its_name_and_a_rerun_makes_no_call(dl19, mock_model, tmp_path):
    corpus = tmp_path / "passages.jsonl"
    runs, nist = dl19["runs"], dl19["nist"]
    topics = dict(list(dl19["topics"].items())[:3])
    pool = pool_runs(runs, 10, set(topics))
    texts = {}
    with open(DL19 / "passages.jsonl", encoding="utf-8") as fh:
        wanted = {p.docid for p in pool}
        for line in fh:
            obj = json.loads(line)
            if obj["docid"] in wanted:
                texts[obj["docid"]] = obj["text"]
    corpus.write_text("".join(json.dumps({"docid": d, "text": t}) + "\n" for d, t in texts.items()))
    # the jury answers NIST's label, except for one pair, where it answers off the scale
    odd = next(p for p in pool if p.docid not in dl19["human"].get(p.qid, {}))
    mock_model.rules = [{"contains": f"Query: {topics[p.qid]}\nPassage: {texts[p.docid]}\n",
                         "output": "##final score: 7" if p == odd else f"##final score: {nist[p.qid][p.docid]}"}
                        for p in pool]
    kwargs = dict(qrels=dl19["human"], corpus=corpus, judges=["mock:nist"], store=tmp_path / "j.sqlite")
    table = jb.experiment({r.name: r.path for r in runs}, topics, **kwargs)
    made = len(mock_model.calls)
    holes = [p for p in pool if p.docid not in dl19["human"].get(p.qid, {})]
    assert made == len(holes) + 1 > 1  # each hole once, the off-scale answer re-asked once (retry-once)
    assert table.attrs["filled"] == len(holes) - 1 and table.attrs["invalid"] == 1
    assert f"first: {odd.qid} {odd.docid}" in table.attrs["notes"][0]
    nist_but_odd = {q: {d: v for d, v in docs.items() if (q, d) != (odd.qid, odd.docid)} for q, docs in nist.items()}
    expected = filled_by_hand(dl19["human"], nist_but_odd, runs, topics)
    for run, row in zip(runs, table.itertuples()):
        assert row.filled == pytest.approx(per_query(expected, run, topics).mean(), abs=1e-12)
    again = jb.experiment({r.name: r.path for r in runs}, topics, **kwargs)
    assert len(mock_model.calls) == made
    pd.testing.assert_frame_equal(table, again)


def test_the_experiment_command_prints_the_same_rows_as_jb_experiment(dl19, tmp_path, monkeypatch, capsys):
    from judgeblender.cli import main

    runs, topics = dl19["runs"], dl19["topics"]
    (tmp_path / "runs").mkdir()
    for r in runs:
        (tmp_path / "runs" / f"{r.name}.run.gz").write_bytes(r.path.read_bytes())
    (tmp_path / "topics.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in topics.items()))
    write_qrels(tmp_path / "human.qrels", dl19["human"])
    args = ["--runs", tmp_path / "runs", "--topics", tmp_path / "topics.tsv", "--qrels", tmp_path / "human.qrels",
            "--llm", LLAMA70B, "--baseline", "bm25base_p"]
    monkeypatch.setattr(sys, "argv", ["judgeblender", "experiment", *map(str, args), "--json"])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code in (0, None)
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    table = jb.experiment({r.name: r.path for r in runs}, topics, qrels=dl19["human"], llm_labels=LLAMA70B,
                          baseline="bm25base_p").set_index("system")
    rows = [x for x in lines if x["kind"] == "system"]
    assert sorted(x["system"] for x in rows) == sorted(table.index)
    for x in rows:
        assert (x["human"], x["filled"], x["llm"]) == pytest.approx(tuple(table.loc[x["system"], ["human", "filled", "llm"]]))
    assert lines[-1]["kind"] == "summary" and lines[-1]["correction"] == "holm"
    monkeypatch.setattr(sys, "argv", ["judgeblender", "experiment", *map(str, args), "--correction", "fdr"])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code == 2
    assert capsys.readouterr().err.startswith("error: --correction must be one of holm, bonferroni, none")
