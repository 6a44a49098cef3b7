"""The labeling journal: one JSON line per action, fsynced before the page is told it was saved.

Appending and syncing each label means a crash (or a killed server) loses nothing the
user saw confirmed. Replaying the journal, last action per pair winning, gives the labels
back on restart. The only damage a crash can leave is a torn last line that was never
confirmed; it is cut off on open, and reported. Only a journal is ever cut: every whole line
must be a journal entry and the torn one the start of one, else the file (a qrels file, a
picture given as --journal by mistake) is refused as it is.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..errors import InputError, JudgeblenderError

LEVELS = (0, 1, 2, 3)
JOURNAL_KEYS = frozenset({"qid", "docid", "label", "at"})  # what JournalEntry.to_json writes
TORN_START = b'{"qid": '  # how every line JournalEntry.to_json writes starts


def is_level(label: object) -> bool:
    """A label of the scale: an int 0-3 (not a bool, not 2.0: JSON floats and true are refused)."""
    return type(label) is int and label in LEVELS


class JournalWriteError(JudgeblenderError):
    """An action could not be written to the journal: it was not saved and is not in the file."""


def hold_lock(fd: int, path: Path, what: str) -> None:
    """An exclusive lock on an open file, held until it is closed (the kernel drops it when the
    process dies, so a crashed server leaves no stale lock); held elsewhere: an error."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EACCES):
            raise JudgeblenderError(f"{path}: {what} is in use by another labeling server; stop that one first "
                                    "(two servers on one file would overwrite each other's labels)") from None
        raise JudgeblenderError(f"{path}: cannot lock {what} ({exc.strerror})") from None


@dataclass(frozen=True)
class JournalEntry:
    qid: str
    docid: str
    label: int | None  # None records a skip
    at: str = ""

    def to_json(self) -> str:
        return json.dumps({"qid": self.qid, "docid": self.docid, "label": self.label, "at": self.at},
                          ensure_ascii=False)


class Journal:
    """An append-only JSONL file of labels and skips."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.torn_line: str | None = None  # the unconfirmed partial line cut off on open, if any
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Locked before it is read or repaired: one server per journal.
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        hold_lock(self._fd, self.path, "the journal")
        self._broken: str | None = None  # set when a failed write could not be rolled back
        try:
            self.entries = self._replay()
        except BaseException:
            self.close()
            raise

    def _replay(self) -> list[JournalEntry]:
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        cut = data.rfind(b"\n") + 1
        entries = []
        for lineno, line in enumerate(data[:cut].split(b"\n")[:-1], start=1):
            try:
                raw = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(self.path, lineno, "UTF-8 text", f"invalid byte at column {exc.start + 1}") from None
            if raw.strip():
                entries.append(_parse(self.path, lineno, raw))
        if cut < len(data):
            # A crash during a write leaves a partial line that was never confirmed: cut it off
            # so the next append starts on a line of its own; anything else is not ours to cut.
            torn = data[cut:]
            if not (torn.startswith(TORN_START) or TORN_START.startswith(torn)):
                raise InputError(self.path, data.count(b"\n") + 1, "a labeling journal (JSON lines ending in a "
                                 "newline)", torn[:40].decode("utf-8", "replace"))
            self.torn_line = torn.decode("utf-8", "replace")
            with open(self.path, "r+b") as fh:
                fh.truncate(cut)
                fh.flush()
                os.fsync(fh.fileno())
        return entries

    def append(self, qid: str, docid: str, label: int | None) -> JournalEntry:
        """Write and fsync one action. On failure (disk full, I/O error) the file is cut back to
        what it held before, so the action is neither confirmed now nor replayed later."""
        if label is not None and not is_level(label):
            raise ValueError(f"label must be one of {LEVELS} or None, got {label!r}")
        if self._broken:
            raise JournalWriteError(self._broken)
        entry = JournalEntry(qid, docid, label, datetime.now(timezone.utc).isoformat(timespec="seconds"))
        data = (entry.to_json() + "\n").encode("utf-8")
        size = os.fstat(self._fd).st_size
        try:
            view = memoryview(data)
            while view:  # unbuffered: nothing is left in a buffer to be written by a later append
                view = view[os.write(self._fd, view):]
            os.fsync(self._fd)
        except OSError as exc:
            reason = f"{self.path} could not be written ({exc.strerror or exc})"
            try:
                os.ftruncate(self._fd, size)
                os.fsync(self._fd)
            except OSError as undo:
                self._broken = (f"{reason}, and could not be cut back ({undo.strerror}): the last label may be "
                                "in the journal; restart the server to see what it holds")
                raise JournalWriteError(self._broken) from None
            raise JournalWriteError(reason) from None
        self.entries.append(entry)
        return entry

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # releases the lock
            self._fd = -1


def _parse(path: Path, lineno: int, raw: str) -> JournalEntry:
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(path, lineno, "one JSON object per line", f"{exc.msg} at column {exc.colno}") from None
    if not isinstance(obj, dict):
        raise InputError(path, lineno, "a JSON object", raw)
    extra = sorted(set(obj) - JOURNAL_KEYS)
    if extra:  # a judge's details file, or another tool's JSON lines: not people's labels
        raise InputError(path, lineno, f"a journal entry (only the keys {', '.join(sorted(JOURNAL_KEYS))})",
                         f"other keys: {', '.join(extra)}")
    qid, docid, label = obj.get("qid"), obj.get("docid"), obj.get("label", "missing")
    if not isinstance(qid, str) or not isinstance(docid, str) or not qid or not docid:
        raise InputError(path, lineno, "string fields qid and docid", raw)
    if label is not None and not is_level(label):
        raise InputError(path, lineno, "a label 0-3, or null for a skip", raw)
    return JournalEntry(qid, docid, label, str(obj.get("at", "")))
