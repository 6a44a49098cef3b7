"""`--ray` sends calls to each worker in batches (issue 23, part 2): a real local Ray runtime
(2 CPUs), the engine with a real SQLite store, the test OpenAI server on 127.0.0.1.

- A worker gets its calls in messages of several calls (those asked for in the same turn of the
  driver's event loop), each no larger than its share of the judge's concurrency, instead of one
  Ray task per call.
- Answers come back one by one as they are given: a call held by the server does not keep the
  other calls of its batch out of the store.
- Answers that end together come back in one exchange (the worker waits GATHER_S for its other
  running calls), and none waits longer than that.
- A worker killed with some calls of its batch answered and others open makes only the open
  ones be asked again (by its restarted process)."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from openai_server import OpenAITestServer

from judgeblender.judges import JudgeSpec, judge_pairs
from judgeblender.pairs import Pair
from judgeblender.store import CallStore

pytestmark = pytest.mark.ray




@pytest.fixture(autouse=True)
def quiet_server(monkeypatch):
    import socketserver

    # A killed worker resets its connections; the server's traceback for each is noise here.
    monkeypatch.setattr(socketserver.BaseServer, "handle_error", lambda self, request, address: None)


def inputs(n: int):
    queries = {f"q{i}": f"question {i}" for i in range(n)}
    corpus = {f"d{i}": f"passage number {i} text" for i in range(n)}
    return queries, corpus, [Pair(f"q{i}", f"d{i}") for i in range(n)]


def spec(server, concurrency: int) -> JudgeSpec:
    return JudgeSpec(model="openai:test-model", options={"base_url": server.base_url, "timeout_s": 30.0,
                                                         "backoff_base_s": 0.01, "concurrency": concurrency})


def passage_of(body) -> str:
    """The passage a request asks about ("passage number N")."""
    text = body["messages"][-1]["content"]
    return text[text.index("passage number "):].split(" text")[0]


def stored(path: Path) -> int:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return db.execute("SELECT count(*) FROM calls").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def wait_for(predicate, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def run_in_thread(judge, pairs, queries, corpus, store_path: Path) -> tuple[threading.Thread, dict]:
    box: dict = {}

    def run() -> None:
        with CallStore(store_path) as store:
            box["run"] = judge_pairs([judge], pairs, queries, corpus, store=store)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, box


def test_calls_reach_each_worker_in_batches_no_larger_than_its_share(cluster, tmp_path):
    from judgeblender.judges.ray_judges import ray_judge

    queries, corpus, pairs = inputs(200)
    with OpenAITestServer("##final score: 2", delay_s=0.05, max_requests=1000) as server:
        judge = ray_judge(spec(server, concurrency=8), workers=2)
        try:
            with CallStore(tmp_path / "s.sqlite") as store:
                run = judge_pairs([judge], pairs, queries, corpus, store=store)
            traffic = judge.backend.traffic()
        finally:
            judge.close()
        assert server.request_count == 200 and server.max_in_flight <= 8
    assert run.stats[judge.id].calls_made == 200
    share = judge.backend.plan.concurrency
    assert share == 4 and len(traffic) == 2
    assert sum(t["calls"] for t in traffic) == sum(t["answers"] for t in traffic) == 200
    for t in traffic:
        # the first calls, asked for together, went out together: one message of its share; after
        # that, calls travel together whenever answers arrive together, never more than its share
        assert t["largest_batch"] == share and t["messages"] < t["calls"], traffic


def test_an_answer_is_stored_while_a_slower_call_of_its_batch_is_still_out(cluster, tmp_path):
    from judgeblender.judges.ray_judges import ray_judge

    release = threading.Event()

    def answer(body) -> str:
        if passage_of(body) == "passage number 0":
            release.wait(60)
        return "##final score: 1"

    queries, corpus, pairs = inputs(4)
    with OpenAITestServer(answer, max_requests=100) as server:
        judge = ray_judge(spec(server, concurrency=4), workers=1)  # one worker: the 4 calls are one batch
        try:
            thread, box = run_in_thread(judge, pairs, queries, corpus, tmp_path / "s.sqlite")
            try:
                wait_for(lambda: stored(tmp_path / "s.sqlite") == 3)
                assert server.in_flight == 1  # the slow call is still held by the server
                traffic = judge.backend.traffic()
            finally:
                release.set()
                thread.join(60)
            assert stored(tmp_path / "s.sqlite") == 4
        finally:
            judge.close()
    assert traffic[0]["largest_batch"] == 4  # the held call and the stored ones went out together
    assert box["run"].stats[judge.id].calls_made == 4


def test_a_worker_killed_mid_batch_asks_again_only_its_unanswered_calls(cluster, tmp_path):
    from judgeblender.judges.ray_judges import ray_judge

    release = threading.Event()
    asked: Counter[str] = Counter()
    held = {"passage number 1", "passage number 3"}

    def answer(body) -> str:
        passage = passage_of(body)
        asked[passage] += 1
        if passage in held:
            release.wait(60)
        return "##final score: 2"

    queries, corpus, pairs = inputs(4)
    with OpenAITestServer(answer, max_requests=100) as server:
        judge = ray_judge(spec(server, concurrency=4), workers=1)  # the 4 calls go to it as one batch
        try:
            victim = judge.backend.worker_pids()[0]
            thread, box = run_in_thread(judge, pairs, queries, corpus, tmp_path / "s.sqlite")
            try:
                wait_for(lambda: stored(tmp_path / "s.sqlite") == 2 and server.in_flight == 2)
                assert judge.backend.traffic()[0]["largest_batch"] == 4
                os.kill(victim, signal.SIGKILL)
                wait_for(lambda: victim not in judge.backend.worker_pids())  # restarted: a new process
            finally:
                release.set()
                thread.join(60)
            assert not thread.is_alive()
        finally:
            judge.close()
    run = box["run"]
    assert run.stats[judge.id].calls_made == 4 and run.stats[judge.id].failed_calls == 0
    # the two answered before the kill were asked once; the two open at the kill, twice
    assert asked == {"passage number 0": 1, "passage number 2": 1, "passage number 1": 2, "passage number 3": 2}
    with CallStore(tmp_path / "s.sqlite") as store:
        assert store.count_calls() == 4


def test_answers_ending_together_come_back_in_one_exchange_and_none_waits_past_the_gather_time(
        cluster, tmp_path, monkeypatch):
    """A worker's exchange that has an answer waits GATHER_S for its other running calls, so
    answers that end together cost the driver one message, not one each; past GATHER_S it
    returns what it has. The worker runs in this process (the actor's class itself), its model's
    calls each held until the test lets them end."""
    import asyncio
    import json

    from judgeblender.backends import ray_executor
    from judgeblender.calls import CallRequest, CallResult, Message

    model = tmp_path / "m.json"
    model.write_text(json.dumps({"name": "m", "default": "2"}))
    worker = ray_executor.JudgeWorker(f"scripted:{model}", {"concurrency": 3})
    gates: dict[str, asyncio.Event] = {}

    async def held(request: CallRequest) -> CallResult:
        await gates[request.messages[0].content].wait()
        return CallResult(text="2")

    worker.backend.aexecute = held

    async def exchange(calls: list[str]) -> asyncio.Future:
        gates.update({c: asyncio.Event() for c in calls})
        batch = [(i, CallRequest((Message("user", c),)), None) for i, c in enumerate(calls, 1)]
        out = asyncio.ensure_future(worker.exchange(ray_executor.pack(batch)))
        for _ in range(10):
            await asyncio.sleep(0)
        return out

    async def together() -> list[int]:
        out = await exchange(["a", "b"])
        gates["a"].set()
        for _ in range(20):  # the first answer given, the exchange woken
            await asyncio.sleep(0)
        assert not out.done()  # it waits for b, still running
        gates["b"].set()
        return [call_id for call_id, status, _ in ray_executor.unpack(await out) if status == "ok"]

    monkeypatch.setattr(ray_executor, "GATHER_S", 60.0, raising=False)
    assert asyncio.run(together()) == [1, 2]

    async def bounded() -> list[int]:
        out = await exchange(["c", "d", "e"])
        gates["c"].set()  # d and e never end
        return [call_id for call_id, _, _ in ray_executor.unpack(await asyncio.wait_for(out, 30))]

    monkeypatch.setattr(ray_executor, "GATHER_S", 0.05)
    worker = ray_executor.JudgeWorker(f"scripted:{model}", {"concurrency": 3})
    worker.backend.aexecute = held
    assert asyncio.run(bounded()) == [1]
