"""Merge call stores: `judgeblender store merge --out merged.sqlite A.sqlite B.sqlite ...`.

A job split into shards (docs/scale-out.md: one driver and one store per shard) ends with one
store per shard; merging them gives the one store that a re-run, `blend`, `store judgments` or
an audit reads. A call's key is the sha256 of everything that determines its answer, so the same
key in two stores is the same call asked twice (shards that overlap, or a store copied before a
resume): it is kept once. The two must agree on the answer (raw output, parsed value,
probabilities, choice mass); where they do not, that is a conflict, reported with both answers,
and nothing is written unless the caller keeps the first input's answer (`keep_first`).
Judgments (judge, query, passage) conflict the same way on their label, probabilities, expected
value or invalid reason. Scorer vectors of one model and text that differ (a BLAS on another
node may change the last bits) keep the first and are counted, not refused.

The inputs are opened read-only and never changed (an input of an older schema is refused:
open it once with this judgeblender to upgrade it). The output is built in a temporary file
beside `out` and renamed onto it only when complete: a merge that fails or is killed leaves
`out` as it was.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from ..errors import ArgumentError, JudgeblenderError, OutputError
from .calls import CallStore, StoreError, is_full, open_read_only, read_only_uri, store_error
from .migrations import MIGRATIONS

# per table: its key columns, and the columns two copies of one key must agree on (None: any
# difference is counted, the first input's copy is kept, nothing is refused)
# (`texts` and `shapes` are keyed by their content's hash, so one text has one id in every store.)
TABLES: dict[str, tuple[tuple[str, ...], tuple[str, ...] | None]] = {
    "texts": (("id",), None),
    "shapes": (("shape",), None),
    "calls": (("key",), ("raw_output", "parsed", "probs", "choice_mass")),
    "judgments": (("judge", "qid", "docid"), ("label", "probs", "expected", "invalid_reason")),
    "vectors": (("model", "text_sha256"), None),
    "file_hashes": (("path", "size", "mtime_ns"), None),
}
SHOWN_CONFLICTS = 5


@dataclass
class Conflict:
    table: str
    key: tuple
    store: Path  # the input whose copy disagrees with the one kept (from an earlier input)
    kept: dict
    other: dict

    def __str__(self) -> str:
        def short(v) -> str:
            text = repr(v)
            return text if len(text) <= 80 else text[:77] + "..."

        differ = [c for c in self.kept if self.kept[c] != self.other[c]]
        return (f"{self.table} {'/'.join(map(str, self.key))}: {self.store} has "
                + ", ".join(f"{c}={short(self.other[c])}" for c in differ)
                + "; an earlier input has " + ", ".join(f"{c}={short(self.kept[c])}" for c in differ))


@dataclass
class MergeReport:
    out: Path
    inputs: list[Path]
    rows: dict[str, int] = field(default_factory=dict)  # per table, in the merged store
    read: dict[str, int] = field(default_factory=dict)  # per table, over all inputs
    duplicates: dict[str, int] = field(default_factory=dict)  # same key in more than one input, kept once
    differing: dict[str, int] = field(default_factory=dict)  # vectors etc.: differing copies, first kept
    conflicts: list[Conflict] = field(default_factory=list)
    conflicts_total: int = 0

    def summary(self) -> dict:
        return {"out": str(self.out), "inputs": [str(p) for p in self.inputs], "rows": self.rows, "read": self.read,
                "duplicates": self.duplicates, "differing": self.differing, "conflicts": self.conflicts_total}


class MergeConflict(JudgeblenderError):
    def __init__(self, report: MergeReport):
        self.report = report
        shown = "\n  ".join(str(c) for c in report.conflicts)
        more = report.conflicts_total - len(report.conflicts)
        super().__init__(
            f"{report.conflicts_total} key(s) have different answers in different stores; nothing written "
            f"(keep the first input's answer with keep_first=True):\n  {shown}"
            + (f"\n  ... and {more} more" if more > 0 else ""))


def _uri(path: Path, mode: str = "ro") -> str:
    return f"file:{quote(str(path.resolve()))}?mode={mode}"


def _check_input(path: Path) -> None:
    """The input is a store of this schema, read as SQLite reads it (on a read-only medium too)."""
    if not path.is_file():
        raise JudgeblenderError(f"{path}: no such store")
    try:
        db = open_read_only(path)
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise store_error(path, exc) from None
    if "calls" not in tables:
        raise JudgeblenderError(f"{path}: not a judgeblender store (no calls table)")
    if version != len(MIGRATIONS):
        raise JudgeblenderError(
            f"{path}: store schema version {version}, this judgeblender writes {len(MIGRATIONS)}; "
            + ("open it once with this judgeblender (e.g. `judgeblender store stats --store PATH`) to upgrade it"
               if version < len(MIGRATIONS) else "upgrade judgeblender"))


def merge_stores(out: str | Path, inputs: list[str | Path], keep_first: bool = False,
                 overwrite: bool = False) -> MergeReport:
    """Merge `inputs` into a new store at `out` (see the module doc); returns what was merged.
    Raises MergeConflict, writing nothing, when two inputs answer one key differently and
    `keep_first` is false."""
    out = Path(out)
    paths = [Path(p) for p in inputs]
    if not paths:
        raise JudgeblenderError("store merge needs at least one input store")
    seen: dict[Path, Path] = {}
    for p in paths:
        if p.resolve() in seen:
            raise JudgeblenderError(f"{p} is given twice")
        seen[p.resolve()] = p
        _check_input(p)
    if out.resolve() in seen:
        raise ArgumentError("out", "a new file", described=f"{str(out)!r}, which is also an input",
                            hint="write the merge to a new file")
    if out.exists() and not overwrite:
        raise ArgumentError("out", "a new file", described=f"{str(out)!r}, which exists",
                            hint="remove it first, or pass overwrite=True to replace it")
    existed = out.exists()
    report = MergeReport(out, paths)
    tmp: Path | None = None
    try:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".merging", dir=out.parent)
            os.close(fd)
            tmp = Path(tmp_name)
            tmp.unlink()  # CallStore creates it, with the current schema
            _build(tmp, paths, report, keep_first, lambda exc: _output_error(out, existed, exc))
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, out)
        except OSError as exc:  # OutputError is one too, already naming `out`
            raise exc if isinstance(exc, OutputError) else OutputError(out, exc, existed) from None
        for suffix in ("-wal", "-shm"):  # a replaced store's old journal files must not outlive it
            Path(f"{out}{suffix}").unlink(missing_ok=True)
        _fsync_dir(out.parent)
    finally:
        if tmp is not None:
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                try:
                    leftover.unlink(missing_ok=True)
                except OSError:
                    pass
    return report


def _output_error(out: Path, existed: bool, exc: Exception) -> Exception:
    """A failure to write the merged store, named as `out` (not its temporary name): a full disk
    as OutputError, like every other output's; another SQLite error as what SQLite said."""
    if is_full(exc) or getattr(exc, "full", False):
        return OutputError(out, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), existed)
    if isinstance(exc, sqlite3.Error):
        return OutputError(out, OSError(errno.EIO, f"SQLite: {exc}"), existed)
    if isinstance(exc, OSError):
        return OutputError(out, exc, existed)
    return exc


def _build(tmp: Path, paths: list[Path], report: MergeReport, keep_first: bool,
           failed: Callable[[Exception], Exception]) -> None:
    """The merged store at `tmp`, whole in its one file (its log checkpointed and gone). An error
    of the output goes through `failed`; damage found in an input names the input."""
    try:
        CallStore(tmp).close()
    except StoreError as exc:
        raise failed(exc) from None
    db = sqlite3.connect(_uri(tmp, "rw"), uri=True, isolation_level=None)
    try:
        for path in paths:
            try:
                _merge_one(db, path, report)
            except sqlite3.DatabaseError as exc:  # damage in an input, found as it is read; or a full disk
                raise (failed(exc) if is_full(exc) else store_error(path, exc)) from None
        if report.conflicts_total and not keep_first:
            raise MergeConflict(report)
        for table in TABLES:
            report.rows[table] = db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.DatabaseError as exc:
        raise failed(exc) from None
    finally:
        db.close()
    wal = Path(f"{tmp}-wal")
    if wal.exists() and wal.stat().st_size:  # a checkpoint that did not finish: the file alone is not the store
        raise failed(OSError(errno.EIO, "SQLite could not write its write-ahead log back into the file"))


def _merge_one(db: sqlite3.Connection, path: Path, report: MergeReport) -> None:
    db.execute("ATTACH DATABASE ? AS src", (read_only_uri(path),))  # as SQLite reads it, a read-only medium too
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            for table, (keys, agree) in TABLES.items():
                columns = [r[1] for r in db.execute(f"PRAGMA main.table_info({table})")]
                report.read[table] = report.read.get(table, 0) + db.execute(
                    f"SELECT COUNT(*) FROM src.{table}").fetchone()[0]
                join = " AND ".join(f"s.{k} = m.{k}" for k in keys)
                report.duplicates[table] = report.duplicates.get(table, 0) + db.execute(
                    f"SELECT COUNT(*) FROM src.{table} s JOIN main.{table} m ON {join}").fetchone()[0]
                compared = agree or tuple(c for c in columns if c not in keys and c not in ("created_at", "updated_at"))
                differ = " OR ".join(f"s.{c} IS NOT m.{c}" for c in compared)
                if agree is None:
                    report.differing[table] = report.differing.get(table, 0) + db.execute(
                        f"SELECT COUNT(*) FROM src.{table} s JOIN main.{table} m ON {join} WHERE {differ}").fetchone()[0]
                else:
                    n = db.execute(f"SELECT COUNT(*) FROM src.{table} s JOIN main.{table} m ON {join} WHERE {differ}"
                                   ).fetchone()[0]
                    report.conflicts_total += n
                    room = SHOWN_CONFLICTS - len(report.conflicts)
                    if n and room > 0:
                        cols = ", ".join([*(f"s.{k}" for k in keys), *(f"m.{c}" for c in agree), *(f"s.{c}" for c in agree)])
                        for row in db.execute(f"SELECT {cols} FROM src.{table} s JOIN main.{table} m ON {join} "
                                              f"WHERE {differ} LIMIT {room}"):
                            k, kept, other = row[:len(keys)], row[len(keys):len(keys) + len(agree)], row[len(keys) + len(agree):]
                            if table == "judgments":  # the judge's id, not its text's hash
                                k = (db.execute("SELECT text FROM main.texts WHERE id = ?", (k[0],)).fetchone()[0],
                                     *k[1:])
                            report.conflicts.append(Conflict(table, k, path, dict(zip(agree, kept)),
                                                             dict(zip(agree, other))))
                names = ", ".join(columns)
                db.execute(f"INSERT OR IGNORE INTO main.{table} ({names}) SELECT {names} FROM src.{table}")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
    finally:
        db.execute("DETACH DATABASE src")


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
