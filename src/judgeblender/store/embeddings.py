"""Scorer outputs in the store: one float32 vector per (model, text).

Embedding judges keep each query's and passage's vector here, cross-encoders each pair's
score (a vector of length 1, keyed by the pair's text). `model` must name everything that
determines the output (weights hash, maximum length), like a call key does for LLM calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .calls import CallStore
from .compact import iso, unix_now

CHUNK = 500  # keys per SELECT: well under SQLite's bound-variable limit


def get_vectors(store: CallStore, model: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
    """The stored vectors among `keys` (sha256_text of the text); absent keys are simply missing."""
    found: dict[str, np.ndarray] = {}
    unique = list(dict.fromkeys(keys))
    with store._lock:
        for start in range(0, len(unique), CHUNK):
            chunk = unique[start:start + CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = store._db.execute(
                f"SELECT text_sha256, dim, vector FROM vectors WHERE model = ? AND text_sha256 IN ({marks})",
                (model, *chunk),
            ).fetchall()
            for key, dim, blob in rows:
                vec = np.frombuffer(blob, dtype=np.float32)
                if len(vec) != dim:  # a torn or foreign row: re-encode rather than trust it
                    continue
                found[key] = vec
    return found


def put_vectors(store: CallStore, model: str, vectors: Mapping[str, np.ndarray]) -> None:
    """Record vectors in one transaction (committed before this returns)."""
    now = iso(unix_now())
    rows = []
    for key, vec in vectors.items():
        arr = np.ascontiguousarray(vec, dtype=np.float32).ravel()
        rows.append((model, key, len(arr), arr.tobytes(), now))
    with store._lock:
        store._db.execute("BEGIN")
        try:
            store._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?,?,?,?,?)", rows)
            store._db.execute("COMMIT")
        except BaseException:
            store.rollback()
            raise


def count_vectors(store: CallStore, model: str | None = None) -> int:
    query, args = "SELECT COUNT(*) FROM vectors", ()
    if model is not None:
        query, args = query + " WHERE model = ?", (model,)
    with store._lock:
        return store._db.execute(query, args).fetchone()[0]
