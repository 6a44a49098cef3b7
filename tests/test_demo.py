"""`judgeblender demo`: the offline jury, its blend, and the blend calibrated on the bundled seed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from judgeblender.blend import BallotTable, Vote
from judgeblender.panels.demo import DEMO_JURY, SEED_FILE, demo_files, demo_pairs
from judgeblender.panels.calibrate import calibrate
from judgeblender.pairs import read_corpus, read_qrels

SRC = Path(__file__).resolve().parents[1] / "src"
NUMBER = r"(-?\d\.\d\d|n/a)"


def test_bundled_seed_is_other_pairs_with_every_members_answers():
    seed = json.loads(SEED_FILE().read_text())
    gold = {(q, d): label for q, d, label in seed["gold"]}
    demo_gold = read_qrels(demo_files()["qrels.txt"])
    demo = {(p.qid, p.docid) for p in demo_pairs(demo_gold, read_corpus(demo_files()["passages.jsonl"]))}
    assert len(demo) == 12 and not demo & set(gold)  # the demo is not judged on its calibration set
    assert len(gold) >= 40 and len({q for q, _ in gold}) >= 4
    members = [f"{s.model}/umbrela/{s.mode}" if s.model.startswith("llamacpp") else s.model for s in DEMO_JURY()]
    assert sorted(seed["members"]) == sorted(members)
    rows: dict = {}
    for jid, member in seed["members"].items():
        assert len(member["fingerprint"]) == 64
        assert {(q, d) for q, d, *_ in member["judgments"]} == set(gold)
        for q, d, label, probs, _score in member["judgments"]:
            rows.setdefault((q, d), {})[jid] = Vote(label, tuple(probs) if probs else None)
    cal = calibrate(BallotTable.from_votes(list(rows.items()), members),
                    {q: {d: l for (q2, d), l in gold.items() if q2 == q} for q, _ in gold})
    assert cal.chosen is not None  # the stored answers calibrate without a model call


@pytest.mark.model
def test_demo_shows_members_blend_and_calibrated_blend(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(SRC)
    proc = subprocess.run([sys.executable, "-m", "judgeblender", "demo", "--no-progress",
                           "--store", str(tmp_path / "demo.sqlite")],
                          env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "…" not in out
    table = out.split("\n")
    for name in ("Qwen2.5-0.5B", "Gemma-3-270M", "blend: majority", "calibrated: "):
        row = next((line for line in table if name in line), None)
        assert row is not None, f"no row for {name}:\n{out}"
        assert re.search(rf"\s\d+/\d+/\d+/\d+\s.*{NUMBER}\s.*{NUMBER}\s.*{NUMBER}\s.*{NUMBER}", row), row
    assert max(map(len, table)) <= 80, out
    assert re.search(r"Calibration on \d+ seed pairs .* chose ", out)
    assert "note" not in proc.stderr  # the stored seed answers match the models' fingerprints


def test_piped_tables_are_not_cut(tmp_path):
    """Piped output has no terminal width: the consoles take a wide one rather than rich's 80,
    so a wide table keeps its headers ("alpha", not "alp…")."""
    gold = tmp_path / "gold.qrels"
    gold.write_text("1 0 a 0\n1 0 b 2\n2 0 c 3\n2 0 d 1\n")
    pred = tmp_path / "a-long-prediction-file-name.qrels"
    pred.write_text("1 0 a 0\n1 0 b 1\n2 0 c 3\n2 0 d 1\n")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(SRC)
    out = subprocess.run([sys.executable, "-m", "judgeblender", "agree", str(pred), "--gold", str(gold)],
                         env=env, capture_output=True, text=True, timeout=120).stdout
    assert "alpha" in out and "wk quad" in out and "…" not in out, out


def test_agree_tables_fit_80_columns_without_cutting_a_figure(tmp_path):
    """On an 80-column terminal (COLUMNS=80) the agreement table keeps every header and figure
    whole ("alpha", "100.0%", not "alp…", "100.…") and no line is wider than 80."""
    gold = tmp_path / "gold.qrels"
    gold.write_text("1 0 a 0\n1 0 b 2\n2 0 c 3\n2 0 d 1\n")
    pred = tmp_path / "a-long-prediction-file-name.qrels"
    pred.write_text("1 0 a 0\n1 0 b 1\n2 0 c 3\n2 0 d 1\n")
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-m", "judgeblender", "agree", str(pred), "--gold", str(gold)],
                         env=env, capture_output=True, text=True, timeout=120).stdout
    # the tables' lines: not the titles (a file path) and captions, which wrap as the terminal does
    table = [line for line in out.splitlines() if not line.startswith(("Agreement with", "Only pairs", "[lo, hi]"))]
    assert "alpha" in out and "wk quad" in out and "100.0%" in out and "…" not in out, out
    assert max(map(len, table)) <= 80, out
