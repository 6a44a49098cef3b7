"""`--ray` runs keep the CLI's contract (issue 20, part 8): real `python -m judgeblender judge
--ray local` subprocesses, each starting its own Ray runtime, against the test OpenAI server on
127.0.0.1, stopped with real signals and with real kills of their Ray worker processes.

- SIGTERM mid-run exits 143 with the resume line: Ray's own SIGTERM handler (exit 1) does not
  take over, and every answer the driver received is in the store.
- Workers that die more often than their restarts allow end the run with exit 3, one error
  line, no traceback, and every answered call kept in the store.
- Every input check runs before Ray starts and before the store file is created.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from openai_server import OpenAITestServer

from judgeblender.backends.ray_executor import MAX_RESTARTS

SRC = Path(__file__).resolve().parents[1] / "src"
N = 60


@pytest.fixture
def files(tmp_path):
    """N pairs over 6 queries, every passage present."""
    q, c, p = tmp_path / "q.tsv", tmp_path / "c.jsonl", tmp_path / "p.tsv"
    q.write_text("".join(f"q{j}\tquestion {j}\n" for j in range(6)))
    c.write_text("".join(json.dumps({"docid": f"d{i}", "text": f"passage {i} text"}) + "\n" for i in range(N)))
    p.write_text("".join(f"q{i % 6}\td{i}\n" for i in range(N)))
    return q, c, p


@pytest.fixture
def ray_tmp():
    """Ray's temporary folder for the subprocess (RAY_TMPDIR): short, as Ray's socket paths must
    fit 107 bytes; where a session folder appears only if Ray was started."""
    folder = tempfile.mkdtemp(prefix="jbt", dir="/tmp")
    yield Path(folder)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def quiet_server(monkeypatch):
    import socketserver

    # Killed workers reset their connections; the server's traceback for each is noise here.
    monkeypatch.setattr(socketserver.BaseServer, "handle_error", lambda self, request, address: None)


def command(files, tmp_path: Path, srv: OpenAITestServer | None, *extra: str, ray: bool = True) -> list[str]:
    q, c, p = files
    base_url = srv.base_url if srv is not None else "http://127.0.0.1:9/v1"
    return [sys.executable, "-m", "judgeblender", "judge", "-q", str(q), "-c", str(c), "-p", str(p),
            "-o", str(tmp_path / "out.qrels"), "--store", str(tmp_path / "s.sqlite"), "-j", "openai:test-model",
            "--base-url", base_url, "--timeout", "10", "--no-progress",
            *(["--ray", "local", "--ray-workers", "1"] if ray else []), *extra]


def env(ray_tmp: Path) -> dict[str, str]:
    out = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
           "OPENAI_API_KEY": "sk-test", "RAY_TMPDIR": str(ray_tmp), "RAY_USAGE_STATS_ENABLED": "0"}
    out.pop("RAY_ADDRESS", None)
    return out


def stored_calls(store: Path) -> int:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        return db.execute("SELECT count(*) FROM calls").fetchone()[0]


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (Ray's head processes and workers are the driver's)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def judge_workers(driver: int) -> list[int]:
    """The driver's Ray actor processes (Ray titles them ray::JudgeWorker...)."""
    found = []
    for pid in descendants(driver):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if cmdline.startswith(b"ray::JudgeWorker"):
            found.append(pid)
    return found


def wait_for(predicate, timeout_s: float, proc: subprocess.Popen):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s")


@pytest.mark.ray
def test_sigterm_during_a_ray_local_run_exits_143_with_the_resume_line_and_keeps_every_answer(
        files, tmp_path, ray_tmp):
    pytest.importorskip("ray")
    with OpenAITestServer(answers="2", delay_s=0.25) as srv:
        cmd = command(files, tmp_path, srv, "--concurrency", "2")
        proc = subprocess.Popen(cmd, env=env(ray_tmp), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: srv.request_count >= 8, 180, proc)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        asked = srv.request_count
        assert proc.returncode == 143, err
        assert "interrupted by SIGTERM" in err and "run the same command again" in err
        assert "--ray local" in err and "Traceback" not in err
        assert not (tmp_path / "out.qrels").exists()
        kept = stored_calls(tmp_path / "s.sqlite")
        # the answers the driver received are stored; at most the 2 calls outstanding are lost
        assert 6 <= kept <= asked < N and asked - kept <= 2
        assert not descendants(proc.pid)  # Ray's processes stopped with the driver
        # the same store again (without Ray, to keep the test short): only the missing calls are made
        srv.delay_s = 0.0
        done = subprocess.run(command(files, tmp_path, srv, ray=False), env=env(ray_tmp), capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert srv.request_count - asked == N - kept


@pytest.mark.ray
def test_workers_that_die_more_often_than_they_may_restart_end_the_run_with_exit_3_and_keep_every_answer(
        files, tmp_path, ray_tmp):
    pytest.importorskip("ray")
    with OpenAITestServer(answers="2", delay_s=0.2, max_requests=5000) as srv:
        cmd = command(files, tmp_path, srv, "--concurrency", "1", "--json")
        proc = subprocess.Popen(cmd, env=env(ray_tmp), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        killed: list[int] = []
        for _ in range(MAX_RESTARTS + 1):  # the first process, then each restart
            # a worker not killed before, once it has answered two calls (one call at a time: the
            # third request comes after the second answer)
            before = srv.request_count
            victim = wait_for(lambda: [p for p in judge_workers(proc.pid) if p not in killed], 120, proc)[0]
            wait_for(lambda: srv.request_count >= before + 3, 120, proc)
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)
        out, err = proc.communicate(timeout=120)
        answered = srv.request_count
    assert proc.returncode == 3, err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "not judged because their model calls failed" in errors[0], err
    assert "died more often than" in err
    kept = stored_calls(tmp_path / "s.sqlite")
    judged = (tmp_path / "out.qrels").read_text().splitlines()
    summary = json.loads(out)["judges"][0]
    # every call the driver got an answer for is stored and written; the rest failed, none is lost
    assert len(judged) == kept == summary["calls_made"] and kept + summary["failed_calls"] == N
    assert 0 < kept < N and answered - kept <= MAX_RESTARTS + 1  # at most the call in flight at each kill
    assert not descendants(proc.pid)


BAD_INPUTS = {
    "missing passage": ({"corpus_lines": N - 1}, (), "pairs reference a passage missing from"),
    "unknown judge": ({}, ("-j", "nosuch:model"), "unknown model prefix 'nosuch'"),
    "unknown prompt": ({}, ("--prompt", "nosuch-prompt"), "nosuch-prompt"),
    "bad option": ({}, ("--ray-workers", "0"), "--ray-workers"),
    "unknown mode": ({}, ("--mode", "fancy"), "unknown scoring mode 'fancy'"),
    "bad pairs": ({"pairs": "q0 d0 extra column here\n"}, (), "p.tsv"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_an_input_mistake_under_ray_local_is_one_error_before_ray_starts_or_the_store_is_created(
        files, tmp_path, ray_tmp, case):
    change, extra, message = BAD_INPUTS[case]
    q, c, p = files
    if "corpus_lines" in change:
        c.write_text("".join(c.read_text().splitlines(keepends=True)[: change["corpus_lines"]]))
    if "pairs" in change:
        p.write_text(change["pairs"])
    cmd = command(files, tmp_path, None)
    if extra[:1] == ("-j",):
        cmd[cmd.index("-j") + 1] = extra[1]
        extra = ()
    started = time.monotonic()
    proc = subprocess.run([*cmd, *extra], env=env(ray_tmp), capture_output=True, text=True, timeout=120)
    seconds = time.monotonic() - started
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "s.sqlite").exists()  # no store file
    assert not any(ray_tmp.iterdir())  # Ray never started: no session folder
    assert "Ray:" not in proc.stderr
    assert seconds < 15, seconds



def test_a_missing_passage_in_cascade_under_ray_local_is_one_error_before_any_model_ray_or_store(
        files, tmp_path, ray_tmp):
    q, c, p = files
    c.write_text("".join(c.read_text().splitlines(keepends=True)[1:]))  # d0 has no text
    proc = subprocess.run(
        [sys.executable, "-m", "judgeblender", "cascade", "-q", str(q), "-c", str(c), "-p", str(p), "--cheap",
         "embed:default", "-j", "openai:test-model", "--base-url", "http://127.0.0.1:9/v1", "--budget", "4",
         "-o", str(tmp_path / "out.qrels"), "--store", str(tmp_path / "s.sqlite"), "--no-progress",
         "--ray", "local"], env=env(ray_tmp), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "pairs reference a passage missing from" in errors[0] and "d0" in errors[0]
    assert not (tmp_path / "s.sqlite").exists() and not any(ray_tmp.iterdir())
