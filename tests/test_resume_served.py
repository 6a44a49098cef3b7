"""Resume survives a restarted server: a served model is keyed by what it serves, not where it listens.

The old key (before store migration 4) hashed the endpoint URL into the identity, so a vLLM
server restarted on another port re-made every stored call. These tests run a judge against a
real local server, restart it on another port, and count the requests; and they open a store
written with the old keys and check the migration re-keys it.
"""

from __future__ import annotations

import sqlite3

import pytest
from openai_server import OpenAITestServer

from judgeblender.calls import CallRequest, CallResult, Message, call_key, canonical_json
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.pairs import Pair, read_corpus, read_queries
from judgeblender.store import CallStore
from judgeblender.store.migrations import MIGRATIONS

PAIRS = [Pair("q1", "d1"), Pair("q1", "d2"), Pair("q2", "d3"), Pair("q2", "d4")]


@pytest.fixture
def data(tiny):
    return read_queries(tiny / "queries.tsv"), read_corpus(tiny / "corpus.jsonl")


def judge_at(server, **options):
    return Judge(JudgeSpec(model="openai:test-model", options={"base_url": server.base_url, "timeout_s": 5.0,
                                                               "concurrency": 2, **options}))


def test_a_server_restarted_on_another_port_is_asked_nothing_again(data, tmp_path):
    with OpenAITestServer("##final score: 2") as first, CallStore(tmp_path / "s.sqlite") as store:
        run = judge_pairs([judge_at(first)], PAIRS, *data, store=store)
        assert len(first.requests) == 4
    with OpenAITestServer("##final score: 2") as second, CallStore(tmp_path / "s.sqlite") as store:
        assert second.port != first.port
        judge = judge_at(second)
        again = judge_pairs([judge], PAIRS, *data, store=store)
        assert len(second.requests) == 0
    assert again.stats[judge.id].cache_hits == 4
    assert [again.judgments[judge.id][p].label for p in PAIRS] == [run.judgments[judge.id][p].label for p in PAIRS]


def test_a_pinned_revision_keeps_two_models_of_one_name_apart(data, tmp_path):
    with OpenAITestServer("##final score: 2") as server, CallStore(tmp_path / "s.sqlite") as store:
        judge_pairs([judge_at(server, model_revision="weights-a")], PAIRS, *data, store=store)
        judge_pairs([judge_at(server, model_revision="weights-b")], PAIRS, *data, store=store)
        assert len(server.requests) == 8  # other weights: every call made again


# --- a store written by the old code (keys with base_url), then migrated ---------------------
def old_identity(port: int, revision: str | None = None) -> dict:
    """`OpenAICompatBackend.identity()` as commit 41f67b2 computed it."""
    return {"backend": "openai", "model": "test-model", "revision": revision, "base_url": f"http://127.0.0.1:{port}/v1"}


def old_store(path, rows: list[tuple[dict, CallRequest, str, bool]]) -> None:
    """A store at schema version 3 (the last before the re-keying), rows keyed the old way:
    (identity, request, answer, written with --redact)."""
    db = sqlite3.connect(path)
    for script in MIGRATIONS[:3]:
        db.executescript(script)
    for n, (ident, req, answer, redacted) in enumerate(rows):
        fields = req.key_fields()
        if redacted:
            fields["messages"] = [[role, "[redacted]"] for role, _ in fields["messages"]]
        db.execute("INSERT INTO calls VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   (call_key(ident, req), "openai", ident["model"], canonical_json(ident), canonical_json(fields),
                    answer, None, None, None, 1, 1, 0.1, f"2025-01-01T00:00:0{n}",
                    '{"finish_reason":"stop"}'))  # as the served backend records every answer
    db.execute("PRAGMA user_version=3")
    db.commit()
    db.close()


def request(text: str) -> CallRequest:
    return CallRequest((Message("system", "grade"), Message("user", text)), max_tokens=50, temperature=0.5)


def new_identity(revision=None) -> dict:
    return {"backend": "openai", "model": "test-model", "revision": revision}


def test_the_migration_rekeys_calls_stored_with_their_endpoint(tmp_path):
    path = tmp_path / "old.sqlite"
    scripted = {"backend": "scripted", "model": "m"}
    old_store(path, [
        (old_identity(8000), request("a"), "##final score: 1", False),
        (old_identity(8000, "rev-1"), request("b"), "##final score: 2", False),
        (old_identity(9000), request("a"), "##final score: 3", False),  # the same call at another URL: newer
        (old_identity(8000), request("c"), "##final score: 0", True),  # --redact: no prompt to re-key from
    ])
    db = sqlite3.connect(path)
    db.execute("INSERT INTO calls VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
               (call_key(scripted, request("a")), "scripted", "m", canonical_json(scripted),
                canonical_json(request("a").key_fields()), "x", None, None, None, 0, 0, 0.0, "2025-01-02", None))
    db.commit()
    db.close()
    with CallStore(path) as store:
        assert store.get(call_key(new_identity(), request("a"))).result.text == "##final score: 1"  # the older kept
        assert store.get(call_key(new_identity("rev-1"), request("b"))).result.text == "##final score: 2"
        assert store.get(call_key(new_identity(), request("b"))) is None  # revisions stay apart
        # nothing deleted: the later duplicate and the redacted row keep their old keys
        assert store.count_calls() == 5
        assert store.get(call_key(old_identity(9000), request("a"))).result.text == "##final score: 3"
        assert store.get(call_key(old_identity(8000), request("c"))).result.text == "##final score: 0"
        assert store.get(call_key(scripted, request("a"))).result.text == "x"  # other backends untouched
        for rec in store.iter_calls():  # every re-keyed row still hashes to its key
            if rec["key"] in (call_key(new_identity(), request("a")), call_key(new_identity("rev-1"), request("b"))):
                assert "base_url" not in rec["model_identity"]
        assert store.integrity_check() == "ok"
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)


def test_a_migrated_store_resumes_on_a_new_port(data, tmp_path):
    """End to end: calls made by a judge, stored under the old keys, are found after migration."""
    path = tmp_path / "s.sqlite"
    recorded: list[tuple[CallRequest, CallResult]] = []
    with OpenAITestServer("##final score: 2") as first:
        judge = judge_at(first)
        original = judge.backend.aexecute

        async def record(req):
            result = await original(req)
            recorded.append((req, result))
            return result

        judge.backend.aexecute = record
        judge_pairs([judge], PAIRS, *data)
    old_store(path, [(old_identity(first.port), req, res.text, False) for req, res in recorded])
    with OpenAITestServer("##final score: 2") as second, CallStore(path) as store:
        judge = judge_at(second)
        run = judge_pairs([judge], PAIRS, *data, store=store)
        assert len(second.requests) == 0 and run.stats[judge.id].cache_hits == 4
