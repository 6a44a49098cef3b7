"""What the store is given to write, and the one encoder that turns it into rows.

Every row reaches the store through one door, CallStore.submit, as a `Write`: answered calls,
a judge's judgments, a scorer's vectors, or any of them together in one transaction. The store's
one writer (store/sinks.py) commits it: here, or in the writer process (served and Ray runs),
from rows made here or there. Wherever it is, a row is made by `encode_calls`, `encode_judgments`
or `encode_vectors`, from what is given here, so the bytes stored cannot depend on the way they
went (tests/test_sinks.py, tests/test_served_writer.py and tests/test_ray_rows.py compare them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ..calls import CallRequest, CallResult, canonical_json
from .compact import flat_json, iso

if TYPE_CHECKING:
    import numpy as np

    from .compact import Texts


class CallRow(NamedTuple):
    """One answered call as the store takes it. `identity` is the model's identity (one dict
    shared by a wave's calls: its JSON is made once per batch), `parsed` what the engine read
    from the answer ({"value", "invalid_reason"}) or None. A plain 6-tuple in this order is taken
    as well (callers and tests that build rows by hand)."""

    key: str
    backend: str
    identity: dict[str, Any]
    request: CallRequest
    result: CallResult
    parsed: dict[str, Any] | None


class JudgmentRows(NamedTuple):
    """A judge's finished judgments, written in the same transaction as the calls beside them:
    (qid, docid, Judgment.record()) each."""

    judge_id: str
    records: Iterable[tuple[str, str, dict[str, Any]]]


class Write(NamedTuple):
    """One transaction's rows, as CallStore.submit takes them: answered calls (CallRows, or plain
    6-tuples), one judge's judgments (or None), and `vectors` table rows (`encode_vectors`)."""

    calls: Sequence[CallRow | tuple] = ()
    judgments: JudgmentRows | tuple | None = None
    vectors: Sequence[tuple] = ()


# A scorer's output for one text replaces the one stored before (a re-encoded torn row).
VECTORS_INSERT = "INSERT OR REPLACE INTO vectors VALUES (?,?,?,?,?)"


def encode_calls(texts: Texts, calls: Sequence[CallRow | tuple], now: float, redact: bool) -> list[tuple]:
    """The `calls` rows of `calls` (compact.CALLS_INSERT's columns), their texts added to `texts`
    as they are met; `now` is the transaction's one time, `redact` a store that keeps no prompt
    text. The identity's JSON is made once per distinct identity object of the batch."""
    identities: dict[int, str] = {}
    rows = []
    for key, backend, identity, request, result, parsed in calls:
        ident = identities.get(id(identity))
        if ident is None:
            ident = identities[id(identity)] = canonical_json(identity)
        rows.append(texts.encode_result(key, backend, ident, request, result, flat_json(parsed), now, redact=redact))
    return rows


def encode_judgments(texts: Texts, judgments: JudgmentRows | tuple, now: float) -> list[tuple]:
    """The `judgments` rows of one judge's records (compact.JUDGMENTS_INSERT's columns)."""
    judge_id, records = judgments
    return [texts.encode_judgment(judge_id, qid, docid, record, now) for qid, docid, record in records]


def encode_vectors(model: str, vectors: Mapping[str, np.ndarray], now: float) -> list[tuple]:
    """The `vectors` rows of a scorer's outputs (VECTORS_INSERT's columns): each as float32
    bytes with its length, keyed by `model` and the text's sha256."""
    import numpy as np  # a scorer's vectors come as arrays: numpy is loaded already

    created, rows = iso(now), []
    for key, vec in vectors.items():
        arr = np.ascontiguousarray(vec, dtype=np.float32).ravel()
        rows.append((model, key, len(arr), arr.tobytes(), created))
    return rows
