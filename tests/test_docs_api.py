"""docs/api.md runs: every `python` block, in order, in one namespace, in a fresh folder; the
example data (`jb.load_dataset`) from the shared data folder through JUDGEBLENDER_DATA, never
downloaded by the suite."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import SHARED_DATA

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def test_every_example_in_docs_api_md_runs(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 8
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JUDGEBLENDER_DATA", str(SHARED_DATA))
    namespace: dict = {"__name__": "docs_api"}
    data = [n for n, block in enumerate(blocks, start=1) if "load_dataset" in block]
    for n, block in enumerate(blocks, start=1):
        if n in data and not SHARED_DATA.is_dir():
            continue  # the example data is not here (and the suite downloads nothing)
        exec(compile(block, f"docs/api.md block {n}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "did you mean 'concurrency'?" in out
    assert data and (not SHARED_DATA.is_dir() or "43 queries, 37 runs, ['fourprompts-flant5-large'" in out), out[-500:]
