"""The call store: keys, persistence, migrations."""

import sqlite3

from judgeblender.calls import CallRequest, CallResult, Message, call_key
from judgeblender.store import CallStore
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


def test_keys_are_stable_across_versions():
    # A store written by an earlier version must still answer: these keys were computed by the
    # first release (when CallRequest.key_fields was dataclasses.asdict).
    ident = {"backend": "x", "model": "m"}
    plain = CallRequest((Message("system", "s"), Message("user", "u é")))
    scored = CallRequest((Message("user", "x"),), mode="logprobs", max_tokens=1, answer_prefix="##final score:",
                         choices=("0", "1", "2", "3"), seed=3, temperature=0.5)
    rubric = CallRequest((Message("user", "x"),), json_schema={
        "title": "T", "type": "object", "properties": {"score": {"type": "integer"}, "r": {"enum": [1, 2]}}})
    assert call_key(ident, plain) == "f476cf736f5149111f2463081afefa5007bc05064a5d343df174ba5e9e4e05a7"
    assert call_key(ident, scored) == "4a8956c2d77a6444c6ac3e85ad87825df8ea39d3f07ffe15adb2677e0ba560b7"
    assert call_key(ident, rubric) == "d119862016ca003ed61290ab8d8d74e8a3b5e55dcf422845548007676874015e"


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


def test_a_store_another_process_is_creating_is_waited_for(tmp_path):
    # Two `judge` runs started together both create the store; the one that loses the race for
    # the WAL switch waits instead of failing with "database is locked".
    import threading
    import time

    path = tmp_path / "new.sqlite"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # what the winner holds while it sets the database up
    other.execute("CREATE TABLE t (x)")
    threading.Timer(0.3, lambda: other.execute("COMMIT")).start()
    started = time.monotonic()
    store = CallStore(path)
    assert time.monotonic() - started >= 0.25
    assert store.count_calls() == 0
    other.close()
