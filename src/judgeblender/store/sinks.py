"""The three ways an answered call reaches the store, behind one protocol.

Which way is right depends on whose CPU bounds the run:

- `InProcessSink`: rows made and committed by this process's own connection. An embedded
  model's answer costs far more than its row, so nothing is gained by sending it elsewhere.
- `RayRowsSink`: rows made here, from the parts the Ray workers made of each row where they had
  the store's dictionaries (compact.row_parts), and committed by the store's writer process
  (store/writer.py): the SQLite work leaves a Ray driver, whose CPU per call decides how many
  calls it feeds. Any `put_many` takes this way once `write_in_child` has started the writer.
- `WriterProcessSink`: answers sent as they are to the writer process, which makes their rows
  and commits them; `done` runs in the event loop once its reply is read. A served run's loop
  spends a few microseconds per answer on the message instead of the row's 100 us.

Each makes its rows with the one encoder (rows.encode_calls, rows.encode_judgments), masked where
they are made (compact.Texts), so the bytes stored are the same whichever way they went. Each
commit is one transaction: calls and the judgments beside them, or neither. The sinks are the
store's own write side: they use the CallStore's connection, lock, texts and writer process as
its methods would (store/calls.py: put_many, put_many_later, put_judgments).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .compact import CALLS_INSERT, JUDGMENTS_INSERT, unix_now
from .rows import CallRow, JudgmentRows, encode_calls, encode_judgments
from .writer import Judgments, Results, Statement, reply_error

if TYPE_CHECKING:
    from .calls import CallStore

# A commit's outcome: None once the rows are committed, else the error naming the store.
Done = Callable[[BaseException | None], None]


class Sink(Protocol):
    def commit(self, calls: Sequence[CallRow | tuple], judgments: JudgmentRows | tuple | None, done: Done) -> None:
        """Commit `calls` and `judgments` (None: none) in one transaction. Raises what fails
        before anything was committed or sent (nothing of it is then stored); otherwise `done`
        is called once: at once by a sink that commits here and now, from the event loop's
        reader of the writer process's pipe by one that does not."""


class InProcessSink:
    """Rows made and committed by this process's connection to the store."""

    def __init__(self, store: CallStore):
        self.store = store

    def commit(self, calls: Sequence[CallRow | tuple], judgments: JudgmentRows | tuple | None, done: Done) -> None:
        store = self.store
        now = unix_now()  # one transaction, one time
        with store._lock:
            store._db.execute("BEGIN IMMEDIATE")
            try:
                rows = encode_calls(store._texts, calls, now, store.redact_passages)
                store._db.executemany(CALLS_INSERT, rows)
                if judgments is not None:
                    store._db.executemany(JUDGMENTS_INSERT, encode_judgments(store._texts, judgments, now))
            except sqlite3.OperationalError as exc:  # disk full, read-only: say which file
                store.rollback()
                raise store._write_failure(exc) from None
            except BaseException:
                store.rollback()
                raise
            store._db.execute("COMMIT")
        store.new_calls += len(rows)
        done(None)


class RayRowsSink:
    """Rows made here (using the parts Ray's workers made, where the store chose their
    dictionary), committed by the writer process with the texts they added, in its one
    transaction; the judgments go as records, encoded there. Returns once committed."""

    def __init__(self, store: CallStore):
        self.store = store

    def commit(self, calls: Sequence[CallRow | tuple], judgments: JudgmentRows | tuple | None, done: Done) -> None:
        store = self.store
        now = unix_now()
        with store._lock:
            writer = store._writer
            assert writer is not None  # CallStore.sink chooses this sink only with a writer process
            store._texts.deferred = []  # the texts' inserts go with the rows
            try:
                rows = encode_calls(store._texts, calls, now, store.redact_passages)
                message: list[tuple] = [Statement(sql, [row]) for sql, row in store._texts.deferred]
                if rows:
                    message.append(Statement(CALLS_INSERT, rows))
                if judgments is not None:
                    judge_id, records = judgments
                    message.append(Judgments(judge_id, list(records), now))
                writer.write(message)
                store._texts.deferred = None
            except sqlite3.OperationalError as exc:  # disk full, read-only, the writer gone
                store.rollback()
                raise store._write_failure(exc) from None
            except BaseException:
                store.rollback()
                raise
        store.new_calls += len(rows)
        done(None)


class WriterProcessSink:
    """Answers sent as they are to the writer process (started the first time), which makes
    their rows and commits them with the judgments in one transaction. `done(None)` is called in
    the running loop once they are committed, or `done(error)` with the error InProcessSink would
    have raised; CallStore.wait_writes waits for every `done` still to come."""

    def __init__(self, store: CallStore):
        self.store = store

    def commit(self, calls: Sequence[CallRow | tuple], judgments: JudgmentRows | tuple | None, done: Done) -> None:
        store = self.store
        now = unix_now()
        message: list[tuple] = [Results([tuple(c) for c in calls], now, store.redact_passages)] if calls else []
        if judgments is not None:
            judge_id, records = judgments
            message.append(Judgments(judge_id, list(records), now))
        n = len(calls)
        with store._lock:
            if store._writer is None:
                store.write_in_child()
            writer = store._writer
            assert writer is not None
            proc = writer.proc

            def on_reply(reply: Any) -> None:
                exc = reply_error(reply, proc)
                if exc is None:
                    store.new_calls += n
                    done(None)
                else:
                    done(store._write_failure(exc))

            writer.submit(message, on_reply)
