"""Checks of files, paths and numbers a user gives, made before any model is loaded or called.

Each check raises InputError naming the file (or the option) and what was expected, so a
mistake costs one `error:` line and exit code 2, never a traceback after hours of calls, and
never a changed file: nothing here writes to the user's files (the writability probe is a
temporary file of our own beside them, removed at once). Library callers (notebooks, the CLI)
call these on what they were given; `cli/checks.py` says which option is which.
"""

from __future__ import annotations

import math
import os
import sqlite3
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from .errors import InputError, JudgeblenderError

SQLITE_MAGIC = b"SQLite format 3\x00"
GGUF_MAGIC = b"GGUF"
PROBE_BYTES = 4096  # written and removed beside an output: a full disk fails here, not after the calls


def number(option: str, value: float | int | None, *, low: float | None = None, high: float | None = None,
           low_open: bool = False, high_open: bool = False) -> None:
    """A finite number within [low, high] (open ends where asked); None (not given) passes."""
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(option, None, "a finite number", str(value))
    below = value <= low if low_open else value < low if low is not None else False
    above = value >= high if high_open else value > high if high is not None else False
    if below or above:
        lo = "" if low is None else ("(" if low_open else "[") + f"{low:g}"
        hi = "" if high is None else f"{high:g}" + (")" if high_open else "]")
        want = (f"a number in {lo}, {hi}" if low is not None and high is not None
                else f"a number {'>' if low_open else '>='} {low:g}" if low is not None
                else f"a number {'<' if high_open else '<='} {high:g}")
        raise InputError(option, None, want, f"{value:g}" if isinstance(value, float) else str(value))


def _kind(path: Path) -> str:
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "no such file"
    except NotADirectoryError:
        return "a path under a file"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "file"
    return "not a regular file"


def input_file(path: str | Path, what: str = "an existing file") -> Path:
    """An existing, readable regular file (a directory, a device or a missing path is an error)."""
    path = Path(path)
    kind = _kind(path)
    if kind != "file":
        raise InputError(path, None, what, kind)
    if not os.access(path, os.R_OK):
        raise InputError(path, None, "a readable file", "permission denied")
    return path


def input_dir(path: str | Path) -> Path:
    """An existing directory (of run files)."""
    path = Path(path)
    kind = _kind(path)
    if kind != "a directory":
        raise InputError(path, None, "a directory of run files", "a file" if kind == "file" else kind)
    return path


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _probe_dir(folder: Path, path: Path, what: str) -> None:
    """Write and remove a small file of our own in `folder`: fails on a read-only or full disk."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".judgeblender-probe.", dir=folder)
    except OSError as exc:
        raise InputError(path, None, f"{what} in a writable folder", f"{folder}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"\0" * PROBE_BYTES)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise InputError(path, None, f"{what} on a disk with free space", f"{folder}: {exc.strerror}") from None
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _existing_parent(path: Path) -> Path:
    """The nearest folder above `path` that exists (outputs' missing folders are created)."""
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(path, None, "a path whose folders are folders", f"{parent} is a file")
    return parent


def output_file(path: str | Path, inputs: Iterable[str | Path | None] = (), what: str = "an output file",
                sqlite_ok: bool = False) -> Path:
    """A file we may write: not a directory, not under a file, not one of the inputs, not an
    existing SQLite database (a store: a mistyped option must not replace every stored call)
    unless `sqlite_ok`, on a writable disk with room. Nothing is written to `path` itself."""
    path = Path(path)
    kind = _kind(path)
    if kind not in ("file", "no such file"):
        raise InputError(path, None, f"{what} path", kind)
    for other in inputs:
        if other is not None and (_same_file(path, Path(other)) or Path(other).absolute() == path.absolute()):
            raise InputError(path, None, f"{what} that is not also an input", f"the same file as input {other}")
    if kind == "file" and not sqlite_ok:
        with open(path, "rb") as fh:
            if fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC:
                raise InputError(path, None, f"{what} that is not an SQLite database",
                                 "an existing SQLite database (a store?); it is not overwritten")
    _probe_dir(_existing_parent(path), path, what)
    return path


def _identity(path: Path) -> tuple:
    """What makes two paths one file: the inode of an existing one (hard links, symlinks), the
    resolved absolute path (links and `..` followed) of one still to be written."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return ("path", real)
    return ("inode", st.st_dev, st.st_ino)


def distinct_outputs(written: Iterable[tuple[str, str | Path]]) -> None:
    """The files a command will write, as (what, path), are different files: `a.qrels`,
    `./a.qrels` and a link to it are one, and writing one would overwrite the other."""
    seen: dict[tuple, tuple[str, Path]] = {}
    for what, path in written:
        path = Path(path)
        first = seen.setdefault(_identity(path), (what, path))
        if first != (what, path):
            raise JudgeblenderError(f"{what} {path} is the same file as {first[0]} {first[1]}: the files a command "
                                    "writes must be different files (one would overwrite the other)")


def sqlite_store(path: str | Path, *, write: bool = True, read_only: bool = False,
                 newest: int | None = None, opener: Callable[[Path], sqlite3.Connection] | None = None) -> Path:
    """A judgeblender store: an existing one (SQLite with our schema, or an empty file unless the
    command only reads it), or, when writing, a new file in a writable folder. Never another
    program's SQLite database or another kind of file, which opening as a store would change.

    `newest`: the newest schema version this judgeblender reads (len(store.migrations.MIGRATIONS),
    given by the caller: this module sits below store/, which uses it); a store of a later
    version is refused. None leaves that to the store, which checks it when it opens.
    `opener`: how the store is read (store.calls.open_read_only, given by the caller for the same
    reason): as SQLite reads it, write-ahead log included, so a store whose last commits are still
    in its log is whole, not damaged. None: the store file alone, read-only and immutable (for a
    caller below store/; it may miss commits still in a log)."""
    path = Path(path)
    kind = _kind(path)
    if kind == "no such file":
        if not write:
            raise InputError(path, None, "an existing store", "no such file")
        _probe_dir(_existing_parent(path), path, "a store")
        return path
    if kind != "file":
        raise InputError(path, None, "a store file", kind)
    with open(path, "rb") as fh:
        head = fh.read(len(SQLITE_MAGIC))
    if head and head != SQLITE_MAGIC:
        raise InputError(path, None, "a judgeblender store (an SQLite file)", "a file that is not SQLite")
    if not head and read_only:  # opening it would write an empty store's schema into it
        raise InputError(path, None, "a judgeblender store", "an empty file")
    if head:
        try:
            # read as SQLite reads it, write-ahead log included: a store whose commits are still in
            # its log (a full disk stopped the checkpoint, a process was killed) is whole, not damaged
            db = opener(path) if opener is not None else sqlite3.connect(
                f"{path.absolute().as_uri()}?mode=ro&immutable=1", uri=True)
            try:
                version = db.execute("PRAGMA user_version").fetchone()[0]
                tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                columns = {r[1] for r in db.execute("PRAGMA table_info(calls)")}
            finally:
                db.close()
        except sqlite3.DatabaseError as exc:
            raise InputError(path, None, "a judgeblender store (a readable SQLite file)", str(exc),
                             hint="if it is a damaged store, `judgeblender store check` and docs/reliability.md "
                             "(section 8, part 7) say how to recover") from None
        # every schema's calls table has these columns; another program's `calls` table would be changed
        if (version == 0 and tables) or (version > 0 and not {"key", "raw_output"} <= columns):
            # migrating another program's database would change it
            raise InputError(path, None, "a judgeblender store", f"another SQLite database (tables: {', '.join(tables[:5])})")
        if newest is not None and version > newest:
            raise InputError(path, None, f"a store of schema version {newest} or older (upgrade judgeblender)",
                             f"version {version}")
    if write:
        _probe_dir(path.absolute().parent, path, "a store")
    return path


def gguf_file(path: str | Path) -> Path:
    """A GGUF model file (checked by its magic bytes)."""
    path = input_file(path, "an existing GGUF model file")
    with open(path, "rb") as fh:
        head = fh.read(4)
    if head != GGUF_MAGIC:
        raise InputError(path, None, "a GGUF model file (starting with 'GGUF')", f"a file starting with {head!r}")
    return path


def model_string(model: str) -> None:
    """The local file a model string names, where it names one: llamacpp:PATH must be GGUF."""
    prefix, _, rest = model.partition(":")
    if prefix == "llamacpp" and (rest.endswith(".gguf") or os.sep in rest):
        gguf_file(rest)


def prompt_ref(prompt: str) -> None:
    """A prompt given as a path (a .toml name or one with a folder) must be a file."""
    if prompt.endswith(".toml") or os.sep in prompt:
        input_file(prompt, "an existing prompt template file (.toml)")
