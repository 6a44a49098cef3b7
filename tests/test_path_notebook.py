"""The notebook gets the CLI's care: `jb.judge` shows the CLI's progress bar, hides llama.cpp's
log lines, and the docs name only blend methods that exist.

`jb.judge` runs in a real interpreter (a subprocess) so that what reaches stderr is what a
terminal, a log file or a notebook cell would get.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from judgeblender.blend import METHODS
from judgeblender.progress import default_enabled

ROOT = Path(__file__).resolve().parents[1]

JUDGE_SCRIPT = """
import json, sys
import pandas as pd
import judgeblender as jb
df = pd.DataFrame({"qid": ["q1", "q1", "q2"], "docid": ["d1", "d2", "d3"], "query": ["a", "a", "b"],
                   "passage": ["goldfish eat flakes", "the eiffel tower", "paris"]})
progress = {"on": True, "off": False, "default": None}[sys.argv[2]]
run = jb.judge(df, judges=[sys.argv[1]], mode="logprobs", progress=progress)
print(json.dumps(run.labels.label.astype(float).tolist()))
"""


def run_judge(tmp_path: Path, judge: str, progress: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", JUDGE_SCRIPT, judge, progress], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=600)


@pytest.fixture
def scripted(tmp_path) -> str:
    (tmp_path / "A.json").write_text(json.dumps({"name": "A", "rules": [
        {"contains": "", "probs": {"2": 0.9, "1": 0.1}}]}))
    return f"scripted:{tmp_path / 'A.json'}"


def test_jb_judge_shows_the_clis_progress_bar_when_asked(tmp_path, scripted):
    r = run_judge(tmp_path, scripted, "on")
    assert r.returncode == 0, r.stderr
    assert "100%" in r.stderr and "invalid: 0" in r.stderr  # the CLI's columns: share done, invalid answers
    assert json.loads(r.stdout) == [2, 2, 2]


def test_jb_judge_is_silent_in_a_log_unless_asked_and_when_told(tmp_path, scripted):
    for progress in ("default", "off"):  # stderr is a pipe here: not a terminal, not a notebook
        r = run_judge(tmp_path, scripted, progress)
        assert r.returncode == 0, r.stderr
        assert r.stderr == ""


def test_the_progress_bar_defaults_on_in_a_terminal_and_in_a_notebook_only():
    assert default_enabled(Console(file=io.StringIO(), force_jupyter=True))
    assert default_enabled(Console(file=io.StringIO(), force_terminal=True, force_jupyter=False))
    assert not default_enabled(Console(file=io.StringIO(), force_jupyter=False))


def test_the_library_shows_progress_without_importing_the_cli(tmp_path, scripted):
    code = (JUDGE_SCRIPT.replace("print(json.dumps", "assert not [m for m in sys.modules if m.startswith('judgeblender.cli')]"
                                 "\nprint(json.dumps"))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-c", code, scripted, "on"], capture_output=True, text=True, cwd=tmp_path,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr


@pytest.mark.model
def test_jb_judge_with_the_embedded_models_prints_no_llama_cpp_log_line(tmp_path):
    # Gemma's context logs a warning ("llama_kv_cache_iswa: using full-size SWA cache") that
    # llama-cpp-python printed even with verbose=False: its log levels predate ggml's DEBUG.
    for model in ("llamacpp:gemma-270m", "llamacpp:default"):
        r = run_judge(tmp_path, model, "off")
        assert r.returncode == 0, r.stderr
        assert r.stderr == "", model  # no llama_* / ggml_* line: only what judgeblender says
        assert len(json.loads(r.stdout)) == 3


def _doc_method_names() -> dict[str, set[str]]:
    """Every blend method name the docs use: in code (`.blend("x"`, `blend_labels(..., "x"`,
    `--method x`) and in docs/api.md's list of methods."""
    found: dict[str, set[str]] = {}
    for doc in ("docs/api.md", "README.md"):
        text = (ROOT / doc).read_text(encoding="utf-8")
        names = set(re.findall(r"\.blend\(\s*\"([^\"]+)\"", text))
        names |= set(re.findall(r"blend_labels\([^()\n]*?,\s*\"([^\"]+)\"", text))
        names |= set(re.findall(r"--method\s+([\w-]+)", text))
        found[doc] = names
    api = (ROOT / "docs/api.md").read_text(encoding="utf-8")
    listed = api[api.index("`judgeblender blend --methods`"):]
    listed = listed[:listed.index("\n\n")]
    found["docs/api.md list"] = set(re.findall(r"`([a-z][\w-]*)`", listed)) - {"judgeblender"}
    return found


def test_every_blend_method_the_docs_name_exists_and_the_list_is_complete():
    found = _doc_method_names()
    for where, names in found.items():
        assert names, f"{where}: no method name found: the parser no longer matches the docs"
        unknown = names - set(METHODS)
        assert not unknown, f"{where} names blend methods that do not exist: {sorted(unknown)}"
    assert found["docs/api.md list"] == set(METHODS)


def test_readme_and_docs_judge_in_the_same_mode_as_the_commands_shown():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    python_modes = set(re.findall(r"jb\.judge\([^\n]*mode=\"(\w+)\"", readme))
    cli_modes = set(re.findall(r"judgeblender judge [^\n]*--mode (\w+)", readme))
    assert python_modes == cli_modes == {"logprobs"}
