"""The call store: keys, persistence, migrations."""

import sqlite3

from judgeblender.backends.base import CallRequest, CallResult, Message
from judgeblender.store import CallStore, call_key
from judgeblender.store.migrations import MIGRATIONS

REQ = CallRequest((Message("user", "judge this"),), mode="generate", max_tokens=10)
IDENT = {"backend": "scripted", "model": "m"}


def test_key_changes_with_anything_that_changes_the_answer():
    base = call_key(IDENT, REQ)
    assert call_key(IDENT, REQ) == base
    assert call_key({**IDENT, "model": "other"}, REQ) != base
    assert call_key(IDENT, CallRequest(REQ.messages, max_tokens=11)) != base
    assert call_key(IDENT, CallRequest(REQ.messages, max_tokens=10, seed=1)) != base
    assert call_key(IDENT, CallRequest((Message("user", "judge that"),), max_tokens=10)) != base


def test_put_get_round_trip_and_persistence(tmp_path):
    path = tmp_path / "s.sqlite"
    with CallStore(path) as store:
        key = call_key(IDENT, REQ)
        store.put(key, "scripted", IDENT, REQ, CallResult("##final score: 2", tokens_in=5, tokens_out=3), {"value": 2})
    with CallStore(path) as store:
        hit = store.get(key)
        assert hit.result.text == "##final score: 2" and hit.result.tokens_in == 5
        assert hit.parsed == {"value": 2}
        assert store.count_calls() == 1
        assert store.integrity_check() == "ok"


def test_schema_is_migrated_to_the_latest_version(tmp_path):
    path = tmp_path / "s.sqlite"
    CallStore(path).close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_redacted_store_keeps_no_prompt_text(tmp_path):
    with CallStore(tmp_path / "s.sqlite", redact_passages=True) as store:
        store.put(call_key(IDENT, REQ), "scripted", IDENT, REQ, CallResult("2"), None)
        (rec,) = list(store.iter_calls())
    assert "judge this" not in str(rec["request"])
