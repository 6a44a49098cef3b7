"""A served run's store rows are made and committed by the store's writer process while the
event loop goes on (issue 23 part 4: the loop's CPU bounds the served rate). Real SQLite stores,
a real writer process, the test OpenAI server on 127.0.0.1.

- The rows it makes are the rows an in-process write makes (redacted stores too), and a served
  run stores what the same run writing in-process stores.
- A write counts only once the writer has answered: `done` is called from the loop's reader, not
  when the write is sent; a commit the writer cannot make fails its answers with an error naming
  the store, and the writer goes on with the next.
- A writer killed in the middle of a served run ends the run with an error naming the store;
  what counted is in the store, and the same run again asks only for the rest.
- A driver killed with commits sent and not yet answered loses none of them: the writer commits
  what it was sent, to the end of its pipe.
- A commit that cannot even be sent fails the run, never leaves it waiting; a writer whose pipe
  is numbered past 1,024 (a driver with many connections open) still answers.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from openai_server import OpenAITestServer
from test_ray_rows import calls_and_judgments, inputs, table

from judgeblender.backends.openai_compat import OpenAICompatBackend
from judgeblender.errors import JudgeblenderError
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.store import CallStore

TABLES = (("calls", "created_at"), ("judgments", "updated_at"), ("texts", ""), ("shapes", ""))


def judge_for(server, concurrency: int = 8) -> Judge:
    return Judge(JudgeSpec(model="openai:test-model", mode="logprobs", options={
        "base_url": server.base_url, "timeout_s": 30.0, "backoff_base_s": 0.01, "concurrency": concurrency}))


async def put_later(store: CallStore, calls: list, judgments=None) -> BaseException | None:
    """put_many_later, awaited: what its `done` was called with."""
    loop = asyncio.get_running_loop()
    answered = loop.create_future()
    store.put_many_later(calls, judgments, answered.set_result)
    return await answered


@pytest.mark.parametrize("redact", [False, True])
def test_the_writer_process_makes_the_rows_an_in_process_write_makes(tmp_path, redact):
    calls, judgments = calls_and_judgments(30)

    async def later(store: CallStore) -> None:
        for start in range(0, 30, 7):
            assert await put_later(store, calls[start:start + 7]) is None
        assert await put_later(store, [], ("openai:m/umbrela/logprobs", judgments)) is None

    with CallStore(tmp_path / "here.sqlite", redact_passages=redact) as store:
        for start in range(0, 30, 7):
            store.put_many(calls[start:start + 7])
        store.put_judgments("openai:m/umbrela/logprobs", judgments)
    with CallStore(tmp_path / "child.sqlite", redact_passages=redact) as store:
        asyncio.run(later(store))
        assert store.count_calls() == 30 and store.new_calls == 30 and len(store.judgments()) == 30
    for name, when in TABLES:
        assert table(tmp_path / "here.sqlite", name, when) == table(tmp_path / "child.sqlite", name, when), name


def test_a_write_sent_for_later_counts_only_once_the_writer_has_answered(tmp_path):
    calls, _ = calls_and_judgments(5)
    seen: list = []

    async def main(store: CallStore) -> None:
        answered = asyncio.get_running_loop().create_future()

        def done(exc):
            seen.append(exc)
            answered.set_result(exc)

        store.put_many_later(calls, None, done)
        assert seen == []  # sent, not yet answered: nothing counts
        assert await answered is None  # the loop's reader handed the answer over
        assert store.count_calls() == 5

    with CallStore(tmp_path / "s.sqlite") as store:
        asyncio.run(main(store))
        assert seen == [None]


def test_a_commit_the_writer_cannot_make_fails_its_answers_and_the_next_one_is_made(tmp_path):
    calls, _ = calls_and_judgments(6)
    path = tmp_path / "s.sqlite"

    async def main(store: CallStore) -> tuple:
        with sqlite3.connect(path) as db:
            db.execute("CREATE TRIGGER refuse BEFORE INSERT ON calls BEGIN SELECT RAISE(ABORT, 'refused here'); END")
        failed = await put_later(store, calls[:3])
        with sqlite3.connect(path) as db:
            db.execute("DROP TRIGGER refuse")
        return failed, await put_later(store, calls[3:])

    with CallStore(path) as store:
        failed, then = asyncio.run(main(store))
        assert isinstance(failed, JudgeblenderError) and str(path) in str(failed) and "refused here" in str(failed)
        assert then is None
        keys = sorted(c["key"] for c in store.iter_calls())
        # the failed transaction left nothing, not even its texts: the later rows decode in full
        assert keys == ["key0003", "key0004", "key0005"]
        assert all(c["request"]["messages"] for c in store.iter_calls())


def test_a_served_run_stores_what_the_same_run_written_in_process_stores(tmp_path, monkeypatch):
    queries, corpus, pairs = inputs(40)
    with OpenAITestServer(answers="2") as server:
        with CallStore(tmp_path / "child.sqlite") as store:
            run = judge_pairs([judge_for(server)], pairs, queries, corpus, store=store)
            assert store.writer.kind == "child"  # the rows went through the writer process
        monkeypatch.setattr(OpenAICompatBackend, "served", False)
        with CallStore(tmp_path / "here.sqlite") as store:
            again = judge_pairs([judge_for(server)], pairs, queries, corpus, store=store)
            assert store.writer.kind == "here"
    judge_id = next(iter(run.judgments))
    assert [j.record() for j in run.judgments[judge_id].values()] == \
        [j.record() for j in again.judgments[judge_id].values()]
    # two live runs differ in their latencies and response ids, and in which answer came first
    # (the one its shape's dictionary is made of): the rows themselves are compared above
    assert stored(tmp_path / "here.sqlite") == stored(tmp_path / "child.sqlite")


def stored(path) -> tuple[list, list]:
    """A store's calls and judgments as they read back, less what differs between two live runs."""
    with CallStore(path) as store:
        calls = sorted(({**c, "latency_s": None, "created_at": None,
                         "extra": {k: v for k, v in c["extra"].items() if k != "response_id"}}
                        for c in store.iter_calls()), key=lambda c: c["key"])
        judgments = sorted(store.judgments(), key=lambda j: (j["qid"], j["docid"]))
    assert len(calls) == len(judgments) == 40
    return calls, judgments


def test_a_writer_killed_mid_run_ends_the_run_naming_the_store_and_the_rerun_asks_only_the_rest(tmp_path):
    queries, corpus, pairs = inputs(60)
    path = tmp_path / "s.sqlite"
    with OpenAITestServer(answers="2", delay_s=0.05) as server:
        with CallStore(path) as store:
            def kill_writer_after_some_answers() -> None:
                deadline = time.monotonic() + 60
                while (server.request_count < 20 or store.writer is None) and time.monotonic() < deadline:
                    time.sleep(0.005)
                store.writer.process.proc.send_signal(signal.SIGKILL)

            killer = threading.Thread(target=kill_writer_after_some_answers)
            killer.start()
            with pytest.raises(JudgeblenderError, match=f"{path}: cannot write to the store .*writer process ended"):
                judge_pairs([judge_for(server, concurrency=4)], pairs, queries, corpus, store=store)
            killer.join()
        asked = server.request_count
        with CallStore(path) as store:
            kept = store.count_calls()
        assert 0 < kept < 60 and kept <= asked
        with CallStore(path) as store:
            run = judge_pairs([judge_for(server, concurrency=4)], pairs, queries, corpus, store=store)
            assert store.count_calls() == 60
        assert server.request_count - asked == 60 - kept  # what was stored is not asked again
    assert all(j.label == 2 for j in next(iter(run.judgments.values())).values())


KILLED_DRIVER = """
import os, signal, sys
from test_ray_rows import calls_and_judgments
from judgeblender.store import CallStore
calls, _ = calls_and_judgments(200)
store = CallStore(sys.argv[1])
store.write_in_child()
for k in range(0, 200, 5):  # 40 commits sent as a served loop sends them, none of their answers read
    store.put_many_later(calls[k:k + 5], None, lambda exc: None)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.timeout(120)
def test_a_driver_killed_with_commits_unanswered_loses_none_of_them(tmp_path):
    tests = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests.parent / "src"), str(tests)])}
    path = tmp_path / "s.sqlite"
    done = subprocess.run([sys.executable, "-c", KILLED_DRIVER, str(path)], env=env, timeout=60)
    assert done.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 60
    while True:  # the writer goes on after the driver, to the end of what it was sent
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            n = db.execute("SELECT count(*) FROM calls").fetchone()[0]
        if n == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert n == 200


@pytest.mark.timeout(120)
def test_a_commit_that_cannot_be_sent_fails_the_run_instead_of_leaving_it_waiting(tmp_path, monkeypatch):
    queries, corpus, pairs = inputs(20)

    def cannot(*args, **kwargs):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(CallStore, "put_many_later", cannot)
    with OpenAITestServer(answers="2") as server:
        with CallStore(tmp_path / "s.sqlite") as store:
            with pytest.raises(OSError, match="Too many open files"):
                judge_pairs([judge_for(server, concurrency=4)], pairs, queries, corpus, store=store)
            assert store.count_calls() == 0


def test_a_writer_whose_pipe_is_numbered_past_1024_still_answers(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2048:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        calls, _ = calls_and_judgments(3)
        with CallStore(tmp_path / "s.sqlite") as store:
            store.write_in_child()
            assert store.writer.process.proc.stdout.fileno() >= 1024
            store.put_many(calls)  # a synchronous write (as under Ray) waits on that pipe
            assert store.count_calls() == 3
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
