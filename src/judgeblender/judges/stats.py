"""What a run counts and reports: each judge's stats, the run's result, and the progress hooks.

These are the engine's outputs and its one channel to a progress display; they hold no state of
a run in progress, so the CLI, the jury, panels and scorers share them without the engine.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..pairs import Pair
from .judgment import Judgment


class Reporter(Protocol):
    """Progress, told as a run goes: a wave of calls starts (with how many it may make), each
    answer counts, one request needs no call (the store had it), the wave ends."""

    def wave(self, label: str, total: int) -> None: ...
    def advance(self, invalid: bool) -> None: ...
    def answered_from_store(self) -> None: ...  # one request fewer to make in this wave
    def end_wave(self) -> None: ...


class SilentReporter:
    """A Reporter that shows nothing (library calls, tests)."""

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
