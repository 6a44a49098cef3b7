"""The cold start of `make demo`: what it installs, what overlaps, and a demo that needs no torch.

docs/setup.md has the measured times; these tests pin the layout that makes them (the build of
llama.cpp side by side with the other installs, no extra the demo does not run, 12 short pairs).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from judgeblender.panels.demo import demo_files, demo_pairs
from judgeblender.pairs import read_corpus, read_qrels

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


def _dry_run(tmp_path: Path) -> list[str]:
    """`make -n demo` as a fresh machine would run it: no venv, an empty home (no cached wheel)."""
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    out = subprocess.run(["make", "-n", "demo", f"VENV={tmp_path}/venv"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return [line for line in out.splitlines() if " pip install " in line]


def test_make_demo_installs_no_extra_the_demo_does_not_run(tmp_path):
    installs = _dry_run(tmp_path)
    extras = {e for line in installs for spec in re.findall(r'"\.\[([^\]]*)\]"', line) for e in spec.split(",")}
    assert extras == {"models"}, installs
    assert any(shlex.split(line)[-1] == "llama-cpp-python==0.3.36" for line in installs), installs
    named = [t for line in installs for t in shlex.split(line) if not t.startswith(("-", "/", str(tmp_path)))]
    for name in ("torch", "sentence-transformers", "embed", "transformers", "ray", "pytest"):
        assert not any(name in t for t in named), (name, named)


def test_make_demo_does_not_byte_compile_what_it_installs(tmp_path):
    installs = [line for line in _dry_run(tmp_path) if "--upgrade pip" not in line]
    assert installs and all("--no-compile" in line for line in installs), installs


FAKE_PYTHON = r'''#!/bin/bash
# Stands in for python3 and the venv's python: logs each call's start and end (ms) and sleeps.
log=LOG
if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; cp "$0" "$3/bin/judgeblender"; fi
echo "start $(date +%s%3N) $*" >> "$log"
case "$*" in *"pip wheel"*|*"pip install"*) sleep 1.5 ;; esac
echo "end $(date +%s%3N) $*" >> "$log"
'''


def _interval(log: list[str], needle: str) -> tuple[int, int]:
    """When the call whose arguments contain `needle` started and ended (ms)."""
    def at(kind: str) -> int:
        return next(int(t) for k, t, args in (line.split(" ", 2) for line in log) if k == kind and needle in args)
    return at("start"), at("end")


def test_llama_cpp_builds_while_the_rest_installs(tmp_path):
    """`make demo` (no -j given) builds the llama.cpp wheel and installs the demo's other
    packages at the same time, then installs the wheel: the real Makefile, run by make, with a
    stand-in interpreter that records when each step runs."""
    log = tmp_path / "calls.log"
    fake = tmp_path / "python3"
    fake.write_text(FAKE_PYTHON.replace("LOG", str(log)))
    fake.chmod(0o755)
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    env.pop("MAKEFLAGS", None)
    subprocess.run(["make", "demo", f"PYTHON={fake}", f"VENV={tmp_path}/venv"], cwd=ROOT, env=env,
                   capture_output=True, text=True, timeout=120, check=True)
    calls = log.read_text().splitlines()
    build = _interval(calls, "pip wheel")
    rest = _interval(calls, 'install --quiet --no-compile -e .[models]')
    wheel = _interval(calls, "install --quiet --no-compile --find-links")
    demo = _interval(calls, "demo")  # bin/judgeblender demo: the only call whose arguments say demo
    assert rest[0] < build[1] and build[0] < rest[1], calls  # the two overlap
    assert wheel[0] >= max(build[1], rest[1]) and demo[0] >= wheel[1], calls


def test_demo_pairs_are_the_three_shortest_of_each_label():
    paths = demo_files()
    gold = read_qrels(paths["qrels.txt"], allowed=range(4))
    corpus = read_corpus(paths["passages.jsonl"])
    pairs = demo_pairs(gold, corpus)
    label = {(q, d): l for q, docs in gold.items() for d, l in docs.items()}
    assert sorted(label[p.qid, p.docid] for p in pairs) == [0] * 3 + [1] * 3 + [2] * 3 + [3] * 3
    chosen = {(p.qid, p.docid) for p in pairs}
    for lab in range(4):
        longest_chosen = max(len(corpus[d]) for (q, d) in chosen if label[q, d] == lab)
        shortest_left = min(len(corpus[d]) for (q, d), l in label.items() if l == lab and (q, d) not in chosen)
        assert longest_chosen <= shortest_left, lab


@pytest.mark.model
def test_the_demo_runs_where_torch_cannot_be_imported(tmp_path):
    """`make demo` installs no torch: the demo must not import it (a torch that fails to import
    stands in for a venv without it)."""
    block = tmp_path / "block"
    for name in ("torch", "sentence_transformers"):
        (block / name).mkdir(parents=True)
        (block / name / "__init__.py").write_text(f"raise ImportError('{name} is not installed')\n")
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = f"{block}{os.pathsep}{SRC}"
    proc = subprocess.run([sys.executable, "-m", "judgeblender", "demo", "--no-progress",
                           "--store", str(tmp_path / "demo.sqlite")],
                          env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Offline jury on 12 TREC DL 2019 pairs (3 per NIST label)" in proc.stdout, proc.stdout
    assert "calibrated: " in proc.stdout and "note" not in proc.stderr, proc.stdout + proc.stderr


def test_the_demos_auc_is_scikit_learns_roc_auc():
    """The demo computes AUC itself (no scikit-learn import in a cold start): the same figure,
    ties and unscored pairs included."""
    import math
    import random

    from sklearn.metrics import roc_auc_score

    from judgeblender.cli.demo import _auc

    rng = random.Random(1)
    for _ in range(300):
        human = [rng.randint(0, 3) for _ in range(rng.randint(2, 20))]
        scores = [rng.choice([None, float("nan"), float(rng.randint(0, 3)), rng.random()]) for _ in human]
        kept = [(h >= 2, s) for h, s in zip(human, scores) if s is not None and math.isfinite(s)]
        if len({y for y, _ in kept}) < 2:
            assert math.isnan(_auc(human, scores))
        else:
            assert _auc(human, scores) == pytest.approx(roc_auc_score([y for y, _ in kept], [s for _, s in kept]))
