"""Atomic writes: a file is written to a temporary name beside it, then renamed into place.

Readers (and a re-run after a crash) see the old content or the new, never half a file:
every output the project writes (qrels, details, batch files, reports, caches, assembled
models) goes through here. So text written here is masked here too (judgeblender.masking: the
API keys this process holds, in every form a server may echo them); binary files (models,
caches) are written as they are. Imports nothing of the project but masking.

The temporary file is made private (tempfile.mkstemp), so before it is renamed it gets the
mode the output would have had if opened directly: an existing file keeps its own, a new
one gets 0666 masked by the user's umask, as every other tool's output does.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from . import masking


def current_umask() -> int:
    """The process's umask, read without changing it where the system says it (Linux's
    /proc/self/status); elsewhere it is set and restored at once."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def output_mode(path: str | Path) -> int:
    """The permission bits an output at `path` gets: an existing file's own, else 0666 & ~umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return 0o666 & ~current_umask()


@contextmanager
def atomic_writer(path: str | Path, mode: str = "wb", suffix: str = "", **open_args: Any) -> Iterator[IO]:
    """Open a temporary file beside `path` (`mode` and `open_args` as for open()); on a clean
    exit it is synced and renamed to `path`, on an exception it is removed and `path` is left
    as it was. The file ends with `output_mode(path)`. In a text mode, what is written is
    masked (masking.py)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode_bits = output_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    try:
        os.fchmod(fd, mode_bits)
        with os.fdopen(fd, mode, **open_args) as fh:
            yield fh if "b" in mode else masking.Writer(fh)
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
