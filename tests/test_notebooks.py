"""Notebooks are first-class: docs/examples/dl19.ipynb runs end to end, and judging in a notebook
shows a progress widget, not lines on stderr.

Both run in a real Jupyter kernel (ipykernel) driven by nbclient, as a notebook server would run
them, with the environment of the tests (the kernel imports this checkout's judgeblender). What a
kernel does differently from a script is the point: it runs an event loop in its main thread
(asyncio.run refused to start there, so `jb.judge` failed in every notebook) and it can show
widgets. The [notebook] extra brings nbclient, ipykernel and ipywidgets; `make test` installs it.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest

import judgeblender as jb
from judgeblender import asyncrun

from conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "examples" / "dl19.ipynb"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def execute(nb, folder: Path, monkeypatch, **env: str):
    """Run every cell of `nb` in a fresh kernel whose working folder is `folder`."""
    nbclient = pytest.importorskip("nbclient")
    src = Path(jb.__file__).resolve().parents[1]  # the judgeblender under test, in the kernel too
    monkeypatch.setenv("PYTHONPATH", str(src) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(folder)}}).execute()
    return nb


def streams(cell, name: str) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == name)


# What a run of the notebook may print differently from its committed outputs, and nothing else:
# the report's size in bytes (its HTML embeds figures, drawn by whichever matplotlib is installed).
# Times and paths would go here too; the notebook prints none (file names only).
IGNORED = [re.compile(r"\(\d[\d,]* bytes\)")]


def text_outputs(nb) -> list[list[tuple[str, str]]]:
    """Every text output of every code cell, a list per cell: stream text by stream, and each
    text/* representation of a result or display, with the IGNORED fields blanked."""
    def blank(text: str) -> str:
        for pattern in IGNORED:
            text = pattern.sub("<ignored>", text)
        return text

    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        found = []
        for out in cell.outputs:
            if out.output_type == "stream":
                found.append((out.name, blank(out.text)))
            elif out.output_type == "error":
                found.append(("error", "\n".join(out.traceback)))
            else:
                found += [(mime, blank(value if isinstance(value, str) else "".join(value)))
                          for mime, value in sorted(out.get("data", {}).items()) if mime.startswith("text/")]
        cells.append(found)
    return cells


def test_the_dl19_notebook_runs_end_to_end(tmp_path, monkeypatch):
    """...with the data `jb.load_dataset` finds through JUDGEBLENDER_DATA (not beside the
    repository), and prints what its committed outputs show: run `make notebook` when that
    changes on purpose."""
    if not (SHARED_DATA / "trec-dl-2019").is_dir():
        pytest.skip("shared data not found")
    nbformat = pytest.importorskip("nbformat")
    committed = nbformat.read(NOTEBOOK, as_version=4)
    nb = execute(nbformat.read(NOTEBOOK, as_version=4), NOTEBOOK.parent, monkeypatch, JUDGEBLENDER_OUT=str(tmp_path),
                 JUDGEBLENDER_DATA=str(SHARED_DATA), JUDGEBLENDER_CACHE=str(tmp_path / "cache"))
    assert not (tmp_path / "cache" / "data").exists()  # nothing downloaded: the copy was used
    expected, got = text_outputs(committed), text_outputs(nb)
    assert all(expected), "the notebook is committed without outputs: run `make notebook`"
    for number, (want, have) in enumerate(zip(expected, got, strict=True), start=1):
        assert have == want, f"code cell {number} prints other than its committed outputs (`make notebook`)"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not any(o.output_type == "error" for o in c.outputs) for c in code)
    text = "".join(streams(c, "stdout") for c in code)
    assert "262 holes" in text and "seed: 10 of 43 queries" in text and "kappa 0.167 on 9260 pairs" in text
    report = tmp_path / "dl19-report.html"
    assert report.is_file() and "llama3-70b" in report.read_text()
    design = json.loads((tmp_path / "seed.design.json").read_text())
    assert design["design"] == "queries" and design["n"] == 10
    # what the notebook shows is what a reader would get: its tables, not tracebacks or warnings
    assert not any(streams(c, "stderr").strip() for c in code), [streams(c, "stderr") for c in code]


JUDGE_CELL = """
run = jb.judge(df, judges=["scripted:A.json"], mode="logprobs"{extra})
print(run.labels.label.tolist())
"""


def judging_notebook(folder: Path, pairs: int, extra: str = ""):
    nbformat = pytest.importorskip("nbformat")
    (folder / "A.json").write_text(json.dumps({"name": "A", "rules": [
        {"contains": "", "probs": {"2": 0.9, "1": 0.1}}]}))
    setup = ("import pandas as pd\nimport judgeblender as jb\n"
             f"df = pd.DataFrame({{'qid': ['q1'] * {pairs}, 'docid': [f'd{{i}}' for i in range({pairs})], "
             f"'query': ['a query'] * {pairs}, 'passage': [f'passage {{i}}' for i in range({pairs})]}})")
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(setup),
                                           nbformat.v4.new_code_cell(JUDGE_CELL.format(extra=extra))])


def test_judging_in_a_notebook_shows_a_widget_and_no_lines_on_stderr(tmp_path, monkeypatch):
    nb = execute(judging_notebook(tmp_path, 40), tmp_path, monkeypatch)
    cell = nb.cells[1]
    assert streams(cell, "stdout").strip() == str([2] * 40)
    assert streams(cell, "stderr") == ""  # no bar redrawn as text, no line per pair
    views = [o for o in cell.outputs if o.output_type == "display_data" and WIDGET_VIEW in o.data]
    assert len(views) == 1
    state = nb.metadata["widgets"][WIDGET_STATE]["state"]
    bars = [m["state"] for m in state.values() if m["model_name"] == "IntProgressModel"]
    texts = [m["state"]["value"] for m in state.values() if m["model_name"] == "HTMLModel"]
    assert [(b["value"], b["max"]) for b in bars] == [(40, 40)]  # one wave, finished
    assert any("40/40" in t and "100%" in t and "invalid: 0" in t for t in texts), texts
    assert views[0].data[WIDGET_VIEW]["model_id"] in state  # the widget shown is the one whose state this is


def test_without_progress_a_notebook_cell_shows_nothing_but_its_result(tmp_path, monkeypatch):
    nb = execute(judging_notebook(tmp_path, 3, extra=", progress=False"), tmp_path, monkeypatch)
    cell = nb.cells[1]
    assert [o.output_type for o in cell.outputs] == ["stream"]
    assert streams(cell, "stdout").strip() == "[2, 2, 2]"


def test_outside_a_kernel_the_bar_is_rich_s():
    from judgeblender.progress import RichReporter
    from judgeblender.progress_widget import in_kernel, widget_reporter

    assert not in_kernel() and widget_reporter() is None
    assert type(RichReporter(True)) is RichReporter and type(RichReporter(False)) is RichReporter


def test_judging_from_code_that_already_runs_an_event_loop(tmp_path):
    """What a kernel does to jb.judge, without the kernel: a loop runs in this thread."""
    (tmp_path / "A.json").write_text(json.dumps({"name": "A", "rules": [{"contains": "", "probs": {"3": 1.0}}]}))
    df = pd.DataFrame({"qid": ["q1", "q2"], "docid": ["d1", "d2"], "query": ["a", "b"], "passage": ["x", "y"]})

    async def in_a_loop():
        return jb.judge(df, judges=[f"scripted:{tmp_path / 'A.json'}"], mode="logprobs")

    assert asyncio.run(in_a_loop()).labels.label.tolist() == [3, 3]

    async def fails():
        raise LookupError("the work's own error")

    async def outer():
        with pytest.raises(LookupError, match="the work's own error"):
            asyncrun.run(fails())
        return asyncrun.run(asyncio.sleep(0, result="done"))

    assert asyncio.run(outer()) == "done"
