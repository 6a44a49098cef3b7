"""`judgeblender store merge`: per-shard stores merged into one, on real SQLite files."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from judgeblender.calls import CallRequest, CallResult, Message, call_key
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.pairs import Pair, read_corpus, read_queries
from judgeblender.store import CallStore, MergeConflict, merge_stores
from judgeblender.store import merge as merge_module

SRC = Path(__file__).resolve().parents[1] / "src"
SCRIPT = {"name": "tiny-judge", "default": "##final score: 1", "rules": [
    {"contains": "flakes", "output": "##final score: 3"}, {"contains": "330 metres", "output": "##final score: 2"}]}


@pytest.fixture
def shards(tmp_path, tiny):
    """Two stores judged by one scripted judge on overlapping shards of the tiny pairs."""
    model = tmp_path / "model.json"
    model.write_text(json.dumps(SCRIPT))
    queries, corpus = read_queries(tiny / "queries.tsv"), read_corpus(tiny / "corpus.jsonl")
    pairs = [Pair(*line.split()[::2]) for line in (tiny / "qrels.txt").read_text().splitlines()]
    spec = JudgeSpec(model=f"scripted:{model}")
    stores = []
    for name, part in (("a", pairs[:3]), ("b", pairs[1:])):  # pairs[1:3] in both
        with CallStore(tmp_path / f"{name}.sqlite") as store:
            judge_pairs([Judge(spec)], part, queries, corpus, store=store)
        stores.append(tmp_path / f"{name}.sqlite")
    return stores, spec, pairs, queries, corpus


def rows(path: Path, table: str) -> set:
    with sqlite3.connect(path) as db:
        return set(db.execute(f"SELECT * FROM {table}"))


def test_merge_keeps_each_call_once_and_a_rerun_on_the_merge_makes_no_call(shards, tmp_path):
    (a, b), spec, pairs, queries, corpus = shards
    before = {p: p.read_bytes() for p in (a, b)}
    report = merge_stores(tmp_path / "m.sqlite", [a, b])
    assert report.read["calls"] == 3 + 3 and report.duplicates["calls"] == 2 and report.rows["calls"] == 4
    assert report.rows["judgments"] == 4 and report.conflicts_total == 0
    assert {p: p.read_bytes() for p in (a, b)} == before  # inputs are read only
    with sqlite3.connect(tmp_path / "m.sqlite") as db:
        keys = [k for (k,) in db.execute("SELECT key FROM calls")]
        assert len(keys) == len(set(keys)) == 4
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert rows(a, "calls") <= rows(tmp_path / "m.sqlite", "calls")  # a's rows as they were (the first input wins)
    with CallStore(tmp_path / "m.sqlite") as store:
        run = judge_pairs([Judge(spec)], pairs, queries, corpus, store=store)
    (stats,) = run.stats.values()
    assert stats.calls_made == 0 and stats.cache_hits == len(pairs)
    assert not list(tmp_path.glob(".m.sqlite.*"))  # no temporary file left


def put(path: Path, text: str, prompt: str = "same prompt") -> str:
    req = CallRequest((Message("user", prompt),), max_tokens=8)
    identity = {"model": "m", "backend": "scripted"}
    key = call_key(identity, req)
    with CallStore(path) as store:
        store.put(key, "scripted", identity, req, CallResult(text=text), {"value": text})
    return key


def test_the_same_key_with_different_answers_is_a_conflict_and_nothing_is_written(tmp_path):
    a, b, out = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "m.sqlite"
    key = put(a, "##final score: 2")
    put(a, "##final score: 0", prompt="another")
    put(b, "##final score: 3")
    with pytest.raises(MergeConflict) as err:
        merge_stores(out, [a, b])
    assert err.value.report.conflicts_total == 1
    assert key in str(err.value) and "##final score: 3" in str(err.value) and "##final score: 2" in str(err.value)
    assert not out.exists() and not list(tmp_path.glob(".m.sqlite.*"))
    report = merge_stores(out, [a, b], keep_first=True)  # keep the earlier input's answer, reported
    assert report.conflicts_total == 1 and report.rows["calls"] == 2
    with sqlite3.connect(out) as db:
        assert db.execute("SELECT raw_output FROM calls WHERE key = ?", (key,)).fetchone()[0] == "##final score: 2"


def test_merge_is_atomic_an_existing_out_stays_as_it_was_until_the_merge_is_complete(tmp_path, monkeypatch):
    a, b, out = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "m.sqlite"
    put(a, "x", "one")
    put(b, "y", "two")
    out.write_bytes(b"old")
    with pytest.raises(Exception, match="exists"):
        merge_stores(out, [a, b])
    real = merge_module._merge_one

    def fail_on_b(db, path, report):
        if path == b:
            raise RuntimeError("killed mid-merge")
        real(db, path, report)

    monkeypatch.setattr(merge_module, "_merge_one", fail_on_b)
    with pytest.raises(RuntimeError):
        merge_stores(out, [a, b], overwrite=True)
    assert out.read_bytes() == b"old" and not list(tmp_path.glob(".m.sqlite.*"))
    monkeypatch.setattr(merge_module, "_merge_one", real)
    assert merge_stores(out, [a, b], overwrite=True).rows["calls"] == 2


def test_bad_inputs_are_refused_before_anything_is_written(tmp_path):
    a = tmp_path / "a.sqlite"
    put(a, "x")
    old = tmp_path / "old.sqlite"
    with sqlite3.connect(old) as db:
        db.execute("CREATE TABLE calls (key TEXT PRIMARY KEY)")
        db.execute("PRAGMA user_version=1")
    not_a_store = tmp_path / "notes.txt"
    not_a_store.write_text("hello" * 100)
    for inputs, message in (([a, old], "schema version 1"), ([a, not_a_store], "not a judgeblender store"),
                            ([a, tmp_path / "missing.sqlite"], "no such store"), ([a, a], "given twice")):
        with pytest.raises(Exception, match=message):
            merge_stores(tmp_path / "m.sqlite", inputs)
        assert not (tmp_path / "m.sqlite").exists()
    with pytest.raises(Exception, match="also an input"):
        merge_stores(a, [a], overwrite=True)


def cli(*args):
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "judgeblender", "store", "merge", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=120)


def test_store_merge_command(shards, tmp_path):
    (a, b), *_ = shards
    proc = cli("--out", tmp_path / "m.sqlite", a, b, "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["rows"]["calls"] == 4 and summary["duplicates"]["calls"] == 2 and summary["conflicts"] == 0
    assert "merged 2 stores" in proc.stderr
    c = tmp_path / "c.sqlite"
    put(c, "one")
    d = tmp_path / "d.sqlite"
    put(d, "two")
    conflict = cli("--out", tmp_path / "n.sqlite", c, d)
    assert conflict.returncode == 2 and "Traceback" not in conflict.stderr
    assert "different answers" in conflict.stderr and not (tmp_path / "n.sqlite").exists()
