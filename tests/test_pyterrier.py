"""judgeblender inside PyTerrier, with the real thing: a PISA index over the DL19 passages, BM25 and
query likelihood from pyterrier-pisa, a jury as a transformer, fill_qrels, pt.Experiment and
jb.experiment. A share of NIST's labels is hidden to make holes; the scripted jury answers NIST's
own label, so every figure can be checked against ir_measures on NIST's labels, on the queries
where neither retriever ties in score at the cut (ties may be ordered differently).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import ir_measures
import numpy as np
import pandas as pd
import pyterrier as pt
import pytest
from pyterrier_pisa import PisaIndex

import judgeblender as jb
from judgeblender.pairs import read_qrels, read_queries
from judgeblender.pyterrier import Judge, fill_qrels

DL19 = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec-dl-2019"
JUDGE = "mock:nist"
JUDGE_ID = f"{JUDGE}/umbrela/generate"


@pytest.fixture(scope="module")
def dl19(tmp_path_factory):
    """A PISA index over the DL19 passages, BM25 and QLD, the topics where neither ties at the cut,
    NIST's labels and the same with 30% of them hidden."""
    if not DL19.is_dir():
        pytest.skip("shared data not found")
    passages = [json.loads(line) for line in open(DL19 / "passages.jsonl", encoding="utf-8")]
    index = PisaIndex(str(tmp_path_factory.mktemp("pisa") / "dl19.pisa"), text_field="text", threads=1)
    index.index({"docno": p["docid"], "text": p["text"]} for p in passages)
    queries = read_queries(DL19 / "queries.tsv")
    all_topics = pd.DataFrame({"qid": list(queries), "query": list(queries.values())})
    wide = {name: getattr(index, name)(num_results=11, threads=1).transform(all_topics) for name in ("bm25", "qld")}
    untied = [q for q in queries if all(r[r.qid == q].score.nunique() == len(r[r.qid == q]) for r in wide.values())]
    assert len(untied) >= 20
    nist = read_qrels(DL19 / "qrels.txt")
    rng = random.Random(11)
    human = pd.DataFrame([(q, d, v) for q, docs in nist.items() for d, v in docs.items() if rng.random() >= 0.3],
                         columns=["qid", "docno", "label"])
    return {"bm25": index.bm25(num_results=10, threads=1), "qld": index.qld(num_results=10, threads=1),
            "topics": all_topics[all_topics.qid.isin(untied)].reset_index(drop=True),
            "nist": nist, "human": human, "texts": {p["docid"]: p["text"] for p in passages}}


@pytest.fixture
def nist_jury(dl19, mock_model, tmp_path):
    """A scripted judge that answers NIST's label (0 where NIST judged none) for the pairs BM25 and
    QLD retrieve, and a passages file. (A scripted model's rules are part of every call's key: the
    fewer, the quicker.)"""
    topics, texts, nist = dl19["topics"], dl19["texts"], dl19["nist"]
    queries = dict(zip(topics.qid, topics["query"]))
    found = pd.concat([dl19[name].transform(topics) for name in ("bm25", "qld")])
    pairs = dict.fromkeys(zip(found.qid, found.docno))
    mock_model.rules = [{"contains": f"Query: {queries[q]}\nPassage: {texts[d]}\n",
                         "output": f"##final score: {nist[q].get(d, 0)}"} for q, d in pairs]
    corpus = tmp_path / "passages.jsonl"
    corpus.write_text("".join(json.dumps({"docid": d, "text": t}) + "\n" for d, t in texts.items()))
    return mock_model, corpus


def ir_measures_means(qrels: pd.DataFrame, res: pd.DataFrame, measure: str = "nDCG@10") -> float:
    """ir_measures' mean over the topics, from PyTerrier's frames renamed to its own names."""
    qrels = qrels[qrels.qid.isin(set(res.qid))]  # ir_measures' mean covers every query of the qrels
    qrels = qrels.rename(columns={"qid": "query_id", "docno": "doc_id", "label": "relevance"})
    run = res.rename(columns={"qid": "query_id", "docno": "doc_id"})
    return ir_measures.calc_aggregate([ir_measures.parse_measure(measure)], qrels, run)[
        ir_measures.parse_measure(measure)]


def test_a_jury_in_a_pipeline_adds_its_columns_and_leaves_score_and_rank_alone(dl19, nist_jury, tmp_path):
    backend, corpus = nist_jury
    topics = dl19["topics"].head(3)
    pipe = dl19["bm25"] % 5 >> Judge([JUDGE], corpus=corpus, store=tmp_path / "j.sqlite", members=True)
    res = pipe.transform(topics)
    plain = (dl19["bm25"] % 5).transform(topics)
    pd.testing.assert_frame_equal(res[plain.columns], plain)
    assert "label" not in res.columns
    assert str(res.jb_label.dtype) == "Int64"
    nist = dl19["nist"]
    assert res.jb_label.tolist() == [nist[q].get(d, 0) for q, d in zip(res.qid, res.docno)]
    assert res[f"jb_label.{JUDGE_ID}"].tolist() == res.jb_label.tolist()
    assert res.jb_valid.all() and res.jb_expected.tolist() == res.jb_label.astype(float).tolist()
    made = len(backend.calls)
    assert made == len(res) == 15
    pd.testing.assert_frame_equal(pipe.transform(topics), res)
    assert len(backend.calls) == made  # the re-run came from the store


def test_with_rerank_the_expected_label_becomes_the_score_and_orders_the_ranks(dl19, nist_jury):
    _, corpus = nist_jury
    topics = dl19["topics"].head(2)
    res = (dl19["bm25"] % 10 >> Judge([JUDGE], corpus=corpus, rerank=True)).transform(topics)
    for _, one in res.groupby("qid"):
        assert one.score.tolist() == one.jb_expected.tolist() == sorted(one.jb_expected, reverse=True)
        assert one["rank"].tolist() == list(range(len(one)))


def test_a_judge_that_answers_off_the_scale_leaves_the_label_missing_with_its_reason(dl19, mock_model):
    mock_model.rules = [{"contains": "", "output": "##final score: 9"}]
    found = (dl19["bm25"] % 2).transform(dl19["topics"].head(1))
    with_text = found.assign(text=[dl19["texts"][d] for d in found.docno])  # as pt.text.get_text adds it
    res = Judge([JUDGE]).transform(with_text)
    assert res.jb_label.isna().all() and not res.jb_valid.any()
    assert all(r.startswith(f"{JUDGE_ID}: ") for r in res.jb_reason)


def test_fill_qrels_fills_the_holes_with_the_jury_and_pt_experiment_scores_them_as_ir_measures_does(
        dl19, nist_jury, tmp_path):
    backend, corpus = nist_jury
    bm25, qld, topics, human = dl19["bm25"], dl19["qld"], dl19["topics"], dl19["human"]
    kwargs = dict(qrels=human, corpus=corpus, judges=[JUDGE], store=tmp_path / "j.sqlite")
    filled = fill_qrels([bm25, qld], topics, **kwargs)
    assert list(filled.columns) == ["qid", "docno", "label", "provenance"] and filled.label.dtype == int
    made = len(backend.calls)
    known = set(zip(human.qid, human.docno))
    holes = filled[[(q, d) not in known for q, d in zip(filled.qid, filled.docno)]]
    assert len(holes) == made > 0
    assert set(holes.provenance) == {JUDGE_ID} and set(filled.provenance) == {"human", JUDGE_ID}
    nist = dl19["nist"]
    assert holes.label.tolist() == [nist.get(q, {}).get(d, 0) for q, d in zip(holes.qid, holes.docno)]

    results = {"BM25": bm25.transform(topics), "QLD": qld.transform(topics)}
    exp = pt.Experiment([bm25, qld], topics, filled, eval_metrics=[ir_measures.nDCG @ 10], names=["BM25", "QLD"])
    table = jb.experiment({"BM25": bm25, "QLD": qld}, topics, baseline="BM25", **kwargs)
    assert len(backend.calls) == made  # fill_qrels's judgments came back from the store
    for name, res in results.items():
        expected = ir_measures_means(filled, res)
        assert exp.set_index("name").loc[name, "nDCG@10"] == pytest.approx(expected, abs=1e-12)
        row = table.set_index("system").loc[name]
        assert row.filled == pytest.approx(expected, abs=1e-12)
        assert row.human == pytest.approx(ir_measures_means(human, res), abs=1e-12)
        assert row["judged@10"] == pytest.approx(ir_measures_means(human, res, "Judged@10"), abs=1e-12)
    assert table.attrs["filled"] == len(holes)
    assert not np.isnan(table.set_index("system").loc["QLD", "p_adjusted"])


@pytest.mark.model
def test_the_embedded_model_judges_a_few_bm25_results_in_a_pipeline(dl19, tmp_path):
    pipe = dl19["bm25"] % 3 >> Judge(["llamacpp:default"], corpus=dl19["texts"], store=tmp_path / "m.sqlite")
    res = pipe.transform(dl19["topics"].head(1))
    assert len(res) == 3 and str(res.jb_label.dtype) == "Int64"
    assert all((lab in (0, 1, 2, 3) and ok) or (pd.isna(lab) and not ok and reason)
               for lab, ok, reason in zip(res.jb_label, res.jb_valid, res.jb_reason))
