"""docs/api.md runs: every `python` block, in order, in one namespace, in a fresh folder."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def test_every_example_in_docs_api_md_runs(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 8
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "docs_api"}
    for n, block in enumerate(blocks, start=1):
        exec(compile(block, f"docs/api.md block {n}", "exec"), namespace)
    assert "did you mean 'concurrency'?" in capsys.readouterr().out
