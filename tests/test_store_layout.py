"""Schema 7: the calls kept in arrival order (a rowid table) and found by key through an index.
A store of schema 6 (calls in a WITHOUT ROWID table ordered by key) migrates to it on open,
reads back every call as it was, and a run resumed on it asks the model nothing again."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from judgeblender.calls import call_key
from judgeblender.store import CallStore
from judgeblender.store.migrations import MIGRATIONS

from test_store_compact import IDENT, KINDS, passage, umbrela_like

SRC = Path(__file__).resolve().parents[1] / "src"


def as_schema_6(path: Path) -> None:
    """Put a store's calls back in schema 6's layout: ordered by key, WITHOUT ROWID."""
    with sqlite3.connect(path) as db:
        columns = ", ".join(f"{name} {kind}" + (" PRIMARY KEY" if pk else " NOT NULL" if notnull else "")
                            for _, name, kind, notnull, _, pk in db.execute("PRAGMA table_info(calls)"))
        db.execute(f"CREATE TABLE calls6 ({columns}) WITHOUT ROWID")
        db.execute("INSERT INTO calls6 SELECT * FROM calls")
        db.execute("DROP TABLE calls")
        db.execute("ALTER TABLE calls6 RENAME TO calls")
        db.execute("PRAGMA user_version=6")
    db.close()


def calls_sql(path: Path) -> str:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT sql FROM sqlite_master WHERE name = 'calls'").fetchone()[0]
    finally:
        db.close()


def test_a_schema_6_store_migrates_to_arrival_order_and_reads_back_every_call(tmp_path):
    path = tmp_path / "old.sqlite"
    requests = [(req, result, parsed) for req, result, parsed in KINDS]
    requests += [(umbrela_like(f"q{k}", passage(k)), KINDS[1][1], {"value": k % 4}) for k in range(300)]
    with CallStore(path) as store:
        for req, result, parsed in requests:
            store.put(call_key(IDENT, req), "openai", IDENT, req, result, parsed)
        before = list(store.iter_calls())
        judged = [(f"q{k}", f"d{k}", {"label": k % 4, "probs": None, "expected": None, "invalid_reason": None,
                                      "steps": []}) for k in range(20)]
        store.put_judgments("j", judged)
        judgments = store.judgments("j")
    as_schema_6(path)
    assert "WITHOUT ROWID" in calls_sql(path)
    with CallStore(path) as store:
        assert list(store.iter_calls()) == before
        keys = [call_key(IDENT, req) for req, _, _ in requests]
        found = store.get_many(keys)
        assert sorted(found) == sorted(keys)
        assert store.judgments("j") == judgments
        assert store.integrity_check() == "ok"
    assert "WITHOUT ROWID" not in calls_sql(path)
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) == 7
        plan = " ".join(str(r) for r in db.execute("EXPLAIN QUERY PLAN SELECT raw_output FROM calls WHERE key = ?",
                                                   (keys[0],)))
        assert "USING INDEX" in plan  # a key is found through the index, not by a scan
    finally:
        db.close()


def test_a_run_resumed_on_a_schema_6_store_asks_the_model_nothing_again(tmp_path):
    queries, corpus, pairs = tmp_path / "q.tsv", tmp_path / "c.jsonl", tmp_path / "p.tsv"
    queries.write_text("".join(f"q{i}\tquestion {i}\n" for i in range(5)))
    corpus.write_text("".join(json.dumps({"docid": f"d{k}", "text": passage(k)}) + "\n" for k in range(40)))
    pairs.write_text("".join(f"q{k % 5}\td{k}\n" for k in range(40)))
    model = tmp_path / "model.json"
    model.write_text(json.dumps({"default": "##final score: 2", "record": False}))
    store = tmp_path / "calls.sqlite"
    env = {**os.environ, "PYTHONPATH": str(SRC)}

    def judge(out: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "judgeblender", "judge", "-q", str(queries), "-c", str(corpus),
                               "-p", str(pairs), "-o", str(tmp_path / out), "-j", f"scripted:{model}",
                               "--store", str(store), "--no-progress"],
                              capture_output=True, text=True, env=env, timeout=300)

    first = judge("first.qrels")
    assert first.returncode == 0, first.stderr
    assert "40 calls made, 0 from the store" in first.stderr
    as_schema_6(store)
    again = judge("again.qrels")
    assert again.returncode == 0, again.stderr
    assert "0 calls made, 40 from the store" in again.stderr
    assert (tmp_path / "again.qrels").read_bytes() == (tmp_path / "first.qrels").read_bytes()
    assert "WITHOUT ROWID" not in calls_sql(store)


def test_readings_and_metadata_made_once_read_back_with_their_types(tmp_path):
    """The row's `parsed` JSON is made once per distinct reading, and a repeated metadata blob
    is reused: equal keys of other types (True and 1, 0.0 and -0.0) and metadata that changes
    between calls still read back as each call had them."""
    readings = [{"value": True, "invalid_reason": None}, {"value": 1, "invalid_reason": None},
                {"value": 1.0, "invalid_reason": None}, {"value": 0.0, "invalid_reason": None},
                {"value": -0.0, "invalid_reason": None}, {"value": 0, "invalid_reason": None},
                {"value": 1, "invalid_reason": None}, {"value": None, "invalid_reason": "no grade"},
                {"value": [1, 2], "invalid_reason": None}, {"value": "2", "invalid_reason": None}]
    finishes = ["stop", "stop", "length", "stop", "length", "length", "stop", "stop", "stop", "stop"]
    base, result, _ = KINDS[0]
    path = tmp_path / "s.sqlite"
    keys = []
    with CallStore(path) as store:
        for k, (parsed, finish) in enumerate(zip(readings, finishes)):
            req = umbrela_like(f"q{k}", passage(k))
            keys.append(call_key(IDENT, req))
            store.put(keys[-1], "openai", IDENT, req,
                      type(result)(result.text, extra={"finish_reason": finish}), parsed)
    with CallStore(path) as store:
        found = store.get_many(keys)
        for key, parsed, finish in zip(keys, readings, finishes):
            assert repr(found[key].parsed) == repr(dict(sorted(parsed.items())))
            assert found[key].result.extra == {"finish_reason": finish}
