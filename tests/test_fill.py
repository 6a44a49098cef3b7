"""`judgeblender fill`: LLM labels fill the holes of human qrels; a human label always wins."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from judgeblender.cli import fill as fill_cli
from judgeblender.errors import InputError
from judgeblender.label.merge import merge_labels
from judgeblender.pairs import Pair, read_qrels

HUMAN = {"q1": {"d1": 3, "d2": 0}, "q2": {"d5": 1}}
LLM = {"q1": {"d1": 2, "d2": 0, "d3": 1}, "q3": {"d9": 2}}


def test_human_labels_win_and_the_llm_fills_the_rest():
    merged = merge_labels(HUMAN, LLM)
    assert merged.qrels() == {"q1": {"d1": 3, "d2": 0, "d3": 1}, "q2": {"d5": 1}, "q3": {"d9": 2}}
    assert [r[3] for r in merged.rows] == ["human", "human", "llm", "human", "llm"]
    assert merged.count("human") == 3 and merged.count("llm") == 2


def test_overlap_and_disagreement_are_counted():
    merged = merge_labels(HUMAN, LLM)
    assert merged.both == 2  # q1/d1 and q1/d2
    assert merged.disagree == 1  # q1/d1: human 3, llm 2


def test_pool_pairs_left_without_any_label_are_listed():
    pool = [Pair("q1", "d1"), Pair("q1", "d4"), Pair("q3", "d9"), Pair("q4", "d1")]
    assert merge_labels(HUMAN, LLM, pool).unlabelled == [Pair("q1", "d4"), Pair("q4", "d1")]


@pytest.fixture
def app():
    app = typer.Typer()
    app.callback()(lambda: None)
    fill_cli.register(app)
    return app


def write(path, qrels):
    path.write_text("".join(f"{q} 0 {d} {lab}\n" for q, docs in qrels.items() for d, lab in docs.items()))
    return path


def test_fill_command_writes_qrels_and_provenance(app, tmp_path):
    human, llm = write(tmp_path / "human.qrels", HUMAN), write(tmp_path / "llm.qrels", LLM)
    pool = tmp_path / "pool.tsv"
    pool.write_text("q1\td1\nq1\td4\n")
    out = tmp_path / "merged.qrels"
    res = CliRunner().invoke(app, ["fill", "--gold", str(human), "--llm", str(llm), "--out", str(out),
                                   "--pairs", str(pool)])
    assert res.exit_code == 0, res.output
    assert read_qrels(out) == merge_labels(HUMAN, LLM).qrels()
    assert (tmp_path / "merged.provenance.tsv").read_text().splitlines() == [
        "qid\tdocid\tlabel\tsource", "q1\td1\t3\thuman", "q1\td2\t0\thuman", "q1\td3\t1\tllm",
        "q2\td5\t1\thuman", "q3\td9\t2\tllm"]
    assert "2 pairs were labelled by both; the LLM disagreed on 1 of them" in res.stdout
    assert "1 pairs of" in res.stdout and "q1/d4" in res.stdout


def test_fill_command_json_counts_labels_per_source(app, tmp_path):
    human, llm = write(tmp_path / "human.qrels", HUMAN), write(tmp_path / "llm.qrels", LLM)
    res = CliRunner().invoke(app, ["fill", "--gold", str(human), "--llm", str(llm), "--out", str(tmp_path / "m.qrels"),
                                   "--provenance", str(tmp_path / "prov.tsv"), "--json"])
    counts = json.loads(res.stdout)
    assert counts["human"] == 3 and counts["llm"] == 2 and counts["pairs"] == 5
    assert counts["labels"] == {"human": [1, 1, 0, 1], "llm": [0, 1, 1, 0]}
    assert (tmp_path / "prov.tsv").exists()


def test_a_label_outside_0_to_3_names_the_file_and_line(app, tmp_path):
    human = write(tmp_path / "human.qrels", HUMAN)
    llm = tmp_path / "llm.qrels"
    llm.write_text("q1 0 d1 2\nq1 0 d2 7\n")
    res = CliRunner().invoke(app, ["fill", "--gold", str(human), "--llm", str(llm), "--out", str(tmp_path / "m.qrels")])
    assert isinstance(res.exception, InputError)
    assert str(res.exception).startswith(f"{llm}:2:")
    assert not (tmp_path / "m.qrels").exists()
