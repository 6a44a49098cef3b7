"""Answers of in-process models stored before finish reasons were recorded (issue 15) are
repaired once, by store migration 6, not by the engine each time it reads one (issue 30 part 7).

The stores here are made in the old form: schema 5, rows written by the store's own encoder
with the metadata (`extra`) an older llama.cpp or hf backend recorded, no finish reason in it;
then opened by this release. Real SQLite files.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from test_ray_rows import remade
from test_ray_rows import rows as stored_rows

from judgeblender.backends.scripted import ScriptedBackend
from judgeblender.calls import CallRequest, CallResult, Message, call_key
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.pairs import Pair
from judgeblender.store import CallStore, compact
from judgeblender.store.migrations import MIGRATIONS

IDENT = {"backend": "llamacpp", "model": "old.gguf", "sha256": "ab" * 32}


def generated(text: str, max_tokens: int = 100) -> CallRequest:
    return CallRequest((Message("user", text),), max_tokens=max_tokens)


def scored(text: str) -> CallRequest:
    return CallRequest((Message("user", text),), mode="logprobs", max_tokens=1, answer_prefix="score:",
                       choices=("0", "1", "2", "3"))


# (backend, request, tokens_out, the extra an old release stored) -> the extra this release reads
CASES = {
    "stopped": ("llamacpp", generated("a"), 5, {}, {"finish_reason": "stop"}),
    "cut": ("llamacpp", generated("b"), 100, {}, {"finish_reason": "length"}),
    "no tokens counted": ("llamacpp", generated("c"), 0, {}, None),
    "hf keeps its other metadata": ("hf", generated("d"), 7, {"chat_format": "fallback"},
                                    {"chat_format": "fallback", "finish_reason": "stop"}),
    "already recorded": ("llamacpp", generated("e"), 100, {"finish_reason": "stop"}, {"finish_reason": "stop"}),
    "logprobs mode: one token scored, no finish": ("llamacpp", scored("f"), 1, {}, None),
    "a served model's answer is not guessed": ("openai", generated("g"), 5, {"response_id": "r"},
                                               {"response_id": "r"}),
}


def old_store(path: Path) -> dict[str, str]:
    """A schema 5 store holding CASES as an older release wrote them; the key of each case."""
    keys = {}
    with CallStore(path) as store:
        for name, (backend, request, tokens_out, extra, _) in CASES.items():
            keys[name] = call_key(IDENT, request)
            store.put(keys[name], backend, IDENT, request,
                      CallResult("##final score: 2", tokens_in=9, tokens_out=tokens_out, extra=dict(extra)), None)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version=5")
    return keys


def rows(path: Path) -> dict[str, tuple]:
    with sqlite3.connect(path) as db:
        return {r[0]: r for r in db.execute("SELECT * FROM calls")}


def test_opening_an_old_store_records_the_finish_reason_each_in_process_answer_had(tmp_path):
    path = tmp_path / "old.sqlite"
    keys = old_store(path)
    before = rows(path)
    with CallStore(path) as store:
        read = {c["key"]: c for c in store.iter_calls()}
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) == 7
    for name, (_, _, _, _, expected) in CASES.items():
        assert read[keys[name]]["extra"] == expected, name
    after = rows(path)
    changed = {name for name, key in keys.items() if after[key] != before[key]}
    assert changed == {"stopped", "cut", "hf keeps its other metadata"}
    for key in keys.values():  # only the metadata: the answer, its tokens and its time stay as they were
        assert after[key][:14] == before[key][:14]
    with CallStore(path):  # opened again: nothing more to do
        pass
    assert rows(path) == after


def test_each_migrated_row_is_what_the_stores_own_encoder_makes_of_it(tmp_path):
    """The repaired metadata is compressed as a new answer's would be in that store (against the
    model's first metadata there): every row, remade from what it decodes to, is the row stored."""
    path = tmp_path / "old.sqlite"
    old_store(path)
    with CallStore(path):
        pass
    assert stored_rows(path) == remade(path)


class OldEmbeddedModel(ScriptedBackend):
    """Stands for llama.cpp reading an old store: it is never called (every answer is stored)."""

    kind = "llamacpp"


def test_the_engine_reads_the_migrated_answers_by_its_one_rule_without_calling_the_model(tmp_path):
    backend = OldEmbeddedModel(default="##final score: 2")
    judge = Judge(JudgeSpec("scripted:x", invalid_policy="no-retry"), backend=backend)
    queries = {"q": "what do goldfish eat"}
    corpus = {"stopped": "flakes and pellets", "cut": "the tower is tall", "silent": "museums in paris"}
    pairs = [Pair("q", docid) for docid in corpus]
    path = tmp_path / "s.sqlite"
    with CallStore(path) as store:
        judge_pairs([judge], pairs, queries, corpus, store=store)
        key_of = {docid: c["key"] for c in store.iter_calls() for docid, text in corpus.items()
                  if text in c["request"]["messages"][-1][1]}
        assert {c["request"]["max_tokens"] for c in store.iter_calls()} == {100}
    with sqlite3.connect(path) as db:  # as an older release stored them: no finish reason
        for docid, tokens_out in (("stopped", 5), ("cut", 100), ("silent", 0)):
            db.execute("UPDATE calls SET extra = NULL, extra_dict = NULL, tokens_out = ? WHERE key = ?",
                       (tokens_out, key_of[docid]))
        db.execute("PRAGMA user_version=5")
    backend.calls.clear()
    with CallStore(path) as store:
        run = judge_pairs([judge], pairs, queries, corpus, store=store)
    assert backend.calls == []
    labels = {p.docid: j.label for p, j in run.judgments[judge.id].items()}
    reasons = {p.docid: j.invalid_reason for p, j in run.judgments[judge.id].items()}
    assert labels["stopped"] == 2
    assert labels["cut"] is None and "cut at the token limit" in reasons["cut"]
    assert labels["silent"] is None and "no finish reason" in reasons["silent"]


def test_a_failed_migration_leaves_the_old_store_as_it_was_and_the_next_open_completes_it(tmp_path, monkeypatch):
    path = tmp_path / "old.sqlite"
    keys = old_store(path)
    before = rows(path)

    def failing(self, *args, **kwargs):
        raise OSError("disk gone")

    real = compact.Texts.encode_extra
    monkeypatch.setattr(compact.Texts, "encode_extra", failing)
    with pytest.raises(OSError, match="disk gone"):
        CallStore(path)
    assert rows(path) == before
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 5
    monkeypatch.setattr(compact.Texts, "encode_extra", real)
    with CallStore(path) as store:
        assert json.loads(json.dumps(store.get(keys["stopped"]).result.extra)) == {"finish_reason": "stop"}
