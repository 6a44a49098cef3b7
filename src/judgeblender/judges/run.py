"""One LLM judge over a list of items: the per-pair state machine, wave by wave.

Work runs in waves, one per template step: every pending pair's step-k call is issued before
any step-(k+1) call (callpool.CallPool runs a wave). Each answer is applied to its pair as it
counts: a text answer feeds the next step, a yes/no may stop the judgment (a template's `stop`
rule), a label on the last step ends it, an invalid answer is asked once more (the judge's
invalid policy) or ends it invalid. A pair whose judgment is final is concluded at once: counted
in the stats and queued for the store, while other calls are in flight, so nothing is left to
write once the last answer is in.

When the server says it cannot score label tokens, the judge falls back to generating (only if
its spec allows it: Judge.fall_back raises otherwise); the answers of the wave that came before
stand, and the rest of the wave is asked again, generated.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .. import asyncrun
from ..backends.base import LogprobsUnsupported
from ..errors import BackendError, CallDeferred
from ..flight import SingleFlight
from ..pairs import Pair
from ..prompts import Step
from ..store import CallStore
from .answers import set_label
from .callpool import Ask, CallPool
from .commit import GroupCommit, declare_writer, writes_later
from .judge import Judge, PairJudge
from .judgment import Judgment, StepOutcome
from .stats import JudgeStats, Reporter
from .truncate import passage_budget, truncate_passage

T = TypeVar("T")


@dataclass
class PairState:
    """One pair on its way through a judge's steps."""

    pair: Pair
    values: dict[str, str]  # the prompt's inputs, then each step's answer under the step's id
    judgment: Judgment
    done: bool = False  # no step left to ask
    concluded: bool = False  # counted and queued for the store (JudgeRunState.conclude)


@dataclass
class Wave:
    """One step asked of the pending pairs: the pairs to ask again (after an invalid answer, or
    generated after a fallback) and the pairs that had an answer."""

    step: Step
    last: bool  # the template's last step: its label ends the judgment
    retry: list[tuple[PairState, int]] = field(default_factory=list)  # (pair, attempt)
    answered: set[int] = field(default_factory=set)  # id() of the pairs answered


def _size(cut: dict[str, int | None]) -> str:
    """A cut passage's size: its tokens where it was tokenized whole, else its characters."""
    if cut["passage_tokens"] is not None:
        return f"{cut['passage_tokens']} tokens"
    return f"{cut['passage_chars']} characters"


class JudgeRunState:
    """The state of one judge's run over `items`: every pair's state, the judge's stats, and the
    commits to the store (None without one)."""

    def __init__(self, judge: Judge, items: list[tuple[Pair, dict[str, str]]], store: CallStore | None,
                 reporter: Reporter, flight: SingleFlight | None = None):
        self.judge, self.store, self.reporter, self.flight = judge, store, reporter, flight
        self.started = time.perf_counter()  # the stats' seconds count the passages' cutting too
        self.stats = JudgeStats(judge.id, pairs=len(items), fallback=judge.fallback)
        self.steps = judge.template.steps
        self.label_steps = {st.id for st in self.steps if st.output in ("label", "json")}
        self.retries_allowed = 1 if judge.spec.invalid_policy == "retry-once" else 0
        self.states = self._states(items)
        self.position = {id(state): k for k, state in enumerate(self.states)}
        self.commits: GroupCommit | None = None  # made in the run's event loop (run)

    def _states(self, items: list[tuple[Pair, dict[str, str]]]) -> list[PairState]:
        """Each item's state, its passage cut to the model's context where one is known (a pair
        with no room left for any of it is never sent: concluded invalid)."""
        judge, stats = self.judge, self.stats
        # a passage is cut only to fit a known context (passage_budget is None without one)
        field_name = judge.template.truncate if judge.backend.context_tokens() is not None else None
        budgets: dict[tuple, int | None] = {}  # by the other fields' values: one query, one budget
        fallback, min_mass = judge.fallback, judge.spec.min_choice_mass if judge.mode == "logprobs" else None
        states = []
        for pair, fields in items:
            values = dict(fields)
            cut = None
            if field_name is not None and field_name in values:
                others = tuple(sorted((k, v) for k, v in values.items() if k != field_name))
                if others not in budgets:
                    budgets[others] = passage_budget(judge.template, judge.backend, values)
                values[field_name], cut = truncate_passage(values[field_name], budgets[others], judge.backend)
            stats.truncated += cut is not None
            j = Judgment(judge.id, pair.qid, pair.docid, truncated=cut, fallback=fallback, min_choice_mass=min_mass)
            state = PairState(pair, values, j)
            if cut is not None and cut["kept_chars"] == 0:  # nothing of the passage would be shown: never sent
                stats.no_room += 1
                state.done = True
                j.invalid_reason = (f"not judged: the prompt leaves no room for the {field_name} in the model's "
                                    f"{judge.backend.context_tokens()}-token context ({_size(cut)})")
            states.append(state)
        return states

    def conclude(self, state: PairState) -> None:
        """The pair's judgment is final: count it, and queue it for the store."""
        j = state.judgment
        if not j.valid and j.invalid_reason is None:  # a template whose last step is not a label
            labels = [o for o in j.steps if o.value is not None and o.step in self.label_steps]
            if labels:
                set_label(j, self.judge.template, labels[-1])
                state.done = True
            else:
                j.invalid_reason = "no label step produced a label"
        if not j.valid:
            self.stats.unjudged[j.invalid_reason or "invalid"] += 1
        else:
            self.stats.judged += 1
        state.concluded = True
        if self.commits is not None:
            self.commits.judgment(state.pair.qid, state.pair.docid, j.record())

    def apply(self, wave: Wave, state: PairState, outcome: StepOutcome | None, error: BackendError | None) -> None:
        """One answer of `wave`, applied as it counts; a pair it finishes is concluded."""
        wave.answered.add(id(state))
        step, j, stats = wave.step, state.judgment, self.stats
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
                if outcome.attempt < self.retries_allowed:
                    stats.retries += 1
                    wave.retry.append((state, outcome.attempt + 1))
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
                if wave.last:
                    set_label(j, self.judge.template, outcome)
                    state.done = True
        if state.done:
            self.conclude(state)

    async def run(self) -> tuple[dict[Pair, Judgment], JudgeStats]:
        """Ask every step of every pair; the judgments (in input order) and the stats."""
        judge, store, stats = self.judge, self.store, self.stats
        retries_before = await judge.backend.count_retries()
        judge.backend.store_rows(store)  # a Ray backend's workers make the costly parts of each row
        if store is not None:
            self.commits = GroupCommit(store, judge.id, writes_later(judge.backend))
        for state in self.states:
            if state.done:  # never sent (no room for the passage)
                self.conclude(state)
        for index, step in enumerate(self.steps):
            pending = [(s, 0) for s in self.states if not s.done]
            while pending:
                pending = await self._wave(Wave(step, last=index == len(self.steps) - 1), pending)
        for state in self.states:
            if not state.concluded:  # every step answered, none final (e.g. the last step is not a label)
                self.conclude(state)
        if self.commits is not None:
            self.commits.drain()
        stats.seconds = time.perf_counter() - self.started
        stats.backend_retries = await judge.backend.count_retries() - retries_before
        return {s.pair: s.judgment for s in self.states}, stats

    async def _wave(self, wave: Wave, pending: list[tuple[PairState, int]]) -> list[tuple[PairState, int]]:
        """Ask `wave.step` of the pending (pair, attempt)s; the ones to ask again, in input order."""
        render = self.judge.template.render_step
        asks: list[Ask] = [(s, attempt, render(wave.step, s.values)) for s, attempt in pending]
        pool = CallPool(self.judge, wave.step, asks, self.store, self.commits, self.reporter, self.stats,
                        functools.partial(self.apply, wave), self.flight)
        try:
            await pool.run()
        except LogprobsUnsupported as exc:
            self._fall_back(str(exc) or "the server returned no logprobs")
            wave.retry += [(s, attempt) for s, attempt in pending if id(s) not in wave.answered]
        position = self.position
        return sorted(wave.retry, key=lambda sa: position[id(sa[0])])  # in input order, as asked the first time

    def _fall_back(self, reason: str) -> None:
        """The judge generates from now on (or raises, not allowed to): recorded on its stats and
        on every pair not yet done, whose distribution it will no longer have."""
        judge = self.judge
        judge.fall_back(reason)
        self.stats.fallback = judge.fallback
        for s in self.states:
            if not s.done:
                s.judgment.fallback = judge.fallback
                s.judgment.min_choice_mass = None  # generated from now on


async def run_judge(judge: Judge, items: list[tuple[Pair, dict[str, str]]], store: CallStore | None,
                    reporter: Reporter, flight: SingleFlight | None = None) -> tuple[dict[Pair, Judgment], JudgeStats]:
    """One LLM judge over `items` ((pair, {input name: text}), already checked): its judgment of
    each pair, in input order, and its stats. The jury and judge_pairs both run judges so.
    `flight`: the calls in flight of other runs in this loop, shared (CallPool)."""
    return await JudgeRunState(judge, items, store, reporter, flight).run()


async def judge_items(judges: list[Judge | PairJudge], items: list[tuple[Pair, dict[str, str]]],
                      store: CallStore | None, reporter: Reporter, flight: SingleFlight | None = None
                      ) -> tuple[dict[str, dict[Pair, Judgment]], dict[str, JudgeStats]]:
    """Every judge over the same items, one after another (each judge's calls sorted on their own)."""
    judgments: dict[str, dict[Pair, Judgment]] = {}
    stats: dict[str, JudgeStats] = {}
    declare_writer(store, judges)
    for judge in judges:
        if isinstance(judge, Judge):
            judgments[judge.id], stats[judge.id] = await run_judge(judge, items, store, reporter, flight)
        else:
            judgments[judge.id], stats[judge.id] = await judge.run(items, store, reporter)
    return judgments, stats


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
