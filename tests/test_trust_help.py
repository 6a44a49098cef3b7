"""Every `--help` page renders, with the bracketed text its source gives.

Help texts say `[default: OUT.details.jsonl]`, `NAME=MODEL[/PROMPT[/MODE]]` or `[ray]`; read as
rich markup, the first two vanish and the last crashed `calibrate --help`. The commands are
found by walking the typer app (a new command is covered without editing this file), and each
page is rendered by the real `judgeblender` command in a subprocess at 80 and 200 columns.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import typer.main

from judgeblender.cli import build_app

WIDTHS = (80, 200)
BRACKETED = re.compile(r"\[[^\[\]\n]*(?:\[[^\[\]\n]*\][^\[\]\n]*)*\]")  # one level of nesting: [/PROMPT[/MODE]]


def _commands(cmd, path=()):
    """(path, click command) of the app and every group and command under it."""
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(typer.main.get_command(build_app())))


def _source_texts(cmd) -> list[str]:
    """The help strings the source gives a command: its own and each parameter's."""
    texts = [cmd.help or "", *(getattr(p, "help", None) or "" for p in cmd.params)]
    texts += [sub.help or "" for sub in getattr(cmd, "commands", {}).values()]
    return [t for t in texts if t]


def _squeeze(text: str) -> str:
    """Help as one string without layout: no panel borders, no whitespace (wrapping moves it)."""
    return re.sub(r"[\s│╭╮╰╯─]+", "", text)


def _help(path: tuple[str, ...], columns: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "dumb", "NO_COLOR": "1"}
    env.pop("FORCE_COLOR", None)
    return subprocess.run([sys.executable, "-m", "judgeblender", *path, "--help"], capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.fixture(scope="module")
def pages() -> dict[tuple[tuple[str, ...], int], subprocess.CompletedProcess]:
    keys = [(path, width) for path, _ in COMMANDS for width in WIDTHS]
    with ThreadPoolExecutor(4) as pool:
        return dict(zip(keys, pool.map(lambda key: _help(*key), keys)))


def test_the_walk_finds_every_command_and_subcommand():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"judge", "calibrate", "store", "store check", "store merge", "prompts show"} <= names
    assert len(names) > 20


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=[" ".join(p) or "judgeblender" for p, _ in COMMANDS])
def test_every_help_page_renders_with_its_bracketed_text(path, width, pages):
    done = pages[(path, width)]
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    shown = _squeeze(done.stdout)
    cmd = dict(COMMANDS)[path]
    for text in _source_texts(cmd):
        for bracketed in BRACKETED.findall(text):
            assert _squeeze(bracketed) in shown, f"{bracketed!r} is missing from `{' '.join(path)} --help`"


def test_calibrates_judge_model_form_is_shown_whole():
    done = _help(("calibrate",), 80)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "NAME=MODEL[/PROMPT[/MODE]]" in _squeeze(done.stdout)


def test_typers_own_default_and_required_marks_are_kept():
    done = _help(("judge",), 200)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[default: OUT.details.jsonl]" in done.stdout  # from the source's help text
    assert "[required]" in done.stdout  # typer's own
    assert "[default: llamacpp:default]" in done.stdout
    assert max(map(len, done.stdout.splitlines())) > 100  # COLUMNS=200 is used, not click's 80


def test_help_texts_with_brackets_exist_to_be_checked():
    """The check above is not vacuous: the CLI's help texts hold dozens of bracketed phrases."""
    found = [b for _, cmd in COMMANDS for t in _source_texts(cmd) for b in BRACKETED.findall(t)]
    assert len(found) > 20 and any("[/PROMPT[/MODE]]" in b for b in found)
