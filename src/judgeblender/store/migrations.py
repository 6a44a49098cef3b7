"""Schema migrations, applied in order; PRAGMA user_version records how many have run.

A migration is SQL (statements separated by `;`) or a function given the open connection,
run inside the same transaction as the version bump.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from ..calls import canonical_json
from ..hashing import sha256_text
from .compact import compact_schema


def _key(identity: dict, request: dict) -> str:
    """`calls.call_key` from the stored JSON of an identity and a request (CallRequest.key_fields())."""
    return sha256_text(canonical_json({"identity": identity, "request": request}))


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
        if "base_url" not in identity or _key(identity, request) != key:
            continue
        identity.pop("base_url")
        db.execute("UPDATE OR IGNORE calls SET key = ?, model_identity = ? WHERE key = ?",
                   (_key(identity, request), canonical_json(identity), key))


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
]
COMPACT_VERSION = 5
