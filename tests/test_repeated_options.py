"""Issue 38 part 6: a repeated option never drops a value silently.

The framework keeps the last value of an option given twice and drops the others without a
word: `judge -j A -j B` judged with B alone and exited 0. Every command is now built as a
`cli.checks.OnceCommand`, so an option of one value (a flag included) given twice is one
`error:` line naming it, exit 2, before the command runs; options declared as a list keep every
value. The sweep below is read from the command tree itself: a new option or command is covered
without being listed here.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from judgeblender.cli.checks import single_valued
from test_seams_options import COMMANDS, invoke, one_error_line


def given(param) -> list[str]:
    """The option once, by its shortest name, with a value for each of its nargs (a flag: none).
    The values need not be valid: a repeat is refused before any value is read."""
    return [min(param.opts, key=len), *(["1"] * (0 if param.is_flag else max(param.nargs, 1)))]


SWEEP = [(words, param) for words, cmd in COMMANDS.items() for param in single_valued(cmd.params)]
MANY = [(words, param) for words, cmd in COMMANDS.items() for param in cmd.params
        if getattr(param, "multiple", False)]


def test_the_sweep_reads_the_real_command_tree():
    """Not vacuous: every command with options is swept, flags and options of several numbers too."""
    assert len(SWEEP) > 150
    assert {words for words, _ in SWEEP} == {words for words, cmd in COMMANDS.items()
                                              if any(p.param_type_name == "option" for p in cmd.params)}
    assert any(p.is_flag for _, p in SWEEP) and any(p.nargs > 1 for _, p in SWEEP)
    assert (("judge",), "model") in {(w, p.name) for w, p in SWEEP}
    assert {("grade",), ("cascade",), ("experiment",)} <= {w for w, _ in MANY}


@pytest.mark.parametrize("words,param", SWEEP, ids=[" ".join(w) + " " + p.opts[0] for w, p in SWEEP])
def test_any_single_valued_option_given_twice_is_one_error_line(words, param, capsys, monkeypatch):
    argv = [*words, *given(param), *given(param)]
    line = one_error_line(*invoke(argv, capsys, monkeypatch)[::2])
    name = next((o for o in param.opts if o.startswith("--")), param.opts[0])
    assert line.startswith(f"error: {name}: expected it at most once"), line
    assert line.endswith("got it 2 times"), line


def test_both_forms_of_a_flag_and_a_same_flag_twice_are_refused(capsys, monkeypatch):
    """A flag counts as a value: `--redact --redact` is refused like `--progress --no-progress`."""
    for argv, name in ((["judge", "--redact", "--redact"], "--redact"),
                       (["judge", "--progress", "--no-progress"], "--progress"),
                       (["judge", "--no-progress", "--no-progress", "--no-progress"], "--progress")):
        line = one_error_line(*invoke(argv, capsys, monkeypatch)[::2])
        assert line.startswith(f"error: {name}: expected it at most once (a flag"), line


def test_a_long_and_a_short_name_and_an_equals_sign_are_one_option(capsys, monkeypatch):
    line = one_error_line(*invoke(["judge", "-j", "a", "--judge=b", "--seed", "1"], capsys, monkeypatch)[::2])
    assert line.startswith("error: --judge: "), line
    line = one_error_line(*invoke(["cascade", "--band", "0.1", "0.2", "--band", "0.3", "0.4"], capsys,
                                  monkeypatch)[::2])
    assert line.startswith("error: --band: ") and "2 times" in line, line


@pytest.mark.parametrize("words,param", MANY, ids=[" ".join(w) + " " + p.opts[0] for w, p in MANY])
def test_an_option_declared_as_a_list_takes_every_value(words, param, capsys, monkeypatch):
    """Repeated, it is not refused: whatever the command says next is about something else."""
    code, _, err = invoke([*words, *given(param), *given(param)], capsys, monkeypatch)
    assert "at most once" not in err, err


def test_help_given_twice_is_still_help(capsys, monkeypatch):
    code, out, err = invoke(["judge", "--help", "--help"], capsys, monkeypatch)
    assert code == 0 and "Usage:" in out and not err


def test_the_real_command_refuses_two_judges_before_reading_anything(tmp_path):
    """`judgeblender judge -j A -j B` in a subprocess: refused before any input is read (the
    inputs named do not exist) and before any store is made."""
    proc = subprocess.run([sys.executable, "-m", "judgeblender", "judge", "-q", "q.tsv", "-c", "c.jsonl", "-p",
                           "p.tsv", "-o", "out.qrels", "-j", "llamacpp:default", "-j", "openai:gpt-4o-mini"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        "error: --judge: expected it at most once (an option of one value: the framework would keep the last "
        "and silently drop the others), got it 2 times"], proc.stderr
    assert list(tmp_path.iterdir()) == []
