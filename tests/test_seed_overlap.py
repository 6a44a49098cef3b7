"""Seeds that overlap: `estimate` and `report` warn, with counts, when the human labels they
evaluate with share queries or pairs with the seed the panel was calibrated on, and still
produce their output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from judgeblender.evaluate.seed_overlap import AGREEMENT, seed_overlap

SRC = Path(__file__).resolve().parents[1] / "src"


def cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=300)


@pytest.fixture
def files(tmp_path):
    """20 queries of 6 documents, two runs; the estimation seed is queries q00-q09 (60 pairs); the
    calibration seed (a `pool --sample` pairs TSV) has 2 pairs on each of q07-q13: 3 of the 10
    estimation queries and 6 of their 60 pairs."""
    queries = [f"q{i:02d}" for i in range(20)]
    human = {q: {f"{q}d{k}": (k * 7 + i) % 4 for k in range(6)} for i, q in enumerate(queries)}
    runs = tmp_path / "runs"
    runs.mkdir()
    orders = {"good": lambda q: sorted(human[q], key=lambda d: -human[q][d]), "plain": lambda q: sorted(human[q])}
    for name, key in orders.items():
        (runs / f"{name}.run").write_text("".join(f"{q} Q0 {d} {k} {10 - k} {name}\n" for q in queries
                                                  for k, d in enumerate(key(q), start=1)))
    (tmp_path / "llm.qrels").write_text("".join(f"{q} 0 {d} {min(3, x + (d[-1] == '2'))}\n"
                                                for q in queries for d, x in human[q].items()))
    (tmp_path / "est.qrels").write_text("".join(f"{q} 0 {d} {x}\n" for q in queries[:10] for d, x in human[q].items()))
    (tmp_path / "human.qrels").write_text("".join(f"{q} 0 {d} {x}\n" for q in queries for d, x in human[q].items()))
    (tmp_path / "seed.tsv").write_text("".join(f"{q}\t{q}d{k}\n" for q in queries[7:14] for k in (0, 3)))
    (tmp_path / "far.tsv").write_text("q15\tq15d0\nq16\tq16d1\n")
    return tmp_path


ESTIMATE = ("estimate", "--llm", "llm.qrels", "--human", "est.qrels", "--runs", "runs")


def test_estimate_warns_with_counts_when_its_seed_overlaps_the_calibration_seed_and_still_estimates(files):
    res = cli(*ESTIMATE, "--calibration-seed", "seed.tsv", cwd=files)
    assert res.returncode == 0, res.stderr
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: 3 of 10 estimation queries and 6 of 60 pairs are in the calibration seed seed.tsv: the panel has "
        "seen them; PPI++ assumes the LLM labels were not fitted to the seed, so the intervals may be too "
        "optimistic; estimate with a seed the panel never saw (pool --sample-queries, then label it)"]
    assert "nDCG@10: 95% intervals, 10 human seed queries of 20" in res.stdout


def test_estimate_is_silent_when_the_seeds_share_nothing(files):
    res = cli(*ESTIMATE, "--calibration-seed", "far.tsv", cwd=files)
    assert res.returncode == 0, res.stderr
    assert "warning" not in res.stderr and "95% intervals" in res.stdout


def test_a_calibration_seed_in_qrels_counts_the_same_as_its_pairs_file(files):
    (files / "seed.qrels").write_text("".join(f"{line.split()[0]} 0 {line.split()[1]} 1\n"
                                              for line in (files / "seed.tsv").read_text().splitlines()))
    est = {line.split()[0]: {} for line in (files / "est.qrels").read_text().splitlines()}
    for line in (files / "est.qrels").read_text().splitlines():
        q, _, d, _ = line.split()
        est[q][d] = 1
    tsv, qrels = seed_overlap(est, files / "seed.tsv"), seed_overlap(est, files / "seed.qrels")
    assert (tsv.queries, tsv.total_queries, tsv.pairs, tsv.total_pairs) == (3, 10, 6, 60)
    assert (qrels.queries, qrels.pairs) == (tsv.queries, tsv.pairs)
    assert seed_overlap(est, files / "far.tsv").warning() is None


def test_report_warns_for_the_gold_and_for_the_seed_and_still_writes_the_report(files):
    res = cli("report", "--gold", "human.qrels", "--pred", "llm.qrels", "--runs", "runs", "--seed-qrels", "est.qrels",
              "--calibration-seed", "seed.tsv", "--out", "r.html", "--bootstrap", 0, cwd=files)
    assert res.returncode == 0, res.stderr
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning:")]
    assert [w.split(": the panel")[0] for w in warnings] == [
        "warning: 7 of 20 gold queries and 14 of 120 pairs are in the calibration seed seed.tsv",
        "warning: 3 of 10 estimation queries and 6 of 60 pairs are in the calibration seed seed.tsv"]
    assert AGREEMENT[1] in warnings[0]
    html = (files / "r.html").read_text()
    assert "7 of 20 gold queries and 14 of 120 pairs are in the calibration seed" in html  # in the report too


def test_a_calibration_seed_that_is_no_pairs_file_is_one_error_line(files):
    (files / "bad.tsv").write_text("q01 q01d1 extra\n")
    res = cli(*ESTIMATE, "--calibration-seed", "bad.tsv", cwd=files)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.startswith("error: bad.tsv:1: expected 2 columns (qid docid)") and res.stdout == ""
