"""One door, one writer (issue 40 part 1): every row a store is given goes in by
CallStore.submit to the store's one writer (store/sinks.py), chosen once, and every way a write
may take stores the same bytes, masked, from the same typed rows.

- HereWriter: rows made and committed by this process. ChildWriter: committed by the writer
  process, from rows made here (a write waited for: Ray's) or made there (a write sent for
  later: a served run's, the proxy's). Real SQLite files and a real writer process.
- Calls, judgments and vectors take the same door; each takes `CallRow`s and plain 6-tuples
  alike, and every way masks a secret a server echoed in any part of a row or a judgment,
  whichever process makes the row.
- A write committed here calls `done` before it returns; one sent for later to the writer
  process, from the event loop's reader once the writer has answered.
- The writer is chosen once: the first write (or write_in_child) chooses it, and no later
  write, whatever it would have chosen, switches it.
"""

from __future__ import annotations

import asyncio
import secrets
import signal
import sqlite3
from pathlib import Path

import json

import numpy as np
import pytest
from openai_server import OpenAITestServer
from test_ray_rows import inputs, table
from test_served_writer import judge_for

from judgeblender import masking
from judgeblender.calls import CallRequest, CallResult, Message
from judgeblender.errors import JudgeblenderError
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.store import CallStore
from judgeblender.store.embeddings import get_vectors, put_vectors
from judgeblender.store.rows import CallRow, JudgmentRows, Write, encode_vectors

SECRET = f"sk-sinks-{secrets.token_hex(12)}"
TABLES = (("calls", "created_at"), ("judgments", "updated_at"), ("texts", ""), ("shapes", ""),
          ("vectors", "created_at"))
WAYS = ("here", "here for later", "child, rows made here", "child, rows made there")


def calls_and_judgments(n: int) -> tuple[list, JudgmentRows]:
    """n answers of two shapes, every second one echoing the secret (answer, metadata, parsed
    label), as CallRows and as plain tuples in turn, and their judgments."""
    identity = {"backend": "openai", "model": "m", "revision": None}
    calls, records = [], []
    for i in range(n):
        echo = f" (key {SECRET})" if i % 2 else ""
        system = (Message("system", "You judge passages."),) if i % 3 else ()
        request = CallRequest((*system, Message("user", f"Query {i}: which passage answers it? passage {i}")),
                              max_tokens=100)
        result = CallResult(f"##final score: 2{echo}", tokens_in=40, tokens_out=4,
                            extra={"finish_reason": "stop", "response_id": f"id{i}{echo}"})
        row = CallRow(f"key{i:04d}", "openai", identity, request, result, {"value": 2, "invalid_reason": echo or None})
        calls.append(row if i % 2 else tuple(row))
        records.append((f"q{i}", f"d{i}", {"label": 2, "raw_output": f"2{echo}", "steps": [{"raw": f"2{echo}"}]}))
    return calls, JudgmentRows("openai:m/umbrela/generate", records)


def vectors(n: int) -> dict[str, np.ndarray]:
    return {f"{i:064x}": np.arange(i, i + 4, dtype=np.float32) for i in range(n)}


def write(path: Path, how: str) -> list:
    """The rows through one way, in three commits; what each commit's `done` was called with."""
    calls, judgments = calls_and_judgments(12)
    outcomes: list = []
    with CallStore(path) as store:
        child = how.startswith("child")
        store.writer_for(child=child)
        later = how.endswith("for later") or how.endswith("made there")

        async def commits() -> None:
            loop = asyncio.get_running_loop()
            for part, also, vecs in ((calls[:5], None, {}), (calls[5:9], None, vectors(3)),
                                     (calls[9:], judgments, {})):
                answered = loop.create_future()

                def done(exc, answered=answered):
                    outcomes.append(exc)
                    answered.set_result(exc)

                write = Write(part, also, encode_vectors("m@1", vecs, 0.0))
                store.submit(write, done if later else None)
                if later and child:
                    assert not answered.done()  # sent; it counts when the writer has answered
                elif later:
                    assert answered.done()  # committed before submit returned
                else:
                    done(None)
                assert await answered is None

        masking.register(SECRET)
        asyncio.run(commits())
        assert store.writer.kind == ("child" if child else "here")
        assert store.count_calls() == 12 and store.new_calls == 12 and len(store.judgments()) == 12
        assert sorted(get_vectors(store, "m@1", list(vectors(3)))) == sorted(vectors(3))
    return outcomes


def test_every_way_stores_the_same_bytes_and_masks_what_a_server_echoed(tmp_path):
    paths = {how: tmp_path / f"{how.replace(' ', '-').replace(',', '')}.sqlite" for how in WAYS}
    for how, path in paths.items():
        assert write(path, how) == [None, None, None], how
    here = paths["here"]
    for how, path in paths.items():
        for name, when in TABLES:
            assert table(path, name, when) == table(here, name, when), (how, name)
        with sqlite3.connect(path) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert SECRET.encode() not in path.read_bytes(), how
        with CallStore(path) as store:
            assert any("***" in c["raw_output"] for c in store.iter_calls())
            assert not any(SECRET in repr(c) for c in store.iter_calls())
            assert not any(SECRET in repr(j) for j in store.judgments())


def test_the_first_write_chooses_the_writer_and_nothing_switches_it(tmp_path):
    calls, judgments = calls_and_judgments(6)
    with CallStore(tmp_path / "here.sqlite") as store:
        assert store.writer is None
        store.put_many(calls[:2])  # a write waited for: this process
        here = store.writer
        assert here.kind == "here"
        store.write_in_child()  # asked for too late: the store keeps writing here
        put_vectors(store, "m@1", vectors(2))
        asyncio.run(later(store, calls[2:4]))
        assert store.writer is here and store.writer_for(child=True) is here
        store.put_judgments(judgments.judge_id, judgments.records)
        assert store.count_calls() == 4 and store.new_calls == 4 and len(store.judgments()) == 6
    with CallStore(tmp_path / "child.sqlite") as store:
        asyncio.run(later(store, calls[:2]))  # a write sent for later: the writer process
        child = store.writer
        assert child.kind == "child"
        pid = child.process.proc.pid
        store.put_many(calls[2:4])  # a write waited for goes to the same writer, the same process
        put_vectors(store, "m@1", vectors(2))
        assert store.writer is child and store.writer_for(child=False) is child and child.process.proc.pid == pid
        assert store.count_calls() == 4 and store.new_calls == 4 and len(get_vectors(store, "m@1", list(vectors(2)))) == 2


async def later(store: CallStore, calls: list) -> None:
    answered = asyncio.get_running_loop().create_future()
    store.put_many_later(calls, None, answered.set_result)
    assert await answered is None


def test_a_writer_process_that_ended_is_replaced_and_the_writer_kept(tmp_path):
    calls, _ = calls_and_judgments(3)
    path = tmp_path / "s.sqlite"
    with CallStore(path) as store:
        store.write_in_child()
        writer = store.writer
        store.put_many(calls[:1])
        writer.process.proc.send_signal(signal.SIGKILL)
        writer.process.proc.wait()
        with pytest.raises(JudgeblenderError, match=f"{path}: cannot write to the store .*writer process ended"):
            put_vectors(store, "m@1", vectors(1))  # vectors fail as calls do, naming the store
        store.write_in_child()  # the next run's start: a new process for the same writer
        assert store.writer is writer and writer.process.proc.poll() is None
        store.put_many(calls[1:])
        assert store.count_calls() == 3


def test_a_run_with_a_served_judge_chooses_the_writer_process_before_its_first_write(tmp_path):
    """A panel whose first judge writes here (an instant scripted one) and whose second is served:
    the run asks for the writer process before the first judge's rows (declare_writer), so the
    served judge's rows are still made off its loop, and both judges' rows are stored."""
    rules = tmp_path / "scripted.json"
    rules.write_text(json.dumps({"rules": [{"contains": "", "probs": {"2": 0.9, "1": 0.1}}], "name": "s"}))
    queries, corpus, pairs = inputs(10)
    with OpenAITestServer(answers="2") as server:
        with CallStore(tmp_path / "s.sqlite") as store:
            run = judge_pairs([Judge(JudgeSpec(model=f"scripted:{rules}", mode="logprobs")), judge_for(server)],
                              pairs, queries, corpus, store=store)
            assert store.writer.kind == "child"
            assert store.count_calls() == 20 and store.new_calls == 20
    assert [len(j) for j in run.judgments.values()] == [10, 10]
