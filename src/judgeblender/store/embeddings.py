"""Scorer outputs in the store: one float32 vector per (model, text).

Embedding judges keep each query's and passage's vector here, cross-encoders each pair's
score (a vector of length 1, keyed by the pair's text). `model` must name everything that
determines the output (weights hash, maximum length), like a call key does for LLM calls.
Vectors are written as every row is, through the store's one door (CallStore.submit), and read
through its connection (StoreAccess), under its lock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .calls import CallStore
from .compact import unix_now
from .rows import Write, encode_vectors

CHUNK = 500  # keys per SELECT: well under SQLite's bound-variable limit


def get_vectors(store: CallStore, model: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
    """The stored vectors among `keys` (sha256_text of the text); absent keys are simply missing."""
    found: dict[str, np.ndarray] = {}
    unique = list(dict.fromkeys(keys))
    access = store.access
    with access:
        for start in range(0, len(unique), CHUNK):
            chunk = unique[start:start + CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = access.db.execute(
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
    store.submit(Write(vectors=encode_vectors(model, vectors, unix_now())))


def count_vectors(store: CallStore, model: str | None = None) -> int:
    query, args = "SELECT COUNT(*) FROM vectors", ()
    if model is not None:
        query, args = query + " WHERE model = ?", (model,)
    with store.access:
        return store.access.db.execute(query, args).fetchone()[0]
