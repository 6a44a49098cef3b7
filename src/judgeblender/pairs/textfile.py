"""Line-by-line reading of text inputs, plain or gzip, with errors that name file and line.

Readers either reject a line (InputError: file, line, what was expected) or apply one of a
few documented repairs, each reported once per file as a warning on the `judgeblender.inputs`
logger ("note: FILE: ..."; printed on stderr when logging is not configured):
- a UTF-8 byte-order mark at the start of a file is dropped;
- an exact duplicate line (same pair, same label, same query or passage text) is kept once;
- control characters (other than tab, newline, carriage return) in query or passage text
  become spaces: they carry no meaning for a judge and can hide text from a reader.
"""

from __future__ import annotations

import gzip
import logging
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

from ..errors import InputError
from ..notes import note

GZIP_MAGIC = b"\x1f\x8b"
log = logging.getLogger("judgeblender.inputs")
# C0 and C1 control characters and DEL, except tab, newline and carriage return.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_ANY_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# what an id may not hold, in one search: a control character or whitespace (`\s` on str is
# str.isspace's set); an id is checked on every line of every file, so the clean case is one call
_NOT_IN_ID = re.compile(_ANY_CONTROL.pattern + r"|\s")


def report_repair(path: str | Path, what: str, lines: list, unit: str = "line", count: int | None = None) -> None:
    """Tell the user, once per file and kind, that a documented repair was applied (`lines`: where,
    in `unit`s: lines of a file, rows of a DataFrame; `count`: how many in all, when `lines` holds
    only the first)."""
    if not lines:
        return
    count = len(lines) if count is None else count
    first = f"{unit} {lines[0]}" + (f", {count - 1} more" if count > 1 else "")
    note(log, f"{path}: {what} ({first})")


def clean_text(text: str) -> tuple[str, bool]:
    """The text with control characters replaced by spaces, and whether any were."""
    cleaned = _CONTROL.sub(" ", text)
    return cleaned, cleaned != text


def check_id(path: str | Path, lineno: int, value: str, what: str) -> str:
    """An identifier must be non-empty and free of control characters (they would never match)."""
    if not value:
        raise InputError(path, lineno, f"a non-empty {what}", value)
    if _NOT_IN_ID.search(value) is None:
        return value
    bad = _ANY_CONTROL.search(value)
    if bad:
        raise InputError(path, lineno, f"a {what} without control characters (found U+{ord(bad.group()):04X})", value)
    space = next((c for c in value if c.isspace()), None)
    if space is not None:  # qrels, runs and pairs files split on whitespace: it would never match
        raise InputError(path, lineno, f"a {what} without whitespace (found U+{ord(space):04X})", value)
    return value


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def iter_lines(path: str | Path, report: bool = True) -> Iterator[tuple[int, str]]:
    """Yield (line number, line without its newline) for a UTF-8 file, gzip or not.

    A UTF-8 byte-order mark is dropped. Undecodable bytes, a truncated gzip stream or an
    unreadable file become an InputError naming the line instead of a traceback. `report`
    False: a first look at the file (format detection), whose repairs the real read reports.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(path, None, "an existing file", "no such file")
    if path.is_dir():
        raise InputError(path, None, "a file", "a directory")
    raw = gzip.open(path, "rb") if _is_gzip(path) else open(path, "rb")
    lineno = 0
    try:
        with raw:
            for lineno, data in enumerate(raw, start=1):
                if lineno == 1 and data.startswith(b"\xef\xbb\xbf"):
                    data = data[3:]
                    if report:
                        report_repair(path, "UTF-8 byte-order mark at the start of the file ignored", [1])
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise InputError(path, lineno, "UTF-8 text", f"invalid byte at column {exc.start + 1}") from None
                yield lineno, text.rstrip("\r\n")
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InputError(path, lineno + 1, "a complete gzip stream", f"truncated or corrupt ({exc})") from None


def read_whole(path: str | Path) -> bytes | None:
    """The file's bytes, gunzipped when gzip; None when it cannot be read whole (missing, a
    directory, a truncated gzip stream): the fast paths then leave the file to iter_lines,
    which names the problem."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        return gzip.decompress(data) if data[:2] == GZIP_MAGIC else data
    except (OSError, EOFError, zlib.error):
        return None


def clean_lines(path: str | Path) -> list[str] | None:
    """The file's lines (newlines removed) when it is the plain case: UTF-8 without a byte-order
    mark and without control characters other than tab, newline and carriage return. Otherwise
    None: the caller goes through iter_lines, which names the line of any problem. Reading the
    whole file at once is several times quicker than line by line for large qrels."""
    data = read_whole(path)
    try:
        text = data.decode("utf-8") if data is not None else None
    except UnicodeDecodeError:
        return None
    if text is None:
        return None
    if text.startswith("\ufeff") or _CONTROL.search(text):
        return None
    lines = text.split("\n")
    if lines and not lines[-1]:
        lines.pop()
    return lines
