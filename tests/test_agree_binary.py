"""Binary relevance tables and Krippendorff's alpha at a chosen level, in the library and in `agree`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from judgeblender.evaluate.agreement import agreement
from judgeblender.evaluate.binary import alpha, binary_report

SRC = str(Path(__file__).resolve().parents[1] / "src")


def test_binary_confusion_and_per_level_accuracy_at_threshold_two():
    g = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    p = np.array([0, 2, 1, 1, 1, 2, 3, 0])
    b = binary_report(g, p, 2)
    assert b.confusion == [[3, 1], [2, 2]]
    assert b.per_level_accuracy == [0.5, 1.0, 0.5, 0.5]
    assert b.accuracy == 5 / 8 and b.precision == 2 / 3 and b.recall == 0.5


def test_threshold_one_moves_gold_ones_to_relevant():
    g = np.array([0, 1, 1, 3])
    p = np.array([0, 0, 2, 3])
    assert binary_report(g, p, 1).confusion == [[1, 0], [1, 2]]


def test_binary_kappa_at_threshold_two_equals_agrees_existing_kappa_binary():
    rng = np.random.default_rng(0)
    g, p = rng.integers(0, 4, 200), rng.integers(0, 4, 200)
    qrels = lambda a: {"q": {f"d{i}": int(x) for i, x in enumerate(a)}}  # noqa: E731
    assert binary_report(g, p, 2).kappa == pytest.approx(agreement(qrels(g), qrels(p), "x").kappa_binary)


def test_alpha_ordinal_equals_agrees_and_nominal_differs():
    rng = np.random.default_rng(1)
    g = rng.integers(0, 4, 300)
    p = np.clip(g + rng.integers(-1, 2, 300), 0, 3)
    qrels = lambda a: {"q": {f"d{i}": int(x) for i, x in enumerate(a)}}  # noqa: E731
    assert alpha(g, p, "ordinal") == pytest.approx(agreement(qrels(g), qrels(p), "x").alpha_ordinal)
    assert alpha(g, p, "nominal") < alpha(g, p, "interval")


def test_agree_cli_reports_the_binary_table_and_alpha_level_in_json(tmp_path):
    gold = tmp_path / "gold.qrels"
    gold.write_text("q 0 a 0\nq 0 b 1\nq 0 c 2\nq 0 d 3\n")
    pred = tmp_path / "j.qrels"
    pred.write_text("q 0 a 0\nq 0 b 2\nq 0 c 2\nq 0 d 1\n")
    r = subprocess.run([sys.executable, "-m", "judgeblender", "agree", "--gold", str(gold), str(pred), "--json",
                        "--binary-threshold", "2", "--alpha-level", "nominal"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": SRC}, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["binary"]["confusion"] == [[1, 1], [1, 1]]
    assert out["binary"]["per_level_accuracy"] == [1.0, 0.0, 1.0, 0.0]
    assert out["alpha"]["level"] == "nominal"


def test_agree_cli_refuses_a_threshold_outside_one_to_three(tmp_path):
    gold = tmp_path / "gold.qrels"
    gold.write_text("q 0 a 0\n")
    r = subprocess.run([sys.executable, "-m", "judgeblender", "agree", "--gold", str(gold), str(gold),
                        "--binary-threshold", "5"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": SRC}, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "--binary-threshold" in r.stderr
