"""Issue 38 part 8: an interrupted run leaves nothing behind.

A `judge` killed with SIGKILL cannot remove the temporary files of its outputs (`.OUT.…` and
`.OUT.details.jsonl.…`, beside them). Their names now say which process wrote them
(fileio.py), so the next write of the same output removes those whose writer is gone, with a
note, and leaves a live writer's alone. Real `python -m judgeblender judge` subprocesses, a real
HTTP server on 127.0.0.1, a real SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
from openai_server import OpenAITestServer

from judgeblender.fileio import atomic_write_text, process_start

N = 12


@pytest.fixture
def files(tmp_path):
    q, c, p = tmp_path / "q.tsv", tmp_path / "c.jsonl", tmp_path / "p.tsv"
    q.write_text("q0\tquestion\n")
    c.write_text("".join(json.dumps({"docid": f"d{i}", "text": f"passage {i}"}) + "\n" for i in range(N)))
    p.write_text("".join(f"q0\td{i}\n" for i in range(N)))
    return q, c, p


def judge(files, server, out: Path, store: Path) -> subprocess.Popen:
    q, c, p = files
    return subprocess.Popen(
        [sys.executable, "-m", "judgeblender", "judge", "-q", str(q), "-c", str(c), "-p", str(p), "-j",
         "openai:test-model", "--base-url", server.base_url, "--concurrency", "1", "--window", "2", "--store",
         str(store), "-o", str(out), "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OPENAI_API_KEY": "sk-test-interrupted"})


def temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".out.qrels."))


def wait_for_temporaries(folder: Path, proc: subprocess.Popen, server: OpenAITestServer, calls: int = 2) -> list[str]:
    """The run's two temporary files, once it has made `calls` model calls (it is mid-run)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = temporaries(folder)
        if len(found) == 2 and server.request_count >= calls:
            return found
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"no temporary files after 120 s: {temporaries(folder)}")


def test_a_sigkilled_judge_leaves_temporaries_that_the_next_run_removes(files, tmp_path):
    out = tmp_path / "out.qrels"
    with OpenAITestServer("2", delay_s=0.3, max_requests=500) as server:
        killed = judge(files, server, out, tmp_path / "s.sqlite")
        left = wait_for_temporaries(tmp_path, killed, server)
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        assert killed.returncode == -signal.SIGKILL
        assert temporaries(tmp_path) == left  # the kill left both behind
        assert {n.split(".jb-")[0] for n in left} == {".out.qrels", ".out.qrels.details.jsonl"}
        assert all(f"-{killed.pid}-" in n for n in left)  # named by the writer

        again = judge(files, server, out, tmp_path / "s.sqlite")
        _, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    assert temporaries(tmp_path) == [], err
    assert len(out.read_text().splitlines()) == N
    notes = [line for line in err.splitlines() if line.startswith("note: removed")]
    assert len(notes) == 2 and all("interrupted run" in n for n in notes), err
    assert sorted(n for note in notes for n in left if n in note) == left, err


def test_a_live_concurrent_writers_temporaries_are_left_alone(files, tmp_path):
    """A run writing the same output right now keeps its files while another run finishes; once
    it is killed, the next run removes them."""
    out = tmp_path / "out.qrels"
    release = threading.Event()

    def slow(body):  # the first run's calls wait until the test lets them go
        release.wait(60)
        return "2"

    with OpenAITestServer(slow, max_requests=500) as stalled, OpenAITestServer("1", max_requests=500) as fast:
        live = judge(files, stalled, out, tmp_path / "live.sqlite")
        try:
            held = wait_for_temporaries(tmp_path, live, stalled, calls=1)
            other = judge(files, fast, out, tmp_path / "other.sqlite")
            _, err = other.communicate(timeout=300)
            assert other.returncode == 0, err
            assert "note: removed" not in err, err
            assert temporaries(tmp_path) == held  # the live run's files, untouched
            assert set(out.read_text().split("\n")[0].split()[-1:]) == {"1"}
        finally:
            live.send_signal(signal.SIGKILL)
            live.wait(timeout=30)
            release.set()
        third = judge(files, fast, out, tmp_path / "other.sqlite")
        _, err = third.communicate(timeout=300)
    assert third.returncode == 0, err
    assert temporaries(tmp_path) == [] and "note: removed 1 temporary file(s)" in err, err


def test_a_reused_process_id_another_host_and_other_names_decide_as_documented(tmp_path):
    """Stale: the id's process started at another time (the id was reused) or is gone; kept: a
    live one, another host's (it cannot be told from here), a name of another shape."""
    host = f"{zlib.crc32(socket.gethostname().encode()):08x}"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = process_start(sleeper.pid)
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()
        names = {
            f".o.txt.jb-{host}-{sleeper.pid}-{start}.abcd1234": True,  # live
            f".o.txt.jb-{host}-{sleeper.pid}-{start + 1}.abcd1234": False,  # the id reused
            f".o.txt.jb-{host}-{gone.pid}-7.abcd1234": False,  # gone
            f".o.txt.jb-{'0' * 8 if host != '0' * 8 else '1' * 8}-{gone.pid}-7.abcd1234": True,  # another host
            ".o.txt.abcd1234": True,  # an older judgeblender's, or the user's
            f".o.txt.more.jb-{host}-{gone.pid}-7.abcd1234": True,  # another output's
        }
        for name in names:
            (tmp_path / name).write_text("x")
        atomic_write_text(tmp_path / "o.txt", "new")
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            [*(n for n, kept in names.items() if kept), "o.txt"])
    finally:
        sleeper.kill()
        sleeper.wait()
