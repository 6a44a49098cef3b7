"""Atomic writes: a file is written to a temporary name beside it, then renamed into place.

Readers (and a re-run after a crash) see the old content or the new, never half a file:
every output the project writes (qrels, details, batch files, reports, caches, assembled
models) goes through here. Imports nothing of the project.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_writer(path: str | Path, mode: str = "wb", suffix: str = "", **open_args: Any) -> Iterator[IO]:
    """Open a temporary file beside `path` (`mode` and `open_args` as for open()); on a clean
    exit it is synced and renamed to `path`, on an exception it is removed and `path` is left
    as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    try:
        with os.fdopen(fd, mode, **open_args) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write a UTF-8 text file (newlines as written) so that readers see the old or the new
    content, never half of it."""
    with atomic_writer(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
