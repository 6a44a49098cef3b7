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

A process killed while writing (SIGKILL, a power cut) leaves its temporary files behind, and
nothing it runs can remove them. So each temporary name says who wrote it:
`.OUT.jb-HOST-PID-START.RANDOM`, the writer's host (a hash of its name), process id and start
time (Linux's /proc/PID/stat, in clock ticks since boot; 0 where the system does not say). Before
a write, the temporary files of the same output whose writer is gone (no such process on this
host, or a process of that id that started at another time: the id was reused) are removed, with
a note on the `judgeblender.outputs` logger. A live writer's files (a concurrent run writing the
same output), another host's, and names of any other shape (an older judgeblender's, anything
the user keeps) are left alone: whether their writer lives cannot be told from here.

The temporary file is made private (tempfile.mkstemp), so before it is renamed it gets the
mode the output would have had if opened directly: an existing file keeps its own, a new
one gets 0666 masked by the user's umask, as every other tool's output does.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import stat
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import IO, Any

from . import masking
from .errors import OutputError

log = logging.getLogger("judgeblender.outputs")


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


def process_start(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot, Linux's /proc/PID/stat field 22); None
    when there is no such process. 0 where the system does not say (the id alone then decides)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[19])  # after the name, which may hold spaces
    except FileNotFoundError:
        return None
    except (OSError, ValueError, IndexError):
        pass
    if os.name == "nt":  # os.kill(pid, 0) would send Ctrl+C there: taken as alive, never removed
        return 0
    try:  # no /proc: does the process exist at all
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except OSError:  # it exists, owned by another user
        pass
    return 0


def _host() -> str:
    return f"{zlib.crc32(socket.gethostname().encode()):08x}"


def _writer_tag() -> str:
    """This process in a temporary name: host, process id and start time (see the module doc)."""
    return f"jb-{_host()}-{os.getpid()}-{process_start(os.getpid()) or 0}"


def _stale(tag: re.Match) -> bool:
    """A temporary file's writer is gone: it ran on this host and no process with its id and
    start time is running now."""
    if tag["host"] != _host():
        return False
    start = process_start(int(tag["pid"]))
    return start is None or (int(tag["start"]) != 0 and start != 0 and start != int(tag["start"]))


def remove_stale_temporaries(path: Path, suffix: str = "") -> list[str]:
    """Remove the temporary files of output `path` whose writer is gone (an interrupted run's),
    saying so once; return their names. Called by atomic_writer before each write."""
    name = re.compile(rf"\.{re.escape(path.name)}\.jb-(?P<host>[0-9a-f]{{8}})-(?P<pid>\d+)-(?P<start>\d+)\."
                      rf"[a-z0-9_]+{re.escape(suffix)}")
    try:
        entries = [entry.name for entry in os.scandir(path.parent) if entry.name.startswith(f".{path.name}.jb-")]
    except OSError:  # no folder yet, or one that cannot be listed: nothing to clean there
        return []
    removed = []
    for entry in entries:
        found = name.fullmatch(entry)
        if found and _stale(found):
            try:
                os.unlink(path.parent / entry)
            except FileNotFoundError:  # another run removed it first
                continue
            except OSError:
                continue  # a read-only folder: the write itself will say so
            removed.append(entry)
    if removed:
        log.warning("note: removed %d temporary file(s) of %s left by an interrupted run whose process is gone: %s",
                    len(removed), path, ", ".join(removed))
    return removed


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
            remove_stale_temporaries(path, suffix)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{_writer_tag()}.", suffix=suffix, dir=path.parent)
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
