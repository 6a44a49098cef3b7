"""A store's writes in a process of their own, for a driver whose CPU is the bound (`--ray`).

Under Ray the driver's CPU per answered call decides how many calls one driver feeds (issue 23:
at most 0.2 ms), and SQLite's insert and commit of each answer's row were the largest part of
what the store cost it (about 35 us of CPU per call: every row lands on a page of its own, since
keys are hashes, and each commit writes those pages to the write-ahead log). Here they run in a
child process: the driver makes the rows (texts and shapes first), sends them in one message,
and waits for the child's word that they are committed, so an answer still counts only once its
row is in the store, and a killed driver loses only its calls in flight. The child's own CPU is
not the driver's.

- One message per transaction: [(statement, rows), ...], run in order between BEGIN IMMEDIATE
  and COMMIT; the answer is "ok" or the SQLite error (its class, text and error name), raised in
  the driver as the store's own writes raise it (CallStore._write), with the transaction rolled
  back. A judge's judgments travel as records (JUDGMENTS, judge id, [(qid, docid, record)],
  time) and are encoded here (compact.Texts.encode_judgment: their details' JSON and deflate
  were the next largest part of the driver's store cost), exactly as the driver encodes them.
- The child ignores SIGINT and SIGTERM (Ctrl+C reaches the whole process group): the driver
  decides when a run stops; the child ends when its pipe closes (the store closed, or the
  driver gone).
- Messages are length-prefixed pickles over the child's stdin and stdout, between two processes
  of the same user on one machine.
"""

from __future__ import annotations

import os
import pickle
import signal
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any, BinaryIO

_HEAD = struct.Struct("<Q")
JUDGMENTS = "judgments"  # an instruction: a judge's judgments as records, encoded by the child


def _send(fh: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    fh.write(_HEAD.pack(len(data)) + data)
    fh.flush()


def _receive(fh: BinaryIO) -> Any:
    """The next message, or None at the end of the pipe."""
    head = fh.read(_HEAD.size)
    if len(head) < _HEAD.size:
        return None
    (size,) = _HEAD.unpack(head)
    data = fh.read(size)
    return pickle.loads(data) if len(data) == size else None


class WriterGone(sqlite3.OperationalError):
    """The writer process ended (killed, or out of memory) before it answered."""


class StoreWriter:
    """The driver's end: one child process writing to the store at `path`."""

    def __init__(self, path: Path):
        self.path = path
        self.proc = self._start()

    def _start(self) -> subprocess.Popen:
        import judgeblender

        env = dict(os.environ)
        package_root = str(Path(judgeblender.__file__).resolve().parents[1])  # the child imports this checkout
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        return subprocess.Popen([sys.executable, "-c", "from judgeblender.store.writer import main; main()",
                                 str(self.path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def write(self, statements: list[tuple]) -> None:
        """Runs the statements in one transaction; returns once it is committed."""
        try:
            _send(self.proc.stdin, statements)  # type: ignore[arg-type]
            reply = _receive(self.proc.stdout)  # type: ignore[arg-type]
        except (BrokenPipeError, OSError):
            reply = None
        except BaseException:  # interrupted (Ctrl+C): this message's answer may never be read
            self._replace()
            raise
        if reply is None:
            raise WriterGone(f"the store's writer process ended (exit status {self.proc.poll()})")
        if reply != "ok":
            kind, text, name = reply
            exc = (sqlite3.OperationalError if kind == "OperationalError" else sqlite3.DatabaseError)(text)
            exc.sqlite_errorname = name  # type: ignore[attr-defined]
            raise exc

    def _replace(self) -> None:
        """A new child with a clean pipe, so no later write reads an earlier one's answer. The old
        child finishes its transaction (committed or not: the caller counted none of its rows, and a
        resume finds what was committed) and ends with its pipe."""
        old, self.proc = self.proc, self._start()
        for pipe in (old.stdin, old.stdout):
            try:
                pipe.close()  # type: ignore[union-attr]
            except OSError:
                pass

    def close(self) -> None:
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
    from .compact import JUDGMENTS_INSERT, Texts

    db = sqlite3.connect(path, timeout=60, isolation_level=None)
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA busy_timeout=60000")
    while (statements := _receive(requests)) is not None:
        try:
            db.execute("BEGIN IMMEDIATE")
            for instruction in statements:
                if instruction[0] == JUDGMENTS:
                    _, judge_id, records, now = instruction
                    texts = Texts(db)
                    db.executemany(JUDGMENTS_INSERT, [texts.encode_judgment(judge_id, qid, docid, record, now)
                                                      for qid, docid, record in records])
                else:
                    db.executemany(*instruction)
            db.execute("COMMIT")
            reply: Any = "ok"
        except sqlite3.Error as exc:
            if db.in_transaction:
                db.execute("ROLLBACK")
            reply = (type(exc).__name__, str(exc), getattr(exc, "sqlite_errorname", ""))
        try:
            _send(replies, reply)
        except BrokenPipeError:  # the driver is gone: nothing waits for the answer
            break
    db.close()


def main() -> None:
    """The child process (StoreWriter starts it): the store's path is its one argument."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    serve(sys.argv[1], sys.stdin.buffer, sys.stdout.buffer)
