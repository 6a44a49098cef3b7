"""Line-by-line reading of text inputs, plain or gzip, with errors that name file and line."""

from __future__ import annotations

import gzip
import io
import os
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from ..errors import InputError

GZIP_MAGIC = b"\x1f\x8b"


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield (line number, line without its newline) for a UTF-8 file, gzip or not.

    A UTF-8 byte-order mark is dropped. Undecodable bytes, a truncated gzip stream or an
    unreadable file become an InputError naming the line instead of a traceback.
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
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise InputError(path, lineno, "UTF-8 text", f"invalid byte at column {exc.start + 1}") from None
                yield lineno, text.rstrip("\r\n")
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InputError(path, lineno + 1, "a complete gzip stream", f"truncated or corrupt ({exc})") from None


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write a file so that readers see the old or the new content, never half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with io.open(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
