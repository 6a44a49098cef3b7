"""A store's writes in a process of their own, for a driver whose CPU is the bound (`--ray`).

Under Ray the driver's CPU per answered call decides how many calls one driver feeds (issue 23:
at most 0.2 ms), and SQLite's insert and commit of each answer's row were the largest part of
what the store cost it (about 35 us of CPU per call: every row lands on a page of its own, since
keys are hashes, and each commit writes those pages to the write-ahead log). Here they run in a
child process: the driver makes the rows (texts and shapes first), sends them in one message,
and waits for the child's word that they are committed, so an answer still counts only once its
row is in the store, and a killed driver loses only its calls in flight. The child's own CPU is
not the driver's.

- One message per transaction: a list of instructions, run in order between BEGIN IMMEDIATE
  and COMMIT; the answer is "ok" or the SQLite error (its class, text and error name), raised in
  the driver as the store's own writes raise it (store/sinks.py), with the transaction rolled
  back. Under Ray the driver makes the calls' rows (texts and shapes first) and sends them as
  `Statement`s; a judge's judgments travel as records (`Judgments`) and are encoded here
  (rows.encode_judgments: their details' JSON and deflate were the next largest part of the
  driver's store cost), by the encoder the driver would have used.
- The child ignores SIGINT and SIGTERM (Ctrl+C reaches the whole process group): the driver
  decides when a run stops; the child ends when its pipe closes (the store closed, or the
  driver gone), having committed every message it was sent: a served driver sends without
  waiting, so a killed one may leave several in the pipe, and their answers stay stored.
- Messages are length-prefixed pickles over the child's stdin and stdout, between two processes
  of the same user on one machine.
- The rows the child makes are masked as the driver's are (judgeblender.masking): a message
  starts with the secrets the driver holds (`Secrets`) whenever they are not yet the child's, so an
  API key a server echoed reaches no row, whichever process makes it.

A served run (an OpenAI-compatible backend, not under Ray) uses the same child differently
(`submit`): its event loop sends the answers as they are (`Results`: the CallRows) and goes
on; the child makes the rows (rows.encode_calls, the encoder every sink uses: the JSON and deflate
that were about 100 us of the loop's CPU per call, against 5-7 us to pickle the answer) and
commits them, and its reply is read by the loop's reader when it comes, which is when those
answers count. The loop's CPU is what holds a served run below the client's limit (issue 23
part 4): each millisecond it spends is a millisecond an arrived answer waits to be read.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import select
import signal
import sqlite3
import struct
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from .. import masking

_HEAD = struct.Struct("<Q")


# The instructions a message holds. Any other pair is a statement and its rows (what a test or a
# caller of StoreWriter.write may send as a plain tuple).
class Statement(NamedTuple):
    """Rows the driver made (Ray's rows, and the texts they added), run with executemany."""

    sql: str
    rows: list[tuple]


class Results(NamedTuple):
    """Answers as the engine has them (CallRow fields, as plain tuples: cheaper to pickle); the
    child makes their rows with the encoder every sink uses (rows.encode_calls)."""

    calls: list[tuple]
    now: float
    redact: bool


class Judgments(NamedTuple):
    """A judge's judgments as records (qid, docid, record), encoded by the child."""

    judge_id: str
    records: list[tuple[str, str, dict[str, Any]]]
    now: float


class Secrets(NamedTuple):
    """The secrets the child masks in the rows it makes (masking.py)."""

    values: tuple[str, ...]


def _frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEAD.pack(len(data)) + data


def _send(fh: BinaryIO, obj: Any) -> None:
    fh.write(_frame(obj))
    fh.flush()


def _receive(fh: BinaryIO) -> Any:
    """The next message, or None at the end of the pipe."""
    head = fh.read(_HEAD.size)
    if len(head) < _HEAD.size:
        return None
    (size,) = _HEAD.unpack(head)
    data = fh.read(size)
    return pickle.loads(data) if len(data) == size else None


def _wait_readable(fd: int) -> None:
    """Block until `fd` has something to read (or its end). poll, not select: select refuses a
    descriptor numbered 1024 or more, which a driver with many connections open may get."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    poller.poll()


class WriterGone(sqlite3.OperationalError):
    """The writer process ended (killed, or out of memory) before it answered."""


# what a message waiting on a writer that was replaced gets: its rows may or may not be committed
# (the old writer finishes what it has read), and they do not count
_REPLACED = ("OperationalError", "interrupted before the store's writer process confirmed the write", "")


def reply_error(reply: Any, proc: subprocess.Popen) -> sqlite3.Error | None:
    """The error a reply stands for: None for "ok", WriterGone for no reply (the child ended),
    else the child's SQLite error as this process's sqlite3 would have raised it."""
    if reply == "ok":
        return None
    if reply is None:
        return WriterGone(f"the store's writer process ended (exit status {proc.poll()})")
    kind, text, name = reply
    exc = (sqlite3.OperationalError if kind == "OperationalError" else sqlite3.DatabaseError)(text)
    exc.sqlite_errorname = name  # type: ignore[attr-defined]
    return exc


class StoreWriter:
    """The driver's end: one child process writing to the store at `path`. Each message is one
    transaction and gets one reply, in order: `write` waits for its own; `submit` leaves it to the
    running event loop's reader (or to `wait`)."""

    def __init__(self, path: Path):
        self.path = path
        self.proc = self._start()
        self._inbox = bytearray()
        self._waiting: deque[Callable[[Any], None]] = deque()  # one per message sent, in order
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop whose reader takes replies

    def _start(self) -> subprocess.Popen:
        import judgeblender

        self._told: tuple[str, ...] = ()  # the secrets this child has been sent: none yet
        env = dict(os.environ)
        package_root = str(Path(judgeblender.__file__).resolve().parents[1])  # the child imports this checkout
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        proc = subprocess.Popen([sys.executable, "-c", "from judgeblender.store.writer import main; main()",
                                 str(self.path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        os.set_blocking(proc.stdout.fileno(), False)  # type: ignore[union-attr]
        return proc

    def submit(self, statements: list[tuple], on_reply: Callable[[Any], None]) -> None:
        """Send one transaction; `on_reply(reply)` gets "ok", the child's SQLite error or None (the
        child ended: see reply_error) once it answers: from the running event loop's reader, or
        from `wait`. Answers come in the order the messages went."""
        secrets = masking.secrets()
        if secrets != self._told:  # the child masks what the driver does (its rows, its judgments)
            statements = [Secrets(secrets), *statements]
        data = _frame(statements)  # a message that cannot be pickled fails here, before anything is sent
        self._told = secrets
        self._waiting.append(on_reply)
        try:
            self.proc.stdin.write(data)  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except BrokenPipeError:  # the writer has ended
            self._gone()
            return
        except BaseException:  # interrupted or failed part-way through the message: the pipe is no longer framed
            self._replace()
            raise
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._loop is not loop:
            self._unwatch()
            loop.add_reader(self.proc.stdout.fileno(), self._read)  # type: ignore[union-attr]
            self._loop = loop

    def wait(self) -> None:
        """Return once every message sent has its answer (each handed to its `on_reply`)."""
        while self._waiting:
            _wait_readable(self.proc.stdout.fileno())  # type: ignore[union-attr]
            self._read()

    def write(self, statements: list[tuple]) -> None:
        """Runs the statements in one transaction; returns once it is committed."""
        replies: list[Any] = []
        self.submit(statements, replies.append)
        # the earlier messages' answers first, handed to their waiters; interrupted (Ctrl+C), this
        # message's answer stays queued for its own waiter, so a later write never takes it
        self.wait()
        exc = reply_error(replies[0], self.proc)
        if exc is not None:
            raise exc

    def _read(self) -> None:
        """Take what the child has sent, and hand each whole reply to its waiter. Interrupted
        part-way (Ctrl+C), the replies could no longer be matched to their messages: the child
        is replaced, and what waited on it does not count."""
        replies = []
        try:
            try:
                data = os.read(self.proc.stdout.fileno(), 1 << 16)  # type: ignore[union-attr]
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if data:
                inbox = self._inbox
                inbox += data
                while len(inbox) >= _HEAD.size:
                    (size,) = _HEAD.unpack_from(inbox)
                    if len(inbox) < _HEAD.size + size:
                        break
                    replies.append(pickle.loads(inbox[_HEAD.size:_HEAD.size + size]))
                    del inbox[:_HEAD.size + size]
        except BaseException:
            self._replace()
            raise
        for reply in replies:
            self._waiting.popleft()(reply)
        if not data:
            self._gone()

    def _unwatch(self) -> None:
        if self._loop is not None:
            if not self._loop.is_closed():
                self._loop.remove_reader(self.proc.stdout.fileno())  # type: ignore[union-attr]
            self._loop = None

    def _gone(self) -> None:
        """The child ended (or its pipe broke): every message still waiting gets no answer."""
        self._unwatch()
        waiting, self._waiting = self._waiting, deque()
        for on_reply in waiting:
            on_reply(None)

    def _replace(self) -> None:
        """A new child with a clean pipe, for a pipe no longer framed (a message cut off part-way,
        a read interrupted part-way), so no later write reads an earlier one's answer. The old
        child finishes its transaction (committed or not: the caller counted none of its rows, and a
        resume finds what was committed) and ends with its pipe; what waited on it gets _REPLACED."""
        old = self.proc
        self._unwatch()
        waiting, self._waiting = self._waiting, deque()
        self._inbox = bytearray()
        try:
            for pipe in (old.stdin, old.stdout):
                try:
                    pipe.close()  # type: ignore[union-attr]
                except OSError:
                    pass
            self.proc = self._start()  # if this fails, the next write finds the old pipe closed
        finally:
            for on_reply in waiting:
                on_reply(_REPLACED)

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self._unwatch()
            try:
                self.proc.stdin.close()  # type: ignore[union-attr]
            except OSError:
                pass
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc.stdout.close()  # type: ignore[union-attr]


def serve(path: str, requests: BinaryIO, replies: BinaryIO) -> None:
    """The child's loop: each message one transaction, until the pipe closes."""
    from .compact import CALLS_INSERT, JUDGMENTS_INSERT, Texts
    from .rows import encode_calls, encode_judgments

    db = sqlite3.connect(path, timeout=60, isolation_level=None)
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA busy_timeout=60000")
    texts = Texts(db)  # what this connection has stored, forgotten with a rolled back transaction
    replying = True
    while (statements := _receive(requests)) is not None:
        try:
            db.execute("BEGIN IMMEDIATE")
            for instruction in statements:
                if isinstance(instruction, Secrets):
                    for secret in instruction.values:
                        masking.register(secret)
                elif isinstance(instruction, Judgments):
                    db.executemany(JUDGMENTS_INSERT, encode_judgments(
                        texts, (instruction.judge_id, instruction.records), instruction.now))
                elif isinstance(instruction, Results):
                    db.executemany(CALLS_INSERT, encode_calls(texts, instruction.calls, instruction.now,
                                                              instruction.redact))
                else:
                    db.executemany(*instruction)
            db.execute("COMMIT")
            reply: Any = "ok"
        except sqlite3.Error as exc:
            texts = Texts(db)
            if db.in_transaction:
                db.execute("ROLLBACK")
            reply = (type(exc).__name__, str(exc), getattr(exc, "sqlite_errorname", ""))
        if replying:
            try:
                _send(replies, reply)
            except BrokenPipeError:  # the driver is gone: commit what it sent all the same, to its end
                replying = False
    db.close()


def main() -> None:
    """The child process (StoreWriter starts it): the store's path is its one argument."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    serve(sys.argv[1], sys.stdin.buffer, sys.stdout.buffer)
