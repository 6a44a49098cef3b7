"""Crash safety: `kill -9` at random moments, then resume, gives the uninterrupted run's output.

Real subprocesses (`python -m judgeblender judge`) judge through a real HTTP server on
127.0.0.1 that logs every request across processes, so "no completed call is repeated" is
checked from the server side: after each kill, no request of the next process asks a call
that the store already held when that process started.

What is compared with the uninterrupted run: the qrels files byte for byte, and the details
files record by record with every field except each step's `cached` flag (which by design
says whether that answer came from the store).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socketserver
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from openai_server import OpenAITestServer
from typer.testing import CliRunner

from judgeblender.cli import app
from judgeblender.store.compact import Texts

MARK = re.compile(r"passage-(\d{4})")
N = 80


def answers(body: dict) -> str:
    """sun-two-step: step 1 (Yes/No), then a grade 1-3 for the Yes pairs; a few invalid answers."""
    text = body["messages"][-1]["content"]
    i = int(MARK.search(text).group(1))
    if "Reply with \"Yes\" or \"No\" only" in text:
        return "Yes" if i % 3 else "No"
    if i % 10 == 1 and body["seed"] == 0:
        return "no idea"  # invalid: the engine asks again with the next seed
    return f"Grade: {1 + i % 3}"


@pytest.fixture(autouse=True)
def quiet_server(monkeypatch):
    # Killed clients reset their connections; the server's traceback for each is noise here.
    monkeypatch.setattr(socketserver.BaseServer, "handle_error", lambda self, request, address: None)


@pytest.fixture
def files(tmp_path):
    q, c, p = tmp_path / "q.tsv", tmp_path / "c.jsonl", tmp_path / "p.tsv"
    q.write_text("".join(f"q{j}\tquestion {j}\n" for j in range(8)))
    c.write_text("".join(json.dumps({"docid": f"d{i}", "text": f"passage-{i:04d} text"}) + "\n" for i in range(N)))
    p.write_text("".join(f"q{i % 8}\td{i}\n" for i in range(N)))
    return q, c, p


def command(files, server, store: Path, out: Path) -> list[str]:
    q, c, p = files
    return [sys.executable, "-m", "judgeblender", "judge", "-q", str(q), "-c", str(c), "-p", str(p),
            "-j", "openai:test-model", "--base-url", server.base_url, "--prompt", "sun-two-step",
            "--concurrency", "2", "--store", str(store), "-o", str(out), "--no-progress", "--json"]


def env() -> dict[str, str]:
    return {**os.environ, "OPENAI_API_KEY": "sk-test-crash"}


def stored_calls(store: Path) -> set[tuple]:
    """The stored calls as (messages, seed), the way the server sees a request."""
    if not store.exists():
        return set()
    with sqlite3.connect(store) as db:
        try:
            rows = db.execute("SELECT settings, dict, messages FROM calls").fetchall()
        except sqlite3.OperationalError:  # not created yet
            return set()
        texts = Texts(db)
        requests = [texts.decode_request(*row) for row in rows]
    return {(tuple(tuple(m) for m in req["messages"]), req["seed"]) for req in requests}


def requested(server, since: int) -> list[tuple]:
    # a request cut off by a kill before its body arrived was never a call (the server says 400)
    recs = sorted((r for r in server.requests if r.method == "POST" and isinstance(r.body, dict)),
                  key=lambda r: r.number)
    return [(tuple((m["role"], m["content"]) for m in r.body["messages"]), r.body["seed"]) for r in recs
            if r.number > since]


def count_calls(store: Path) -> int:
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5) as db:
            return db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def integrity(store: Path) -> str:
    with sqlite3.connect(store) as db:
        return db.execute("PRAGMA integrity_check").fetchone()[0]


def comparable(details: Path) -> list[dict]:
    recs = [json.loads(line) for line in details.read_text().splitlines()]
    for rec in recs:
        for judge in rec["judges"].values():
            for step in judge["steps"]:
                del step["cached"]
    return recs


def in_process(cmd: list[str], monkeypatch) -> dict:
    """The same `judge` command, run by the CLI code in this process (saves an interpreter start)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-crash")
    result = CliRunner().invoke(app, cmd[3:])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["judges"][0]


@pytest.fixture
def uninterrupted(files, tmp_path, monkeypatch) -> tuple[Path, dict]:
    out = tmp_path / "ref.qrels"
    with OpenAITestServer(answers, delay_s=0.01, max_requests=2000) as server:
        summary = in_process(command(files, server, tmp_path / "ref.sqlite", out), monkeypatch)
    return out, summary


def test_kill_9_at_five_random_moments_then_resume_gives_the_uninterrupted_output(files, tmp_path, uninterrupted):
    ref_out, ref = uninterrupted
    total = ref["calls_made"]  # every call of the job: both steps, and the re-asks of invalid answers
    assert total > N  # the second step and the re-asks happened

    rng = random.Random(20240611)
    # Each kill comes once the store holds a random number of calls (spread over the whole job,
    # both waves) plus a random few milliseconds, so it lands between, during or after writes.
    targets = sorted(rng.sample(range(3, total - 3), 5))
    store, out = tmp_path / "s.sqlite", tmp_path / "o.qrels"
    with OpenAITestServer(answers, delay_s=0.01, max_requests=5000) as server:
        kills = []
        for target in targets:
            before, seen = stored_calls(store), server.request_count
            proc = subprocess.Popen(command(files, server, store, out), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, env=env())
            deadline = time.monotonic() + 60
            while count_calls(store) < target and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(rng.uniform(0, 0.03))
            proc.send_signal(signal.SIGKILL)
            assert proc.wait() == -signal.SIGKILL, "the job ended before it could be killed"
            kills.append(count_calls(store))
            assert integrity(store) == "ok"
            # no call already in the store when this process started was asked again
            assert not set(requested(server, seen)) & before
        assert kills == sorted(kills) and kills[0] >= 3  # each kill came after calls were stored; none lost

        before, seen = stored_calls(store), server.request_count
        proc = subprocess.run(command(files, server, store, out), capture_output=True, text=True, env=env(),
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        resumed = json.loads(proc.stdout)["judges"][0]
        assert not set(requested(server, seen)) & before
    print(f"\njob of {total} calls; killed with {kills} calls stored; the resume made {resumed['calls_made']} "
          f"calls and reused {resumed['cache_hits']}")  # shown with -s; quoted in docs/reliability.md
    assert resumed["calls_made"] == total - len(before) and resumed["cache_hits"] == len(before)
    assert out.read_text() == ref_out.read_text()
    assert comparable(Path(f"{out}.details.jsonl")) == comparable(Path(f"{ref_out}.details.jsonl"))
    assert integrity(store) == "ok"


def test_two_processes_on_one_store_both_finish_without_corrupting_it(files, tmp_path, uninterrupted, monkeypatch):
    ref_out, ref = uninterrupted
    store = tmp_path / "shared.sqlite"
    with OpenAITestServer(answers, delay_s=0.01, max_requests=5000) as server:
        outs = [tmp_path / "a.qrels", tmp_path / "b.qrels"]
        # Both start together on a store that does not exist yet: both create it, both write.
        procs = [subprocess.Popen(command(files, server, store, o), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env()) for o in outs]
        results = [p.communicate(timeout=120) for p in procs]
        for p, (_, err) in zip(procs, results):
            assert p.returncode == 0, err
        summaries = [json.loads(stdout)["judges"][0] for stdout, _ in results]
        asked = requested(server, 0)
        # a third run finds every call stored (the model identity includes the server's URL: same server)
        third = in_process(command(files, server, store, tmp_path / "c.qrels"), monkeypatch)
        assert third["calls_made"] == 0 and server.request_count == len(asked)
    for o in outs:
        assert o.read_text() == ref_out.read_text()
        assert comparable(Path(f"{o}.details.jsonl")) == comparable(Path(f"{ref_out}.details.jsonl"))
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        keys = db.execute("SELECT COUNT(*), COUNT(DISTINCT key) FROM calls").fetchone()
        judgments = db.execute("SELECT COUNT(*), COUNT(DISTINCT judge || '|' || qid || '|' || docid) FROM judgments").fetchone()
    # one row per call and per judgment, the job's calls exactly, each asked at most once per process
    assert keys == (ref["calls_made"], ref["calls_made"])
    assert judgments == (N, N)
    assert len(set(asked)) == ref["calls_made"] and len(asked) <= 2 * ref["calls_made"]
    print(f"\ntwo processes: calls made {[s['calls_made'] for s in summaries]}, reused "
          f"{[s['cache_hits'] for s in summaries]}; {len(asked)} requests for {len(set(asked))} distinct calls")
    # each process accounted for every call of the job, from the model or from the store
    assert [s["calls_made"] + s["cache_hits"] for s in summaries] == [ref["calls_made"]] * 2
