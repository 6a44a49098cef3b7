"""Secrets and stored text: a planted API key appears in no output, and --redact keeps passages out.

The key is planted in the environment (or a 0600 key file) and sent to a real HTTP server on
127.0.0.1 that echoes it back: in a 401 error, in 500 errors that are retried, and inside a 200
answer's text. Then every byte the job leaves behind is searched for it: the store file and its
journal, qrels, details, `store export` and `store judgments` output, stdout and stderr, and
(in process) every log record down to DEBUG from every library.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.pairs import Pair


class EchoServer:
    """An OpenAI-compatible server that repeats the caller's key back in the places servers do.

    Passage text decides the answer: "reject" -> 401 naming the key; "flaky" -> 500 naming the
    key twice, then an answer (retried); "broken" -> 500 naming the key, every time (retried,
    then given up); "echo" -> a 200 whose answer quotes the key; anything else ->
    "##final score: 2". Stops after `max_requests` or 120 s.
    """

    def __init__(self, max_requests: int = 200):
        self.keys_seen: list[str] = []
        self.flaky_failures = 0
        self.max_requests = max_requests
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                with owner.lock:
                    owner.keys_seen.append(key)
                    if len(owner.keys_seen) > owner.max_requests:
                        return self._send(503, {"error": {"message": "request budget exhausted"}})
                text = body["messages"][-1]["content"]
                if "reject" in text:
                    self._send(401, {"error": {"message": f"Incorrect API key provided: {key}.", "code": "invalid_api_key"}})
                elif "broken" in text or ("flaky" in text and owner.flaky_failures < 2):
                    with owner.lock:
                        owner.flaky_failures += "flaky" in text
                    self._send(500, {"error": {"message": f"internal error while serving key {key}"}})
                else:
                    answer = f"##final score: 2 (served for {key})" if "echo" in text else "##final score: 2"
                    self._send(200, {"id": "x", "object": "chat.completion", "model": body["model"],
                                     "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                                                  "finish_reason": "stop"}]})

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.timer = threading.Timer(120, self.httpd.shutdown)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> "EchoServer":
        self.thread.start()
        self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.timer.cancel()
        self.httpd.shutdown()
        self.httpd.server_close()


QUERIES = "q1\twhat do goldfish eat\nq2\thow tall is the eiffel tower\n"
PASSAGES = {
    "d1": "Goldfish eat flakes and peas. UNIQUE-PASSAGE-MARKER-ALPHA",
    "d2": "The Eiffel Tower is 330 metres tall. UNIQUE-PASSAGE-MARKER-BRAVO",
    "d3": "please reject this one UNIQUE-PASSAGE-MARKER-CHARLIE",
    "d4": "a flaky one UNIQUE-PASSAGE-MARKER-DELTA",
    "d5": "echo echo UNIQUE-PASSAGE-MARKER-ECHO",
    "d6": "a broken one UNIQUE-PASSAGE-MARKER-FOXTROT",
}
PAIRS = "q1\td1\nq2\td2\nq1\td3\nq2\td4\nq1\td5\n"


def planted() -> str:
    return "sk-PLANTED-" + secrets.token_hex(16)


@pytest.fixture
def inputs(tmp_path):
    (tmp_path / "q.tsv").write_text(QUERIES)
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"docid": d, "text": t}) + "\n" for d, t in PASSAGES.items()))
    (tmp_path / "p.tsv").write_text(PAIRS)
    return tmp_path


def cli(*args, env=None):
    full = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    return subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], capture_output=True, text=True,
                          env={**full, **(env or {})}, timeout=180)


def every_byte(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def judge_args(folder: Path, server: EchoServer, *extra, store: Path | None = None) -> list:
    return ["judge", "-q", folder / "q.tsv", "-c", folder / "c.jsonl", "-p", folder / "p.tsv", "-o", folder / "out.qrels",
            "--store", store or folder / "store.sqlite", "--base-url", server.base_url, "--timeout", "5",
            "--no-progress", "--json", *extra]


def assert_absent(secret: str, outputs: dict[str, bytes | str]) -> None:
    for name, data in outputs.items():
        data = data.encode() if isinstance(data, str) else data
        assert secret.encode() not in data, f"the planted secret leaked into {name}"


def test_a_planted_env_key_reaches_the_server_and_no_output(inputs):
    key = planted()
    with EchoServer() as server:
        run = cli(*judge_args(inputs, server, "-j", "openai:test-model"), env={"OPENAI_API_KEY": key})
    assert run.returncode == 3, run.stderr  # the 401 pair is a failed call: exit 3, the rest written
    assert server.keys_seen and set(server.keys_seen) == {key}  # the plant was real: the server got it
    details = {json.loads(line)["docid"]: json.loads(line) for line in (inputs / "out.qrels.details.jsonl").open()}
    # the error paths were taken: a 401 (not retried, the pair unjudged) and 500s (retried)
    assert "HTTP 401" in details["d3"]["invalid_reason"] and "***" in details["d3"]["invalid_reason"]
    assert details["d4"]["label"] == 2 and json.loads(run.stdout)["judges"][0]["backend_retries"] == 2
    assert details["d5"]["label"] == 2 and "***" in details["d5"]["judges"]["openai:test-model/umbrela/generate"]["raw_output"]
    export = cli("store", "export", "--store", inputs / "store.sqlite", "-o", inputs / "export.jsonl")
    judgments = cli("store", "judgments", "--store", inputs / "store.sqlite", "-o", inputs / "judgments.jsonl")
    stats = cli("store", "stats", "--store", inputs / "store.sqlite")
    assert export.returncode == judgments.returncode == stats.returncode == 0
    assert (inputs / "export.jsonl").stat().st_size > 0
    assert_absent(key, {**every_byte(inputs), "judge stdout": run.stdout, "judge stderr": run.stderr,
                        "export stderr": export.stderr, "judgments stderr": judgments.stderr, "stats": stats.stdout})


def test_a_key_file_must_be_private_and_its_key_stays_out_of_outputs(inputs, tmp_path_factory):
    key = planted()
    keyfile = tmp_path_factory.mktemp("keys") / "openai.key"  # outside the searched folder
    keyfile.write_text(key + "\n")
    panel = inputs / "panel.toml"
    with EchoServer() as server:
        # (a short backoff: the "flaky" pair's retries are the slow part of this job)
        panel.write_text(f'[[judges]]\nmodel = "openai:test-model"\nid = "served"\noptions = {{ api_key_file = '
                         f'"{keyfile}", base_url = "{server.base_url}", backoff_base_s = 0.01 }}\n')
        keyfile.chmod(0o644)
        loose = cli(*judge_args(inputs, server, "--panel", panel))
        assert loose.returncode == 2 and "Traceback" not in loose.stderr
        assert f"API key file {keyfile} has permissions 0644" in loose.stderr and "chmod 600" in loose.stderr
        assert not server.keys_seen  # nothing was sent with a key others can read
        keyfile.chmod(0o600)
        run = cli(*judge_args(inputs, server, "--panel", panel))
    assert run.returncode == 3, run.stderr  # the 401 pair is a failed call: exit 3, the rest written
    assert set(server.keys_seen) == {key}
    assert_absent(key, {**every_byte(inputs), "loose stderr": loose.stderr, "stdout": run.stdout, "stderr": run.stderr})


def test_no_log_record_of_any_library_carries_the_key(inputs, monkeypatch, caplog):
    key = planted()
    monkeypatch.setenv("OPENAI_API_KEY", key)
    caplog.set_level(logging.DEBUG)  # the openai SDK, httpx, httpcore and judgeblender, all levels
    queries = dict(line.split("\t") for line in QUERIES.splitlines())
    pairs = [Pair(*line.split("\t")) for line in PAIRS.splitlines()] + [Pair("q2", "d6")]
    with EchoServer() as server:
        judge = Judge(JudgeSpec(model="openai:test-model",
                                options={"base_url": server.base_url, "backoff_base_s": 0.01, "timeout_s": 5}))
        try:
            run = judge_pairs([judge], pairs, queries, PASSAGES)
        finally:
            judge.close()
    assert set(server.keys_seen) == {key} and run.stats[judge.id].backend_retries == 2 + 5
    given_up = run.judgments[judge.id][Pair("q2", "d6")].invalid_reason
    assert "failed after 6 attempts" in given_up and "serving key ***" in given_up
    assert len(caplog.records) > 10  # the libraries did log, at DEBUG
    assert_absent(key, {"log messages": caplog.text, "log args": repr([r.args for r in caplog.records])})
    assert_absent(key, {"judgments": repr(run.judgments), "backend": repr(judge.backend)})


def test_a_password_in_the_base_url_stays_out_of_log_records_and_judgments(monkeypatch, caplog):
    """A base URL's `user:password@` (Python's `base_url`, as a panel file gives it): the HTTP
    client sends it as `Authorization: Basic`, the server echoes that in a 401 and an answer, and
    no log record of any library, no judgment and no repr holds the password or its Basic form."""
    import base64
    from urllib.parse import quote

    password = "pw/" + secrets.token_hex(12) + "+@="  # "/", "+", "@" and "=": percent-encoded in the URL
    monkeypatch.setenv("OPENAI_API_KEY", planted())
    caplog.set_level(logging.DEBUG)
    queries = dict(line.split("\t") for line in QUERIES.splitlines())
    pairs = [Pair("q1", "d1"), Pair("q1", "d3"), Pair("q1", "d5")]
    with EchoServer() as server:
        url = server.base_url.replace("http://", f"http://alice:{quote(password, safe='')}@")
        judge = Judge(JudgeSpec(model="openai:test-model", options={"base_url": url, "timeout_s": 5}))
        try:
            run = judge_pairs([judge], pairs, queries, PASSAGES)
        finally:
            judge.close()
    basic = base64.b64encode(f"alice:{password}".encode()).decode()
    assert f"Basic {basic}" in server.keys_seen  # the plant was real: the server was sent it
    rejected = run.judgments[judge.id][Pair("q1", "d3")].invalid_reason
    assert "HTTP 401" in rejected and "***" in rejected
    for secret in (password, quote(password, safe=""), basic, basic[4:-4]):
        assert_absent(secret, {"log messages": caplog.text, "log args": repr([r.args for r in caplog.records]),
                               "judgments": repr(run.judgments), "backend": repr(judge.backend)})


def test_a_password_in_a_service_url_stays_out_of_the_clients_messages():
    """jb.Client's address with `user:password@`: its repr, its error when the service cannot
    be reached, and anything judgeblender writes afterwards mask it."""
    import judgeblender as jb
    from judgeblender import masking
    from judgeblender.errors import JudgeblenderError

    password = "svc-" + secrets.token_hex(12)
    client = jb.Client(f"http://alice:{password}@127.0.0.1:9", timeout=5)
    with pytest.raises(JudgeblenderError) as failed:
        client.health()
    shown = {"repr": repr(client), "error": str(failed.value), "written": masking.text(f"see {client.url}")}
    assert "cannot reach" in shown["error"] and "***@127.0.0.1:9" in shown["repr"]
    assert_absent(password, shown)


def test_redacted_store_keeps_no_passage_text_and_still_reuses_answers(inputs):
    (inputs / "p.tsv").write_text("q1\td1\nq2\td2\n")
    markers = [PASSAGES[d].split()[-1] for d in ("d1", "d2")]
    env = {"OPENAI_API_KEY": "sk-x"}
    with EchoServer() as server:
        plain = cli(*judge_args(inputs, server, "-j", "openai:test-model", store=inputs / "plain.sqlite"), env=env)
        first = cli(*judge_args(inputs, server, "-j", "openai:test-model", "--redact"), env=env)
        again = cli(*judge_args(inputs, server, "-j", "openai:test-model", "--redact"), env=env)
    assert plain.returncode == first.returncode == again.returncode == 0, first.stderr
    # without --redact the prompts, and so the passages, are kept (this test can fail); the store
    # compresses them (schema 5), so they are looked for in its export
    plain_export = cli("store", "export", "--store", inputs / "plain.sqlite", "-o", inputs / "plain-export.jsonl")
    assert plain_export.returncode == 0
    assert all(m in (inputs / "plain-export.jsonl").read_text() for m in markers)
    assert json.loads(first.stdout)["judges"][0]["calls_made"] == 2
    assert json.loads(again.stdout)["judges"][0]["calls_made"] == 0  # reuse works: keys hash the full prompt
    export = cli("store", "export", "--store", inputs / "store.sqlite", "-o", inputs / "redacted-export.jsonl")
    assert export.returncode == 0
    redacted = {k: v for k, v in every_byte(inputs).items() if "store.sqlite" in k or "redacted-export" in k}
    assert b"[redacted]" in redacted[str(inputs / "redacted-export.jsonl")]
    for marker in markers:
        assert_absent(marker, redacted)
