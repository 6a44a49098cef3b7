"""Answers are bounded (issue 20, part 3).

A response body larger than a bound derived from the request (openai_wire.response_bound:
overhead + max_tokens x a per-token allowance x (1 + top_logprobs), capped) is not read past
the bound: the answer is recorded invalid ("answer too large") with none of its text, whether
the body has a Content-Length, comes chunked, or inflates past the bound from gzip. Batch API
result lines are held to the same bound. Parsing an answer as large as the bound allows does
not hold the event loop long enough for other calls to time out. Every case runs against the
test server on 127.0.0.1 (real HTTP, real SQLite stores).
"""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from openai_server import Fault, OpenAITestServer
from test_trust_finish import batch_judge, batch_output
from typer.testing import CliRunner

from judgeblender.backends.openai_compat import OpenAICompatBackend
from judgeblender.backends.openai_wire import (RESPONSE_BYTES_PER_TOKEN, RESPONSE_HARD_CAP_BYTES,
                                               RESPONSE_OVERHEAD_BYTES, response_bound)
from judgeblender.calls import CallRequest, Message
from judgeblender.cli import app
from judgeblender.errors import InputError
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.pairs import Pair

SRC = Path(__file__).resolve().parents[1] / "src"
REQUEST = CallRequest((Message("user", "what do goldfish eat?"),), max_tokens=100)
BOUND = response_bound(REQUEST)


def body_of_size(size: int, text_char: str = "2") -> bytes:
    """A well-formed chat completion of exactly `size` bytes, its answer padded with `text_char`."""
    def make(n: int) -> bytes:
        return json.dumps({"id": "chatcmpl-x", "object": "chat.completion", "model": "test-model", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "##final score: 2 " + text_char * n},
             "finish_reason": "stop"}]}).encode()
    return make(size - len(make(0)))


@pytest.fixture
def backend_for():
    made: list[OpenAICompatBackend] = []

    def make(srv: OpenAITestServer, **kw) -> OpenAICompatBackend:
        backend = OpenAICompatBackend("test-model", base_url=srv.base_url, api_key="sk-test",
                                      backoff_base_s=0.01, **{"timeout_s": 10.0, **kw})
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


# --- the bound ------------------------------------------------------------------------------
def test_the_bound_grows_with_max_tokens_and_top_logprobs_up_to_the_hard_cap():
    assert BOUND == RESPONSE_OVERHEAD_BYTES + 100 * RESPONSE_BYTES_PER_TOKEN
    logprobs = CallRequest(REQUEST.messages, mode="logprobs", max_tokens=1, choices=("0", "1", "2", "3"))
    assert response_bound(logprobs, top_logprobs=20) == RESPONSE_OVERHEAD_BYTES + RESPONSE_BYTES_PER_TOKEN * 21
    assert response_bound(logprobs, top_logprobs=5) < response_bound(logprobs, top_logprobs=20)
    huge = CallRequest(REQUEST.messages, max_tokens=1_000_000)
    assert response_bound(huge) == RESPONSE_HARD_CAP_BYTES


def test_a_body_just_under_the_bound_is_read(backend_for):
    with OpenAITestServer(script=[Fault("raw", body=body_of_size(BOUND))]) as srv:
        result = backend_for(srv).execute(REQUEST)
    assert "refused" not in result.extra and result.text.startswith("##final score: 2 ")
    assert len(result.text) > BOUND - 200


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_one_byte_over_the_bound_is_refused(backend_for, chunked):
    with OpenAITestServer(script=[Fault("raw", body=body_of_size(BOUND + 1), chunked=chunked)]) as srv:
        result = backend_for(srv).execute(REQUEST)
        assert srv.request_count == 1  # refused, not retried: it is the model's answer
    assert result.text == "" and result.extra["refused"].startswith("answer too large")
    assert f"over the bound of {BOUND:,} bytes" in result.extra["refused"]


def test_a_chunked_body_without_content_length_under_the_bound_is_read(backend_for):
    with OpenAITestServer(answers="##final score: 3", script=[Fault("ok", chunked=True)]) as srv:
        result = backend_for(srv).execute(REQUEST)
    assert result.text == "##final score: 3" and result.extra["finish_reason"] == "stop"


def test_the_client_asks_for_uncompressed_bodies_and_never_sends_its_bound(backend_for):
    with OpenAITestServer() as srv:
        backend_for(srv).execute(REQUEST)
        headers = srv.requests[-1].headers
    assert headers["accept-encoding"] == "identity"
    assert not [h for h in headers if "judgeblender" in h]


def test_a_gzip_body_within_the_bound_is_read(backend_for):
    with OpenAITestServer(answers="##final score: 1", script=[Fault("ok", gzip=True, chunked=True)]) as srv:
        result = backend_for(srv).execute(REQUEST)
    assert result.text == "##final score: 1"


def test_a_gzip_body_that_inflates_past_the_bound_is_refused_without_inflating_it(backend_for):
    # 50 MB of answer in 49 KB on the wire: inflated no further than the bound
    bomb = gzip.compress(b'{"choices":[{"index":0,"message":{"role":"assistant","content":"' + b"2" * 50_000_000
                         + b'"},"finish_reason":"stop"}]}')
    assert len(bomb) < 100_000
    with OpenAITestServer(script=[Fault("raw", body=bomb, headers=(("Content-Encoding", "gzip"),))]) as srv:
        result = backend_for(srv).execute(REQUEST)
    assert result.text == "" and "inflates past" in result.extra["refused"]


def test_a_body_in_a_coding_that_was_not_asked_for_is_a_malformed_answer_and_retried(backend_for):
    script = [Fault("ok", headers=(("Content-Encoding", "br"),)), "ok"]
    with OpenAITestServer(answers="##final score: 2", script=script) as srv:
        backend = backend_for(srv)
        result = backend.execute(REQUEST)
        assert srv.request_count == 2
    assert result.text == "##final score: 2" and backend.retry_reasons["malformed answer"] == 1


def test_an_error_body_over_the_bound_is_cut_and_the_call_retried(backend_for):
    huge_error = json.dumps({"error": {"message": "overloaded " + "x" * 5_000_000}}).encode()
    with OpenAITestServer(answers="##final score: 2", script=[Fault("raw", body=huge_error, status=503), "ok"]) as srv:
        backend = backend_for(srv)
        result = backend.execute(REQUEST)
    assert result.text == "##final score: 2" and backend.retry_reasons["HTTP 503"] == 1


def test_a_logprobs_answer_over_its_bound_is_invalid_not_a_label(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    # 20 alternatives of 2 KB each: far beyond one token's worth
    alternatives = [("2", -0.1)] + [("x" * 2000 + str(i), -5.0) for i in range(19)]
    with OpenAITestServer(top_logprobs=alternatives) as srv:
        judge = Judge(JudgeSpec("openai:test-model", mode="logprobs", invalid_policy="no-retry",
                                options={"base_url": srv.base_url, "backoff_base_s": 0.01}))
        run = judge_pairs([judge], [Pair("q1", "d1")], {"q1": "q"}, {"d1": "p"})
    j = run.judgments[judge.id][Pair("q1", "d1")]
    assert j.label is None and "answer too large" in j.invalid_reason


# --- nothing of that size is stored ---------------------------------------------------------
def test_a_five_megabyte_answer_is_invalid_and_none_of_it_is_stored_or_written(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    q, c, p = tmp_path / "q.tsv", tmp_path / "c.jsonl", tmp_path / "p.tsv"
    q.write_text("q1\twhat do goldfish eat\n")
    c.write_text(json.dumps({"docid": "d1", "text": "Goldfish eat flakes and pellets."}) + "\n")
    p.write_text("q1\td1\n")
    out, store = tmp_path / "out.qrels", tmp_path / "s.sqlite"
    with OpenAITestServer(answers="##final score: 2 " + "2" * 5_000_000) as srv:
        done = CliRunner().invoke(app, ["judge", "-q", str(q), "-c", str(c), "-p", str(p), "-o", str(out),
                                        "--store", str(store), "-j", "openai:test-model", "--base-url", srv.base_url,
                                        "--invalid", "no-retry", "--no-progress"])
        assert srv.request_count == 1
    assert done.exit_code == 0, done.output
    rec = json.loads((tmp_path / "out.qrels.details.jsonl").read_text())
    assert rec["label"] is None and "answer too large" in rec["invalid_reason"]
    assert out.read_text() == ""
    assert (tmp_path / "out.qrels.details.jsonl").stat().st_size < 20_000
    db = sqlite3.connect(store)
    try:
        assert db.execute("SELECT raw_output FROM calls").fetchall() == [("",)]
    finally:
        db.close()
    assert sum(f.stat().st_size for f in tmp_path.glob("s.sqlite*")) < 1_000_000


# --- Batch API result lines -----------------------------------------------------------------
def test_batch_result_lines_over_the_bound_are_invalid_and_not_stored(tiny, tmp_path):
    sizes = iter([0, 60_000, 6_000_000, 0])  # padding: fits, over the bound, over the hard cap, fits
    with OpenAITestServer() as srv:
        first = batch_judge(tiny, tmp_path, srv, "--batch-write", str(tmp_path / "req.jsonl"),
                            "--out", str(tmp_path / "a.qrels"))
        assert first.exit_code == 0, first.output
        batch_output(tmp_path / "req.jsonl", tmp_path / "out.jsonl",
                     lambda: ("##final score: 2 " + " " * next(sizes), "stop"))
        second = batch_judge(tiny, tmp_path, srv, "--batch-read", str(tmp_path / "out.jsonl"),
                             "--out", str(tmp_path / "b.qrels"))
        assert srv.request_count == 0
    assert second.exit_code == 0, second.output
    details = [json.loads(x) for x in (tmp_path / "b.qrels.details.jsonl").read_text().splitlines()]
    assert sorted(str(d["label"]) for d in details) == ["2", "2", "None", "None"]
    too_large = [d["invalid_reason"] for d in details if d["label"] is None]
    assert all("answer too large: the Batch API output line has" in r for r in too_large)
    db = sqlite3.connect(tmp_path / "store.sqlite")
    try:
        assert max(len(raw) for (raw,) in db.execute("SELECT raw_output FROM calls")) < 1000
    finally:
        db.close()


def test_a_batch_line_over_the_hard_cap_without_its_custom_id_first_is_an_input_error(tiny, tmp_path):
    (tmp_path / "out.jsonl").write_text(json.dumps({"response": {"body": "x" * (RESPONSE_HARD_CAP_BYTES + 10)},
                                                    "custom_id": "abc"}) + "\n")
    with OpenAITestServer() as srv:
        done = batch_judge(tiny, tmp_path, srv, "--batch-read", str(tmp_path / "out.jsonl"),
                           "--out", str(tmp_path / "b.qrels"))
        assert srv.request_count == 0
    assert isinstance(done.exception, InputError)  # the CLI prints it as one error line, exit 2
    assert "out.jsonl:1: expected a Batch API output line of at most" in str(done.exception)


# --- parsing a large degenerate answer does not stall the other calls ---------------------------
DEGENERATE = {  # 40 KB answers of the shapes that made the label parser's time polynomial
    "spaces": "score" + " " * 39_990 + "x",
    "commas": "1, " * 13_300,
    "breaks": "final score" + "\n" * 39_980 + "x",
    "digits": ("1" * 300 + " ") * 132 + "x",
    "stars": "score" + "*" * 39_990 + "x",
}


def test_degenerate_40_kb_answers_among_20_concurrent_calls_make_no_other_call_time_out(tmp_path):
    q, c, p = tmp_path / "q.tsv", tmp_path / "c.jsonl", tmp_path / "p.tsv"
    q.write_text("q1\twhat do goldfish eat\n")
    docs = [f"passage-{kind}" for kind in DEGENERATE] + [f"passage-plain-{i}" for i in range(20 - len(DEGENERATE))]
    c.write_text("".join(json.dumps({"docid": d, "text": f"Goldfish {d}."}) + "\n" for d in docs))
    p.write_text("".join(f"q1\t{d}\n" for d in docs))
    answers = {f"passage-{kind}": text for kind, text in DEGENERATE.items()}
    assert all(39_000 < len(text) <= 40_000 for text in answers.values())
    out = tmp_path / "out.qrels"
    # every answer waits 0.5 s, so all 20 calls are in flight together: a parse that held the
    # event loop for the 2 s timeout would make the others time out and be sent again
    with OpenAITestServer(answers=answers, default_answer="##final score: 2", delay_s=0.5) as srv:
        cmd = [sys.executable, "-m", "judgeblender", "judge", "-q", str(q), "-c", str(c), "-p", str(p), "-o", str(out),
               "--store", str(tmp_path / "s.sqlite"), "-j", "openai:test-model", "--base-url", srv.base_url,
               "--concurrency", "20", "--timeout", "2", "--invalid", "no-retry", "--no-progress", "--json"]
        done = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(SRC), "OPENAI_API_KEY": "sk-test"},
                              capture_output=True, text=True, timeout=300)
        assert srv.request_count == 20  # every call sent once: none timed out and was sent again
        assert srv.max_in_flight >= 10
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)["judges"][0]
    assert summary["backend_retries"] == 0 and summary["failed_calls"] == 0
    details = [json.loads(x) for x in (tmp_path / "out.qrels.details.jsonl").read_text().splitlines()]
    assert [d["label"] for d in details if d["docid"] not in answers] == [2] * (20 - len(DEGENERATE))


def test_a_body_is_read_no_further_than_its_content_length(backend_for):
    """A body whose Content-Length is within the bound is read without the bound's wrapper: the
    HTTP/1.1 parser stops at the Content-Length, so a server that sends more after it (here 2 MB,
    past the bound) has the rest left unread, and the answer is what the length framed."""
    import socket
    import threading

    answer = json.dumps({"id": "chatcmpl-x", "object": "chat.completion", "model": "test-model", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "##final score: 1"}, "finish_reason": "stop"}]}).encode()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int([line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")][0])
            while len(body) < length:
                body += conn.recv(65536)
            reply = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(answer)
                     + answer + b"x" * 2_000_000)
            try:
                conn.sendall(reply)
            except OSError:  # the client closed the connection with the rest unread
                pass

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    backend = OpenAICompatBackend("test-model", base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-test",
                                  timeout_s=10.0, max_retries=0)
    try:
        result = backend.execute(REQUEST)
    finally:
        backend.close()
        server.join(timeout=10)
        listener.close()
    assert BOUND < 2_000_000
    assert result.text == "##final score: 1" and "refused" not in result.extra
