"""The path for labels people already have: `calibrate --labels` then `blend --panel --pairs`.

Run as a user runs it (real subprocesses on real files): published LLM labels of a TREC DL
2019 slice (tests/data/dl19_slice, cut by scripts/make_dl19_slice.py), a human seed, and a
pool file that the blend keeps to, counting the pool's pairs no label file has.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from judgeblender.blend import BallotTable
from judgeblender.panels.panel_file import load_blend_panel
from judgeblender.pairs import read_pairs, read_qrels

SLICE = Path(__file__).parent / "data" / "dl19_slice"


def cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "COLUMNS": "200"}, timeout=300)


def qrels_pairs(path: Path) -> set[tuple[str, str]]:
    return {(q, d) for q, docs in read_qrels(path).items() for d in docs}


def write_qrels(path: Path, rows) -> None:
    path.write_text("".join(f"{q} 0 {d} {label}\n" for q, d, label in rows))


def test_blend_with_pairs_writes_only_the_pools_pairs_and_counts_those_no_file_labels(tmp_path):
    write_qrels(tmp_path / "a.qrels", [("q1", "d1", 2), ("q1", "d2", 0), ("q2", "d3", 1), ("q2", "d4", 3)])
    write_qrels(tmp_path / "b.qrels", [("q1", "d1", 2), ("q1", "d2", 1), ("q2", "d3", 1)])
    (tmp_path / "pool.tsv").write_text("q1\td2\nq2\td3\nq2\td9\nq3\td1\n")  # d9 and q3/d1: in no file
    r = cli("blend", "a.qrels", "b.qrels", "--method", "max", "--pairs", "pool.tsv", "--out", "out.qrels", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert read_qrels(tmp_path / "out.qrels") == {"q1": {"d2": 1}, "q2": {"d3": 1}}
    assert "--pairs pool.tsv: 2 of its 4 pairs have labels in the inputs; 2 have none in any input" in r.stderr
    assert "wrote out.qrels (2 pairs)" in r.stderr


def test_a_pool_file_in_another_format_is_read_like_judge_reads_pairs(tmp_path):
    write_qrels(tmp_path / "a.qrels", [("q1", "d1", 2), ("q1", "d2", 0)])
    (tmp_path / "pool.run").write_text("q1 Q0 d2 1 9.0 r\nq1 Q0 d7 2 8.0 r\n")  # a TREC run as the pool
    r = cli("blend", "a.qrels", "--pairs", "pool.run", "--out", "out.qrels", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert read_qrels(tmp_path / "out.qrels") == {"q1": {"d2": 0}}
    assert "1 have none in any input" in r.stderr


def test_a_missing_pairs_file_is_one_error_line_before_anything_is_written(tmp_path):
    write_qrels(tmp_path / "a.qrels", [("q1", "d1", 2)])
    r = cli("blend", "a.qrels", "--pairs", "nope.tsv", "--out", "out.qrels", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith("error:") and "nope.tsv" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out.qrels").exists()


def test_only_pairs_keeps_table_order_and_counts_the_pairs_the_table_lacks():
    table = BallotTable.from_votes([(("q1", "d1"), {"a": 1}), (("q1", "d2"), {"a": 2}), (("q2", "d1"), {"a": 0})])
    kept, missing = table.only_pairs([("q2", "d1"), ("q1", "d1"), ("q9", "d9")])
    assert kept.pairs == (("q1", "d1"), ("q2", "d1")) and kept.labels[:, 0].tolist() == [1, 0]
    assert missing == 1


def test_published_labels_calibrate_then_blend_to_the_pool_on_dl19(tmp_path):
    """The README's label-file path on real published labels of 15 DL19 queries."""
    for name in ("j1", "j2", "j3"):
        (tmp_path / f"{name}.qrels").write_text((SLICE / f"{name}.qrels").read_text())
    human = read_qrels(SLICE / "qrels.txt")
    seed = sorted((q, d, label) for q, docs in human.items() for d, label in docs.items())[::3]  # every third pair
    write_qrels(tmp_path / "human.qrels", seed)
    pool = sorted(qrels_pairs(SLICE / "qrels.txt"))[1::2]  # half the pairs: the pool to judge
    (tmp_path / "pool.tsv").write_text("".join(f"{q}\t{d}\n" for q, d in pool) + "q0\td0\n")
    r = cli("calibrate", "--gold", "human.qrels", "--labels", "j1.qrels", "--labels", "j2.qrels", "--labels", "j3.qrels",
            "--out", "panel.toml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    panel = load_blend_panel(tmp_path / "panel.toml")
    assert set(panel.judges) <= {"j1", "j2", "j3"}
    r = cli("blend", "j1.qrels", "j2.qrels", "j3.qrels", "--panel", "panel.toml", "--pairs", "pool.tsv",
            "--out", "llm.qrels", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    written = qrels_pairs(tmp_path / "llm.qrels")
    assert written == set(pool)  # every pool pair the files label, and nothing else
    assert f"{len(pool)} of its {len(pool) + 1} pairs have labels in the inputs; 1 have none" in r.stderr
    assert {tuple(p) for p in read_pairs(tmp_path / "pool.tsv")} - written == {("q0", "d0")}
