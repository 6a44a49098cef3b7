"""Runs in every shape follow the run file's rule (issue 29, part 3).

A TREC run file that ranks a document twice for a query is refused, naming the line and the
line where the document came first; a score that is not a finite number is refused naming the
line. A run handed over as a DataFrame, a PyTerrier result frame or a transformer's output, a
dict, ScoredDoc tuples or an ir_datasets id's scoreddocs used to be settled by row order or a
dict's overwrite (the last score won) and took NaN scores as they came. Every shape now goes
through the run files' own rule (pairs.runs.each_document_once, read_score), at every entry
point that takes runs: jb.correlate, jb.experiment, fill_qrels.
"""

from __future__ import annotations

import math
import re
import uuid

import ir_measures
import pandas as pd
import pytest
from ir_datasets.formats import GenericScoredDoc
from ir_measures import ScoredDoc

import judgeblender as jb
from judgeblender import convert
from judgeblender.errors import ArgumentError, InputError
from judgeblender.pairs import read_run
from judgeblender.pairs.irds import DatasetError

GOLD = {"q1": {"d1": 2, "d2": 0, "d3": 1}, "q2": {"d4": 3, "d5": 0}}
TOPICS = {"q1": "first query", "q2": "second query"}
# q1 ranks d2 twice (rows 1 and 3 of four; 0-based 1 and 3 in a frame)
ROWS = [("q1", "d1", 3.0), ("q1", "d2", 2.0), ("q2", "d4", 1.0), ("q1", "d2", 0.5)]
TWICE = "expected each document once per query (d2 is ranked for query q1 at"


def frame(rows, names=("qid", "docid", "score")):
    return pd.DataFrame(rows, columns=list(names))


def pyterrier_frame(rows):
    """A PyTerrier result frame: Terrier's internal docid beside the docno, rank and query."""
    df = frame(rows, ("qid", "docno", "score"))
    return df.assign(docid=range(len(df)), rank=df.groupby("qid").cumcount(), query=df.qid.map(TOPICS))


def dict_of_lists(rows):
    out = {}
    for q, d, s in rows:
        out.setdefault(q, []).append((d, s))
    return out


def run_file(tmp_path, rows):
    path = tmp_path / f"{uuid.uuid4().hex[:6]}.run"
    path.write_text("".join(f"{q} Q0 {d} {i} {s} tag\n" for i, (q, d, s) in enumerate(rows, start=1)))
    return path


# Each turns rows into a run of one shape; the position of the repeat (1-based rows for tuples,
# the frame's index for frames, qid[i] for a dict of lists) and where the document came first.
SHAPES = {
    "DataFrame": (lambda rows, tmp: frame(rows), "row 3", "row 1"),
    "ir_measures frame": (lambda rows, tmp: frame(rows, ("query_id", "doc_id", "score")), "row 3", "row 1"),
    "PyTerrier result frame": (lambda rows, tmp: pyterrier_frame(rows), "row 3", "row 1"),
    "dict of lists": (lambda rows, tmp: dict_of_lists(rows), "key q1[2]", "key q1[1]"),
    "ScoredDoc tuples": (lambda rows, tmp: [ScoredDoc(*r) for r in rows], "row 4", "row 2"),
    "(qid, docid, score) tuples": (lambda rows, tmp: list(rows), "row 4", "row 2"),
    "ir_measures.read_trec_run": (lambda rows, tmp: ir_measures.read_trec_run(str(run_file(tmp, rows))), "row 4",
                                  "row 2"),
    "ir_datasets GenericScoredDoc": (lambda rows, tmp: (GenericScoredDoc(*r) for r in rows), "row 4", "row 2"),
}
ENTRY_POINTS = {
    "correlate": (lambda run: jb.correlate(GOLD, GOLD, {"bm25": run}, bootstrap=0), "runs['bm25']"),
    "experiment": (lambda run: jb.experiment({"bm25": run}, TOPICS, qrels=GOLD, llm_labels=GOLD), "systems['bm25']"),
    "experiment, a list": (lambda run: jb.experiment([run], TOPICS, qrels=GOLD, llm_labels=GOLD), "systems[0]"),
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_document_ranked_twice_is_an_error_naming_query_document_and_both_rows(shape, entry, tmp_path):
    make, at, first = SHAPES[shape]
    call, argument = ENTRY_POINTS[entry]
    with pytest.raises(ArgumentError) as caught:
        call(make(ROWS, tmp_path))
    assert str(caught.value).startswith(f"{argument}: {at}: {TWICE} {first} already), got ('q1', 'd2', 0.5)")


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_repeat_with_the_same_score_is_refused_too_as_in_a_run_file(shape, tmp_path):
    make, at, first = SHAPES[shape]
    rows = ROWS[:3] + [("q1", "d2", 2.0)]
    with pytest.raises(ArgumentError, match=rf"^runs\['r'\]: {re.escape(at)}: {re.escape(TWICE)} {re.escape(first)}"):
        convert.runs({"r": make(rows, tmp_path)})
    with pytest.raises(InputError, match=rf":4: {re.escape(TWICE)} line 2 already"):
        read_run(run_file(tmp_path, rows))  # the file's own rule, the same words


def test_the_run_file_states_the_rule_in_the_same_words(tmp_path):
    with pytest.raises(InputError) as caught:
        read_run(run_file(tmp_path, ROWS))
    assert f":4: {TWICE} line 2 already), got 'q1 Q0 d2 4 0.5 tag'" in str(caught.value)


def test_a_pyterrier_frame_repeats_by_docno_even_where_terriers_docids_differ():
    df = pyterrier_frame(ROWS[:3] + [("q1", "d1", 0.5)])
    assert df.docid.is_unique
    with pytest.raises(ArgumentError, match=r"\(d1 is ranked for query q1 at row 0 already\)"):
        convert.runs({"bm25": df})


def test_a_pyterrier_transformers_output_follows_the_rule_in_experiment_and_fill_qrels():
    import pyterrier as pt

    from judgeblender.pyterrier import fill_qrels

    twice = pt.Transformer.from_df(frame(ROWS, ("qid", "docno", "score")))
    topics = pd.DataFrame({"qid": list(TOPICS), "query": list(TOPICS.values())})
    with pytest.raises(ArgumentError, match=rf"^systems\['bm25'\]: row \d: {re.escape(TWICE)} row \d already"):
        jb.experiment({"bm25": twice}, topics, qrels=GOLD, llm_labels=GOLD)
    with pytest.raises(ArgumentError, match=rf"^systems\[1\]: row \d: {re.escape(TWICE)}"):
        fill_qrels([pt.Transformer.from_df(frame(ROWS[:3], ("qid", "docno", "score"))), twice], topics, qrels=GOLD,
                   llm_labels=GOLD)
    once = pt.Transformer.from_df(frame(ROWS[:3], ("qid", "docno", "score")))
    filled = fill_qrels([once], topics, qrels=GOLD, llm_labels=GOLD)  # the same without the repeat: fine
    assert set(zip(filled.qid, filled.docno)) >= {("q1", "d1"), ("q1", "d2"), ("q2", "d4")}


# -- scores ---------------------------------------------------------------------------------------

NOT_FINITE = [pytest.param(math.nan, "a finite score", "nan", id="nan"),
              pytest.param(math.inf, "a finite score", "inf", id="inf"),
              pytest.param(-math.inf, "a finite score", "-inf", id="minus-inf"),
              pytest.param(None, "a number score", "None", id="none"),
              pytest.param("nan", "a number score", "'nan'", id="text-nan"),
              pytest.param("1_0", "a number score", "'1_0'", id="text-underscore"),
              pytest.param(True, "a number score", "True", id="bool")]


@pytest.mark.parametrize("score, expected, shown", NOT_FINITE)
@pytest.mark.parametrize("shape", [s for s in SHAPES if s != "ir_measures.read_trec_run"])
def test_a_score_that_is_not_a_finite_number_is_an_error_naming_the_row(shape, score, expected, shown, tmp_path):
    make, _, first = SHAPES[shape]  # the bad score sits where d2 first comes
    rows = ROWS[:1] + [("q1", "d2", score)] + ROWS[2:3]
    if score is None and "frame" in shape.lower():  # pandas holds a None among floats as NaN
        expected, shown = "a finite score", "nan"
    with pytest.raises(ArgumentError) as caught:
        jb.correlate(GOLD, GOLD, {"bm25": make(rows, tmp_path)}, bootstrap=0)
    assert str(caught.value) == f"runs['bm25']: {first} (q1 d2): expected {expected}, got {shown}"


@pytest.mark.parametrize("text, expected", [("nan", "a number score"), ("inf", "a number score"),
                                            ("1e999", "a finite score"), ("-1e999", "a finite score")])
def test_the_run_file_refuses_the_same_scores_naming_the_line(text, expected, tmp_path):
    path = tmp_path / "bad.run"
    path.write_text(f"q1 Q0 d1 1 3.0 tag\nq1 Q0 d2 2 {text} tag\n")
    with pytest.raises(InputError, match=rf"bad.run:2: expected {expected} in column 5, got '{text}'"):
        read_run(path)


def test_a_dict_of_scores_with_nan_names_its_key():
    with pytest.raises(ArgumentError, match=r"^runs\['r'\]: key q1/d2 \(q1 d2\): expected a finite score, got nan$"):
        convert.runs({"r": {"q1": {"d1": 1.0, "d2": math.nan}}})


# -- what holds -----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_shape_of_a_good_run_ranks_as_its_run_file(shape, tmp_path):
    rows = [("q1", "d1", 1.0), ("q1", "d3", 2.5), ("q1", "d2", 2.5), ("q2", "d1", 7.0), ("q2", "d4", -1.0)]
    make, _, _ = SHAPES[shape]
    (run,) = convert.runs({"r": make(rows, tmp_path)})
    assert run.ranking == read_run(run_file(tmp_path, rows)).ranking  # ties by docid, d1 in both queries
    assert run.ranking["q1"] == [("d3", 2.5), ("d2", 2.5), ("d1", 1.0)]


def test_scores_as_decimal_text_or_numpy_numbers_read_as_a_run_file_reads_them(tmp_path):
    import numpy as np

    given = {"q1": {"d1": "1.5", "d2": np.int64(2), "d3": np.float64(-0.25)}}
    (run,) = convert.runs({"r": given})
    assert run.ranking == {"q1": [("d2", 2.0), ("d1", 1.5), ("d3", -0.25)]}


def test_a_run_that_ranks_nothing_is_an_error_as_an_empty_run_file_is(tmp_path):
    with pytest.raises(ArgumentError, match=r"^systems\['bm25'\]: expected at least one ranked document"):
        jb.experiment({"bm25": frame([])}, TOPICS, qrels=GOLD, llm_labels=GOLD)
    with pytest.raises(InputError, match="expected at least one ranked document, got 'an empty run'"):
        read_run(run_file(tmp_path, []))


def test_a_list_of_one_runs_rows_is_refused_as_systems_not_read_as_runs():
    with pytest.raises(ArgumentError, match=r"^systems\[0\]: expected a system .*; systems looks like one run's rows"):
        jb.experiment([ScoredDoc(*r) for r in ROWS[:3]], TOPICS, qrels=GOLD, llm_labels=GOLD)
    with pytest.raises(ArgumentError, match=r"^runs\[0\]: expected a run .*; runs looks like one run's rows"):
        jb.correlate(GOLD, GOLD, [tuple(r) for r in ROWS[:3]], bootstrap=0)


def test_a_run_dict_of_something_else_says_what_it_takes():
    with pytest.raises(jb.JudgeblenderError, match=r"a run dict maps qid -> \{docid: score\} or \[\(docid, score\)\]; "
                                                    r"query 'q1' maps to float"):
        convert.runs({"r": {"q1": 1.0}})
    with pytest.raises(jb.JudgeblenderError, match=r"key q1\[0\] should be \(docid, score\), got 'd1'"):
        convert.runs({"r": {"q1": ["d1"]}})


# -- ir_datasets scoreddocs ---------------------------------------------------------------------

def register(tmp_path, run_text: str) -> str:
    ir_datasets = pytest.importorskip("ir_datasets")
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TrecScoredDocs
    from ir_datasets.util import LocalDownload

    (tmp_path / "run.txt").write_text(run_text)
    ident = f"judgeblender-seams-{uuid.uuid4().hex[:8]}"
    ir_datasets.registry.register(ident, Dataset(TrecScoredDocs(LocalDownload(tmp_path / "run.txt"))))
    return f"irds:{ident}"


def test_ir_datasets_scoreddocs_that_rank_a_document_twice_are_refused_not_overwritten(tmp_path):
    src = register(tmp_path, "q1 Q0 d1 1 3.0 x\nq1 Q0 d2 2 2.0 x\nq2 Q0 d4 1 1.0 x\nq1 Q0 d2 3 0.5 x\n")
    with pytest.raises(DatasetError, match=rf"^{src}: scoreddoc 4: {re.escape(TWICE)} scoreddoc 2 already\)"):
        read_run(src)


def test_ir_datasets_scoreddocs_with_a_nan_score_are_refused_naming_the_row(tmp_path):
    src = register(tmp_path, "q1 Q0 d1 1 3.0 x\nq1 Q0 d2 2 nan x\n")
    with pytest.raises(DatasetError, match=rf"^{src}: scoreddoc 2 \(q1 d2\): expected a finite score, got nan"):
        read_run(src)


def test_good_ir_datasets_scoreddocs_still_read_as_their_run_file(tmp_path):
    text = "q1 Q0 d1 1 3.0 x\nq1 Q0 d2 2 2.0 x\nq2 Q0 d2 1 1.0 x\n"
    (tmp_path / "same.run").write_text(text)
    assert read_run(register(tmp_path, text)).ranking == read_run(tmp_path / "same.run").ranking
