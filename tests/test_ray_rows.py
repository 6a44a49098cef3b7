"""Under `--ray`, the workers make the costly parts of each answer's store row (issue 23, part 2:
the driver's CPU per answered call): a real local Ray runtime (2 CPUs), the test OpenAI server on
127.0.0.1, real SQLite stores.

- The driver compresses only the rows of the first calls of a shape (before its dictionary
  exists); every other row's messages and metadata come compressed from the worker.
- What is stored is what the driver makes itself, byte for byte: each row re-made from what it
  decodes to, by the store's own encoder, is the row stored; and it decodes to what a local run of
  the same calls stores (same keys, prompts, answers, probabilities).
- Parts made against a dictionary the store did not choose for the row are not used: the store
  makes that row itself.
- A store that redacts passages takes no prompt from a worker.
- The store's SQLite writes (and the encoding of judgments) run in a writer process of their
  own (store.writer): the rows are those an in-process store writes; a writer that dies fails
  the write with an error naming the store; Ctrl+C (SIGINT to the process group) leaves it be."""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path

import pytest
from openai_server import OpenAITestServer

from judgeblender.calls import CallRequest, CallResult, Message, canonical_json
from judgeblender.errors import JudgeblenderError
from judgeblender.judges import JudgeSpec, judge_pairs
from judgeblender.pairs import Pair
from judgeblender.store import CallStore
from judgeblender.store import compact

COLUMNS = ("key, backend, identity, settings, dict, messages, raw_output, parsed, probs, choice_mass, tokens_in, "
           "tokens_out, latency_s, created_at, extra, extra_dict")




def inputs(n: int):
    queries = {f"q{i}": f"question {i} about topic {i % 7}" for i in range(n)}
    corpus = {f"d{i}": f"passage number {i}: " + " ".join(f"w{(i * 7 + j) % 300}" for j in range(40))
              for i in range(n)}
    return queries, corpus, [Pair(f"q{i}", f"d{i}") for i in range(n)]


def spec(server, mode: str = "generate", concurrency: int = 8) -> JudgeSpec:
    return JudgeSpec(model="openai:test-model", mode=mode, options={
        "base_url": server.base_url, "timeout_s": 30.0, "backoff_base_s": 0.01, "concurrency": concurrency})


def rows(path: Path) -> list[tuple]:
    with sqlite3.connect(path) as db:
        return db.execute(f"SELECT {COLUMNS} FROM calls ORDER BY key").fetchall()


def remade(path: Path) -> list[tuple]:
    """Every stored call made again by the store's own encoder from what it decodes to (in a
    transaction rolled back: the store is left as it is); its time as stored (exports show it to
    the millisecond)."""
    with CallStore(path) as store:
        decoded = list(store.iter_calls())
    created = {row[0]: row[13] for row in rows(path)}
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("BEGIN")
        texts = compact.Texts(db)
        out = [texts.encode_call(
            c["key"], c["backend"], c["model_identity"], c["request"], c["raw_output"],
            canonical_json(c["parsed"]) if c["parsed"] is not None else None,
            canonical_json(c["probs"]) if c["probs"] is not None else None, c["choice_mass"], c["tokens_in"],
            c["tokens_out"], c["latency_s"], created[c["key"]],
            canonical_json(c["extra"]) if c["extra"] else None) for c in decoded]
        db.execute("ROLLBACK")
    finally:
        db.close()
    return sorted(out)


def driver_packs(monkeypatch) -> list[int]:
    """Counts the calls' blobs the driver's store compresses (a judgment's details aside; the
    workers' compressions are in their own processes)."""
    made: list[int] = []
    real = compact._deflate

    def counting(data, zdict):
        if zdict is not None and not zdict.startswith(compact.DETAILS_DICT_V1):
            made.append(1)
        return real(data, zdict)

    monkeypatch.setattr(compact, "_deflate", counting)
    return made


@pytest.mark.ray
def test_a_run_whose_first_judge_writes_here_asks_for_the_writer_process_for_its_ray_judge(cluster, tmp_path):
    """A panel whose first judge writes here (an instant scripted one) and whose second runs under
    Ray: the run chooses the store's writer process before its first write (declare_writer), so
    the Ray driver's rows are committed off its CPU, and both judges' rows are stored."""
    import json

    from judgeblender.judges import Judge
    from judgeblender.judges.ray_judges import ray_judge

    rules = tmp_path / "scripted.json"
    rules.write_text(json.dumps({"rules": [{"contains": "", "probs": {"2": 0.9, "1": 0.1}}], "name": "s"}))
    queries, corpus, pairs = inputs(12)
    with OpenAITestServer("##final score: 2", max_requests=100) as server:
        judge = ray_judge(spec(server), workers=1)
        try:
            with CallStore(tmp_path / "mixed.sqlite") as store:
                run = judge_pairs([Judge(JudgeSpec(model=f"scripted:{rules}", mode="logprobs")), judge],
                                  pairs, queries, corpus, store=store)
                assert store.writer.kind == "child"
                assert store.count_calls() == 24
        finally:
            judge.close()
    assert [len(j) for j in run.judgments.values()] == [12, 12]


@pytest.mark.ray
@pytest.mark.parametrize("mode", ["generate", "logprobs"])
def test_the_workers_make_the_rows_and_the_store_holds_what_the_driver_would_have_made(
        cluster, tmp_path, monkeypatch, mode):
    from judgeblender.judges.ray_judges import ray_judge

    queries, corpus, pairs = inputs(120)
    packs = driver_packs(monkeypatch)
    encoded: list[int] = []  # judgments the driver encodes itself
    real_encode = compact.Texts.encode_judgment
    monkeypatch.setattr(compact.Texts, "encode_judgment",
                        lambda self, *a: encoded.append(1) or real_encode(self, *a))
    with OpenAITestServer("##final score: 2" if mode == "generate" else "2", top_logprobs=[("2", -0.1), ("1", -2.5)],
                          max_requests=1000) as server:
        judge = ray_judge(spec(server, mode), workers=2)
        try:
            with CallStore(tmp_path / "ray.sqlite") as store:
                run = judge_pairs([judge], pairs, queries, corpus, store=store)
        finally:
            judge.close()
        driver_made, driver_encoded = len(packs), len(encoded)
        local = judge_pairs([JudgeSpec(model="openai:test-model", mode=mode, options=spec(server).options)],
                            pairs, queries, corpus, store=CallStore(tmp_path / "local.sqlite"))
    assert run.stats[judge.id].calls_made == 120 and run.stats[judge.id].judged == 120
    # two compressions (messages, metadata) per row the driver makes: only the calls sent before
    # the first answer of their shape was stored (at most the 8 in flight, and a few more)
    assert driver_made <= 2 * 16, driver_made
    assert driver_encoded == 0  # the writer process encodes the judgments
    stored = rows(tmp_path / "ray.sqlite")
    assert len(stored) == 120
    assert stored == remade(tmp_path / "ray.sqlite")  # byte for byte what the store makes itself
    with CallStore(tmp_path / "ray.sqlite") as a, CallStore(tmp_path / "local.sqlite") as b:
        ray_calls = {c["key"]: c for c in a.iter_calls()}
        local_calls = {c["key"]: c for c in b.iter_calls()}
        ray_judgments, local_judgments = a.judgments(), b.judgments()
    assert len(ray_judgments) == 120
    for r in ray_judgments:  # as a local run stores them, but for the workers that answered
        assert [w["step"] for w in r.pop("workers")] == ["grade"]
    assert ray_judgments == local_judgments
    assert ray_calls.keys() == local_calls.keys()
    for key, c in ray_calls.items():
        l = local_calls[key]
        assert (c["request"], c["raw_output"], c["parsed"], c["probs"], c["choice_mass"]) == \
               (l["request"], l["raw_output"], l["parsed"], l["probs"], l["choice_mass"])
        assert set(c["extra"]) == set(l["extra"]) | {"worker"}
        assert c["extra"]["finish_reason"] == l["extra"]["finish_reason"]
    if mode == "logprobs":
        assert all(c["probs"] for c in ray_calls.values())
    assert local.stats[next(iter(local.stats))].judged == 120


def test_parts_made_against_another_dictionary_are_not_used(tmp_path):
    """A worker's parts whose dictionary is not the one the store chooses for the row (another
    store's; one rolled back since) are made again by the store: the row decodes to its own call."""
    def call(i: int) -> tuple[CallRequest, CallResult]:
        text = f"Judge this passage, one of many passages, about topic {i}: " + "text " * 30
        request = CallRequest((Message("user", text),))
        return request, CallResult("##final score: 2", extra={"finish_reason": "stop", "response_id": f"r{i}"})

    identity = {"backend": "openai", "model": "m"}
    identity_id = compact.text_id(canonical_json(identity))
    with CallStore(tmp_path / "a.sqlite") as a:
        a.put_many([(f"k{i}", "openai", identity, *call(i), None) for i in range(2)])
        request, result = call(5)
        dictionary, extra_dict = a.row_hint(request, identity_id)
        assert dictionary is not None and extra_dict is not None  # the store knows both by now
        zdicts = {d: a.dictionary_bytes(d) for d in (dictionary, extra_dict)}
    with CallStore(tmp_path / "b.sqlite") as b:
        b.put_many([("other", "openai", identity, CallRequest((Message("user", "Judge this passage about x"),)),
                     CallResult("1", extra={"finish_reason": "stop", "response_id": "x"}), None)])
        result.row = compact.row_parts(request, result, dictionary, extra_dict, zdicts)
        assert result.row.messages is not None and result.row.extra_blob is not None
        b.put_many([("k5", "openai", identity, request, result, None)])
        stored = {c["key"]: c for c in b.iter_calls()}["k5"]
    assert stored["request"]["messages"] == [["user", request.messages[0].content]]
    assert stored["extra"] == result.extra
    assert rows(tmp_path / "b.sqlite") == remade(tmp_path / "b.sqlite")


@pytest.mark.ray
def test_a_store_that_redacts_passages_takes_no_prompt_from_the_workers(cluster, tmp_path, monkeypatch):
    from judgeblender.judges.ray_judges import ray_judge

    queries, corpus, pairs = inputs(40)
    with OpenAITestServer("##final score: 1", max_requests=200) as server:
        judge = ray_judge(spec(server), workers=2)
        try:
            with CallStore(tmp_path / "r.sqlite", redact_passages=True) as store:
                judge_pairs([judge], pairs, queries, corpus, store=store)
                calls = list(store.iter_calls())
        finally:
            judge.close()
    assert len(calls) == 40
    assert all(c["request"]["messages"] == [["user", "[redacted]"]] for c in calls)
    assert not any("passage number" in str(r) for r in rows(tmp_path / "r.sqlite"))


def calls_and_judgments(n: int) -> tuple[list[tuple], list[tuple]]:
    """n answered calls (two shapes, metadata, probabilities on some) and their judgments."""
    identity = {"backend": "openai", "model": "m", "revision": None}
    calls, judgments = [], []
    for i in range(n):
        role_text = [Message("system", "You judge passages.")] if i % 2 else []
        request = CallRequest((*role_text, Message("user", f"Query {i}: which passage answers it? passage {i}")),
                              mode="logprobs" if i % 3 == 0 else "generate", max_tokens=1 if i % 3 == 0 else 100)
        probs = {"0": 0.1, "1": 0.2, "2": 0.6, "3": 0.1} if i % 3 == 0 else None
        result = CallResult("2", probs=probs, choice_mass=0.9 if probs else None, tokens_in=40, tokens_out=1,
                            extra={"finish_reason": "stop", "response_id": f"id{i}"})
        calls.append((f"key{i:04d}", "openai", identity, request, result, {"value": 2, "invalid_reason": None}))
        judgments.append((f"q{i}", f"d{i}", {"label": 2, "probs": probs, "expected": 1.9 if probs else None,
                                             "invalid_reason": None, "raw_output": "2", "steps": [{"raw": "2"}]}))
    return calls, judgments


def table(path: Path, name: str, leave_out: str) -> list[tuple]:
    with sqlite3.connect(path) as db:
        cols = [r[1] for r in db.execute(f"PRAGMA table_info({name})") if r[1] != leave_out]
        return sorted(db.execute(f"SELECT {', '.join(cols)} FROM {name}").fetchall())


def test_a_store_written_through_its_writer_process_holds_the_rows_an_in_process_store_holds(tmp_path):
    calls, judgments = calls_and_judgments(30)
    for name, child in (("here.sqlite", False), ("child.sqlite", True)):
        with CallStore(tmp_path / name) as store:
            if child:
                store.write_in_child()
                assert store.writer.kind == "child" and store.writer.process.proc.pid != os.getpid()
            for start in range(0, 30, 7):
                store.put_many(calls[start:start + 7])
            store.put_judgments("openai:m/umbrela/logprobs", judgments)
            assert store.count_calls() == 30 and len(store.judgments()) == 30  # read back at once
    for name, when in (("calls", "created_at"), ("judgments", "updated_at"), ("texts", ""), ("shapes", "")):
        assert table(tmp_path / "here.sqlite", name, when) == table(tmp_path / "child.sqlite", name, when), name


def test_a_writer_process_that_dies_fails_the_next_write_with_an_error_naming_the_store(tmp_path):
    calls, _ = calls_and_judgments(2)
    path = tmp_path / "s.sqlite"
    with CallStore(path) as store:
        store.write_in_child()
        store.put_many(calls[:1])
        store.writer.process.proc.send_signal(signal.SIGKILL)
        store.writer.process.proc.wait()
        with pytest.raises(JudgeblenderError, match=f"{path}: cannot write to the store .*writer process ended"):
            store.put_many(calls[1:])
    with CallStore(path) as store:
        assert [c["key"] for c in store.iter_calls()] == ["key0000"]  # what was committed stays


def test_ctrl_c_reaching_the_writer_process_leaves_it_writing(tmp_path):
    calls, _ = calls_and_judgments(2)
    with CallStore(tmp_path / "s.sqlite") as store:
        store.write_in_child()
        store.put_many(calls[:1])
        store.writer.process.proc.send_signal(signal.SIGINT)  # what Ctrl+C sends the whole process group
        store.writer.process.proc.send_signal(signal.SIGTERM)
        store.put_many(calls[1:])
        assert store.writer.process.proc.poll() is None and store.count_calls() == 2


def test_a_write_interrupted_while_it_waits_leaves_no_answer_for_the_next_write_to_read(tmp_path, monkeypatch):
    """Ctrl+C while the driver waits for the writer's word: the next write must not take that
    word (say "committed") for its own."""
    from judgeblender.store import writer

    calls, _ = calls_and_judgments(3)
    with CallStore(tmp_path / "s.sqlite") as store:
        store.write_in_child()
        store.put_many(calls[:1])
        real = writer._wait_readable

        def interrupted(fd):
            monkeypatch.setattr(writer, "_wait_readable", real)
            raise KeyboardInterrupt

        monkeypatch.setattr(writer, "_wait_readable", interrupted)
        with pytest.raises(KeyboardInterrupt):
            store.put_many(calls[1:2])
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            store.writer.process.write([("INSERT INTO no_such_table VALUES (?)", [(1,)])])
        store.put_many(calls[2:])
        assert {c["key"] for c in store.iter_calls()} >= {"key0000", "key0002"}
