"""One-shot inputs are read once (issue 29, part 1).

ir_measures' read_trec_qrels / read_trec_run and ir_datasets' qrels_iter() / scoreddocs_iter()
hand over generators: an entry point that reads such an argument twice finds it empty the second
time and computes a figure on nothing (jb.agreement gave n=0, kappa NaN). Every entry point that
takes labels, qrels, runs or pairs is fed here, on the real TREC DL 2019 labels, runs and
published LLM labels, with a real ir_measures generator, a plain generator, iter(list) and
ir_datasets' own namedtuples, and must give exactly what the same data gives from its files.
An input that holds nothing where data is needed is an ArgumentError naming the argument (and,
for an iterator, the likely cause), made before any model call; two inputs that share no pair
still give NaN with a note.
"""

from __future__ import annotations

import math
import random

import ir_measures
import pandas as pd
import pytest
from ir_datasets.formats import GenericQrel, GenericScoredDoc, TrecQrel

import judgeblender as jb
from judgeblender.errors import ArgumentError
from judgeblender.evaluate import correlate as evaluate_correlate
from judgeblender.pairs import read_qrels, read_queries, read_run, write_qrels
from judgeblender.pairs.design import draw_query_design, write_design
from judgeblender.pairs.pool import pool_runs

from conftest import SHARED_DATA

DL19 = SHARED_DATA / "trec-dl-2019"
LLM = SHARED_DATA / "llm-labels" / "trec-dl-2019"
RUNS = ("ICT-BERT2", "bm25base_p", "p_bert")
JUDGES = ("fourprompts-llama3-70b", "fourprompts-flant5-large", "sun-then-decomposed-flant5-large")


def rows(path):
    """(qid, docid, label) of a qrels file, in file order."""
    return [(q, d, v) for q, docs in read_qrels(path).items() for d, v in docs.items()]


def run_rows(path):
    return [(q, d, s) for q, docs in read_run(path).ranking.items() for d, s in docs]


# Each makes a fresh one-shot iterator over a file's labels or a run's scored documents.
LABELS = {
    "ir_measures.read_trec_qrels": lambda path: ir_measures.read_trec_qrels(str(path)),
    "generator": lambda path: (row for row in rows(path)),
    "iter(list)": lambda path: iter(rows(path)),
    "ir_datasets.TrecQrel": lambda path: (TrecQrel(q, d, v, "0") for q, d, v in rows(path)),
    "ir_datasets.GenericQrel": lambda path: (GenericQrel(q, d, v) for q, d, v in rows(path)),
}
RUN_SHAPES = {
    "ir_measures.read_trec_run": lambda path: ir_measures.read_trec_run(str(path)),
    "generator": lambda path: (row for row in run_rows(path)),
    "iter(list)": lambda path: iter(run_rows(path)),
    "ir_datasets.GenericScoredDoc": lambda path: (GenericScoredDoc(q, d, s) for q, d, s in run_rows(path)),
}
SHAPES = pytest.mark.parametrize("shape", list(LABELS))


def run_shape_for(shape: str):
    """A run shape to go with a labels shape: every run shape is used, without a product of both."""
    return list(RUN_SHAPES.values())[list(LABELS).index(shape) % len(RUN_SHAPES)]


@pytest.fixture(scope="module")
def dl19(tmp_path_factory):
    """DL19 on 12 queries as files: NIST's labels, the same with 30% hidden, three published LLM
    labellings, the queries and three official runs (cut to the 12 queries); `reference` keeps
    what an entry point gives on the files, computed once."""
    if not DL19.is_dir():
        pytest.skip("shared data not found")
    folder = tmp_path_factory.mktemp("dl19")
    nist = read_qrels(DL19 / "qrels.txt")
    topics = sorted(nist)[:12]
    files = {"nist": folder / "nist.qrels", "human": folder / "human.qrels"}
    write_qrels(files["nist"], {q: nist[q] for q in topics})
    rng = random.Random(5)
    write_qrels(files["human"], {q: {d: v for d, v in nist[q].items() if rng.random() >= 0.3} for q in topics})
    for name in JUDGES:
        llm = read_qrels(LLM / f"{name}.qrels")
        files[name] = folder / f"{name}.qrels"
        write_qrels(files[name], {q: llm[q] for q in topics if q in llm})
    runs = {}
    for name in RUNS:
        runs[name] = folder / f"{name}.run"
        with open(runs[name], "w", encoding="utf-8") as fh:
            for q, docs in read_run(DL19 / "runs" / f"{name}.run.gz").ranking.items():
                if q in topics:
                    fh.writelines(f"{q} Q0 {d} {rank} {s!r} {name}\n" for rank, (d, s) in enumerate(docs, start=1))
    queries = read_queries(DL19 / "queries.tsv")
    return {"files": files, "topics": {q: queries[q] for q in topics}, "runs": runs, "reference": {}}


def reference(dl19, key, compute):
    """What `compute()` gives on the files, computed once for the module."""
    if key not in dl19["reference"]:
        dl19["reference"][key] = compute()
    return dl19["reference"][key]


def same_report(a, b) -> None:
    assert a.to_dict() == b.to_dict()


# -- every entry point, every one-shot shape ------------------------------------------------------

@SHAPES
def test_agreement_reads_one_shot_gold_and_prediction_as_their_files(dl19, shape):
    files = dl19["files"]
    from_files = jb.agreement(files["nist"], files["fourprompts-llama3-70b"], bootstrap=50)
    once = jb.agreement(LABELS[shape](files["nist"]), LABELS[shape](files["fourprompts-llama3-70b"]), bootstrap=50)
    assert once.n == from_files.n > 1000 and not math.isnan(once.kappa)
    same_report(once, from_files)


def test_a_one_shot_prediction_with_invalid_labels_is_counted_and_scored_from_one_read():
    gold = {"q1": {"d1": 2, "d2": 0, "d3": 3}}
    pred = [("q1", "d1", 2), ("q1", "d2", None), ("q1", "d3", 3)]
    once = jb.agreement(gold, (row for row in pred), bootstrap=0)
    assert (once.n, once.invalid, once.accuracy) == (2, 1, 1.0)
    same_report(once, jb.agreement(gold, pred, bootstrap=0))


@pytest.mark.parametrize("shape", ["ir_measures.read_trec_qrels", "generator", "ir_datasets.TrecQrel"])
def test_run_agreement_reads_gold_once_for_every_judge(shape, mock_model, tmp_path):
    queries = {"q1": "what do goldfish eat", "q2": "how tall is the eiffel tower"}
    passages = {"d1": "Goldfish eat flakes.", "d2": "The tower is 330 metres tall.", "d3": "Kettles boil water."}
    mock_model.rules = [{"contains": "Passage: Kettles", "output": "##final score: 0"},
                        {"contains": "", "output": "##final score: 2"}]
    run = jb.judge([("q1", "d1"), ("q1", "d3"), ("q2", "d2")], judges=[{"model": "mock:a", "id": "A"},
                   {"model": "mock:b", "id": "B"}, {"model": "mock:c", "id": "C"}], queries=queries, corpus=passages)
    gold = tmp_path / "gold.qrels"
    gold.write_text("q1 0 d1 2\nq1 0 d3 0\nq2 0 d2 3\n", encoding="utf-8")
    table = run.agreement(LABELS[shape](gold), bootstrap=0)
    assert table.n.tolist() == [3, 3, 3]  # not 3, then 0 and 0 from an emptied generator
    pd.testing.assert_frame_equal(table, run.agreement(gold, bootstrap=0))


@SHAPES
def test_correlate_reads_gold_predictions_and_runs_once(dl19, shape):
    files, runs = dl19["files"], dl19["runs"]
    run_shape = run_shape_for(shape)
    preds = ("fourprompts-llama3-70b", "fourprompts-flant5-large")
    from_files = reference(dl19, "correlate", lambda: jb.correlate(files["nist"], {p: files[p] for p in preds}, runs,
                                                                   measures=["nDCG@10"], bootstrap=20))
    once = jb.correlate(LABELS[shape](files["nist"]), {p: LABELS[shape](files[p]) for p in preds},
                        {name: run_shape(path) for name, path in runs.items()}, measures=["nDCG@10"], bootstrap=20)
    assert once.n_runs.tolist() == [3, 3] and once.kendall_tau.notna().all()
    pd.testing.assert_frame_equal(once, from_files)


def test_correlate_reads_one_unnamed_one_shot_prediction_once(dl19):
    files = dl19["files"]
    pred = files["fourprompts-llama3-70b"]
    once = jb.correlate(files["nist"], ir_measures.read_trec_qrels(str(pred)), dl19["runs"], bootstrap=0)
    pd.testing.assert_frame_equal(once, jb.correlate(files["nist"], pred, dl19["runs"], bootstrap=0))


@SHAPES
def test_calibrate_blend_and_ballots_read_each_judges_labels_once(dl19, shape):
    files = dl19["files"]
    jury = {name: files[name] for name in JUDGES}
    fresh = lambda: {name: LABELS[shape](path) for name, path in jury.items()}  # noqa: E731
    from_files = reference(dl19, "calibrate", lambda: jb.calibrate(jury, files["nist"], "weights", folds=3))
    once = jb.calibrate(fresh(), LABELS[shape](files["nist"]), "weights", folds=3)
    assert once.report.gold_pairs == from_files.report.gold_pairs > 1000
    assert once.report == from_files.report and once.learned == from_files.learned
    pd.testing.assert_frame_equal(once.apply(fresh()), reference(dl19, "apply", lambda: from_files.apply(jury)))
    pd.testing.assert_frame_equal(jb.blend_labels(fresh(), "mv"), reference(dl19, "mv", lambda: jb.blend_labels(jury)))
    table = jb.ballots(fresh())
    assert table.pairs == reference(dl19, "ballots", lambda: jb.ballots(jury)).pairs and len(table.pairs) > 1000


@SHAPES
def test_experiment_reads_qrels_llm_labels_and_systems_once(dl19, shape):
    files, runs, topics = dl19["files"], dl19["runs"], dl19["topics"]
    run_shape = run_shape_for(shape)
    llm = files["fourprompts-llama3-70b"]
    from_files = reference(dl19, "experiment", lambda: jb.experiment(runs, topics, qrels=files["human"], llm_labels=llm,
                                                                     baseline="bm25base_p"))
    once = jb.experiment({name: run_shape(path) for name, path in runs.items()}, topics,
                         qrels=LABELS[shape](files["human"]), llm_labels=LABELS[shape](llm), baseline="bm25base_p")
    assert once.human.notna().all() and once.attrs["holes"] > 0
    pd.testing.assert_frame_equal(once, from_files)


def test_experiment_reads_a_one_shot_seed_once_and_before_any_model_call(dl19, tmp_path, mock_model):
    files, runs, topics = dl19["files"], dl19["runs"], dl19["topics"]
    nist = read_qrels(files["nist"])
    pool = pool_runs([read_run(p, name=n) for n, p in runs.items()], 10, set(topics))
    design = draw_query_design(sorted({p.qid for p in pool}), 8, 3)
    write_design(tmp_path / "seed.design.json", design)
    write_qrels(tmp_path / "seed.qrels", {q: {p.docid: nist[q].get(p.docid, 0) for p in pool if p.qid == q}
                                          for q in design.seed})
    llm = files["fourprompts-llama3-70b"]
    from_files = jb.experiment(runs, topics, qrels=files["human"], llm_labels=llm, seed=tmp_path / "seed.qrels")
    once = jb.experiment(runs, topics, qrels=files["human"], llm_labels=llm,
                         seed=ir_measures.read_trec_qrels(str(tmp_path / "seed.qrels")),
                         design=tmp_path / "seed.design.json")
    assert once.ppi.notna().all()
    pd.testing.assert_frame_equal(once, from_files)
    # a bad seed is refused before the jury is asked anything
    with pytest.raises(ArgumentError, match="seed: expected at least one"):
        jb.experiment(runs, topics, qrels=files["human"], judges=["mock:x"], corpus={}, seed=iter([]),
                      design=tmp_path / "seed.design.json")
    assert mock_model.calls == []


@pytest.mark.parametrize("shape", ["ir_measures.read_trec_qrels", "iter(list)", "ir_datasets.TrecQrel"])
def test_fill_qrels_reads_qrels_llm_labels_and_systems_once(dl19, shape):
    from judgeblender.pyterrier import fill_qrels

    files, runs = dl19["files"], dl19["runs"]
    topics = pd.DataFrame({"qid": list(dl19["topics"]), "query": list(dl19["topics"].values())})
    llm = files["fourprompts-llama3-70b"]
    from_files = reference(dl19, "fill_qrels", lambda: fill_qrels(list(runs.values()), topics, qrels=files["human"],
                                                                  llm_labels=llm))
    once = fill_qrels([RUN_SHAPES["ir_measures.read_trec_run"](p) for p in runs.values()], topics,
                      qrels=LABELS[shape](files["human"]), llm_labels=LABELS[shape](llm), names=list(runs))
    assert set(once.provenance) == {"human", "llm_labels"}  # a file's labels go by its name
    pd.testing.assert_frame_equal(once, from_files.replace({"provenance": {llm.stem: "llm_labels"}}))


def test_judge_reads_a_generator_of_pairs_once_and_judges_each_pair_once(mock_model):
    queries = {"q1": "what do goldfish eat"}
    passages = {"d1": "Goldfish eat flakes.", "d2": "Kettles boil water."}
    mock_model.default = "##final score: 1"
    run = jb.judge((p for p in [("q1", "d1"), ("q1", "d2"), ("q1", "d1")]), ["mock:m"], queries=queries,
                   corpus=passages)
    assert run.labels[["qid", "docno", "label"]].values.tolist() == [["q1", "d1", 1], ["q1", "d2", 1]]
    assert len(mock_model.calls) == 2


def test_the_evaluate_layer_reads_an_iterator_of_runs_once(dl19):
    files = dl19["files"]
    gold, pred = read_qrels(files["nist"]), read_qrels(files["fourprompts-flant5-large"])
    runs = [read_run(path, name=name) for name, path in dl19["runs"].items()]
    listed = evaluate_correlate(gold, {"flan": pred}, runs, ["nDCG@10"], bootstrap=0)
    once = evaluate_correlate(gold, {"flan": pred}, iter(runs), ["nDCG@10"], bootstrap=0)
    assert [r.to_dict() for r in once] == [r.to_dict() for r in listed]


# -- nothing where data is needed -----------------------------------------------------------------

GOLD = {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}}
VOTES = [("q1", "d1", 2), ("q1", "d2", 0), ("q2", "d3", 1)]
EMPTY = [
    pytest.param(lambda e: jb.agreement(e, GOLD), "gold", id="agreement-gold"),
    pytest.param(lambda e: jb.agreement(GOLD, e), "pred", id="agreement-pred"),
    pytest.param(lambda e: jb.correlate(e, GOLD, {"r": [("q1", "d1", 1.0)]}), "gold", id="correlate-gold"),
    pytest.param(lambda e: jb.correlate(GOLD, {"llm": e}, {"r": [("q1", "d1", 1.0)]}), "predictions['llm']",
                 id="correlate-named-prediction"),
    pytest.param(lambda e: jb.correlate(GOLD, e, {"r": [("q1", "d1", 1.0)]}), "predictions", id="correlate-prediction"),
    pytest.param(lambda e: jb.correlate(GOLD, GOLD, {"r": e}), "runs['r']", id="correlate-run"),
    pytest.param(lambda e: jb.calibrate({"A": VOTES}, e), "gold", id="calibrate-gold"),
    pytest.param(lambda e: jb.calibrate({"A": VOTES, "B": e}, GOLD), "labels['B']", id="calibrate-labels"),
    pytest.param(lambda e: jb.blend_labels({"A": e}), "labels['A']", id="blend-labels"),
    pytest.param(lambda e: jb.ballots({"A": VOTES, "B": e}), "labels['B']", id="ballots"),
    pytest.param(lambda e: jb.experiment({"r": [("q1", "d1", 1.0)]}, {"q1": "a"}, qrels=e, llm_labels=GOLD),
                 "qrels", id="experiment-qrels"),
    pytest.param(lambda e: jb.experiment({"r": [("q1", "d1", 1.0)]}, {"q1": "a"}, qrels=GOLD, llm_labels=e),
                 "llm_labels", id="experiment-llm-labels"),
    pytest.param(lambda e: jb.experiment({"r": e}, {"q1": "a"}, qrels=GOLD, llm_labels=GOLD), "systems['r']",
                 id="experiment-system"),
    pytest.param(lambda e: jb.judge(e, ["mock:m"], queries={"q1": "a"}, corpus={"d1": "b"}), "pairs", id="judge-pairs"),
]


@pytest.mark.parametrize("call, argument", EMPTY)
@pytest.mark.parametrize("empty", ["iterator", "list"])
def test_an_input_that_holds_nothing_is_an_error_naming_the_argument(call, argument, empty, mock_model):
    with pytest.raises(ArgumentError) as caught:
        call(iter([]) if empty == "iterator" else [])
    assert str(caught.value).startswith(f"{argument}: expected at least one")
    assert isinstance(caught.value, ValueError)
    assert ("was it read before?" in str(caught.value)) == (empty == "iterator")
    assert mock_model.calls == []


def test_fill_qrels_with_empty_human_labels_is_an_error_naming_qrels(dl19, tmp_path):
    from judgeblender.pyterrier import fill_qrels

    (tmp_path / "empty.qrels").write_text("", encoding="utf-8")
    with pytest.raises(ArgumentError, match=r"^qrels: expected at least one \(qid, docid, label\), got an iterator "):
        fill_qrels(list(dl19["runs"].values()), dl19["topics"], llm_labels=dl19["files"]["fourprompts-llama3-70b"],
                   qrels=ir_measures.read_trec_qrels(str(tmp_path / "empty.qrels")))


def test_an_empty_qrels_file_where_labels_are_needed_names_the_argument_and_the_file(tmp_path):
    (tmp_path / "empty.qrels").write_text("\n", encoding="utf-8")
    with pytest.raises(ArgumentError, match=rf"^gold: expected at least one .*, got the file {tmp_path / 'empty.qrels'}, "
                                             r"which holds none"):
        jb.agreement(tmp_path / "empty.qrels", GOLD)


def test_an_iterator_read_before_the_call_is_named_as_the_likely_cause(dl19):
    gold = ir_measures.read_trec_qrels(str(dl19["files"]["nist"]))
    assert len(list(gold)) > 1000  # the user looked at it first
    with pytest.raises(ArgumentError, match=r"^gold: .*, got an iterator that yielded none; an iterator is read once: "
                                             r"was it read before\?"):
        jb.agreement(gold, dl19["files"]["fourprompts-llama3-70b"])


def test_one_shot_inputs_that_share_no_pair_still_give_nan_with_a_note():
    report = jb.agreement(iter([("q1", "d1", 2), ("q1", "d2", 0)]), (r for r in [("q9", "d1", 2)]), bootstrap=0)
    assert (report.n, report.n_gold, report.n_pred) == (0, 2, 1) and math.isnan(report.kappa)
    assert "no pair is labelled in both files; every statistic is undefined" in report.notes
    # the one query set (evaluate/scope.py) also says which query it dropped and why
    assert any("q9 (no label in the human labels)" in note for note in report.notes)


def test_a_one_shot_prediction_whose_every_label_is_invalid_is_counted_not_refused():
    report = jb.agreement(GOLD, (r for r in [("q1", "d1", None), ("q1", "d2", float("nan"))]), bootstrap=0)
    assert (report.n, report.invalid) == (0, 2) and math.isnan(report.kappa) and report.notes
