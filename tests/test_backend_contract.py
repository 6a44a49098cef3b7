"""The backend contract, declared (issue 30 part 3): everything the engine uses of a backend is
on backends.base.Backend with a default, and the engine uses nothing else.

- A backend that fills in only `identity` and `execute` is judged, with a store, as any other.
- Transport retries are read through `count_retries`, awaited on the run's loop: a backend
  whose count lives elsewhere (Ray's workers) collects it there; the Ray driver's loop goes on
  while it does (it blocked on ray.get, once per worker, before).
- `store_rows` is told the store once per judge's run, in the run's loop, before any call;
  `aclose` is awaited on the run's loop at its end.
- A server that cannot score mid-run falls the judge back through its public `fall_back`.
Real stores, the test OpenAI server on 127.0.0.1 and a real local Ray runtime for the Ray case.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from openai_server import OpenAITestServer

from judgeblender.backends.base import Backend, LogprobsUnsupported
from judgeblender.calls import CallRequest, CallResult
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.pairs import Pair
from judgeblender.store import CallStore

QUERIES = {"q1": "what do goldfish eat", "q2": "how tall is the eiffel tower"}
CORPUS = {"d1": "Goldfish eat flakes.", "d2": "The tower is 330 metres tall.", "d3": "Paris hosts museums."}
PAIRS = [Pair("q1", "d1"), Pair("q2", "d2"), Pair("q2", "d3")]


class Bare(Backend):
    """A backend with nothing but what it must fill in."""

    kind = "bare"

    def __init__(self, answers: list[str] | None = None):
        self.answers = list(answers or [])
        self.events: list[tuple[str, Any]] = []

    def identity(self) -> dict[str, Any]:
        return {"backend": "bare", "model": "m"}

    def execute(self, request: CallRequest) -> CallResult:
        self.events.append(("execute", request.temperature))
        text = self.answers.pop(0) if self.answers else "##final score: 2"
        return CallResult(text, tokens_out=4, extra={"finish_reason": "stop"})


def test_a_backend_with_only_identity_and_execute_is_judged_with_a_store(tmp_path):
    judge = Judge(JudgeSpec("bare:m"), backend=Bare())
    with CallStore(tmp_path / "s.sqlite") as store:
        run = judge_pairs([judge], PAIRS, QUERIES, CORPUS, store=store)
        assert store.count_calls() == 3 and len(store.judgments()) == 3
    stats = run.stats[judge.id]
    assert [j.label for j in run.judgments[judge.id].values()] == [2, 2, 2]
    assert stats.backend_retries == 0 and stats.calls_made == 3


class Counting(Bare):
    """Its transport retries are known only by asking (as Ray's workers' are): two per call."""

    async def count_retries(self) -> int:
        await asyncio.sleep(0)  # collected off the loop's turn, as Ray's are
        return 2 * sum(1 for event, _ in self.events if event == "execute")

    def store_rows(self, store) -> None:
        self.events.append(("store_rows", (store, asyncio.get_running_loop())))

    async def aclose(self) -> None:
        self.events.append(("aclose", asyncio.get_running_loop()))


def test_retries_store_and_closing_go_through_the_declared_contract(tmp_path):
    backend = Counting(["no label here", "##final score: 1", "##final score: 3", "##final score: 0"])
    judge = Judge(JudgeSpec("bare:m"), backend=backend)  # retry-once: the first answer is asked again
    with CallStore(tmp_path / "s.sqlite") as store:
        run = judge_pairs([judge], PAIRS, QUERIES, CORPUS, store=store)
    stats = run.stats[judge.id]
    assert stats.retries == 1 and stats.calls_made == 4
    assert stats.backend_retries == 2 * 4  # the difference of what count_retries said over the run
    kinds = [event for event, _ in backend.events]
    assert kinds[0] == "store_rows" and kinds.count("store_rows") == 1  # once, before any call, for both waves
    assert kinds[-1] == "aclose" and kinds.count("aclose") == 1
    (told, loop), = [value for event, value in backend.events if event == "store_rows"]
    assert told is store and loop is backend.events[-1][1]  # told and closed on the run's loop


class CannotScore(Bare):
    supports_logprobs = True

    async def aexecute(self, request: CallRequest) -> CallResult:
        if request.mode == "logprobs":
            raise LogprobsUnsupported("this server returns no logprobs")
        return self.execute(request)


def test_a_server_that_cannot_score_falls_the_judge_back_through_its_public_method(monkeypatch):
    seen = []
    real = Judge.fall_back
    monkeypatch.setattr(Judge, "fall_back", lambda self, reason: seen.append(reason) or real(self, reason))
    judge = Judge(JudgeSpec("bare:m", mode="logprobs", allow_fallback=True), backend=CannotScore())
    run = judge_pairs([judge], PAIRS, QUERIES, CORPUS)
    assert seen == ["this server returns no logprobs"]
    assert all(j.label == 2 and j.fallback.startswith("logprobs -> generate") for j in run.judgments[judge.id].values())
    assert run.stats[judge.id].fallback == judge.fallback


async def count_while_the_loop_ticks(backend: Backend) -> tuple[int, int]:
    """count_retries awaited while another task ticks: how many ticks it let through."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    count = await backend.count_retries()
    during = ticks - before
    task.cancel()
    return count, during


@pytest.mark.ray
def test_the_ray_workers_retries_are_counted_while_the_drivers_loop_goes_on(cluster):
    from judgeblender.judges.ray_judges import ray_judge

    with OpenAITestServer("##final score: 2", script=["429", "429"]) as server:
        judge = ray_judge(JudgeSpec(model="openai:test-model", options={
            "base_url": server.base_url, "timeout_s": 10.0, "backoff_base_s": 0.01, "concurrency": 4}), workers=2)
        try:
            run = judge_pairs([judge], PAIRS, QUERIES, CORPUS)
            count, ticks = asyncio.run(count_while_the_loop_ticks(judge.backend))
        finally:
            judge.close()
    assert run.stats[judge.id].backend_retries == 2 and count == 2
    assert ticks > 0  # the loop ran other tasks while the workers were asked
