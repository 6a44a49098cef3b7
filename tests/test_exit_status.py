"""Exit status tells the truth (issue 15, part 1): real `python -m judgeblender` subprocesses
against the test OpenAI server on 127.0.0.1, stopped with real signals.

- SIGINT / SIGTERM mid-run: exit 130 / 143, the answers received are in the store, how to
  resume is printed, no --out (nor details) is written, and running the same command again
  makes only the missing calls.
- Model calls that fail at the transport level (every call answered 429; one passage the
  server always crashes on): exit 3 after writing what was judged, with the count; invalid
  model answers are a normal outcome (exit 0).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from openai_server import Fault, OpenAITestServer

from test_crash import N, files, quiet_server  # noqa: F401 - fixtures: 80 pairs, a quiet server

SRC = Path(__file__).resolve().parents[1] / "src"
MARK = re.compile(r"passage-(\d{4})")


def command(files, tmp_path: Path, srv: OpenAITestServer, *extra: str) -> list[str]:
    q, c, p = files
    return [sys.executable, "-m", "judgeblender", "judge", "-q", str(q), "-c", str(c), "-p", str(p),
            "-o", str(tmp_path / "out.qrels"), "--store", str(tmp_path / "s.sqlite"), "-j", "openai:test-model",
            "--base-url", srv.base_url, "--timeout", "5", "--no-progress", *extra]


def env() -> dict[str, str]:
    # the subprocess imports this checkout's code, whatever is installed
    return {**os.environ, "PYTHONPATH": str(SRC), "OPENAI_API_KEY": "sk-test"}


def stored_calls(store: Path) -> int:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        return db.execute("SELECT count(*) FROM calls").fetchone()[0]


def test_the_subprocess_runs_this_checkout():
    out = subprocess.run([sys.executable, "-c", "import judgeblender; print(judgeblender.__file__)"],
                         env=env(), capture_output=True, text=True, check=True).stdout
    assert Path(out.strip()).resolve().is_relative_to(SRC)


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_mid_run_commits_what_is_done_writes_no_output_and_resume_makes_only_the_rest(
        files, tmp_path, sig, code):
    with OpenAITestServer(answers="2", delay_s=0.25) as srv:
        cmd = command(files, tmp_path, srv, "--concurrency", "2")
        proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while srv.request_count < 8 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        asked = srv.request_count
        assert proc.returncode == code, err
        assert f"interrupted by {sig.name}" in err and "run the same command again" in err
        assert "python -m judgeblender judge" in err and "Traceback" not in err
        # nothing written as if complete: neither the qrels nor the details
        assert not (tmp_path / "out.qrels").exists() and not (tmp_path / "out.qrels.details.jsonl").exists()
        kept = stored_calls(tmp_path / "s.sqlite")
        # every answer received before the signal is in the store; at most the 2 in flight are lost
        assert 6 <= kept <= asked < N and asked - kept <= 2

        # the same command again: only the missing calls are made, and the run completes
        srv.delay_s = 0.0
        done = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert srv.request_count - asked == N - kept
    assert stored_calls(tmp_path / "s.sqlite") == N
    assert len((tmp_path / "out.qrels").read_text().splitlines()) == N


def test_every_call_answered_429_exits_3_with_a_summary(files, tmp_path):
    with OpenAITestServer(fault_rates={"429": 1.0}) as srv:
        done = subprocess.run(command(files, tmp_path, srv, "--limit", "3", "--json"), env=env(),
                              capture_output=True, text=True, timeout=120)
        asked = srv.request_count
    assert done.returncode == 3, done.stderr
    assert asked == 3 * 6  # each call: 1 attempt and 5 retries
    assert "error: 3 of 3 pairs not judged because their model calls failed" in done.stderr
    assert "HTTP 429" in done.stderr and "Traceback" not in done.stderr
    summary = json.loads(done.stdout)["judges"][0]
    assert summary["failed_calls"] == 3 and summary["judged"] == 0
    assert (tmp_path / "out.qrels").read_text() == ""  # what was judged: nothing


def test_a_passage_the_server_always_fails_on_exits_3_after_writing_the_rest(files, tmp_path):
    def answers(body: dict) -> str:
        text = body["messages"][-1]["content"]
        if int(MARK.search(text).group(1)) == 5:
            raise RuntimeError("the server crashes on passage 5")  # the handler drops the connection
        return "2"

    with OpenAITestServer(answers=answers) as srv:
        done = subprocess.run(command(files, tmp_path, srv), env=env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert f"error: 1 of {N} pairs not judged because their model calls failed" in done.stderr
    lines = (tmp_path / "out.qrels").read_text().splitlines()
    assert len(lines) == N - 1 and not any(" d5 " in line for line in lines)
    details = [json.loads(x) for x in (tmp_path / "out.qrels.details.jsonl").read_text().splitlines()]
    failed = [d for d in details if d["label"] is None]
    assert [d["docid"] for d in failed] == ["d5"] and "backend error" in failed[0]["invalid_reason"]


def test_invalid_answers_are_an_outcome_not_a_failure(files, tmp_path):
    with OpenAITestServer(answers="I cannot decide.") as srv:
        done = subprocess.run(command(files, tmp_path, srv, "--limit", "2"), env=env(),
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "2 unjudged" in done.stderr and "error:" not in done.stderr


def test_a_command_s_exit_code_is_not_dropped(monkeypatch):
    """main() used to drop the code typer returns in non-standalone mode (typer.Exit, Ctrl+C)."""
    import typer

    from judgeblender import cli

    def fake_build_app(commands=None):
        app = typer.Typer()

        @app.command()
        def boom() -> None:
            raise typer.Exit(7)

        return app

    monkeypatch.setattr(cli, "build_app", fake_build_app)
    monkeypatch.setattr(sys, "argv", ["judgeblender"])
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    assert exit_.value.code == 7
