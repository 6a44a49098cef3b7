"""One wave of calls: a step asked of every pending pair, by a fixed pool of workers.

The workers (the backend's concurrency) take the requests in prompt order, so consecutive calls
share the longest prefix (llama.cpp reuses it, and served prefix caches hit). Each worker keys
and looks up its request in the store only when it takes it, so the first calls go out at once
and the keying overlaps the calls in flight. Only the prompts are made before the first call
(their order needs their text); each call's request is made when it is first keyed or sent.

An answer from the store counts at once. A model's answer is queued for the store's next commit
(commit.GroupCommit) and counts only once its row is committed; its worker goes on to its next
request meanwhile and waits only when GROUP of its answers are uncommitted, so an instant
model's rows commit in groups. The reporter's wave starts at every request and drops those the
store answers, so its rate and ETA are the model's.

Given a `SingleFlight` (judgeblender serve's, shared by its requests), a call the store could not
answer is made once for every run of the loop that needs it: the first worker to need it leads
(asks the model), the others wait for its answer, handed to them once committed, and count it as
answered from the store; a worker that finds nothing in flight reads the store once more first,
as the answer may have been committed since its chunk was looked up.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..backends.base import LogprobsUnsupported
from ..calls import CallRequest, CallResult, call_keys
from ..errors import BackendError
from ..flight import SingleFlight
from ..prompts import Step
from ..store import CallStore
from ..store.calls import StoredCall
from ..store.rows import CallRow
from .answers import interpret, step_examples
from .commit import GROUP, GroupCommit
from .judge import Judge
from .judgment import StepOutcome
from .requests import request_from_prompt
from .stats import JudgeStats, Reporter

if TYPE_CHECKING:
    from .run import PairState

LOOKAHEAD = 256  # requests keyed and looked up in the store together (CallPool.lookups)
# Answers from the store a worker counts before it lets the event loop run something else: a
# wave answered from the store awaits nothing, and 200 pairs of 20 KB held a server's loop (its
# GET /v1/health) for 90-240 ms; a yield per 32 costs nothing to measure.
YIELD_EVERY = 32

# (pair, attempt, the step's rendered prompt: system, user)
Ask = tuple["PairState", int, tuple[str | None, str]]
# sees each answer as it counts: the outcome, or None with the backend's error
OnAnswer = Callable[["PairState", StepOutcome | None, BackendError | None], None]


class CallPool:
    """Ask `step` of each (pair, attempt, rendered prompt) in `asks`, answered from the store or
    the model (`commits` writes to `store`, and is None without one). `on_answer(state, outcome,
    backend error)` sees each answer as it counts (a model's once its row is committed), so the
    caller finishes the pair while other calls are in flight. `run` raises LogprobsUnsupported
    when the server says it cannot score: the answers that came before it have counted."""

    def __init__(self, judge: Judge, step: Step, asks: list[Ask], store: CallStore | None,
                 commits: GroupCommit | None, reporter: Reporter, stats: JudgeStats, on_answer: OnAnswer,
                 flight: SingleFlight | None = None):
        self.judge, self.step, self.asks = judge, step, asks
        self.flight = flight if commits is not None else None  # calls in flight, shared: with a store only
        self.store, self.commits, self.reporter, self.stats, self.on_answer = store, commits, reporter, stats, on_answer
        self.identity = judge.backend.identity()
        self.scale = judge.template.scale
        self.choices = step.choices(self.scale)  # once per wave
        self.examples = step_examples(judge.template, step) if step.output == "json" else None
        # Sorting by prompt text (the texts of its messages, as sent) puts prompts with long
        # common prefixes next to each other.
        texts = [(system, user) if system else (user,) for _, _, (system, user) in asks]
        self.order = sorted(range(len(asks)), key=texts.__getitem__)
        self.requests: list[CallRequest | None] = [None] * len(asks)
        self.key_of = call_keys(self.identity) if store else None
        self.no_logprobs: LogprobsUnsupported | None = None  # the server said it cannot score

    def request(self, i: int) -> CallRequest:
        req = self.requests[i]
        if req is None:
            _, attempt, prompt = self.asks[i]
            req = self.requests[i] = request_from_prompt(self.judge, self.step, prompt, attempt, self.choices)
        return req

    def lookups(self) -> Iterator[tuple[int, str, StoredCall | None]]:
        """The requests in prompt order, each with its key and stored answer, looked up a chunk
        at a time (one query, not one per request): a wave of calls (the backend's concurrency),
        at least 64 and at most LOOKAHEAD, so the first calls wait on no more keys than their own
        and keying 256 requests at once (3-4 ms) does not hold answers that arrive meanwhile."""
        size = min(LOOKAHEAD, max(64, self.judge.backend.max_concurrency))
        store, key_of, order = self.store, self.key_of, self.order
        for start in range(0, len(order), size):
            chunk = order[start:start + size]
            if store is None or key_of is None:
                yield from ((i, "", None) for i in chunk)
                continue
            keys = [key_of(self.request(i)) for i in chunk]
            hits = store.get_many(keys)
            yield from ((i, key, hits.get(key)) for i, key in zip(chunk, keys))

    def outcome_of(self, i: int, result: CallResult, cached: bool) -> StepOutcome:
        judge = self.judge
        outcome = interpret(self.step, self.scale, self.request(i), result, judge.template.score_range,
                            judge.spec.min_choice_mass, self.examples)
        outcome.cached, outcome.attempt = cached, self.asks[i][1]
        if "worker" in result.extra:  # answered by a Ray worker (ray_executor): say which
            self.asks[i][0].judgment.workers.append({"step": self.step.id, "attempt": outcome.attempt,
                                                     **result.extra["worker"]})
        return outcome

    def count(self, i: int, outcome: StepOutcome | None, error: BackendError | None = None) -> None:
        if outcome is not None:
            self.stats.invalid_outputs += outcome.value is None
        self.on_answer(self.asks[i][0], outcome, error)

    async def run(self) -> None:
        todo = self.lookups()  # shared by the workers: each request goes to exactly one
        self.reporter.wave(f"{self.judge.id} · {self.step.id}" if self.asks else self.judge.id, len(self.asks))
        try:
            workers = min(max(1, self.judge.backend.max_concurrency), len(self.order))
            await asyncio.gather(*(self.worker(todo) for _ in range(workers)))
        finally:
            if self.commits is not None:
                self.commits.commit_now()  # stopped (Ctrl+C, SIGTERM, an error): the answers received are kept
            self.reporter.end_wave()
        if self.no_logprobs is not None:
            raise self.no_logprobs

    async def worker(self, todo: Iterator[tuple[int, str, StoredCall | None]]) -> None:
        """Take requests until there are none (or the server cannot score), then wait for this
        worker's answers still uncommitted and count them."""
        backend, commits, stats, reporter = self.judge.backend, self.commits, self.stats, self.reporter
        kind = backend.kind
        # this worker's answers written but not yet committed: (the commit's future, ask, outcome)
        uncommitted: deque[tuple[asyncio.Future, int, StepOutcome]] = deque()
        hits = 0  # answers from the store counted since this worker last let the loop run
        for i, key, hit in todo:
            if self.no_logprobs is not None:  # issue no more calls the server cannot score
                break
            req = self.request(i)
            flight = None
            try:
                if hit is None and self.flight is not None:
                    hit, flight = await self.board(key)
            except LogprobsUnsupported as exc:  # the call waited for failed so: as if made here
                self.no_logprobs = self.no_logprobs or exc
                break
            except BackendError as exc:
                self.count(i, None, exc)
                reporter.advance(True)
                continue
            if hit is not None:
                stats.cache_hits += 1
                self.count(i, self.outcome_of(i, hit.result, cached=True))
                reporter.answered_from_store()
                hits += 1
                if hits == YIELD_EVERY:
                    hits = 0
                    await asyncio.sleep(0)
                continue
            try:
                result = await backend.aexecute(req)
            except BaseException as exc:
                if flight is not None:  # those waiting on this call get its failure (a cancel: they ask)
                    self.flight.land(key, flight, error=exc)  # type: ignore[union-attr]
                if isinstance(exc, LogprobsUnsupported):
                    self.no_logprobs = self.no_logprobs or exc
                    break
                if isinstance(exc, BackendError):
                    self.count(i, None, exc)
                    reporter.advance(True)
                    continue
                raise
            outcome = self.outcome_of(i, result, cached=False)
            if commits is not None:  # in the store before it counts
                parsed = {"value": outcome.value, "invalid_reason": outcome.invalid_reason}
                committed = commits.submit(CallRow(key, kind, self.identity, req, result, parsed))
                if flight is not None:  # those waiting on this call get its answer once it is committed
                    committed.add_done_callback(functools.partial(self.landed, key, flight, result))
                uncommitted.append((committed, i, outcome))
                await self.count_committed(uncommitted, everything=False)
            else:
                stats.calls_made += 1
                self.count(i, outcome)
                reporter.advance(outcome.value is None)
        await self.count_committed(uncommitted, everything=True)

    async def board(self, key: str) -> tuple[StoredCall | None, asyncio.Future | None]:
        """Before a call the store could not answer: (an answer, None) where another run of
        this loop made the same call meanwhile (waited for while it is in flight, or found in
        the store once committed); else (None, the flight this worker now leads, to `land`)."""
        shared, result = await self.flight.follow(key)  # type: ignore[union-attr]
        if shared:
            return StoredCall(key, result, None), None
        stored = self.store.get(key) if self.store is not None else None  # committed since the look-up
        if stored is not None:
            return stored, None
        return None, self.flight.lead(key)  # type: ignore[union-attr]

    def landed(self, key: str, flight: asyncio.Future, result: CallResult, committed: asyncio.Future) -> None:
        """A led call's commit is done: its answer (or the store's error) to those waiting on it."""
        error = asyncio.CancelledError() if committed.cancelled() else committed.exception()
        self.flight.land(key, flight, result, error)  # type: ignore[union-attr]

    async def count_committed(self, uncommitted: deque[tuple[asyncio.Future, int, StepOutcome]],
                              everything: bool) -> None:
        """Count a worker's answers whose commit is done, in order; waits for a commit only for
        `everything` (the worker has no request left) or when GROUP answers are waiting."""
        while uncommitted and (everything or uncommitted[0][0].done() or len(uncommitted) >= GROUP):
            done, i, outcome = uncommitted.popleft()
            if not done.done():
                if self.commits is not None:
                    self.commits.hurry()  # this worker waits on the commit: make it now
                # the commit's future is shared by its rows' workers: one cancelled worker must
                # not cancel it for the others
                await asyncio.shield(done)
            done.result()  # the store's error, if the commit failed
            self.stats.calls_made += 1
            self.count(i, outcome)
            self.reporter.advance(outcome.value is None)
