"""Judge many pairs with one or more judges.

Work runs in waves, one per template step: every pending pair's step-k call is issued before
any step-(k+1) call. Within a wave, stored answers are reused first; the remaining calls are
sorted by their prompt text, so consecutive calls share the longest prefix (llama.cpp reuses
it, and served prefix caches hit), and run with the backend's concurrency. Each finished call
is written to the store before it counts, and each answer is applied to its pair as it counts:
a pair it finishes has its judgment written then, while other calls are in flight, so nothing
is left to write once the last answer is in.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from .. import asyncrun
from ..backends.base import LogprobsUnsupported
from ..calls import FINISHED_NORMALLY, CallRequest, CallResult, Message, call_keys
from ..errors import ArgumentError, BackendError, CallDeferred, JudgeblenderError, MissingItemsError
from ..pairs import Pair
from ..pairs.texts import text_problem
from ..parse import parse_grade, parse_yesno
from ..parse.screen import non_answer
from ..parse.verdict import parse_verdict, template_examples
from ..prompts import PromptTemplate, Step
from ..store import CallStore
from ..store.calls import StoredCall
from .judge import Judge, JudgeSpec
from .judgment import Judgment, StepOutcome
from .truncate import passage_budget, truncate_passage

T = TypeVar("T")
LOOKAHEAD = 256  # requests keyed and looked up in the store together (_run_calls)
GROUP = 64  # a worker's answers awaiting their commit at most (_GroupCommit)
FLUSH_EVERY_S = 0.02  # commits while nobody waits on them, at most one per this (_GroupCommit)
RETRY_TEMPERATURE = 0.5  # a retry of an invalid answer samples, else it would repeat itself


class Reporter(Protocol):
    def wave(self, label: str, total: int) -> None: ...
    def advance(self, invalid: bool) -> None: ...
    def answered_from_store(self) -> None: ...  # one request fewer to make in this wave
    def end_wave(self) -> None: ...


class PairJudge(Protocol):
    """A judge that is not a prompt sent to an LLM (an embedding or cross-encoder scorer).

    It labels all items itself; the engine only collects its judgments and stats."""

    id: str

    async def run(self, items: list[tuple[Pair, dict[str, str]]], store: CallStore | None,
                  reporter: Reporter) -> tuple[dict[Pair, Judgment], "JudgeStats"]: ...


class SilentReporter:
    def wave(self, label: str, total: int) -> None:
        pass

    def advance(self, invalid: bool) -> None:
        pass

    def answered_from_store(self) -> None:
        pass

    def end_wave(self) -> None:
        pass


@dataclass
class JudgeStats:
    judge_id: str
    pairs: int = 0
    judged: int = 0
    unjudged: Counter = field(default_factory=Counter)  # reason -> pairs
    calls_made: int = 0
    cache_hits: int = 0
    retries: int = 0  # re-asks after an invalid answer
    backend_retries: int = 0  # transport retries inside the backend (429, 5xx, timeouts)
    invalid_outputs: int = 0  # answers that did not parse, retried or not
    truncated: int = 0
    # pairs left unjudged because a model call failed after its retries (429, 5xx, timeouts,
    # connection errors, other HTTP errors): not the model's fault; the CLI exits 3 on any
    failed_calls: int = 0
    # pairs whose call was queued for later (the Batch API): unjudged for now, not failed
    deferred_calls: int = 0
    # pairs never sent: the prompt leaves no room for the passage in the model's context
    no_room: int = 0
    fallback: str | None = None
    seconds: float = 0.0

    def add(self, other: "JudgeStats") -> None:
        """Count `other` (the same judge on other pairs: a later window) into these stats."""
        for name in ("pairs", "judged", "calls_made", "cache_hits", "retries", "backend_retries", "invalid_outputs",
                     "truncated", "failed_calls", "deferred_calls", "no_room", "seconds"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.unjudged.update(other.unjudged)
        self.fallback = other.fallback or self.fallback

    @property
    def invalid_rate(self) -> float:
        total = self.calls_made + self.cache_hits
        return self.invalid_outputs / total if total else 0.0


@dataclass
class JudgeRun:
    pairs: list[Pair]
    judgments: dict[str, dict[Pair, Judgment]]  # judge id -> pair -> judgment
    stats: dict[str, JudgeStats]
    skipped: list[tuple[Pair, str]] = field(default_factory=list)  # pairs not judged at all, and why


@dataclass
class _PairState:
    pair: Pair
    values: dict[str, str]
    judgment: Judgment
    done: bool = False
    settled: bool = False  # counted and queued for the store (engine._run_judge's settle)


def resolve_pairs(
    pairs: Sequence[Pair], queries: Mapping[str, Any], corpus: Mapping[str, Any], skip_missing: bool = False,
    queries_source: str = "the queries", corpus_source: str = "the corpus",
) -> tuple[list[Pair], list[tuple[Pair, str]]]:
    """Split pairs into judgeable ones and those missing a query or passage.

    The one check of what a prompt will show, for the CLI and the library alike: a query or
    passage that is absent, NaN, None, <NA> or blank is an error naming the pair (with
    `skip_missing`, a skip with that reason); one that is not a string is always an error."""
    pairs = list(dict.fromkeys(pairs))
    unfit = _Unfit()
    ok = unfit.sort(pairs, queries, corpus, skip_missing)
    if not skip_missing:
        unfit.raise_first(len(pairs), queries_source, corpus_source)
    return ok, unfit.skipped


class _Unfit:
    """What makes pairs unjudgeable, gathered over one list or over a stream of windows, so the
    error a stream raises at its end is the one `resolve_pairs` raises for the whole list."""

    SHOWN = 1000  # missing docids kept for the message (it shows 5); the count is kept apart

    def __init__(self) -> None:
        self.skipped: list[tuple[Pair, str]] = []
        self.no_query: set[str] = set()
        self.no_passage: list[str] = []
        self.n_no_passage = 0
        self.text: tuple[Pair, str, str] | None = None  # the first pair with an unfit text
        self.n_text = 0

    def sort(self, pairs: list[Pair], queries: Mapping[str, Any], corpus: Mapping[str, Any],
             skip_missing: bool) -> list[Pair]:
        """The judgeable pairs of `pairs` (each once); the others are counted, and kept as skips."""
        no_query = [p for p in pairs if p.qid not in queries]
        no_passage = [p for p in pairs if p.qid in queries and p.docid not in corpus]
        self.no_query.update(p.qid for p in no_query)
        self.no_passage.extend(p.docid for p in no_passage[:self.SHOWN - len(self.no_passage)])
        self.n_no_passage += len(no_passage)
        skipped = [(p, "query missing") for p in no_query] + [(p, "passage missing") for p in no_passage]
        missing = {p for p, _ in skipped}
        judged = [p for p in pairs if p not in missing]
        problems = {("query", q): text_problem(queries[q]) for q in {p.qid for p in judged}}  # each text once
        problems.update({("passage", d): text_problem(corpus[d]) for d in {p.docid for p in judged}})
        unfit = [(p, kind, problem) for p in judged for kind, key in (("query", p.qid), ("passage", p.docid))
                 for problem in (problems[kind, key],) if problem is not None]
        refused = [u for u in unfit if not skip_missing or u[2].startswith("not ")]  # a wrong type is never skipped
        if refused and self.text is None:
            self.text = refused[0]
        self.n_text += len(refused)
        if refused and skip_missing:  # a wrong type: an error even when skipping
            raise self._text_error(len(pairs))
        first_reason = {p: f"{kind} {problem}" for p, kind, problem in reversed(unfit)}  # the query's, if both
        skipped += [(p, first_reason[p]) for p in dict.fromkeys(p for p, _, _ in unfit)]
        missing |= set(first_reason)
        self.skipped.extend(skipped)
        return [p for p in pairs if p not in missing]

    def raise_first(self, total: int, queries_source: str, corpus_source: str) -> None:
        """The error for the first kind of problem found (queries, then passages, then texts)."""
        if self.no_query:
            raise MissingItemsError("query", sorted(self.no_query), total, queries_source)
        if self.n_no_passage:
            raise MissingItemsError("passage", self.no_passage, total, corpus_source, count=self.n_no_passage)
        if self.text is not None:
            raise self._text_error(total)

    def _text_error(self, total: int) -> JudgeblenderError:
        (qid, docid), kind, problem = self.text  # type: ignore[misc]
        hint = "" if problem.startswith("not ") else "; pass --skip-missing to judge the rest and report them"
        return JudgeblenderError(f"pair ({qid}, {docid}): its {kind} is {problem}, expected a non-blank string "
                                 f"({self.n_text} of {total} pairs like this){hint}")


def _size(cut: dict[str, int | None]) -> str:
    """A cut passage's size: its tokens where it was tokenized whole, else its characters."""
    if cut["passage_tokens"] is not None:
        return f"{cut['passage_tokens']} tokens"
    return f"{cut['passage_chars']} characters"


def _request(judge: Judge, step: Step, values: dict[str, str], attempt: int) -> CallRequest:
    """The call that asks `step` for one pair."""
    return _request_of(judge, step, judge.template.render_step(step, values), attempt)


def _request_of(judge: Judge, step: Step, prompt: tuple[str | None, str], attempt: int,
                choices: tuple[str, ...] | None = None) -> CallRequest:
    """_request from the step's rendered prompt (system, user); `choices` is
    step.choices(scale), which a wave makes once."""
    system, user = prompt
    messages = ((Message("system", system),) if system else ()) + (Message("user", user),)
    seed = judge.spec.seed + attempt
    temperature = 0.0 if attempt == 0 else RETRY_TEMPERATURE
    if judge.mode == "logprobs" and step.output != "text":
        return CallRequest(messages, mode="logprobs", max_tokens=1, temperature=0.0, seed=seed,
                           answer_prefix=step.answer_prefix or "",
                           choices=step.choices(judge.template.scale) if choices is None else choices)
    return CallRequest(messages, mode="generate", max_tokens=step.max_tokens, temperature=temperature, seed=seed,
                       json_schema=step.json_schema if step.output == "json" else None)


# words for the finish reasons (not on calls.FINISHED_NORMALLY) users meet most
NOT_FINISHED = {"length": "cut at the token limit", "content_filter": "withheld by the content filter",
                "tool_calls": "a tool call, not a text answer"}


def unfinished_reason(finish: str | None) -> str:
    """Why a generate-mode answer whose finish reason is not on the allow-list is invalid."""
    if finish is None:
        return "no finish reason: the server did not say that the answer ended normally"
    return f"answer {NOT_FINISHED.get(finish, 'did not end normally')} (finish_reason: {finish})"


def step_examples(template: PromptTemplate, step: Step) -> list[dict[str, Any]]:
    """The JSON objects the step's own prompt text shows (its example of a verdict), read from
    the template with every input and earlier step left blank, never from an item's values."""
    blanks = {name: "" for name in [*template.inputs, *(s.id for s in template.steps)]}
    system, user = template.render_step(step, blanks)
    return template_examples(system or "", user)


def interpret(step: Step, scale: list[int], request: CallRequest, result: CallResult,
              score_range: list[float] | None = None, min_choice_mass: float = 0.0,
              examples: list[dict[str, Any]] | None = None) -> StepOutcome:
    """Read a step's answer: a label, a yes/no (1/0), a text, or invalid with the reason.

    The answer is read on the step's own scale (its `labels`, else the template's `scale`);
    a JSON verdict equal to one of the template's `examples` (`step_examples`) is not a verdict.
    Never a label from a non-answer: an answer the backend refused to keep (too large) is
    invalid in either mode; an empty or degenerate answer ("1, 1, 1, ..." on and on: parse.screen)
    is invalid whatever the step asks, as every parser screens it; in logprobs mode the label tokens must hold at least
    `min_choice_mass` of the next-token probability; in generate mode an answer counts only
    when its finish_reason says it ended normally (calls.FINISHED_NORMALLY): cut at the token
    limit, filtered, ended any other way or without a finish reason, it is invalid."""
    levels = step.labels or scale
    refused = result.extra.get("refused")
    if refused:
        return StepOutcome(step.id, result.text, None, str(refused))
    if request.mode == "logprobs":
        if not result.probs or not result.choice_mass:
            return StepOutcome(step.id, result.text, None, "no probability on any answer token",
                               result.probs, result.choice_mass)
        if result.choice_mass < min_choice_mass:
            return StepOutcome(step.id, result.text, None,
                               f"the answer tokens hold {result.choice_mass:.2g} of the next-token probability, "
                               f"below min_choice_mass {min_choice_mass:g}", result.probs, result.choice_mass)
        best = max(result.probs, key=result.probs.get)
        value: int | None = (1 if best == "Yes" else 0) if step.output == "yesno" else int(best)
        return StepOutcome(step.id, result.text, value, None, result.probs, result.choice_mass)
    finish = result.extra.get("finish_reason")
    if finish not in FINISHED_NORMALLY:
        return StepOutcome(step.id, result.text, None, unfinished_reason(finish))
    if step.output == "text":  # screened as the parsers screen theirs: empty or degenerate is no answer
        refused = non_answer(result.text)
        return StepOutcome(step.id, result.text, None if refused else result.text.strip(), refused)
    if step.output == "json":
        verdict = parse_verdict(result.text, step.json_schema or {}, step.score_field, step.reason_field,
                                levels=levels, score_range=score_range, examples=examples or ())
        return StepOutcome(step.id, result.text, verdict.score, verdict.invalid_reason, reason=verdict.reason,
                           repaired=verdict.repaired or None)
    parsed = parse_yesno(result.text) if step.output == "yesno" else parse_grade(result.text, levels)
    return StepOutcome(step.id, result.text, parsed.label, parsed.invalid_reason)


async def _run_calls(
    judge: Judge, step: Step, asks: list[tuple[_PairState, int, tuple[str | None, str]]],
    store: CallStore | None, writer: "_GroupCommit | None", reporter: Reporter, stats: JudgeStats,
    on_answer: Callable[[_PairState, StepOutcome | None, BackendError | None], None],
) -> None:
    """Ask `step` of each (pair, attempt, rendered prompt) in `asks`, answered from the store or
    the model (`writer` commits to `store`, and is None without one). `on_answer(state, outcome,
    backend error)` sees each answer as it counts (a model's once its row is committed), so the
    caller finishes the pair while other calls are in flight.

    A fixed pool of workers (the backend's concurrency) takes the requests in prompt order; each
    keys and looks up its request in the store only when it takes it, so the first calls go out
    at once and the keying overlaps the calls in flight. Only the prompts are made before the
    first call (their order needs their text); each call's request is made when it is first keyed
    or sent. The reporter's wave starts at every request and drops those the store answers, so
    its rate and ETA are the model's."""
    identity = judge.backend.identity()
    scale = judge.template.scale
    choices = step.choices(scale)  # once per wave
    # Sorting by prompt text (the texts of its messages, as sent) puts prompts with long common
    # prefixes next to each other.
    texts = [(system, user) if system else (user,) for _, _, (system, user) in asks]
    order = sorted(range(len(asks)), key=texts.__getitem__)
    del texts
    made: list[CallRequest | None] = [None] * len(asks)

    def request(i: int) -> CallRequest:
        req = made[i]
        if req is None:
            _, attempt, prompt = asks[i]
            req = made[i] = _request_of(judge, step, prompt, attempt, choices)
        return req

    key_of = call_keys(identity) if store else None
    judge.backend.store_rows(store)  # a Ray backend: its workers make the costly parts of each answer's row

    def lookups() -> Iterator[tuple[int, str, StoredCall | None]]:
        """The requests in prompt order, each with its key and stored answer, looked up a chunk
        at a time (one query, not one per request): a wave of calls (the backend's concurrency),
        at least 64 and at most LOOKAHEAD, so the first calls wait on no more keys than their own
        and keying 256 requests at once (3-4 ms) does not hold answers that arrive meanwhile."""
        size = min(LOOKAHEAD, max(64, judge.backend.max_concurrency))
        for start in range(0, len(order), size):
            chunk = order[start:start + size]
            if store is None or key_of is None:
                yield from ((i, "", None) for i in chunk)
                continue
            keys = [key_of(request(i)) for i in chunk]
            hits = store.get_many(keys)
            yield from ((i, key, hits.get(key)) for i, key in zip(chunk, keys))

    todo = lookups()  # shared by the workers: each request goes to exactly one
    reporter.wave(f"{judge.id} · {step.id}" if asks else judge.id, len(asks))
    no_logprobs: list[LogprobsUnsupported] = []

    examples = step_examples(judge.template, step) if step.output == "json" else None

    def outcome_of(i: int, result: CallResult, cached: bool) -> StepOutcome:
        outcome = interpret(step, scale, request(i), result, judge.template.score_range,
                            judge.spec.min_choice_mass, examples)
        outcome.cached, outcome.attempt = cached, asks[i][1]
        if "worker" in result.extra:  # answered by a Ray worker (ray_executor): say which
            asks[i][0].judgment.workers.append({"step": step.id, "attempt": outcome.attempt,
                                                    **result.extra["worker"]})
        return outcome

    def count(i: int, outcome: StepOutcome | None, error: BackendError | None = None) -> None:
        if outcome is not None:
            stats.invalid_outputs += outcome.value is None
        on_answer(asks[i][0], outcome, error)

    async def worker() -> None:
        # answers written but not yet committed: each counts (stats, reporter) only once its row
        # is in the store; a worker goes on to its next request meanwhile and waits only when
        # GROUP of its answers are uncommitted, so an instant model's rows commit in groups
        unsettled: deque[tuple[asyncio.Future, int, StepOutcome]] = deque()

        async def settle(everything: bool) -> None:
            while unsettled and (everything or unsettled[0][0].done() or len(unsettled) >= GROUP):
                done, i, outcome = unsettled.popleft()
                if not done.done():
                    if writer is not None:
                        writer.hurry()  # this worker waits on the commit: make it now
                    # the commit's future is shared by its rows' workers: one cancelled worker
                    # must not cancel it for the others
                    await asyncio.shield(done)
                done.result()  # the store's error, if the commit failed
                stats.calls_made += 1
                count(i, outcome)
                reporter.advance(outcome.value is None)

        for i, key, hit in todo:
            if no_logprobs:  # the server said it cannot score: issue no more such calls
                break
            req = request(i)
            if hit is not None:
                stats.cache_hits += 1
                count(i, outcome_of(i, hit.result, cached=True))
                reporter.answered_from_store()
                continue
            try:
                result = await judge.backend.aexecute(req)
            except LogprobsUnsupported as exc:
                no_logprobs.append(exc)
                break
            except BackendError as exc:
                count(i, None, exc)
                reporter.advance(True)
                continue
            outcome = outcome_of(i, result, cached=False)
            if writer:  # in the store before it counts
                parsed = {"value": outcome.value, "invalid_reason": outcome.invalid_reason}
                unsettled.append((writer.submit((key, judge.backend.kind, identity, req, result, parsed)), i, outcome))
                await settle(False)
            else:
                stats.calls_made += 1
                count(i, outcome)
                reporter.advance(outcome.value is None)
        await settle(True)

    try:
        await asyncio.gather(*(worker() for _ in range(min(max(1, judge.backend.max_concurrency), len(order)))))
    finally:
        if writer is not None:
            writer.commit_now()  # stopped (Ctrl+C, SIGTERM, an error): the answers received are kept
        reporter.end_wave()
    if no_logprobs:
        raise no_logprobs[0]


class _GroupCommit:
    """Finished calls are committed together, in one transaction, and each call counts only once
    its row is committed. A commit is made at most every FLUSH_EVERY_S while nobody waits on it:
    at 64 calls in flight against a 200 ms server, committing at the end of every turn of the
    event loop made 1,400 transactions of 1.4 calls each per 2,000 calls, 285 us of the loop's
    CPU per call. A worker that must wait for a commit (GROUP of its answers uncommitted, or
    its requests done) has it made at once (`hurry`), so an instant model never waits on the clock.

    A judge's finished judgments go in the same transactions (`judgment`), as their pairs finish,
    so the window's judgments are in the store when its last answer is, not written after it
    (85-105 ms per 2,000 pairs with every call done and the loop idle). A judgment is derived
    from stored calls, so it needs no future: `drain` waits for the last of them.

    `later` (a served backend's answers): the rows are made and committed by the store's writer
    process (CallStore.put_many_later) while the loop goes on, and the futures are done when its
    reply is read; the loop spends 5-7 us per answer on the message, not the 100-120 us of making
    and committing the row (docs/driver-costs.md)."""

    def __init__(self, store: CallStore, judge_id: str | None = None, later: bool = False):
        self.store = store
        self.judge_id = judge_id
        self.later = later
        if later:  # the process starts now (0.6 ms), ready (100 ms) before the first answers
            store.write_in_child()
        self.pending: list[tuple] = []  # rows for the next commit
        self.committed: asyncio.Future | None = None  # done once they are: one future per commit
        self.judgments: list[tuple[str, str, dict[str, Any]]] = []
        self.scheduled: asyncio.Handle | None = None  # a TimerHandle while it waits on the clock
        self.last = -math.inf  # the loop time of the last commit
        self.failed: BaseException | None = None

    def _schedule(self) -> None:
        if self.scheduled is None:
            loop = asyncio.get_running_loop()
            wait = self.last + FLUSH_EVERY_S - loop.time()
            self.scheduled = loop.call_soon(self._flush) if wait <= 0 else loop.call_later(wait, self._flush)

    def hurry(self) -> None:
        """Someone waits on a queued row: commit in the loop's next turn, not at the clock's."""
        if isinstance(self.scheduled, asyncio.TimerHandle):
            self.scheduled.cancel()
            self.scheduled = asyncio.get_running_loop().call_soon(self._flush)

    def submit(self, row: tuple) -> asyncio.Future:
        """Queue a row for the next commit; the future (the commit's, shared by its rows) is done
        once it is committed."""
        if self.committed is None:
            self.committed = asyncio.get_running_loop().create_future()
        self._schedule()
        self.pending.append(row)
        return self.committed

    def judgment(self, qid: str, docid: str, record: dict[str, Any]) -> None:
        """Queue a finished judgment (of this writer's judge) for the next commit."""
        self._schedule()
        self.judgments.append((qid, docid, record))

    def commit_now(self) -> None:
        """Commit what is queued, here and now: at a wave's end, and when a run stops (Ctrl+C,
        SIGTERM, an error), so it keeps every answer it received. A failed commit reaches the
        rows' futures (their workers) or, for judgments alone, `failed`."""
        if self.scheduled is not None:
            self.scheduled.cancel()
            self._flush()
        if self.later:
            self.store.wait_writes()

    def drain(self) -> None:
        """Every queued judgment committed; a failed write of judgments raised here."""
        self.commit_now()
        if self.failed is not None:
            raise self.failed

    def _flush(self) -> None:
        self.scheduled = None
        self.last = asyncio.get_running_loop().time()
        batch, self.pending = self.pending, []
        done, self.committed = self.committed, None
        judgments, self.judgments = self.judgments, []
        also = (self.judge_id, judgments) if judgments else None
        try:
            if self.later:  # committed when the writer says so (_settle then); a send can fail here
                if batch or also is not None:
                    self.store.put_many_later(batch, also, lambda exc: self._settle(done, exc))
                return
            if batch:
                self.store.put_many(batch, also)
            elif also is not None:
                self.store.put_judgments(*also)  # type: ignore[arg-type]
        except BaseException as exc:  # every caller of the batch sees the failure
            self._settle(done, exc)
            if not isinstance(exc, Exception):
                raise  # KeyboardInterrupt, SystemExit: stop the loop as well
            return
        self._settle(done, None)

    def _settle(self, done: asyncio.Future | None, exc: BaseException | None) -> None:
        """A commit's outcome to its rows' future (None: judgments alone, whose failure is `failed`)."""
        if done is None:
            if exc is not None:
                self.failed = self.failed or exc
        elif not done.done():
            if exc is None:
                done.set_result(None)
            else:  # the first worker to await it ends the run; the rest need not say it again
                done.set_exception(exc)
                done.exception()


def _finish(state: _PairState, judge: Judge, outcome: StepOutcome) -> None:
    """Set the judgment's label (and distribution, in logprobs mode) from a final label step."""
    j = state.judgment
    state.done = True
    if judge.template.score_range is not None:  # a continuous rubric score has no label
        j.score, j.reason = float(outcome.value), outcome.reason  # type: ignore[arg-type]
        return
    j.label = int(outcome.value)  # type: ignore[arg-type]
    if outcome.reason is not None:
        j.score, j.reason = float(j.label), outcome.reason
    if outcome.probs is not None:
        scale = judge.template.scale
        j.probs = {str(level): float(outcome.probs.get(str(level), 0.0)) for level in scale}
        j.expected = sum(level * j.probs[str(level)] for level in scale)
    state.done = True


async def _run_judge(
    judge: Judge, items: list[tuple[Pair, dict[str, str]]], store: CallStore | None, reporter: Reporter
) -> tuple[dict[Pair, Judgment], JudgeStats]:
    stats = JudgeStats(judge.id, pairs=len(items), fallback=judge.fallback)
    started = time.perf_counter()
    retries_before = await judge.backend.count_retries()
    # a passage is cut only to fit a known context (passage_budget is None without one)
    field = judge.template.truncate if judge.backend.context_tokens() is not None else None
    budgets: dict[tuple, int | None] = {}  # by the other fields' values: one query, one budget
    states = []
    fallback, min_mass = judge.fallback, judge.spec.min_choice_mass if judge.mode == "logprobs" else None
    for pair, fields in items:
        values = dict(fields)
        cut = None
        if field is not None and field in values:
            others = tuple(sorted((k, v) for k, v in values.items() if k != field))
            if others not in budgets:
                budgets[others] = passage_budget(judge.template, judge.backend, values)
            values[field], cut = truncate_passage(values[field], budgets[others], judge.backend)
        stats.truncated += cut is not None
        j = Judgment(judge.id, pair.qid, pair.docid, truncated=cut, fallback=fallback, min_choice_mass=min_mass)
        state = _PairState(pair, values, j)
        if cut is not None and cut["kept_chars"] == 0:  # nothing of the passage would be shown: never sent
            stats.no_room += 1
            state.done = True
            j.invalid_reason = (f"not judged: the prompt leaves no room for the {field} in the model's "
                                f"{judge.backend.context_tokens()}-token context ({_size(cut)})")
        states.append(state)

    steps = judge.template.steps
    label_steps = {st.id for st in steps if st.output in ("label", "json")}
    retries_allowed = 1 if judge.spec.invalid_policy == "retry-once" else 0
    # a served model's rows are made and written off the event loop, whose CPU bounds its rate
    # (the loop reads the writer's pipe: POSIX only, not Windows' proactor loop). Under Ray
    # (not `served`) the workers make the rows' costly parts instead.
    later = judge.backend.served and os.name == "posix"
    writer = _GroupCommit(store, judge.id, later) if store else None
    position = {id(state): k for k, state in enumerate(states)}

    def settle(state: _PairState) -> None:
        """The pair's judgment is final: count it, and queue it for the store."""
        j = state.judgment
        if not j.valid and j.invalid_reason is None:  # a template whose last step is not a label
            labels = [o for o in j.steps if o.value is not None and o.step in label_steps]
            if labels:
                _finish(state, judge, labels[-1])
            else:
                j.invalid_reason = "no label step produced a label"
        if not j.valid:
            stats.unjudged[j.invalid_reason or "invalid"] += 1
        else:
            stats.judged += 1
        state.settled = True
        if writer is not None:
            writer.judgment(state.pair.qid, state.pair.docid, j.record())

    for state in states:
        if state.done:  # never sent (no room for the passage)
            settle(state)
    for index, step in enumerate(steps):
        pending = [(s, 0) for s in states if not s.done]
        while pending:
            render = judge.template.render_step
            asks = [(s, attempt, render(step, s.values)) for s, attempt in pending]
            retry: list[tuple[_PairState, int]] = []
            answered: set[int] = set()

            def on_answer(state: _PairState, outcome: StepOutcome | None, error: BackendError | None,
                          step: Step = step, index: int = index, retry: list = retry, answered: set = answered) -> None:
                """One answer of this wave, applied as it counts; a pair it finishes is settled."""
                answered.add(id(state))
                j = state.judgment
                if outcome is None:
                    j.invalid_reason = f"{step.id}: backend error: {error}"
                    if isinstance(error, CallDeferred):  # queued for the Batch API: asked for, not failed
                        stats.deferred_calls += 1
                    else:
                        stats.failed_calls += 1
                    state.done = True
                else:
                    j.steps.append(outcome)
                    if outcome.value is None:
                        if outcome.attempt < retries_allowed:
                            stats.retries += 1
                            retry.append((state, outcome.attempt + 1))
                        else:
                            j.invalid_reason = f"{step.id}: {outcome.invalid_reason}"
                            state.done = True
                    elif step.output == "text":
                        state.values[step.id] = str(outcome.value)
                    elif step.output == "yesno":
                        answer = "yes" if outcome.value == 1 else "no"
                        state.values[step.id] = answer.capitalize()
                        if answer in step.stop:
                            j.label, j.stopped_at, state.done = step.stop[answer], step.id, True
                    else:
                        state.values[step.id] = str(outcome.value)
                        if index == len(steps) - 1:
                            _finish(state, judge, outcome)
                if state.done:
                    settle(state)

            try:
                await _run_calls(judge, step, asks, store, writer, reporter, stats, on_answer)
            except LogprobsUnsupported as exc:
                # the answers of this wave that came before stand; the rest are asked again, generated
                judge.fall_back(str(exc) or "the server returned no logprobs")
                stats.fallback = judge.fallback
                for s in states:
                    if not s.done:
                        s.judgment.fallback = judge.fallback
                        s.judgment.min_choice_mass = None  # generated from now on
                retry += [(s, attempt) for s, attempt in pending if id(s) not in answered]
            pending = sorted(retry, key=lambda sa: position[id(sa[0])])  # in input order, as asked the first time
    for state in states:
        if not state.settled:  # every step answered, none final (e.g. the last step is not a label)
            settle(state)
    judgments = {s.pair: s.judgment for s in states}
    if writer is not None:
        writer.drain()
    stats.seconds = time.perf_counter() - started
    stats.backend_retries = await judge.backend.count_retries() - retries_before
    return judgments, stats


async def _judge_items(judges: list, items: list[tuple[Pair, dict[str, str]]], store: CallStore | None,
                       reporter: Reporter) -> tuple[dict[str, dict[Pair, Judgment]], dict[str, JudgeStats]]:
    """Every judge over the same items, one after another (each judge's calls sorted on their own)."""
    judgments: dict[str, dict[Pair, Judgment]] = {}
    stats: dict[str, JudgeStats] = {}
    for judge in judges:
        if isinstance(judge, Judge):
            judgments[judge.id], stats[judge.id] = await _run_judge(judge, items, store, reporter)
        else:
            judgments[judge.id], stats[judge.id] = await judge.run(items, store, reporter)
    return judgments, stats


def _check_ids(judges: list) -> None:
    ids = [j.id for j in judges]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise JudgeblenderError(f"two judges share the id {dupes[0]!r}: give each a distinct id")


async def judge_pairs_async(
    judges: Iterable[Judge | PairJudge], pairs: Sequence[Pair], queries: dict[str, str], corpus: dict[str, str],
    store: CallStore | None = None, reporter: Reporter | None = None, skip_missing: bool = False,
) -> JudgeRun:
    judges = list(judges)
    _check_ids(judges)
    pairs = [p if isinstance(p, Pair) else Pair(*map(str, p)) for p in pairs]  # (qid, docid) tuples too
    ok, skipped = resolve_pairs(pairs, queries, corpus, skip_missing)
    items = [(p, {"query": queries[p.qid], "passage": corpus[p.docid]}) for p in ok]
    judgments, stats = await _judge_items(judges, items, store, reporter or SilentReporter())
    return JudgeRun(pairs=ok, judgments=judgments, stats=stats, skipped=skipped)


# ------------------------------------------------------------------------------------ streaming
# Pairs judged together: each window's calls are sorted by prompt text (prefix reuse) and its
# outputs written before the next window is read. 10,000 pairs hold about 50 MB of prompts and
# judgments; on pairs in pool order (grouped by query) nearly all prefix reuse is within a window
# (docs/scale-out.md measures the embedded throughput against one window for everything).
WINDOW = 10_000


def window_texts(corpus: Mapping[str, Any], docids: Iterable[str]) -> dict[str, Any]:
    """The passages of one window: one read of an on-disk index (`get_many`), or dict lookups."""
    get_many = getattr(corpus, "get_many", None)
    if get_many is not None:
        return get_many(list(docids))
    return {d: corpus[d] for d in dict.fromkeys(docids) if d in corpus}


def _windows(pairs: Iterable[Pair | tuple[str, str]], window: int | None) -> Iterator[list[Pair]]:
    from ..pairs.pairs import unique_pairs  # each pair once across windows, holding digests only

    it = iter(pairs) if getattr(pairs, "unique", False) else unique_pairs(pairs)  # a PairsFile is already
    while chunk := list(islice(it, window or WINDOW)):
        yield chunk


def check_stream(pairs: Iterable[Pair | tuple[str, str]], queries: Mapping[str, Any], corpus: Mapping[str, Any],
                 skip_missing: bool = False, window: int | None = None) -> tuple[int, list[tuple[Pair, str]]]:
    """The validation pass over streamed pairs, before any model call: raises what
    `resolve_pairs` would raise for the whole list (counts over the whole stream) without
    holding the pairs; returns (pairs, skipped) with skips only under `skip_missing`."""
    unfit = _Unfit()
    total = 0
    for chunk in _windows(pairs, window):
        total += len(chunk)
        unfit.sort(chunk, queries, window_texts(corpus, (p.docid for p in chunk)), skip_missing)
        if not skip_missing:
            unfit.skipped.clear()
    if not skip_missing:
        unfit.raise_first(total, "the queries", "the corpus")
    return total, unfit.skipped


@dataclass
class StreamTotals:
    """What a streamed run keeps after its windows are written: each judge's stats summed over the
    windows, and the skipped pairs (a skip is held: it comes from bad input and is reported)."""

    stats: dict[str, JudgeStats] = field(default_factory=dict)
    skipped: list[tuple[Pair, str]] = field(default_factory=list)
    pairs: int = 0
    windows: int = 0

    def add(self, run: JudgeRun) -> None:
        self.pairs += len(run.pairs)
        self.windows += 1
        self.skipped.extend(run.skipped)
        for jid, st in run.stats.items():
            if jid in self.stats:
                self.stats[jid].add(st)
            else:
                self.stats[jid] = st


async def judge_windows_async(
    judges: list, pairs: Iterable[Pair | tuple[str, str]], queries: Mapping[str, Any], corpus: Mapping[str, Any],
    store: CallStore | None = None, reporter: Reporter | None = None, skip_missing: bool = False,
    window: int = WINDOW,
) -> AsyncIterator[tuple[JudgeRun, dict[str, Any]]]:
    """Judge a stream of pairs window by window; yields each window's JudgeRun (its pairs in
    input order, each pair once over the whole stream) with the window's passages by docid.
    Nothing of a window is kept after it is yielded: run `check_stream` first for errors before
    any model call."""
    _check_ids(judges)
    reporter = reporter or SilentReporter()
    for chunk in _windows(pairs, window):
        texts = window_texts(corpus, (p.docid for p in chunk))
        ok, skipped = resolve_pairs(chunk, queries, texts, skip_missing)
        items = [(p, {"query": queries[p.qid], "passage": texts[p.docid]}) for p in ok]
        judgments, stats = await _judge_items(judges, items, store, reporter)
        yield JudgeRun(pairs=ok, judgments=judgments, stats=stats, skipped=skipped), texts


def judge_stream(
    judges: list, pairs: Iterable[Pair | tuple[str, str]], queries: Mapping[str, Any], corpus: Mapping[str, Any],
    on_window: Callable[[JudgeRun, dict[str, Any]], None], store: CallStore | None = None, reporter: Reporter | None = None,
    skip_missing: bool = False, window: int | None = None,
) -> StreamTotals:
    """Judge pairs of any length with bounded memory: `on_window` receives each window's
    JudgeRun and its passages (write it out there) in input order; the totals come back. Built judges only
    (closed by the caller); their served connections are closed here, on the run's loop."""
    totals = StreamTotals()

    async def work() -> StreamTotals:
        async for run, texts in judge_windows_async(judges, pairs, queries, corpus, store, reporter, skip_missing,
                                                    window):
            on_window(run, texts)
            totals.add(run)
        return totals

    return run_then_close(judges, work())


def judge_pairs(
    judges: Iterable[Judge | PairJudge | JudgeSpec | str], pairs: Sequence[Pair | tuple[str, str]],
    queries: dict[str, str], corpus: dict[str, str], store: CallStore | None = None,
    reporter: Reporter | None = None, skip_missing: bool = False,
) -> JudgeRun:
    """Synchronous entry point (notebooks, scripts, the CLI). Judges may be given as JudgeSpecs or
    model strings: those are built here and closed afterwards; pairs as (qid, docid) tuples."""
    from .factory import build_judge  # factory imports this module

    given = list(judges)
    if not given:  # no judge would make a run that judged nothing
        raise ArgumentError("judges", "at least one judge", judges)
    built = [build_judge(JudgeSpec(model=j) if isinstance(j, str) else j)
             for j in given if isinstance(j, (JudgeSpec, str))]
    made = iter(built)
    judges = [next(made) if isinstance(j, (JudgeSpec, str)) else j for j in given]
    try:
        return run_then_close(judges, judge_pairs_async(judges, pairs, queries, corpus, store, reporter,
                                                        skip_missing))
    finally:
        for judge in built:
            judge.close()


def run_then_close(judges: Iterable[Any], work: Coroutine[Any, Any, T]) -> T:
    """Run `work` in a fresh event loop, then close the judges' served connections on that loop.

    Connections made on an event loop must close on it: left to the garbage collector, they try
    to close on a later loop and log "Event loop is closed" tracebacks. Only prompt judges hold
    connections (their backend's); a scorer holds none."""

    async def main() -> T:
        try:
            return await work
        finally:
            for judge in judges:
                if isinstance(judge, Judge):
                    await judge.backend.aclose()

    return asyncrun.run(main())


def summary_rows(run: JudgeRun) -> list[dict[str, Any]]:
    return [
        {
            "judge": s.judge_id, "pairs": s.pairs, "judged": s.judged, "unjudged": sum(s.unjudged.values()),
            "invalid_outputs": s.invalid_outputs, "invalid_rate": round(s.invalid_rate, 4), "retries": s.retries,
            "backend_retries": s.backend_retries, "calls_made": s.calls_made, "cache_hits": s.cache_hits, "truncated": s.truncated,
            "fallback": s.fallback, "seconds": round(s.seconds, 2),
            "failed_calls": s.failed_calls, "deferred_calls": s.deferred_calls, "no_room": s.no_room,
            # why pairs stayed unjudged (reason -> pairs), so a JSON summary says what is missing
            "unjudged_reasons": dict(s.unjudged.most_common()),
        }
        for s in run.stats.values()
    ]
