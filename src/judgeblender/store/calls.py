"""The call store: every LLM call and its answer in one SQLite file.

A call's key (`judgeblender.calls.call_key`) is the sha256 of the backend, the model's identity (file hash, or served name
and revision), the rendered messages and every decoding setting. Each finished call
is committed at once (WAL journal), so a killed run loses only its in-flight calls and a
re-run finds the rest here instead of calling the model again. API keys are never part of a
request or identity, so they never reach this file. Every row goes in through one door,
`CallStore.submit` (put_many, put_many_later, put_judgments and store.embeddings.put_vectors are
its forms), to the store's one writer (store/sinks.py), chosen once (`writer_for`): this process,
or a process of its own (store/writer.py) when a served or Ray judge says it needs one
(`write_in_child`), off the driver's CPU or the served loop's; reads stay here.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import validate
from ..calls import CallRequest, CallResult, canonical_json
from ..errors import JudgeblenderError
from ..fileio import atomic_write_text
from ..hashing import sha256_file
from .compact import Texts, iso, text_id
from .migrations import ARRIVAL_ORDER_VERSION, MIGRATIONS
from .wal import holds_commits
from .rows import CallRow, JudgmentRows, Write
from .sinks import ChildWriter, Done, HereWriter, Writer


# What a user can do about a damaged store (docs/reliability.md): every answer in a store can be
# asked again, so a new store loses time, never results.
RECOVERY = ("to recover, keep what is readable with `sqlite3 {path} .recover | sqlite3 NEW.sqlite` and check "
            "it with `judgeblender store check --store NEW.sqlite`, or restore a backup, or pass a new --store "
            "(its answers are then asked of the models again)")
_DAMAGE = ("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_IOERR_SHORT_READ")


def is_full(exc: BaseException) -> bool:
    """An SQLite error that says the disk is full (SQLITE_FULL): a write that failed, not damage."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith("SQLITE_FULL") or "database or disk is full" in str(exc)


class StoreError(JudgeblenderError):
    """SQLite reported damage in a store, or could not read or write it: names the file, what
    SQLite said and (for damage) how to recover. `full`: the disk was full (SQLITE_FULL)."""

    def __init__(self, message: str, *, full: bool = False):
        super().__init__(message)
        self.full = full


def damaged(path: str | Path, found: str) -> StoreError:
    return StoreError(f"{path}: the store is damaged (SQLite: {found}); {RECOVERY.format(path=path)}")


def store_error(path: str | Path, exc: sqlite3.DatabaseError) -> StoreError:
    """The one translation of an SQLite error on a store into the error a user sees (exit 2)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc)
    if is_full(exc):  # SQLite rolled the transaction back whole; those committed before it stand
        return StoreError(f"{path}: cannot write to the store (SQLite: {text}); every answer committed before is "
                          "kept in it: free some space and run the same command again to resume from them", full=True)
    if name.startswith(_DAMAGE) or any(w in text for w in ("malformed", "not a database", "corrupt")):
        try:
            with open(path, "rb") as fh:
                sqlite = fh.read(len(validate.SQLITE_MAGIC)) == validate.SQLITE_MAGIC
        except OSError:
            sqlite = True
        # a file that never was SQLite is not a damaged store: nothing to recover
        return damaged(path, text) if sqlite else StoreError(f"{path}: not a judgeblender store (SQLite: {text})")
    return StoreError(f"{path}: cannot use the store (SQLite: {text})")


def unwritable(path: str | Path) -> str | None:
    """Why SQLite could not write the store at `path` (its file, or the -wal and -shm files it
    makes beside it), or None when it can: a read-only medium, or a read-only file or folder."""
    path = Path(path).absolute()
    for target, what in ((path.parent, "its folder"), (path, "the store file")):
        if target.exists() and not os.access(target, os.W_OK):
            try:
                read_only = bool(os.statvfs(target).f_flag & os.ST_RDONLY)
            except OSError:
                read_only = False
            return "it is on a read-only medium" if read_only else f"{what} is read-only"
    return None


def unwritten_commits(path: str | Path) -> StoreError:
    return StoreError(
        f"{path}: the store has commits not yet written back from its write-ahead log ({path}-wal), and SQLite "
        f"cannot make its shared-memory file ({path}-shm) here to read them; it is never read in part: copy the "
        f"store with its -wal file to writable storage first and use the copy")


def read_only_uri(path: str | Path) -> str:
    """The URI that reads the store as SQLite does, write-ahead log included, and writes nothing
    beside it where nothing needs reading from a log. Without a log (or with an empty one) the
    store file is all there is, and it is opened immutable: no -wal or -shm file is made, and a
    writer that starts meanwhile adds its commits to a log of its own, not to the file. With a
    log, SQLite reads it (mode=ro, making the -shm file it needs where it can). On a medium where
    it cannot, SQLite refuses the store; if the log holds a commit (store.wal), so is it here, in
    one line, never read in part; else the file alone is what SQLite would read: immutable."""
    path = Path(path)
    uri = path.absolute().as_uri()
    wal = Path(f"{path}-wal")
    if not wal.exists() or wal.stat().st_size == 0:
        return f"{uri}?mode=ro&immutable=1"
    try:
        db = sqlite3.connect(f"{uri}?mode=ro", uri=True)
        try:
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # opens the log, or fails
            return f"{uri}?mode=ro"
        finally:
            db.close()
    except sqlite3.OperationalError as exc:
        if not (getattr(exc, "sqlite_errorname", "") or "").startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY")):
            raise store_error(path, exc) from None
    except sqlite3.DatabaseError as exc:
        raise store_error(path, exc) from None
    if holds_commits(wal):
        raise unwritten_commits(path)
    return f"{uri}?mode=ro&immutable=1"


def open_read_only(path: str | Path, **connect: Any) -> sqlite3.Connection:
    """A read-only connection to the store, reading it as SQLite does (read_only_uri)."""
    uri = read_only_uri(path)
    try:
        return sqlite3.connect(uri, uri=True, **connect)
    except sqlite3.DatabaseError as exc:
        raise store_error(path, exc) from None


class StoreAccess:
    """A store's connection in this process (`db`), what it knows of the store's texts
    (`texts`), and the lock that serialises their use: shared by the store's reads (CallStore)
    and its writer (store/sinks.py), and by nothing outside store/. Held (`with access:`), it is
    the one place where an SQLite error becomes a StoreError naming the file: damage found in
    the middle of a command (a corrupt page read for the first time) ends it with one error
    line, not a traceback. No integrity check runs at open (it reads every page: minutes on a
    large store); `store check` runs one."""

    def __init__(self, path: Path, db: sqlite3.Connection):
        self.path = path
        self.db = db
        self.texts = Texts(db)
        self._lock = threading.Lock()

    def __enter__(self) -> "StoreAccess":
        self._lock.acquire()
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        self._lock.release()
        if isinstance(exc, sqlite3.DatabaseError):
            raise store_error(self.path, exc) from None
        return False

    def rollback(self) -> None:
        """Roll back the open transaction, if SQLite still has one: after damage it may have
        ended it already, and the error to report is the damage, not the failed rollback. The
        texts this connection believed stored went with it, so they are forgotten."""
        self.texts = Texts(self.db)
        if self.db.in_transaction:
            try:
                self.db.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def write_failure(self, exc: sqlite3.Error) -> Exception:
        """The error a failed write raises: naming this store."""
        if isinstance(exc, sqlite3.OperationalError) and not is_full(exc):  # read-only, the writer gone
            return StoreError(f"{self.path}: cannot write to the store ({exc})")
        return store_error(self.path, exc)  # type: ignore[arg-type]


@dataclass
class StoredCall:
    key: str
    result: CallResult
    parsed: dict[str, Any] | None


class CallStore:
    """Thread-safe access to one store file (one connection, serialised by a lock).

    `read_only=True` is for callers that only read (`store stats`, `report --store`, ...): where
    the store can be written, it is opened as for writing (an older schema is upgraded, a log
    left by a crash is checkpointed on close); where it cannot (a read-only medium, file or
    folder), it is opened read-only as SQLite reads it (open_read_only), and a store that would
    need upgrading first is refused in one line. Without it, a store that cannot be written is
    refused in one line naming it, before any call is made that could not be recorded."""

    def __init__(self, path: str | Path, redact_passages: bool = False, *, read_only: bool = False):
        self.path = Path(path)
        self.read_only = read_only
        if self.path.exists():  # never turn another program's database (or any other file) into a store
            validate.sqlite_store(self.path, write=False, newest=len(MIGRATIONS), opener=open_read_only)
        elif read_only:  # opening it would make an empty store
            raise StoreError(f"{self.path}: no such store")
        self.new_calls = 0
        self.cache_hits = 0
        self._writer: Writer | None = None  # chosen once, by writer_for
        self.redact_passages = redact_passages
        reason = unwritable(self.path)
        if reason is not None:
            if not read_only:
                raise StoreError(f"{self.path}: cannot write to the store: {reason}; this command records what it "
                                 "does in the store: copy the store to writable storage, or give another store")
            self.access = StoreAccess(self.path, open_read_only(self.path, check_same_thread=False,
                                                                isolation_level=None))
            try:
                self._check_version(reason)
            except BaseException:
                self.access.db.close()
                raise
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            db = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False, isolation_level=None)
        except sqlite3.DatabaseError as exc:
            raise store_error(self.path, exc) from None
        self.access = StoreAccess(self.path, db)
        try:
            with self.access:
                mode = self._wal_mode()
                if mode.lower() != "wal":
                    raise JudgeblenderError(
                        f"{self.path}: the file system does not support SQLite's WAL journal (got {mode!r}); "
                        "put the store on a local disk"
                    )
                self.access.db.execute("PRAGMA synchronous=NORMAL")
                self.access.db.execute("PRAGMA busy_timeout=60000")
            self._migrate()
        except BaseException:
            db.close()
            raise

    def _check_version(self, reason: str) -> None:
        """A store opened read-only is read as it is: one of an older schema would have to be
        upgraded (written) first."""
        with self.access:
            version = self.access.db.execute("PRAGMA user_version").fetchone()[0]
        if version != len(MIGRATIONS):
            raise StoreError(
                f"{self.path}: the store has schema version {version} and must be upgraded to {len(MIGRATIONS)} before "
                f"it is read, which writes to it, but {reason}: copy it to writable storage and use the copy"
                if version < len(MIGRATIONS) else
                f"{self.path}: store schema version {version} is newer than this judgeblender "
                f"({len(MIGRATIONS)}); upgrade judgeblender")

    def _wal_mode(self, wait_s: float = 60.0) -> str:
        """Switch to the WAL journal. Two processes creating one store at the same moment race for
        it, and SQLite answers the loser "database is locked" at once, without its busy timeout:
        wait and try again."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return self.access.db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _migrate(self) -> None:
        with self.access:
            self.access.db.execute("BEGIN IMMEDIATE")
            try:
                version = self.access.db.execute("PRAGMA user_version").fetchone()[0]
                if version > len(MIGRATIONS):
                    raise JudgeblenderError(
                        f"{self.path}: store schema version {version} is newer than this judgeblender "
                        f"({len(MIGRATIONS)}); upgrade judgeblender"
                    )
                for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
                    if callable(script):
                        script(self.access.db)
                    else:
                        for statement in filter(str.strip, script.split(";")):
                            self.access.db.execute(statement)
                    self.access.db.execute(f"PRAGMA user_version={number}")
                self.access.db.execute("COMMIT")
            except BaseException:
                self.access.rollback()
                raise
            if 0 < version < ARRIVAL_ORDER_VERSION <= len(MIGRATIONS):
                self._reclaim()

    def _reclaim(self) -> None:
        """Give the pages an older schema's rows left free back to the file system (VACUUM). A
        store another process holds open is left as it is: new calls reuse the free pages."""
        try:
            self.access.db.execute("VACUUM")
        except sqlite3.OperationalError:
            pass

    # -- calls -------------------------------------------------------------------------
    _SELECT = ("SELECT key, raw_output, parsed, probs, choice_mass, tokens_in, tokens_out, latency_s, extra, "
               "extra_dict FROM calls WHERE key ")

    def get(self, key: str) -> StoredCall | None:
        return self.get_many([key]).get(key)

    def get_many(self, keys: list[str]) -> dict[str, StoredCall]:
        """The stored calls among `keys`, by key (one query per 500 keys)."""
        found: dict[str, StoredCall] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            with self.access:
                if len(chunk) == 1:
                    rows = self.access.db.execute(self._SELECT + "= ?", chunk).fetchall()
                else:
                    rows = self.access.db.execute(self._SELECT + f"IN ({','.join('?' * len(chunk))})", chunk).fetchall()
                extras = [self.access.texts.decode_extra(row[8], row[9]) for row in rows]
            for (key, raw, parsed, probs, mass, tin, tout, lat, _, _), extra in zip(rows, extras):
                result = CallResult(text=raw, probs=json.loads(probs) if probs else None, choice_mass=mass,
                                    tokens_in=tin or 0, tokens_out=tout or 0, latency_s=lat or 0.0, extra=extra or {})
                found[key] = StoredCall(key, result, json.loads(parsed) if parsed else None)
        self.cache_hits += len(found)
        return found

    def put(self, key: str, backend: str, identity: dict[str, Any], request: CallRequest, result: CallResult,
            parsed: dict[str, Any] | None) -> None:
        """Record one finished call; committed before this returns."""
        self.put_many([CallRow(key, backend, identity, request, result, parsed)])

    def put_many(self, calls: Sequence[CallRow | tuple], judgments: JudgmentRows | tuple | None = None) -> None:
        """Record finished calls in one transaction, with `judgments` (a judge's records) in the
        same one when given; committed before this returns, by the store's writer."""
        self.submit(Write(calls, judgments))

    def put_many_later(self, calls: Sequence[CallRow | tuple], judgments: JudgmentRows | tuple | None,
                       done: Done) -> None:
        """put_many for an event loop that must not spend its CPU on rows (a served run, the
        proxy): with a writer process (write_in_child), the calls go as they are to it, which
        makes their rows, exactly as put_many makes them, and commits them with `judgments` in
        one transaction; `done(None)` is called in the running loop once they are committed, or
        `done(error)` with the error put_many would have raised, and `wait_writes` waits for
        every `done` still to come. A store written here commits before this returns."""
        self.submit(Write(calls, judgments), done)

    def submit(self, write: Write, done: Done | None = None) -> None:
        """The one door every row goes in by: `write`'s calls, judgments and vectors committed in
        one transaction by the store's writer (`writer_for`: the first write chooses it, the
        writer process for a write sent for later, else this process). Without `done`, committed
        before this returns (raising what failed); with it, sent for later (put_many_later). Its
        calls count in `new_calls` once committed."""
        n = len(write.calls)

        def counted(exc: BaseException | None) -> None:
            if exc is None:
                self.new_calls += n
            if done is not None:
                done(exc)

        later = done is not None
        self.writer_for(child=later).submit(write, counted, later=later)

    @property
    def writer(self) -> Writer | None:
        """The store's one writer (store/sinks.py: `kind` "here" or "child"), or None before the
        first write or write_in_child."""
        return self._writer

    def writer_for(self, child: bool) -> Writer:
        """The store's writer, chosen here, once, by the first caller that needs one: a write
        waited for (`child` False: this process), or one sent for later, or a judge whose rows
        must leave this process (write_in_child): the writer process. Kept while the store is
        open: every later write goes to it, whatever it would have chosen, so where a store's
        rows go never changes in the middle of its use (a served judge after a store was
        written here writes here too; judges.commit.declare_writer asks first where it can)."""
        writer = self._writer
        if writer is None:
            with self.access:
                writer = self._writer
                if writer is None:
                    writer = self._writer = (ChildWriter if child else HereWriter)(self.access, self.redact_passages)
        return writer

    def write_in_child(self) -> None:
        """Say that this store's rows should be committed by a process of its own (store/writer.py),
        for a driver whose CPU bounds the run (a Ray driver, a served run's loop, the proxy's):
        chooses the writer process if no writer is chosen yet (writer_for), and replaces the
        writer's process where it has ended. Reads stay here."""
        self.writer_for(child=True).ready()

    def wait_writes(self) -> None:
        """Return once every write sent to the writer process has been answered (put_many_later)."""
        if self._writer is not None:
            self._writer.wait()

    def row_hint(self, request: CallRequest, identity_id: int) -> tuple[int | None, int | None] | None:
        """What a Ray worker needs to make this call's row parts (Texts.row_hint: the dictionary
        ids this store will choose, where it knows them), or None: a store that redacts passages
        stores no prompt a worker could make. `identity_id` is text_id of the identity's JSON."""
        if self.redact_passages:
            return None
        return self.access.texts.row_hint(request, identity_id)

    def dictionary_bytes(self, dictionary: int) -> bytes:
        """A dictionary's bytes (a text of this store), for the Ray workers that compress against it."""
        with self.access:
            return self.access.texts.dictionary_bytes(dictionary)

    def count_calls(self) -> int:
        with self.access:
            return self.access.db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def iter_calls(self) -> Iterator[dict[str, Any]]:
        """Every call as schema 4 showed it (request with its messages, identity, ISO times),
        in the order they were stored; read in chunks, so memory stays bounded."""
        last: tuple = ()
        while True:
            with self.access:
                rows = self.access.db.execute(
                    "SELECT key, backend, identity, settings, dict, messages, raw_output, parsed, probs, choice_mass, "
                    "tokens_in, tokens_out, latency_s, created_at, extra, extra_dict FROM calls "
                    + ("WHERE (created_at, key) > (?, ?) " if last else "") + "ORDER BY created_at, key LIMIT 1000",
                    last).fetchall()
                records = []
                for (key, backend, ident, settings, dictionary, blob, raw, parsed, probs, mass, tin, tout, lat,
                     created, extra, extra_dict) in rows:
                    identity = json.loads(self.access.texts.get(ident))
                    records.append({
                        "key": key, "backend": backend, "model": str(identity.get("model", "")),
                        "model_identity": identity, "request": self.access.texts.decode_request(settings, dictionary, blob),
                        "raw_output": raw, "parsed": json.loads(parsed) if parsed else None,
                        "probs": json.loads(probs) if probs else None, "choice_mass": mass, "tokens_in": tin,
                        "tokens_out": tout, "latency_s": lat, "created_at": iso(created),
                        "extra": self.access.texts.decode_extra(extra, extra_dict)})
            if not rows:
                return
            yield from records
            last = (rows[-1][13], rows[-1][0])

    def call_stats(self) -> dict[str, dict[str, float]]:
        """Per model: calls, tokens and seconds, for cost and time reports."""
        with self.access:
            rows = self.access.db.execute(
                "SELECT backend, identity, COUNT(*), SUM(tokens_in), SUM(tokens_out), SUM(latency_s) "
                "FROM calls GROUP BY 1, 2").fetchall()
            named = [(f"{backend}:{json.loads(self.access.texts.get(ident)).get('model', '')}", n, tin, tout, lat)
                     for backend, ident, n, tin, tout, lat in rows]
        stats: dict[str, dict[str, float]] = {}
        for name, n, tin, tout, lat in sorted(named):
            row = stats.setdefault(name, {"calls": 0, "tokens_in": 0, "tokens_out": 0, "seconds": 0.0})
            row["calls"] += n
            row["tokens_in"] += tin or 0
            row["tokens_out"] += tout or 0
            row["seconds"] += lat or 0.0
        return stats

    # -- judgments ---------------------------------------------------------------------
    def put_judgments(self, judge_id: str, records: Iterable[tuple[str, str, dict[str, Any]]]) -> None:
        """Record a judge's judgments in one transaction (they are derived from stored calls, so
        a crash before the commit loses nothing a re-run cannot rebuild without a call)."""
        self.put_many([], JudgmentRows(judge_id, records))

    def judgments(self, judge_id: str | None = None) -> list[dict[str, Any]]:
        query = "SELECT judge, qid, docid, label, probs, expected, invalid_reason, details FROM judgments"
        args: tuple = ()
        if judge_id is not None:
            query += " WHERE judge = ?"
            args = (text_id(judge_id),)
        with self.access:
            rows = self.access.db.execute(query, args).fetchall()
            out = [{"judge_id": self.access.texts.get(j), "qid": q, "docid": d,
                    **self.access.texts.decode_judgment(label, probs, expected, reason, details)}
                   for j, q, d, label, probs, expected, reason, details in rows]
        out.sort(key=lambda r: (r["judge_id"], r["qid"], r["docid"]))
        return out

    def judge_ids(self) -> list[str]:
        with self.access:
            return sorted(self.access.texts.get(r[0]) for r in self.access.db.execute("SELECT DISTINCT judge FROM judgments"))

    # -- file hashes (model identity of local files, cached by size and mtime) ----------
    def file_sha256(self, path: str | Path) -> str:
        path = Path(path).resolve()
        st = path.stat()
        with self.access:
            row = self.access.db.execute(
                "SELECT sha256 FROM file_hashes WHERE path=? AND size=? AND mtime_ns=?",
                (str(path), st.st_size, st.st_mtime_ns),
            ).fetchone()
        if row:
            return row[0]
        digest = sha256_file(path)
        with self.access:
            self.access.db.execute(
                "INSERT OR REPLACE INTO file_hashes VALUES (?,?,?,?)", (str(path), st.st_size, st.st_mtime_ns, digest)
            )
        return digest

    def integrity_check(self) -> str:
        with self.access:
            return self.access.db.execute("PRAGMA integrity_check").fetchone()[0]

    def close(self) -> None:
        with self.access:
            if self._writer is not None:
                self._writer.close()
            self.access.db.close()

    def __enter__(self) -> "CallStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def export_jsonl(store: CallStore, out: str | Path) -> int:
    lines = [canonical_json(rec) + "\n" for rec in store.iter_calls()]
    atomic_write_text(out, "".join(lines))
    return len(lines)


def check_store(path: str | Path, quick: bool = False, shown: int = 5) -> list[str]:
    """SQLite's integrity check of a store (quick_check: without comparing indexes to their
    tables), read-only: [] when it passed, else the first `shown` problems it found. It reads
    every page, so it runs only when asked (`judgeblender store check`), never at open."""
    path = Path(path)
    pragma = "quick_check" if quick else "integrity_check"
    db = open_read_only(path)  # a log's committed pages are read (and checked) too
    try:
        rows = [" ".join(str(r[0]).split()) for r in db.execute(f"PRAGMA {pragma}({shown})")]  # one line
    except sqlite3.DatabaseError as exc:
        raise store_error(path, exc) from None
    finally:
        db.close()
    return [] if rows == ["ok"] else rows
