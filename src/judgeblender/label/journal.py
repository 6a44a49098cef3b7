"""The labeling journal: one JSON line per action, fsynced before the page is told it was saved.

Appending and syncing each label means a crash (or a killed server) loses nothing the
user saw confirmed. Replaying the journal, last action per pair winning, gives the labels
back on restart. The only damage a crash can leave is a torn last line that was never
confirmed; it is cut off on open, and reported.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..errors import InputError

LEVELS = (0, 1, 2, 3)


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
        self.entries = self._replay()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "ab")

    def _replay(self) -> list[JournalEntry]:
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            # A crash during a write leaves a partial line that was never confirmed: cut it off
            # so the next append starts on a line of its own.
            cut = data.rfind(b"\n") + 1
            self.torn_line = data[cut:].decode("utf-8", "replace")
            with open(self.path, "r+b") as fh:
                fh.truncate(cut)
                fh.flush()
                os.fsync(fh.fileno())
            data = data[:cut]
        entries = []
        for lineno, line in enumerate(data.split(b"\n")[:-1], start=1):
            try:
                raw = line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(self.path, lineno, "UTF-8 text", f"invalid byte at column {exc.start + 1}") from None
            if raw.strip():
                entries.append(_parse(self.path, lineno, raw))
        return entries

    def append(self, qid: str, docid: str, label: int | None) -> JournalEntry:
        if label is not None and label not in LEVELS:
            raise ValueError(f"label must be one of {LEVELS} or None, got {label!r}")
        entry = JournalEntry(qid, docid, label, datetime.now(timezone.utc).isoformat(timespec="seconds"))
        self._fh.write((entry.to_json() + "\n").encode("utf-8"))
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.entries.append(entry)
        return entry

    def close(self) -> None:
        self._fh.close()


def _parse(path: Path, lineno: int, raw: str) -> JournalEntry:
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(path, lineno, "one JSON object per line", f"{exc.msg} at column {exc.colno}") from None
    if not isinstance(obj, dict):
        raise InputError(path, lineno, "a JSON object", raw)
    qid, docid, label = obj.get("qid"), obj.get("docid"), obj.get("label", "missing")
    if not isinstance(qid, str) or not isinstance(docid, str) or not qid or not docid:
        raise InputError(path, lineno, "string fields qid and docid", raw)
    if label is not None and (isinstance(label, bool) or label not in LEVELS):
        raise InputError(path, lineno, "a label 0-3, or null for a skip", raw)
    return JournalEntry(qid, docid, label, str(obj.get("at", "")))
