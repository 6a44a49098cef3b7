"""The compact store (schema 5): every call and judgment reads back exactly as written, a store
written by the previous release migrates whole and atomically, and a call costs under 1 KB."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from judgeblender.calls import CallRequest, CallResult, Message, call_key
from judgeblender.store import CallStore, export_jsonl, merge_stores
from judgeblender.store.compact import MAX_SHAPES_PER_SETTINGS
from judgeblender.store.migrations import MIGRATIONS

DATA = Path(__file__).parent / "data"
SRC = Path(__file__).resolve().parents[1] / "src"
IDENT = {"backend": "openai", "model": "m", "model_revision": "r1"}


def passage(k: int) -> str:
    return f"passage {k}: " + " ".join(f"w{(k * 7 + j) % 1000}" for j in range(60))


def umbrela_like(query: str, text: str) -> CallRequest:
    return CallRequest((Message("system", "You are a search quality rater evaluating the relevance of passages."),
                        Message("user", "Given a query and a passage, you must provide a score on an integer scale "
                                        "of 0 to 3 with the following meanings: ... " * 6
                                + f"\nQuery: {query}\nPassage: {text}\nSplit this problem into steps ...")),
                       mode="logprobs", max_tokens=1, answer_prefix="##final score:", choices=("0", "1", "2", "3"))


KINDS = [
    (CallRequest((Message("user", "judge this é ☃ \x00 nul"),), max_tokens=10),
     CallResult("##final score: 2", tokens_in=5, tokens_out=3, latency_s=0.25, extra={"finish_reason": "stop"}),
     {"value": 2}),
    (umbrela_like("what is a cat", passage(1)),
     CallResult("2", probs={"0": 0.1, "1": 0.2, "2": 0.6, "3": 0.1}, choice_mass=0.97, tokens_in=400), {"value": 2}),
    (CallRequest((Message("user", "rubric"),), json_schema={"type": "object", "properties": {"score": {"type": "number"}}}),
     CallResult('{"score": 0.5}'), None),
    (CallRequest((Message("system", ""), Message("user", ""), Message("assistant", "x"), Message("user", "y" * 70000)),
                 temperature=0.5, seed=7),
     CallResult(""), None),
]


def test_every_kind_of_call_reads_back_exactly_as_written(tmp_path):
    path = tmp_path / "s.sqlite"
    with CallStore(path) as store:
        for req, result, parsed in KINDS:
            store.put(call_key(IDENT, req), "openai", IDENT, req, result, parsed)
    with CallStore(path) as store:
        records = {r["key"]: r for r in store.iter_calls()}
        for req, result, parsed in KINDS:
            key = call_key(IDENT, req)
            hit = store.get(key)
            assert hit.result == result and hit.parsed == parsed
            rec = records[key]
            assert rec["request"] == json.loads(json.dumps(req.key_fields()))
            assert rec["model_identity"] == IDENT and rec["backend"] == "openai" and rec["model"] == "m"
            assert rec["raw_output"] == result.text and rec["created_at"].endswith("+00:00")


def test_export_shows_the_exact_prompt_of_every_call(tmp_path):
    with CallStore(tmp_path / "s.sqlite") as store:
        reqs = [umbrela_like(f"query {k // 10}", passage(k)) for k in range(300)]
        store.put_many([(call_key(IDENT, r), "openai", IDENT, r, CallResult("2"), None) for r in reqs])
        assert export_jsonl(store, tmp_path / "calls.jsonl") == 300
    lines = {line["key"]: line for line in map(json.loads, (tmp_path / "calls.jsonl").read_text().splitlines())}
    assert {k: line["request"]["messages"] for k, line in lines.items()} == \
        {call_key(IDENT, r): [[m.role, m.content] for m in r.messages] for r in reqs}


def test_a_judgment_reads_back_with_every_field(tmp_path):
    record = {"label": 2, "probs": {"0": 0.1, "1": 0.2, "2": 0.6, "3": 0.1}, "expected": 1.7, "score": None,
              "reason": None, "invalid_reason": None, "raw_output": "2", "reasoning": None,
              "truncated": {"kept_chars": 10, "passage_tokens": 900}, "fallback": None, "stopped_at": None,
              "min_choice_mass": 0.01, "steps": [{"step": "final", "value": 2, "raw": "2", "attempt": 0}]}
    invalid = {**record, "label": None, "probs": None, "expected": None, "invalid_reason": "final: no label"}
    with CallStore(tmp_path / "s.sqlite") as store:
        store.put_judgments("openai:m/umbrela/logprobs", [("q1", "d1", record), ("q1", "d2", invalid)])
        store.put_judgments("other", [("q2", "d1", invalid)])
        assert store.judge_ids() == ["openai:m/umbrela/logprobs", "other"]
        got = store.judgments("openai:m/umbrela/logprobs")
    assert got == [{"judge_id": "openai:m/umbrela/logprobs", "qid": "q1", "docid": "d1", **record},
                   {"judge_id": "openai:m/umbrela/logprobs", "qid": "q1", "docid": "d2", **invalid}]


def test_repeated_details_are_compressed_once_and_every_judgment_reads_back(tmp_path):
    from judgeblender.store import compact

    steps = [{"step": "final", "value": 2, "raw": "##final score: 2", "attempt": 0, "cached": False}]
    same = {"label": 2, "probs": None, "expected": None, "invalid_reason": None, "raw_output": "##final score: 2",
            "steps": steps}
    other = {**same, "label": 1, "raw_output": "##final score: 1", "steps": [{**steps[0], "value": 1,
                                                                              "raw": "##final score: 1"}]}
    rest = {k: v for k, v in same.items() if k not in compact.JUDGMENT_COLUMNS}
    first = compact.pack_details(rest)
    assert compact.pack_details(json.loads(json.dumps(rest))) is first  # an equal record: the blob made once
    assert compact.unpack_details(first) == rest
    assert compact.pack_details({**rest, "raw_output": "x"}) != first
    with CallStore(tmp_path / "s.sqlite") as store:
        store.put_judgments("j", [("q1", f"d{i}", same) for i in range(3)] + [("q1", "d9", other)])
        got = store.judgments("j")
    assert got == [{"judge_id": "j", "qid": "q1", "docid": f"d{i}", **same} for i in range(3)] + \
        [{"judge_id": "j", "qid": "q1", "docid": "d9", **other}]


def test_sixty_word_passages_cost_under_a_kilobyte_per_call(tmp_path):
    """Bytes on disk over calls, with one judgment per call (as logprobs judging writes them),
    once the store is closed (the WAL folded in: SQLite's WAL stays near 4 MB whatever the
    store's size). bench/store_size.py measures it through the engine, open and closed."""
    path = tmp_path / "s.sqlite"
    n = 3000
    with CallStore(path) as store:
        reqs = [umbrela_like(f"question {k // 10} about topic {k % 97}", passage(k)) for k in range(n)]
        for start in range(0, n, 16):
            store.put_many([(call_key(IDENT, r), "openai", IDENT, r,
                             CallResult("2", probs={"0": 0.01, "1": 0.09, "2": 0.7, "3": 0.2}, choice_mass=0.98,
                                        tokens_in=380, tokens_out=1, latency_s=0.2), {"value": 2})
                            for r in reqs[start:start + 16]])
        store.put_judgments("openai:m/umbrela/logprobs", [
            (f"q{k // 10}", f"d{k}", {"label": 2, "probs": {"0": 0.01, "1": 0.09, "2": 0.7, "3": 0.2},
                                       "expected": 2.09, "invalid_reason": None, "raw_output": "2",
                                       "steps": [{"step": "final", "value": 2, "raw": "2", "attempt": 0,
                                                  "probs": {"0": 0.01, "1": 0.09, "2": 0.7, "3": 0.2}}]})
            for k in range(n)])
    assert not Path(f"{path}-wal").exists()
    assert path.stat().st_size / n < 1024, path.stat().st_size / n


def test_many_prompt_shapes_under_one_setting_share_a_bounded_number_of_dictionaries(tmp_path):
    with CallStore(tmp_path / "s.sqlite") as store:
        reqs = [CallRequest((Message("user", f"{k:04d} a prompt whose start changes every call"),)) for k in range(200)]
        store.put_many([(call_key(IDENT, r), "openai", IDENT, r, CallResult("2"), None) for r in reqs])
        assert sorted(r["request"]["messages"][0][1] for r in store.iter_calls()) == [r.messages[0].content for r in reqs]
    with sqlite3.connect(tmp_path / "s.sqlite") as db:
        assert db.execute("SELECT COUNT(DISTINCT dict) FROM shapes").fetchone()[0] == MAX_SHAPES_PER_SETTINGS


# -- the store of the previous release ----------------------------------------------------------------
def v4_store(path: Path) -> Path:
    """tests/data/store-v4.sql: a store written by judgeblender's schema-4 release (a scripted
    judge in both modes on the tiny pairs, a redacted call, a served call, judgments, a vector)."""
    db = sqlite3.connect(path)
    db.executescript((DATA / "store-v4.sql").read_text())
    db.close()
    return path


def v4_rows(path: Path) -> tuple[list, list]:
    with sqlite3.connect(path) as db:
        calls = db.execute("SELECT key, backend, model_identity, request, raw_output, parsed, probs, choice_mass, "
                           "tokens_in, tokens_out, latency_s, created_at, extra FROM calls ORDER BY key").fetchall()
        judgments = db.execute("SELECT judge_id, qid, docid, details FROM judgments ORDER BY 1, 2, 3").fetchall()
    return calls, judgments


def test_a_store_written_by_the_previous_release_migrates_whole(tmp_path):
    path = v4_store(tmp_path / "old.sqlite")
    calls, judgments = v4_rows(path)
    assert len(calls) >= 10 and len(judgments) >= 5
    with CallStore(path) as store:
        migrated = sorted(store.iter_calls(), key=lambda r: r["key"])
        for (key, backend, ident, req, raw, parsed, probs, mass, tin, tout, lat, created, extra), rec in zip(calls, migrated):
            assert rec == {"key": key, "backend": backend, "model": json.loads(ident).get("model", ""),
                           "model_identity": json.loads(ident), "request": json.loads(req), "raw_output": raw,
                           "parsed": json.loads(parsed) if parsed else None,
                           "probs": json.loads(probs) if probs else None, "choice_mass": mass, "tokens_in": tin,
                           "tokens_out": tout, "latency_s": lat, "created_at": created,
                           "extra": json.loads(extra) if extra else None}
        assert len(migrated) == len(calls)
        assert [(r["judge_id"], r["qid"], r["docid"], {k: v for k, v in r.items() if k not in
                 ("judge_id", "qid", "docid")}) for r in store.judgments()] == \
            [(j, q, d, json.loads(det)) for j, q, d, det in judgments]
        assert store.integrity_check() == "ok"
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0] >= 1


def test_a_failed_migration_leaves_the_previous_schema_untouched_and_the_next_open_completes_it(tmp_path, monkeypatch):
    from judgeblender.store import compact

    path = v4_store(tmp_path / "old.sqlite")
    before = v4_rows(path)
    real = compact.Texts.encode_call
    seen = []

    def failing(self, *args, **kwargs):
        seen.append(1)
        if len(seen) == 5:
            raise OSError("disk gone")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(compact.Texts, "encode_call", failing)
    with pytest.raises(OSError):
        CallStore(path)
    assert v4_rows(path) == before
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 4
    monkeypatch.setattr(compact.Texts, "encode_call", real)
    with CallStore(path) as store:
        assert store.count_calls() == len(before[0])


KILLER = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from judgeblender.store import compact
from judgeblender.store.calls import CallStore
real, n = compact.Texts.encode_call, [0]
def dying(self, *args, **kwargs):
    n[0] += 1
    if n[0] == int(sys.argv[3]):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, *args, **kwargs)
compact.Texts.encode_call = dying
CallStore(sys.argv[2])
"""


def test_a_migration_killed_midway_resumes_on_the_next_open(tmp_path):
    path = v4_store(tmp_path / "old.sqlite")
    before = v4_rows(path)
    proc = subprocess.run([sys.executable, "-c", KILLER, str(SRC), str(path), "7"], capture_output=True)
    assert proc.returncode == -signal.SIGKILL
    assert v4_rows(path) == before  # the half-written migration was rolled back by SQLite
    with CallStore(path) as store:
        assert store.count_calls() == len(before[0]) and len(store.judgments()) == len(before[1])


def test_merge_of_compact_stores_keeps_texts_once_and_reads_back(tmp_path):
    reqs = [umbrela_like("q", passage(k)) for k in range(20)]
    for name, part in (("a", reqs[:12]), ("b", reqs[8:])):
        with CallStore(tmp_path / f"{name}.sqlite") as store:
            store.put_many([(call_key(IDENT, r), "openai", IDENT, r, CallResult("2"), None) for r in part])
            store.put_judgments("j", [("q", f"d{k}", {"label": 1, "invalid_reason": None}) for k in range(3)])
    report = merge_stores(tmp_path / "m.sqlite", [tmp_path / "a.sqlite", tmp_path / "b.sqlite"])
    assert report.rows["calls"] == 20 and report.duplicates["calls"] == 4 and report.conflicts_total == 0
    with CallStore(tmp_path / "m.sqlite") as store:
        assert sorted(r["request"]["messages"][1][1] for r in store.iter_calls()) == \
            sorted(r.messages[1].content for r in reqs)
        assert [j["qid"] for j in store.judgments("j")] == ["q"] * 3


def test_merge_names_the_judge_of_a_conflicting_judgment(tmp_path):
    from judgeblender.store import MergeConflict

    for name, label in (("a", 1), ("b", 2)):
        with CallStore(tmp_path / f"{name}.sqlite") as store:
            store.put_judgments("openai:m/umbrela", [("q", "d", {"label": label, "invalid_reason": None})])
    with pytest.raises(MergeConflict, match="judgments openai:m/umbrela/q/d"):
        merge_stores(tmp_path / "m.sqlite", [tmp_path / "a.sqlite", tmp_path / "b.sqlite"])
