"""A store's one writer: every row a store is given goes through `submit` of one of these two.

A CallStore has one writer, chosen once (CallStore.writer_for) and kept for as long as the store
is open: which one depends on whose CPU bounds the run.

- `HereWriter`: rows made and committed by this process's own connection to the store. An
  embedded model's answer costs far more than its row, so nothing is gained by sending it
  elsewhere.
- `ChildWriter`: the store's writer process (store/writer.py) commits, so the SQLite work leaves
  a process whose CPU per call decides how many calls it feeds. A write that is waited for
  (`later=False`: a Ray driver's, and any other write the store is given meanwhile) has its rows
  made here, from the parts the Ray workers made of each row where they had the store's
  dictionaries (compact.row_parts), and returns once the child has committed them. A write for
  later (`later=True`: a served run's answers, the proxy's) goes as it is; the child makes its
  rows, and `done` runs in the event loop once the child's reply is read: the loop spends a few
  microseconds per answer on the message instead of the row's 100 us.

Each makes its rows with the one encoder (rows.encode_calls, rows.encode_judgments,
rows.encode_vectors), masked where they are made (compact.Texts), so the bytes stored are the
same whichever way they went. Each write is one transaction: its calls, judgments and vectors,
or none of them. Both use the store's connection through its `StoreAccess` (its connection,
texts and lock), the one object the store's reads and its writer share.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from .compact import CALLS_INSERT, JUDGMENTS_INSERT, unix_now
from .rows import VECTORS_INSERT, Write, encode_calls, encode_judgments
from .writer import Judgments, Results, Statement, StoreWriter, reply_error

if TYPE_CHECKING:
    from .calls import StoreAccess

# A write's outcome: None once its rows are committed, else the error naming the store.
Done = Callable[[BaseException | None], None]


class Writer(Protocol):
    kind: str  # "here" or "child"

    def submit(self, write: Write, done: Done, later: bool = False) -> None:
        """Commit `write` in one transaction. Raises what fails before anything was committed or
        sent (nothing of it is then stored); otherwise `done` is called once: before this returns
        by a write committed here and now, from the event loop's reader of the writer process's
        pipe by one sent for `later` to a child."""

    def ready(self) -> None:
        """Able to take the next write: a writer process that ended is replaced."""

    def wait(self) -> None:
        """Return once every write sent has had its `done` called."""

    def close(self) -> None:
        """Every write sent committed (or failed), and the writer's process, if any, ended."""


class HereWriter:
    """Rows made and committed by this process's connection to the store; `later` changes nothing."""

    kind = "here"

    def __init__(self, access: StoreAccess, redact: bool):
        self.access = access
        self.redact = redact

    def submit(self, write: Write, done: Done, later: bool = False) -> None:
        access, db = self.access, self.access.db
        now = unix_now()  # one transaction, one time
        with access:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(CALLS_INSERT, encode_calls(access.texts, write.calls, now, self.redact))
                if write.judgments is not None:
                    db.executemany(JUDGMENTS_INSERT, encode_judgments(access.texts, write.judgments, now))
                if write.vectors:
                    db.executemany(VECTORS_INSERT, write.vectors)
            except sqlite3.OperationalError as exc:  # disk full, read-only: say which file
                access.rollback()
                raise access.write_failure(exc) from None
            except BaseException:
                access.rollback()
                raise
            db.execute("COMMIT")
        done(None)

    def ready(self) -> None:
        pass

    def wait(self) -> None:
        pass

    def close(self) -> None:
        pass


class ChildWriter:
    """The store's writer process commits (`process`, store/writer.py's StoreWriter): rows made
    here for a write waited for, made there for one sent for `later`."""

    kind = "child"

    def __init__(self, access: StoreAccess, redact: bool):
        self.access = access
        self.redact = redact
        self.process = StoreWriter(access.path)  # starts now (0.6 ms), ready (100 ms) before the first write

    def ready(self) -> None:
        if self.process.proc.poll() is not None:  # it ended (its last write failed, naming the store): a new one
            self.process.close()
            self.process = StoreWriter(self.access.path)

    def submit(self, write: Write, done: Done, later: bool = False) -> None:
        if later:
            self._send(write, done)
            return
        access = self.access
        now = unix_now()
        with access:
            access.texts.deferred = []  # the texts' inserts go with the rows
            try:
                rows = encode_calls(access.texts, write.calls, now, self.redact)
                message: list[tuple] = [Statement(sql, [row]) for sql, row in access.texts.deferred]
                message += self._rest([Statement(CALLS_INSERT, rows)] if rows else [], write, now)
                self.process.write(message)
                access.texts.deferred = None
            except sqlite3.OperationalError as exc:  # disk full, read-only, the writer gone
                access.rollback()
                raise access.write_failure(exc) from None
            except BaseException:
                access.rollback()
                raise
        done(None)

    def _send(self, write: Write, done: Done) -> None:
        """The write as it is (its calls as plain tuples: cheaper to pickle), made into rows by
        the child; `done` from the loop's reader once the child has answered."""
        now = unix_now()
        calls = [Results([tuple(c) for c in write.calls], now, self.redact)] if write.calls else []
        message = self._rest(calls, write, now)
        access = self.access
        with access:
            proc = self.process.proc

            def on_reply(reply: Any) -> None:
                exc = reply_error(reply, proc)
                done(None if exc is None else access.write_failure(exc))

            self.process.submit(message, on_reply)

    @staticmethod
    def _rest(head: list, write: Write, now: float) -> list[tuple]:
        """`head` (the calls' instructions) followed by the judgments, as records the child
        encodes (their details' JSON and deflate leave this process too), and the vectors."""
        message = list(head)
        if write.judgments is not None:
            judge_id, records = write.judgments
            message.append(Judgments(judge_id, list(records), now))
        if write.vectors:
            message.append(Statement(VECTORS_INSERT, list(write.vectors)))
        return message

    def wait(self) -> None:
        with self.access:
            self.process.wait()

    def close(self) -> None:
        self.process.close()
