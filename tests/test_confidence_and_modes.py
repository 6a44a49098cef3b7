"""One confidence level everywhere, shown with every interval; outputs made with the user's umask.

`estimate` defaulted to 90% intervals while `report`, `agree` and `correlate` defaulted to
95% (the same inputs gave "46 of 666 pairs ordered" in one and "37" in the other), and the
library differed the same way. Every output went through fileio.atomic_writer, whose
tempfile.mkstemp made it 0600 whatever the umask.
"""

from __future__ import annotations

import inspect
import json
import os
import stat
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest
import typer

from judgeblender import api
from judgeblender.cli import build_app
from judgeblender.evaluate.intervals import CONFIDENCE
from judgeblender.fileio import atomic_write_text
from judgeblender.report import ReportInputs
from test_seed_overlap import files  # noqa: F401  (a fixture: runs, LLM labels, human labels, a seed)

SRC = Path(__file__).resolve().parents[1] / "src"
INTERVAL_COMMANDS = ("estimate", "report", "agree", "correlate")
# the modules, not the functions judgeblender.evaluate re-exports under the same names
agreement, bootstrap, estimate, leaderboard, pair_design = (
    import_module(f"judgeblender.evaluate.{m}") for m in ("agreement", "bootstrap", "estimate", "leaderboard",
                                                          "pair_design"))
INTERVAL_FUNCTIONS = (estimate.estimate, estimate.query_ppi, estimate.plan, estimate.estimate_pair_design,
                      pair_design.poisson_estimate, agreement.agreement, leaderboard.correlate,
                      leaderboard.compare_scores, bootstrap.bootstrap_intervals, api.agreement, api.correlate,
                      api.Judged.agreement)


def cli(*args, cwd: Path, umask: int | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    res = subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], cwd=cwd, capture_output=True,
                         text=True, env=env, timeout=300,
                         preexec_fn=(lambda: os.umask(umask)) if umask is not None else None)
    assert res.returncode == 0, res.stderr
    return res


# --- one level ----------------------------------------------------------------------------------------

def test_every_command_that_gives_an_interval_defaults_to_the_one_confidence_level():
    app = typer.main.get_command(build_app())
    for name in INTERVAL_COMMANDS:
        option = next(p for p in app.commands[name].params if p.name == "confidence")
        assert option.default == CONFIDENCE, name
    assert ReportInputs(gold=Path("g"), preds=[], runs_dir=Path("r")).confidence == CONFIDENCE


@pytest.mark.parametrize("function", INTERVAL_FUNCTIONS, ids=lambda f: f.__qualname__)
def test_every_library_function_that_gives_an_interval_defaults_to_the_one_confidence_level(function):
    assert inspect.signature(function).parameters["confidence"].default == CONFIDENCE


def test_estimate_shows_the_level_with_every_interval_in_its_table_and_its_json(files):
    base = ("estimate", "--llm", "llm.qrels", "--human", "est.qrels", "--runs", "runs")
    table = cli(*base, cwd=files).stdout
    assert "nDCG@10: 95% intervals" in table and "PPI++ [95% CI]" in table and "human-only [95% CI]" in table
    records = [json.loads(line) for line in cli(*base, "--json", cwd=files).stdout.splitlines()]
    kinds = {r["kind"] for r in records}
    assert kinds == {"run", "pair", "method"}
    assert all(r["confidence"] == CONFIDENCE for r in records)  # runs, pairs and the method alike


def test_agree_and_correlate_give_their_level_in_json_and_tables(files):
    agree = cli("agree", "--gold", "human.qrels", "llm.qrels", "--json", cwd=files).stdout
    assert all(json.loads(line)["confidence"] == CONFIDENCE for line in agree.splitlines())
    table = cli("correlate", "--gold", "human.qrels", "--runs", "runs", "llm.qrels", "--bootstrap", 50, cwd=files)
    assert "95% bootstrap interval" in table.stdout


# --- file modes ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_output_is_made_with_the_users_umask(files, umask, mode):
    cli("fill", "--gold", "est.qrels", "--llm", "llm.qrels", "--out", "merged.qrels", cwd=files, umask=umask)
    cli("report", "--gold", "human.qrels", "--pred", "llm.qrels", "--runs", "runs", "--out", "r.html",
        "--bootstrap", 0, cwd=files, umask=umask)
    for out in ("merged.qrels", "r.html"):
        assert stat.S_IMODE((files / out).stat().st_mode) == mode, out


def test_a_replaced_output_keeps_its_mode(files):
    out = files / "merged.qrels"
    out.write_text("old\n")
    out.chmod(0o640)
    cli("fill", "--gold", "est.qrels", "--llm", "llm.qrels", "--out", out, cwd=files, umask=0o022)
    assert out.read_text() != "old\n" and stat.S_IMODE(out.stat().st_mode) == 0o640
    atomic_write_text(out, "new\n")  # the library function, in this process, alike
    assert out.read_text() == "new\n" and stat.S_IMODE(out.stat().st_mode) == 0o640
