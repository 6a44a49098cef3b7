"""docs/pyterrier.md runs: every `python` block, in order, in one namespace, in a fresh folder,
its data from `jb.load_dataset("dl19")` pointed at the shared TREC DL 2019 collection by
JUDGEBLENDER_DATA (passages, queries, NIST qrels, runs, LLM labels)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import SHARED_DATA

DOC = Path(__file__).resolve().parents[1] / "docs" / "pyterrier.md"


def test_every_example_in_docs_pyterrier_md_runs(tmp_path, monkeypatch, capsys):
    if not (SHARED_DATA / "trec-dl-2019").is_dir():
        pytest.skip("shared data not found")
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 5
    monkeypatch.setenv("JUDGEBLENDER_DATA", str(SHARED_DATA))
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "docs_pyterrier"}
    for n, block in enumerate(blocks, start=1):
        exec(compile(block, f"docs/pyterrier.md block {n}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "holes in the top 10 pool" in out and "jb.experiment took" in out
