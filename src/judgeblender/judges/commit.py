"""Write batching: a judge's answers and judgments committed to the store together, each answer
counting only once its row is committed.

A commit is made at most every FLUSH_EVERY_S while nobody waits on it: at 64 calls in flight
against a 200 ms server, committing at the end of every turn of the event loop made 1,400
transactions of 1.4 calls each per 2,000 calls, 285 us of the loop's CPU per call. A worker that
must wait for a commit (GROUP of its answers uncommitted, or its requests done) has it made at
once (`hurry`), so an instant model never waits on the clock. GROUP is 2,048, not 64: an
instant judge's worker commits every GROUP answers, and each SQLite transaction costs about
3.5 ms here (its pages written to the write-ahead log again), so 64 a commit spent 0.05 ms of
every pair (316 commits per 20,000 pairs against 42 at 512), and 512 a commit a further 0.4 s of
SQLite CPU per 10^5 calls against 2,048. The rows waiting are the answers' own (a few hundred
bytes each, less than a window's judgments), and each still counts only once committed. A model
slower than 2,048 answers in FLUSH_EVERY_S never reaches GROUP: the clock commits first.

A judge's finished judgments go in the same transactions (`judgment`), as their pairs finish,
so the window's judgments are in the store when its last answer is, not written after it
(85-105 ms per 2,000 pairs with every call done and the loop idle). A judgment is derived from
stored calls, so it needs no future: `drain` waits for the last of them.

How a batch reaches the store is the store's one writer's (store/sinks.py), chosen once per
store: a served backend's answers are sent for later (CallStore.put_many_later) and, with the
writer process (write_in_child), as they are: it makes and commits their rows while the loop goes
on, and their future is done when its reply is read: the loop spends 5-7 us per answer on the
message, not the 100-120 us of making and committing the row (docs/driver-costs.md). Any other
batch is committed before `put_many` returns: here, or by the writer process from rows made here
(Ray's rows, once the backend's store_rows asked for it). `declare_writer` asks for the writer
process before a run's first write, where any of its judges is served.
"""

from __future__ import annotations

import asyncio
import math
import os
from typing import Any

from collections.abc import Iterable

from ..backends.base import Backend
from ..store import CallStore
from ..store.rows import CallRow, JudgmentRows
from .judge import Judge

GROUP = 2048  # a worker's answers awaiting their commit at most (CallPool)
FLUSH_EVERY_S = 0.02  # commits while nobody waits on them, at most one per this


def writes_later(backend: Backend) -> bool:
    """Whether a backend's rows are made and written off the event loop, by the writer process:
    a served model's, whose rate the loop's CPU bounds (the loop reads the writer's pipe: POSIX
    only, not Windows' proactor loop). Under Ray (not `served`) the workers make the rows' costly
    parts instead (Backend.store_rows)."""
    return backend.served and os.name == "posix"


def declare_writer(store: CallStore | None, judges: Iterable[object]) -> None:
    """Before a run's first write, the writer its store needs (CallStore.writer_for chooses once
    per store): the writer process where any of the run's judges writes later (a served one) or
    runs under Ray (its driver's CPU per call bounds the run: Backend.rows_off_driver), so that a
    judge run before it that writes here (an embedded model, a scorer's vectors) does not choose
    this process for that judge's rows as well."""
    if store is not None and any(isinstance(j, Judge) and (writes_later(j.backend) or j.backend.rows_off_driver)
                                 for j in judges):
        store.write_in_child()


class GroupCommit:
    """One judge's answers and judgments on their way to `store`, committed in groups."""

    def __init__(self, store: CallStore, judge_id: str, later: bool = False):
        self.store = store
        self.judge_id = judge_id
        self.later = later
        if later:  # the writer process, unless the store has its writer: starts now (0.6 ms), ready
            store.write_in_child()  # (100 ms) before the first answers
        self.pending: list[CallRow] = []  # rows for the next commit
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

    def submit(self, row: CallRow) -> asyncio.Future:
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
        also = JudgmentRows(self.judge_id, judgments) if judgments else None
        if not batch and also is None:
            return
        try:
            if self.later:  # committed when the writer says so (_resolve then); a send can fail here
                self.store.put_many_later(batch, also, lambda exc: self._resolve(done, exc))
                return
            self.store.put_many(batch, also)
        except BaseException as exc:  # every caller of the batch sees the failure
            self._resolve(done, exc)
            if not isinstance(exc, Exception):
                raise  # KeyboardInterrupt, SystemExit: stop the loop as well
            return
        finally:  # the rows are made (or sent as they are): the prompts' JSON made for them can go
            for row in batch:
                row[3].forget_messages_json()
        self._resolve(done, None)

    def _resolve(self, done: asyncio.Future | None, exc: BaseException | None) -> None:
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
