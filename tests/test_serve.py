"""`judgeblender serve` as a real process: uvicorn on 127.0.0.1, judging with tests/openai_server.py
(a real OpenAI-compatible HTTP server) as the served model, on TREC DL 2019 passages.

Equality with `judgeblender judge` on the same inputs and store, answers served from the store,
auth, every limit, hostile bodies, metrics, the OpenAPI document, a bounded load test, SIGKILL
under load then a restart, and SIGTERM with requests in flight.
"""

from __future__ import annotations

import http.client
import json
import socket
import socketserver
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from openai_server import OpenAITestServer
from prometheus_client.parser import text_string_to_metric_families
from serve_helpers import API_KEY, Served, answer_of

DL19 = Path(__file__).parent / "data" / "dl19_slice"
JUDGE = "openai:test-model/umbrela/generate"


@pytest.fixture(autouse=True)
def quiet_server(monkeypatch):
    # clients the tests kill reset their connections: the canned server's traceback for each is noise
    monkeypatch.setattr(socketserver.BaseServer, "handle_error", lambda self, request, address: None)


def texts() -> tuple[dict[str, str], dict[str, str], list[tuple[str, str]]]:
    queries = dict(line.split("\t", 1) for line in (DL19 / "queries.tsv").read_text().splitlines())
    passages = {}
    for line in (DL19 / "passages.jsonl").read_text().splitlines():
        rec = json.loads(line)
        passages[rec["docid"]] = rec["text"]
    pairs = [(line.split()[0], line.split()[2]) for line in (DL19 / "qrels.txt").read_text().splitlines()]
    return queries, passages, pairs


QUERIES, PASSAGES, PAIRS = texts()


def body_of(pairs: list[tuple[str, str]]) -> list[dict]:
    return [{"qid": q, "docid": d, "query": QUERIES[q], "passage": PASSAGES[d]} for q, d in pairs]


def serve_args(upstream: OpenAITestServer, store: Path, *more: str) -> list[str]:
    return ["-j", "openai:test-model", "--base-url", upstream.base_url, "--store", str(store), *more]


def judge_cli(upstream: OpenAITestServer, store: Path, pairs: list[tuple[str, str]], tmp: Path, *more: str) -> list[dict]:
    """`judgeblender judge` on the same pairs: its details lines."""
    p = tmp / "pairs.tsv"
    p.write_text("".join(f"{q}\t{d}\n" for q, d in pairs))
    out = tmp / "cli.qrels"
    cmd = [sys.executable, "-m", "judgeblender", "judge", "-q", str(DL19 / "queries.tsv"), "-c",
           str(DL19 / "passages.jsonl"), "-p", str(p), "-o", str(out), "--base-url", upstream.base_url,
           "--store", str(store), "--no-progress", *more]
    if "--panel" not in more:
        cmd += ["-j", "openai:test-model"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "OPENAI_API_KEY": API_KEY})
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in Path(f"{out}.details.jsonl").read_text().splitlines()]


def metrics(served: Served, token: str | None = None) -> dict[tuple[str, tuple], float]:
    r = served.get("/metrics", token)
    assert r.status == 200 and r.headers["content-type"].startswith("text/plain")
    found = {}
    for family in text_string_to_metric_families(r.body.decode()):
        for s in family.samples:
            found[s.name, tuple(sorted(s.labels.items()))] = s.value
    return found


# ----------------------------------------------------------------------------- equality, store
def test_results_equal_judge_details_and_a_second_request_is_served_from_the_store(tmp_path):
    pairs = PAIRS[:40]
    with OpenAITestServer(answer_of, max_requests=10_000) as upstream:
        cli = judge_cli(upstream, tmp_path / "cli.sqlite", pairs, tmp_path)
        asked_by_cli = upstream.request_count
        with Served(serve_args(upstream, tmp_path / "serve.sqlite")) as served:
            first = served.judge(body_of(pairs))
            assert first.status == 200, first
            asked = upstream.request_count - asked_by_cli
            assert asked == asked_by_cli  # the same calls: each pair once, the invalid ones asked again
            results = first.json()["results"]
            assert [(r["qid"], r["docid"]) for r in results] == pairs  # the request's order
            assert [r["details"] for r in results] == cli  # judge's details lines, record for record
            invalid = [r for r in results if r["label"] is None]
            assert invalid and all(not r["valid"] and r["reason"] and r["details"]["invalid_reason"] for r in invalid)
            assert all(r["label"] == r["judges"][JUDGE]["label"] for r in results)
            assert all(r["label"] in (0, 1, 2, 3) for r in results if r["valid"])

            # the same pairs again, in another order: every answer from the store, no upstream call
            before = upstream.request_count
            again = served.judge(body_of(pairs[::-1]))
            assert again.status == 200 and upstream.request_count == before
            stats = again.json()["stats"][0]
            assert stats["calls_made"] == 0 and stats["cache_hits"] == asked
            assert [r["details"] for r in again.json()["results"]][::-1] == \
                judge_cli(upstream, tmp_path / "cli.sqlite", pairs, tmp_path)  # both from their store now
            found = metrics(served)
            assert found["judgeblender_calls_made_total", (("judge", JUDGE),)] == asked
            assert found["judgeblender_store_hits_total", (("judge", JUDGE),)] == asked
            n_invalid = sum(1 for r in results for s in r["details"]["judges"][JUDGE]["steps"] if s["value"] is None)
            assert found["judgeblender_invalid_answers_total", (("judge", JUDGE),)] == 2 * n_invalid
            assert found["judgeblender_requests_total", (("endpoint", "judge"), ("status", "200"))] == 2
            assert found["judgeblender_request_seconds_count", (("endpoint", "judge"),)] == 2
            assert found["judgeblender_pairs_total", ()] == 80
            assert served.stop() == 0
        # everything answered is in the store: a new server on the same store asks the model nothing
        before = upstream.request_count
        with Served(serve_args(upstream, tmp_path / "serve.sqlite")) as restarted:
            r = restarted.judge(body_of(pairs))
            assert r.status == 200 and upstream.request_count == before
            assert [x["label"] for x in r.json()["results"]] == [x["label"] for x in results]
            assert restarted.stop() == 0


def test_a_panel_is_blended_as_judge_panel_blends_it_and_described_at_v1_panel(tmp_path):
    panel = tmp_path / "panel.toml"
    panel.write_text('name = "two"\n[aggregator]\nmethod = "mv"\ntie = "min"\n'
                     '[[judges]]\nmodel = "openai:test-model"\nprompt = "umbrela"\n'
                     '[[judges]]\nmodel = "openai:test-model"\nprompt = "sun-two-step"\n')
    pairs = PAIRS[40:70]
    with OpenAITestServer(answer_of, max_requests=10_000) as upstream:
        cli = judge_cli(upstream, tmp_path / "cli.sqlite", pairs, tmp_path, "--panel", str(panel))
        args = ["--panel", str(panel), "--base-url", upstream.base_url, "--store", str(tmp_path / "s.sqlite")]
        with Served(args) as served:
            described = served.get("/v1/panel").json()
            assert described["panel"] == "two" and described["method"] == "mv" and described["tie"] == "min"
            assert [m["id"] for m in described["judges"]] == [
                "openai:test-model/umbrela/generate", "openai:test-model/sun-two-step/generate"]
            r = served.judge(body_of(pairs))
            assert r.status == 200, r
            results = r.json()["results"]
            assert [x["details"] for x in results] == cli
            assert all(set(x["judges"]) == {m["id"] for m in described["judges"]} for x in results)
            assert all(x["details"]["blend"] == {"panel": "two", "method": "mv", "tie": "min", "seed": 0}
                       for x in results)
            assert served.stop() == 0


def test_ids_only_with_the_servers_queries_and_corpus(tmp_path):
    pairs = PAIRS[:6]
    with OpenAITestServer(answer_of) as upstream, Served(serve_args(
            upstream, tmp_path / "s.sqlite", "--queries", str(DL19 / "queries.tsv"), "--corpus",
            str(DL19 / "passages.jsonl"))) as served:
        by_ids = served.judge([{"qid": q, "docid": d} for q, d in pairs])
        assert by_ids.status == 200, by_ids
        full = served.judge(body_of(pairs))  # the same texts: the same calls, from the store
        assert [r["label"] for r in full.json()["results"]] == [r["label"] for r in by_ids.json()["results"]]
        assert full.json()["stats"][0]["calls_made"] == 0
        unknown = served.judge([{"qid": pairs[0][0], "docid": "no-such-doc"}])
        assert unknown.status == 400 and unknown.json()["field"] == "pairs[0].docid"
        assert served.get("/v1/panel").json()["ids_only"] == {"queries": True, "corpus": True}


# ----------------------------------------------------------------------------- auth
def test_bearer_tokens_and_no_token_written_anywhere(tmp_path):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("# the team's tokens\ntok-alpha-7f3a9c\n\ntok-beta-11b2e0\n")
    store = tmp_path / "s.sqlite"
    with OpenAITestServer(answer_of) as upstream, Served(serve_args(upstream, store, "--token-file",
                                                                    str(tokens))) as served:
        body = body_of(PAIRS[:3])
        none = served.judge(body)
        assert none.status == 401 and none.headers["www-authenticate"] == "Bearer" and "token" in none.json()["error"]
        assert served.judge(body, token="tok-alpha-7f3a9").status == 401  # a prefix of a token
        assert served.judge(body, token="tok-gamma").status == 401
        assert served.request("POST", "/v1/judge", {"pairs": body},
                              headers={"Authorization": "Basic tok-alpha-7f3a9c"}).status == 401
        assert upstream.request_count == 0  # nothing refused reached the model
        assert served.judge(body, token="tok-beta-11b2e0").status == 200
        assert served.get("/v1/health").status == 200  # a load balancer's probe needs no token
        for path in ("/metrics", "/v1/panel", "/openapi.json"):
            assert served.get(path).status == 401
            assert served.get(path, token="tok-alpha-7f3a9c").status == 200
        assert served.stop() == 0
        written = b"".join(p.read_bytes() for p in tmp_path.glob("s.sqlite*")) + served.stderr.encode()
    for secret in (b"tok-alpha-7f3a9c", b"tok-beta-11b2e0", API_KEY.encode()):
        assert secret not in written


def test_listening_beyond_loopback_needs_a_token_file(tmp_path):
    store = tmp_path / "s.sqlite"
    done = subprocess.run([sys.executable, "-m", "judgeblender", "serve", "-j", "openai:test-model", "--host",
                           "0.0.0.0", "--port", "0", "--store", str(store)], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--host" in lines[0] and "--token-file" in lines[0] and "Traceback" not in done.stderr
    assert not store.exists()
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("tok-0\n")
    with OpenAITestServer(answer_of) as upstream, Served(["--host", "0.0.0.0", "--token-file", str(tokens),
                                                          *serve_args(upstream, store)]) as served:
        assert served.judge(body_of(PAIRS[:1]), token="tok-0").status == 200
        assert served.stop() == 0
    empty = tmp_path / "empty.txt"
    empty.write_text("# no token\n")
    done = subprocess.run([sys.executable, "-m", "judgeblender", "serve", "-j", "openai:test-model", "--token-file",
                           str(empty), "--store", str(tmp_path / "t.sqlite")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and str(empty) in done.stderr and "at least one token" in done.stderr


# ----------------------------------------------------------------------------- limits, hostile bodies
BAD_BODIES = [
    (b"not json", "body"),
    (b'{"pairs": [', "body"),
    (b"\xff\xfe{}", "body"),
    (b"[]", "body"),
    (b'"pairs"', "body"),
    (b"42", "body"),
    (b"null", "body"),
    (b'{"pairs": {}}', "pairs"),
    (b'{"pairs": []}', "pairs"),
    (b'{}', "pairs"),
    (b'{"pairs": [], "extra": 1}', "extra"),
    (b'{"pairs": [7]}', "pairs[0]"),
    (b'{"pairs": [{"qid": ["q"], "docid": "d", "query": "x", "passage": "y"}]}', "pairs[0].qid"),
    (b'{"pairs": [{"qid": true, "docid": "d", "query": "x", "passage": "y"}]}', "pairs[0].qid"),
    (b'{"pairs": [{"qid": "q", "docid": "", "query": "x", "passage": "y"}]}', "pairs[0].docid"),
    (b'{"pairs": [{"qid": "q", "docid": "d", "query": "x", "passage": 3}]}', "pairs[0].passage"),
    (b'{"pairs": [{"qid": "q", "docid": "d", "query": "x", "passage": "   "}]}', "pairs[0].passage"),
    (b'{"pairs": [{"qid": "q", "docid": "d", "query": null, "passage": "y"}]}', "pairs[0].query"),
    (b'{"pairs": [{"qid": "q", "docid": "d", "query": "x", "passage": "\\ud800"}]}', "pairs[0].passage"),
    (b'{"pairs": [{"qid": "q", "docid": "d", "query": "x", "passage": "y", "label": 3}]}', "pairs[0].label"),
    (b'{"pairs": [{"qid": "q", "docid": "d", "query": "x"}]}', "pairs[0].passage"),
    (b'{"pairs": [{"qid": "q", "docid": "d", "query": "x", "passage": "y"}, '
     b'{"qid": "q", "docid": "e", "query": "x", "passage": "z"}, '
     b'{"qid": "q", "docid": "d", "query": "x", "passage": "y"}]}', "pairs[2]"),
    (b'{"pairs": [{"qid": "q", "docid": "d", "query": "x", "passage": "y"}, '
     b'{"qid": "q", "docid": "e", "query": "another", "passage": "z"}]}', "pairs[1].query"),
    (b"[" * 40_000 + b"]" * 40_000, "body"),  # nested past the JSON parser's depth
    (b'{"pairs": [{"qid": "q", "docid": "d", "query": "x", "passage": "y"}, ' + b"[" * 30_000 + b"]" * 30_000
     + b"]}", "body"),
]


def raw_post(served: Served, header: bytes, parts: list[bytes]) -> tuple[int, dict]:
    """POST /v1/judge over a bare socket, sending as much of the body as the server reads: a
    server that refuses a body answers before it is all sent (and may close the connection)."""
    with socket.create_connection(("127.0.0.1", served.port), timeout=60) as sock:
        sock.sendall(b"POST /v1/judge HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n" + header
                     + b"\r\n")
        try:
            for part in parts:
                sock.sendall(part)
        except OSError:  # the server answered and closed: its answer is in the socket's buffer
            pass
        data = b""
        try:
            while chunk := sock.recv(65536):
                data += chunk
                if b"\r\n\r\n" in data:
                    head, _, rest = data.partition(b"\r\n\r\n")
                    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                                      if line.lower().startswith(b"content-length")))
                    if len(rest) >= length:
                        break
        except OSError:
            pass
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(rest)


def test_every_limit_and_hostile_body_is_one_json_error_naming_the_field(tmp_path):
    with OpenAITestServer(answer_of, delay_s=1.5) as upstream, Served(serve_args(
            upstream, tmp_path / "s.sqlite", "--max-body", "200000", "--max-pairs", "5", "--max-queue", "2")) as served:
        for raw, field in BAD_BODIES:
            r = served.request("POST", "/v1/judge", raw=raw)
            assert r.status == 400, (raw[:80], r)
            assert r.json()["field"] == field, (raw[:80], r.json())
            assert r.json()["error"].startswith(field + ":"), r.json()
        # a 10 MB string: refused from its Content-Length, and when sent chunked, as soon as it passes the limit
        huge = json.dumps({"pairs": [{"qid": "q", "docid": "d", "query": "x", "passage": "p" * 10_000_000}]}).encode()
        status, answer = raw_post(served, f"Content-Length: {len(huge)}\r\n".encode(), [huge])
        assert status == 413 and answer["field"] == "body" and "200000" in answer["error"]
        chunks = [b"%x\r\n%s\r\n" % (len(c), c) for c in (huge[i:i + 65536] for i in range(0, len(huge), 65536))]
        status, answer = raw_post(served, b"Transfer-Encoding: chunked\r\n", chunks + [b"0\r\n\r\n"])
        assert status == 413 and answer["field"] == "body"
        r = served.judge(body_of(PAIRS[:6]))
        assert r.status == 413 and r.json()["field"] == "pairs" and "at most 5" in r.json()["error"]
        assert upstream.request_count == 0  # no refused request reached the model
        # other routes and methods: JSON too
        assert served.get("/v1/nothing").status == 404 and "error" in served.get("/v1/nothing").json()
        r = served.get("/v1/judge")
        assert r.status == 405 and "error" in r.json()

        # the queue: two requests in flight (their model answers take 1.5 s), a third is told to come back
        answers: list = []
        workers = [threading.Thread(target=lambda k=k: answers.append(served.judge(body_of(PAIRS[k:k + 1]))))
                   for k in range(2)]
        for w in workers:
            w.start()
        served.wait_until(lambda: served.get("/v1/health").json()["in_flight"] == 2)
        busy = served.judge(body_of(PAIRS[5:6]))
        assert busy.status == 429 and busy.headers["retry-after"] == "1" and "--max-queue" in busy.json()["error"]
        for w in workers:
            w.join(30)
        assert [a.status for a in answers] == [200, 200]
        assert served.judge(body_of(PAIRS[5:6])).status == 200  # room again
        found = metrics(served)
        assert found["judgeblender_requests_total", (("endpoint", "judge"), ("status", "400"))] == len(BAD_BODIES)
        assert found["judgeblender_requests_total", (("endpoint", "judge"), ("status", "413"))] == 3
        assert found["judgeblender_requests_total", (("endpoint", "judge"), ("status", "429"))] == 1
        assert served.stop() == 0
    assert "Traceback" not in served.stderr


def test_openapi_document_and_health(tmp_path):
    with OpenAITestServer(answer_of) as upstream, Served(serve_args(upstream, tmp_path / "s.sqlite")) as served:
        doc = served.get("/openapi.json").json()
        assert doc["openapi"].startswith("3.")
        assert {"/v1/judge", "/v1/panel", "/v1/health", "/metrics"} <= set(doc["paths"])
        assert doc["paths"]["/v1/judge"]["post"]["requestBody"]["content"]["application/json"]["schema"][
            "properties"]["pairs"]["maxItems"] == 1000
        assert served.get("/v1/health").json()["status"] == "ok"


def test_failed_model_calls_answer_502_with_what_was_judged(tmp_path):
    with OpenAITestServer(answer_of, script=["500"] * 12) as upstream, Served(serve_args(
            upstream, tmp_path / "s.sqlite", "--concurrency", "1")) as served:
        r = served.judge(body_of(PAIRS[:3]))
        assert r.status == 502, r
        body = r.json()
        assert "failed after all retries" in body["error"]
        failed = [x for x in body["results"] if x["label"] is None]
        assert failed and all("backend error" in x["reason"] for x in failed)
        again = served.judge(body_of(PAIRS[:3]))  # the faults are spent: the failed ones are asked again
        assert again.status == 200 and again.json()["stats"][0]["calls_made"] == len(failed)


# ----------------------------------------------------------------------------- load, SIGKILL, SIGTERM
def test_load_2000_pairs_at_concurrency_64_against_a_50ms_model(tmp_path):
    pairs = [(f"q{i % 50}", f"d{i}") for i in range(2000)]
    body = [[{"qid": q, "docid": d, "query": f"question {q}", "passage": f"passage {d} text"}] for q, d in pairs]
    with OpenAITestServer(answer_of, delay_s=0.05, max_requests=5000) as upstream, Served(serve_args(
            upstream, tmp_path / "s.sqlite", "--concurrency", "64")) as served:
        started = time.monotonic()
        answers = served.post_many(body, concurrency=64)
        took = time.monotonic() - started
        assert [a.status for a in answers] == [200] * 2000
        for (one,), a in zip(body, answers):
            (result,) = a.json()["results"]
            assert (result["qid"], result["docid"]) == (one["qid"], one["docid"])
            raw = result["details"]["judges"][JUDGE]["steps"][-1]["raw"]
            assert result["label"] == (int(raw) if raw.isdigit() else None)
        assert upstream.request_count == 2000 + sum(a.json()["results"][0]["label"] is None for a in answers)
        assert upstream.max_in_flight <= 64
        assert served.stop() == 0
    print(f"\n2,000 pairs, 1 a request, 64 at once, 50 ms model: {took:.1f} s")
    assert took < 60


def test_sigkill_under_load_keeps_every_answer_returned_and_a_restart_asks_only_for_the_rest(tmp_path):
    store = tmp_path / "s.sqlite"
    pairs = [(f"q{i % 20}", f"d{i}") for i in range(600)]
    body = [[{"qid": q, "docid": d, "query": f"question {q}", "passage": f"passage {d} words"}] for q, d in pairs]
    returned: list[tuple[str, str]] = []
    with OpenAITestServer(lambda b: "2", delay_s=0.02, max_requests=5000) as upstream:
        served = Served(serve_args(upstream, store, "--concurrency", "32"))

        # answers are recorded as they return, from a thread per request
        lock = threading.Lock()

        def one(k: int) -> None:
            try:
                a = served.judge(body[k])
            except (OSError, http.client.HTTPException):  # the server was killed while it answered
                return
            if a.status == 200:
                with lock:
                    returned.extend((r["qid"], r["docid"]) for r in a.json()["results"])

        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(32) as pool:
            futures = [pool.submit(one, k) for k in range(len(body))]
            served.wait_until(lambda: len(returned) >= 150, timeout=60)
            served.proc.kill()
            served.proc.wait()
            for f in futures:
                f.result()
        assert 150 <= len(returned) < 600
        with sqlite3.connect(store) as db:
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            stored_calls = db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
            judged = set(db.execute("SELECT qid, docid FROM judgments").fetchall())
        assert set(returned) <= judged  # every answer returned was committed first
        assert stored_calls >= len(returned)

        before = upstream.request_count
        with Served(serve_args(upstream, store, "--concurrency", "32")) as again:
            answers = again.post_many([sum(body[k:k + 50], []) for k in range(0, 600, 50)], concurrency=4)
            assert [a.status for a in answers] == [200] * 12
            assert all(r["label"] == 2 for a in answers for r in a.json()["results"])
            made = sum(s["calls_made"] for a in answers for s in a.json()["stats"])
            assert made == upstream.request_count - before == 600 - stored_calls  # only what was not committed
            assert again.stop() == 0


def test_sigterm_answers_the_requests_in_flight_then_exits_0(tmp_path):
    store = tmp_path / "s.sqlite"
    with OpenAITestServer(answer_of, delay_s=1.0) as upstream:
        served = Served(serve_args(upstream, store, "--concurrency", "8"))
        got: list = []
        worker = threading.Thread(target=lambda: got.append(served.judge(body_of(PAIRS[:5]))))
        worker.start()
        served.wait_until(lambda: upstream.in_flight > 0)
        code = served.stop()
        worker.join(30)
        assert code == 0
        assert got and got[0].status == 200 and len(got[0].json()["results"]) == 5
        assert "stopped: every answer given is in the store" in served.stderr
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0] == 5
