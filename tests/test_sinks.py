"""One write path (issue 30 part 2): the three sinks an answered call may take to the store
(store/sinks.py) store the same bytes, masked, from the same typed rows.

- InProcessSink: rows made and committed by this process; RayRowsSink: made here, committed by
  the writer process; WriterProcessSink: sent as they are, made and committed by the writer
  process. Real SQLite files and a real writer process.
- Each takes `CallRow`s and plain 6-tuples alike, and every one masks a secret a server echoed
  in any part of a row or a judgment, whichever process makes the row.
- A sink that commits here calls `done` before it returns; the writer process's is called
  from the event loop's reader once the writer has answered.
"""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
from pathlib import Path

from test_ray_rows import table

from judgeblender import masking
from judgeblender.calls import CallRequest, CallResult, Message
from judgeblender.store import CallStore
from judgeblender.store.rows import CallRow, JudgmentRows
from judgeblender.store.sinks import InProcessSink, RayRowsSink, WriterProcessSink

SECRET = f"sk-sinks-{secrets.token_hex(12)}"
TABLES = (("calls", "created_at"), ("judgments", "updated_at"), ("texts", ""), ("shapes", ""))


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


def write(path: Path, how: str) -> list:
    """The rows through one sink, in three commits; what each commit's `done` was called with."""
    calls, judgments = calls_and_judgments(12)
    outcomes: list = []
    with CallStore(path) as store:
        if how == "in process":
            sink = store.sink()
            assert isinstance(sink, InProcessSink)
        elif how == "ray rows":
            store.write_in_child()
            sink = store.sink()
            assert isinstance(sink, RayRowsSink)
        else:
            sink = store.sink(later=True)
            assert isinstance(sink, WriterProcessSink)

        async def commits() -> None:
            loop = asyncio.get_running_loop()
            for part, also in ((calls[:5], None), (calls[5:9], None), (calls[9:], judgments)):
                answered = loop.create_future()
                sink.commit(part, also, lambda exc, answered=answered: outcomes.append(exc) or answered.set_result(exc))
                if how == "writer process":
                    assert not answered.done()  # sent; it counts when the writer has answered
                else:
                    assert answered.done()  # committed before commit returned
                assert await answered is None

        masking.register(SECRET)
        asyncio.run(commits())
        assert store.count_calls() == 12 and store.new_calls == 12 and len(store.judgments()) == 12
    return outcomes


def test_the_three_sinks_store_the_same_bytes_and_mask_what_a_server_echoed(tmp_path):
    paths = {how: tmp_path / f"{how.replace(' ', '-')}.sqlite" for how in ("in process", "ray rows", "writer process")}
    for how, path in paths.items():
        assert write(path, how) == [None, None, None], how
    here = paths["in process"]
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
