"""What the store is given to write, and the one encoder that turns it into rows.

An answered call reaches the store by one of three sinks (store/sinks.py): made into its row in
this process and committed here, made here and committed by the writer process (under Ray), or
sent as it is to the writer process, which makes the row there (a served run). Whichever it is,
the row is made here, by `encode_calls`, from a `CallRow`, so the bytes stored cannot depend on
the way they went (tests/test_served_writer.py and tests/test_ray_rows.py compare them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ..calls import CallRequest, CallResult, canonical_json
from .compact import flat_json

if TYPE_CHECKING:
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
