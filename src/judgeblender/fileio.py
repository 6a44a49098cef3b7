"""Atomic writes: a file is written to a temporary name beside it, then renamed into place.

Readers (and a re-run after a crash) see the old content or the new, never half a file:
every output the project writes (qrels, details, batch files, reports, caches, assembled
models) goes through here. So text written here is masked here too (judgeblender.masking: the
API keys this process holds, in every form a server may echo them); binary files (models,
caches) are written as they are. Imports nothing of the project but masking and its errors.

A write that fails (a full disk, a read-only medium, an I/O error) raises one OutputError naming
the output, whichever step failed (making the folder or the temporary file, a write, the flush,
the sync, the rename), and removes the temporary file: the output is as it was, and the command
ends with one `error:` line and exit 2 instead of a traceback. The file object handed to the
caller raises it too, for its own writes only: another OSError of the caller's (an input it
reads while writing) passes through as it is, and when two outputs are written at once, the one
whose write failed is the one named.

The temporary file is made private (tempfile.mkstemp), so before it is renamed it gets the
mode the output would have had if opened directly: an existing file keeps its own, a new
one gets 0666 masked by the user's umask, as every other tool's output does.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import IO, Any

from . import masking
from .errors import OutputError


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


class _Written:
    """The temporary file as the caller sees it: every call is the file's own, but a write or
    flush that fails raises OutputError naming the output (not the temporary name)."""

    def __init__(self, fh: IO, path: Path, existed: bool):
        self._fh, self._path, self._existed = fh, path, existed

    def _guarded(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self._fh, method)(*args)
        except OutputError:
            raise
        except OSError as exc:
            raise OutputError(self._path, exc, self._existed) from None

    def write(self, data: Any) -> Any:
        return self._guarded("write", data)

    def writelines(self, lines: Any) -> None:
        self._guarded("writelines", lines)

    def flush(self) -> None:
        self._guarded("flush")

    def __getattr__(self, name: str) -> Any:  # tell, seek, fileno, ...: the file's own
        return getattr(self._fh, name)


@contextmanager
def atomic_writer(path: str | Path, mode: str = "wb", suffix: str = "", **open_args: Any) -> Iterator[IO]:
    """Open a temporary file beside `path` (`mode` and `open_args` as for open()); on a clean
    exit it is synced and renamed to `path`, on an exception it is removed and `path` is left
    as it was. The file ends with `output_mode(path)`. Any step that fails to write raises
    OutputError naming `path` (see the module doc). In a text
    mode, what is written is masked (masking.py)."""
    path = Path(path)
    existed = path.exists()
    tmp: str | None = None
    done = False
    try:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            mode_bits = output_mode(path)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
        except OSError as exc:
            raise OutputError(path, exc, existed) from None
        try:
            os.fchmod(fd, mode_bits)
            fh = os.fdopen(fd, mode, **open_args)
        except BaseException:
            os.close(fd)
            raise
        try:
            yield _Written(fh if "b" in mode else masking.Writer(fh), path, existed)  # type: ignore[misc]
            try:
                fh.flush()
                os.fsync(fh.fileno())
                fh.close()
                pending = _TOGETHER.get()
                if pending is None:
                    os.replace(tmp, path)
                else:  # renamed with the others when outputs_together ends
                    pending.append((tmp, path, existed))
            except OSError as exc:
                raise OutputError(path, exc, existed) from None
            done = True
        finally:
            if not fh.closed:
                try:  # a failed write leaves bytes in the buffer: closing tries them once more
                    fh.close()
                except OSError:
                    pass
    finally:
        if tmp is not None and not done:
            _remove([tmp])


_TOGETHER: ContextVar[list[tuple[str, Path, bool]] | None] = ContextVar("outputs_together", default=None)


@contextmanager
def outputs_together() -> Iterator[None]:
    """The outputs written inside (through atomic_writer) replace theirs together, when the block
    ends without an exception, or none does: each is written and synced to its temporary file as
    it comes, and the renames, which need no room, wait for the end. A command that writes a qrels
    file and its provenance (or details, or a sample and its design) never leaves the new one
    beside the old other because the disk filled on the second. Nested blocks join the outermost."""
    if _TOGETHER.get() is not None:
        yield
        return
    pending: list[tuple[str, Path, bool]] = []
    token = _TOGETHER.set(pending)
    try:
        yield
    except BaseException:
        _TOGETHER.reset(token)
        _remove(tmp for tmp, _, _ in pending)
        raise
    _TOGETHER.reset(token)
    for done, (tmp, path, existed) in enumerate(pending):
        try:
            os.replace(tmp, path)
        except OSError as exc:
            _remove(tmp for tmp, _, _ in pending[done:])
            raise OutputError(path, exc, existed) from None


def _remove(paths: Iterable[str]) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write a UTF-8 text file (newlines as written) so that readers see the old or the new
    content, never half of it."""
    with atomic_writer(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
