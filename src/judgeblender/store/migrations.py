"""Schema migrations, applied in order; PRAGMA user_version records how many have run.

A migration is SQL (statements separated by `;`) or a function given the open connection,
run inside the same transaction as the version bump.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from ..calls import canonical_json, store_key
from .compact import CALLS_COLUMNS, CHUNK, Texts, compact_schema


def rekey_served_calls(db: sqlite3.Connection) -> None:
    """Served models (`openai:`) are keyed by what they serve, no longer by where they listen:
    drop `base_url` from each stored identity and re-key the row, so a server restarted on
    another port finds the calls it already answered.

    A row is re-keyed only when its stored identity and request give back its key (so the
    request was stored in full). Rows written with --redact store no prompt text, cannot be
    re-keyed and keep their old key. When two rows fall on one new key (the same call asked of
    two URLs), the older keeps it and the other stays under its old key: nothing is deleted.
    """
    rows = db.execute("SELECT key, model_identity, request FROM calls WHERE backend = 'openai' "
                      "ORDER BY created_at, key").fetchall()
    for key, identity_json, request_json in rows:
        identity, request = json.loads(identity_json), json.loads(request_json)
        if "base_url" not in identity or store_key(identity, request) != key:
            continue
        identity.pop("base_url")
        db.execute("UPDATE OR IGNORE calls SET key = ?, model_identity = ? WHERE key = ?",
                   (store_key(identity, request), canonical_json(identity), key))


# Backends that generate in this process, and record their finish reason since issue 15.
GENERATED_HERE = ("llamacpp", "hf")


def record_finish_reasons(db: sqlite3.Connection) -> None:
    """Generated answers of in-process models stored before their finish reason was recorded
    (issue 15) get the one they had: such a model stops only at its end token or at max_tokens,
    so fewer tokens than max_tokens is "stop" and max_tokens is "length" (cut). An answer with no
    token count keeps none, and stays invalid ("no finish reason"), as every answer without one
    is. Done once, here, so the engine reads every stored answer by the one rule (answers.py)
    instead of repairing old rows as it meets them."""
    texts = Texts(db)
    settings: dict[int, dict] = {}
    last = ""
    while True:  # chunks in key order: memory stays bounded, and no row is read twice
        rows = db.execute(
            "SELECT key, identity, settings, extra, extra_dict, tokens_out FROM calls "
            f"WHERE backend IN ({', '.join('?' * len(GENERATED_HERE))}) AND key > ? ORDER BY key LIMIT {CHUNK}",
            (*GENERATED_HERE, last)).fetchall()
        if not rows:
            break
        for key, identity_id, settings_id, blob, extra_dict, tokens_out in rows:
            request = settings.get(settings_id)
            if request is None:
                request = settings[settings_id] = json.loads(texts.get(settings_id))
            extra = texts.decode_extra(blob, extra_dict) or {}
            if request.get("mode") != "generate" or "finish_reason" in extra or not tokens_out:
                continue
            extra["finish_reason"] = "stop" if tokens_out < request["max_tokens"] else "length"
            db.execute("UPDATE calls SET extra = ?, extra_dict = ? WHERE key = ?",
                       (*texts.encode_extra(identity_id, canonical_json(extra)), key))
        last = rows[-1][0]


def calls_in_arrival_order(db: sqlite3.Connection) -> None:
    """Migration 7: the calls kept in a rowid table, in the order they arrive, found by key through
    an index, instead of a WITHOUT ROWID table ordered by key.

    A call's key is a sha256, so consecutive calls land on random pages of a table ordered by
    key: committing 512 calls of a 10^5-call store rewrote about as many leaf pages of 4 KiB,
    whole rows included (1.6 KB each before compression), into the write-ahead log. In arrival
    order a commit's rows fill a few new pages at the table's end, and only the key index (64
    characters and a rowid an entry) takes the random writes: SQLite's CPU for inserting and
    committing 10^5 calls fell from 3.8-4.2 s to 2.4-2.5 s (docs/benchmarks.md). The columns and
    every query stay as they were; the rows are copied in the order they were stored."""
    db.execute(f"CREATE TABLE calls7 ({CALLS_COLUMNS})")
    db.execute("INSERT INTO calls7 SELECT * FROM calls ORDER BY created_at, key")
    db.execute("DROP TABLE calls")
    db.execute("ALTER TABLE calls7 RENAME TO calls")


MIGRATIONS: list[str | Callable[[sqlite3.Connection], None]] = [
    # 1: every LLM call, keyed by what determines its answer.
    """
    CREATE TABLE calls (
        key TEXT PRIMARY KEY,
        backend TEXT NOT NULL,
        model TEXT NOT NULL,
        model_identity TEXT NOT NULL,
        request TEXT NOT NULL,
        raw_output TEXT NOT NULL,
        parsed TEXT,
        probs TEXT,
        choice_mass REAL,
        tokens_in INTEGER,
        tokens_out INTEGER,
        latency_s REAL,
        created_at TEXT NOT NULL,
        extra TEXT
    );
    CREATE TABLE file_hashes (
        path TEXT NOT NULL,
        size INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        PRIMARY KEY (path, size, mtime_ns)
    );
    """,
    # 2: final per-pair judgments of each judge, so blends can be recomputed without calls.
    """
    CREATE TABLE judgments (
        judge_id TEXT NOT NULL,
        qid TEXT NOT NULL,
        docid TEXT NOT NULL,
        label INTEGER,
        probs TEXT,
        expected REAL,
        invalid_reason TEXT,
        details TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (judge_id, qid, docid)
    );
    """,
    # 3: scorer outputs (embedding vectors, cross-encoder scores) keyed by model and text, so a
    # re-run or another jury containing the same scorer encodes nothing twice.
    """
    CREATE TABLE vectors (
        model TEXT NOT NULL,
        text_sha256 TEXT NOT NULL,
        dim INTEGER NOT NULL,
        vector BLOB NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (model, text_sha256)
    );
    """,
    # 4: served models keyed without their endpoint URL.
    rekey_served_calls,
    # 5: each repeated text once, messages compressed against their shape's first call (compact.py).
    compact_schema,
    # 6: in-process models' answers from before issue 15 get the finish reason they had.
    record_finish_reasons,
    # 7: calls in arrival order (a rowid table), found by key through its index.
    calls_in_arrival_order,
]
ARRIVAL_ORDER_VERSION = 7  # the last migration that rewrote every call: the space it freed is given back
