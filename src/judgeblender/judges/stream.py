"""Judging pairs of any length with bounded memory: window by window.

Pairs judged together: each window's calls are sorted by prompt text (prefix reuse) and its
outputs written before the next window is read. 10,000 pairs hold about 50 MB of prompts and
judgments; on pairs in pool order (grouped by query) nearly all prefix reuse is within a window
(docs/scale-out.md measures the embedded throughput against one window for everything).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from .. import arguments
from ..pairs import Pair
from ..store import CallStore
from .inputs import Unfit, resolve_pairs, window_problems, window_texts
from .run import judge_items, run_then_close
from .stats import JudgeRun, JudgeStats, Reporter, SilentReporter

WINDOW = 10_000


def windows(pairs: Iterable[Pair | tuple[str, str]], window: int | None) -> Iterator[list[Pair]]:
    """The pairs in chunks of `window` (WINDOW if None), each pair once over the whole stream."""
    from ..pairs.pairs import unique_pairs  # each pair once across windows, holding digests only

    it = iter(pairs) if getattr(pairs, "unique", False) else unique_pairs(pairs)  # a PairsFile is already
    while chunk := list(islice(it, window or WINDOW)):
        yield chunk


def check_stream(pairs: Iterable[Pair | tuple[str, str]], queries: Mapping[str, Any], corpus: Mapping[str, Any],
                 skip_missing: bool = False, window: int | None = None) -> tuple[int, list[tuple[Pair, str]]]:
    """The validation pass over streamed pairs, before any model call: raises what
    `resolve_pairs` would raise for the whole list (counts over the whole stream) without
    holding the pairs; returns (pairs, skipped) with skips only under `skip_missing`."""
    unfit = Unfit()
    total = 0
    for chunk in windows(pairs, window):
        total += len(chunk)
        unfit.sort(chunk, queries, window_problems(corpus, (p.docid for p in chunk)), skip_missing)
        if not skip_missing:
            unfit.skipped.clear()
    if not skip_missing:
        unfit.raise_first(total, "the queries", "the corpus")
    return total, unfit.skipped


class InWindow:
    """A Reporter whose waves are named with the window of a streamed run they belong to, from the
    second on ("… · grade · window 2"): each window is its own wave of calls, and without the name a
    run of three windows reads, on any display, as one judge finishing three times."""

    __slots__ = ("reporter", "index")

    def __init__(self, reporter: Reporter, index: int):
        self.reporter, self.index = reporter, index

    def wave(self, label: str, total: int) -> None:
        self.reporter.wave(f"{label} · window {self.index}", total)

    def advance(self, invalid: bool) -> None:
        self.reporter.advance(invalid)

    def answered_from_store(self) -> None:
        self.reporter.answered_from_store()

    def end_wave(self) -> None:
        self.reporter.end_wave()


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
    arguments.distinct_ids("judges", (j.id for j in judges))
    reporter = reporter or SilentReporter()
    for index, chunk in enumerate(windows(pairs, window), 1):
        texts = window_texts(corpus, (p.docid for p in chunk))
        ok, skipped = resolve_pairs(chunk, queries, texts, skip_missing)
        items = [(p, {"query": queries[p.qid], "passage": texts[p.docid]}) for p in ok]
        told = reporter if index == 1 else InWindow(reporter, index)
        judgments, stats = await judge_items(judges, items, store, told)
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
