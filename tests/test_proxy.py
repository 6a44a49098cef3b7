"""Issue 33 part 2: `judgeblender proxy`, an OpenAI-compatible caching proxy, tested as it runs.

The proxy is a real subprocess (`python -m judgeblender proxy`, uvicorn on 127.0.0.1, a free
port read from its first stdout line) in front of tests/openai_server.py, a real HTTP server that
records every request it gets and can answer 429 with Retry-After and other faults. Clients are
the standard library's http.client, the openai SDK and judgeblender's own `judge`. What the
upstream was asked is counted on the upstream, so "served from the store" means no request
reached it; the store is read back with `judgeblender store export`.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from openai_server import Fault, OpenAITestServer
from test_seams_secrets import leaks, planted_key

from conftest import TESTS

pytestmark = pytest.mark.timeout(300)

ASK = {"model": "test-model", "messages": [{"role": "user", "content": "is the passage relevant?"}], "temperature": 0}


class Proxy:
    """`judgeblender proxy` as a subprocess; `stop()` sends SIGTERM and returns its exit status."""

    def __init__(self, upstream: str, store: Path, *args: str, env: dict[str, str] | None = None,
                 logs: Path | None = None, prefix: tuple[str, ...] = ()):
        self.logs = logs or store.with_suffix(".log")
        self.err = open(self.logs, "wb")
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "judgeblender", "proxy", "--upstream", upstream, "--store", str(store), "--port", "0",
             *args], stdout=subprocess.PIPE, stderr=self.err, env={**os.environ, **(env or {})})
        line = self.proc.stdout.readline().decode()
        if " at http://" not in line:
            self.proc.kill()
            self.proc.wait()
            self.err.close()
            raise AssertionError(f"the proxy did not start: {line!r} {self.logs.read_text()}")
        self.url = line.split(" at ")[1].split()[0]
        self.address = self.url.split("//")[1].split("/")[0]
        self.stdout_first = line

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(self.address, timeout=60)
        try:
            conn.request(method, path, body, {"content-type": "application/json", **(headers or {})})
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def chat(self, body: dict | bytes, **headers: str) -> tuple[int, dict[str, str], bytes]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return self.request("POST", "/v1/chat/completions", data, headers)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=60)
        finally:
            self.proc.stdout.close()
            self.err.close()
        return code


@pytest.fixture
def proxies():
    """Start proxies with `start(upstream, store, *args)`; each still running is stopped at the end,
    and must exit 0."""
    started: list[Proxy] = []

    def start(upstream: str, store: Path, *args: str, **kwargs) -> Proxy:
        proxy = Proxy(upstream, store, *args, **kwargs)
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        if proxy.proc.poll() is None:
            assert proxy.stop() == 0, proxy.logs.read_text()


def exported(store: Path, tmp_path: Path) -> list[dict]:
    out = tmp_path / f"export-{secrets.token_hex(4)}.jsonl"
    done = subprocess.run([sys.executable, "-m", "judgeblender", "store", "export", "--store", str(store), "-o", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def content(data: bytes) -> str:
    return json.loads(data)["choices"][0]["message"]["content"]


# -- caching ---------------------------------------------------------------------------------------
def test_deterministic_requests_are_answered_from_the_store(proxies, tmp_path):
    with OpenAITestServer(answers="2") as up:
        proxy = proxies(up.base_url, tmp_path / "s.sqlite")
        first = proxy.chat(ASK)
        second = proxy.chat(ASK)
        assert (first[0], first[1]["x-judgeblender-cache"]) == (200, "miss")
        assert (second[0], second[1]["x-judgeblender-cache"]) == (200, "hit")
        assert second[2] == first[2] and content(first[2]) == "2"  # the same bytes, the same completion id
        assert up.request_count == 1
        seeded = {**ASK, "temperature": 0.8, "seed": 7}  # a seed makes a sampled request repeatable
        assert [proxy.chat(seeded)[1]["x-judgeblender-cache"] for _ in range(2)] == ["miss", "hit"]
        assert up.request_count == 2
        # the fields that cannot change an answer are not in the key; 0 and 0.0 are one temperature
        for same in ({**ASK, "user": "someone"}, {**ASK, "stream": False}, {**ASK, "temperature": 0.0}):
            assert proxy.chat(same)[1]["x-judgeblender-cache"] == "hit", same
        assert up.request_count == 2
    rows = exported(tmp_path / "s.sqlite", tmp_path)
    assert len(rows) == 2
    row = next(r for r in rows if r["request"].get("seed") is None)
    assert row["backend"] == "proxy" and row["model_identity"] == {
        "api": "chat.completions", "model": "test-model", "upstream": up.base_url}
    assert row["request"] == {"messages": [["user", "is the passage relevant?"]], "temperature": 0}
    assert row["raw_output"].encode() == first[2]  # the upstream's body as returned
    assert row["extra"]["finish_reason"] == "stop" and row["tokens_out"] == 1


def test_a_cached_answer_takes_no_delayed_ack(proxies, tmp_path):
    """One client, one keep-alive connection, one call at a time: a cached answer is back in a
    millisecond or two. With Nagle's algorithm on the proxy's sockets (a listening socket made
    without naming TCP, which asyncio then leaves alone) each took 44 ms, waiting for the
    client's delayed ACK."""
    with OpenAITestServer() as up:
        proxy = proxies(up.base_url, tmp_path / "s.sqlite")
        assert proxy.chat(ASK)[0] == 200
        conn = http.client.HTTPConnection(proxy.address, timeout=60)
        seconds = []
        for _ in range(21):
            started = time.perf_counter()
            conn.request("POST", "/v1/chat/completions", json.dumps(ASK).encode(), {"content-type": "application/json"})
            response = conn.getresponse()
            assert response.read() and response.getheader("x-judgeblender-cache") == "hit"
            seconds.append(time.perf_counter() - started)
        conn.close()
        assert sorted(seconds)[10] < 0.02, seconds  # the median, with room for a loaded machine
        assert up.request_count == 1


def test_samples_pass_through_every_time_and_are_all_stored(proxies, tmp_path):
    with OpenAITestServer(answers="1") as up:
        proxy = proxies(up.base_url, tmp_path / "s.sqlite")
        sampled = {**ASK, "temperature": 0.7}
        no_temperature = {k: v for k, v in ASK.items() if k != "temperature"}  # OpenAI's default is 1
        answers = [proxy.chat(body) for body in (sampled, sampled, no_temperature, no_temperature)]
        assert [(a[0], a[1]["x-judgeblender-cache"]) for a in answers] == [(200, "pass")] * 4
        assert up.request_count == 4
        assert len({a[2] for a in answers}) == 4  # each its own completion
    assert len(exported(tmp_path / "s.sqlite", tmp_path)) == 4  # every sample kept, none replaced


def test_two_models_never_share_an_answer(proxies, tmp_path):
    with OpenAITestServer(answers=lambda body: body["model"]) as up:
        proxy = proxies(up.base_url, tmp_path / "s.sqlite")
        for _ in range(2):
            assert content(proxy.chat({**ASK, "model": "judge-a"})[2]) == "judge-a"
            assert content(proxy.chat({**ASK, "model": "judge-b"})[2]) == "judge-b"
        assert up.request_count == 2


def test_two_upstreams_never_share_an_answer(proxies, tmp_path):
    with OpenAITestServer(answers="first") as one, OpenAITestServer(answers="second") as two:
        assert content(proxies(one.base_url, tmp_path / "s.sqlite").chat(ASK)[2]) == "first"
        assert content(proxies(two.base_url, tmp_path / "s.sqlite").chat(ASK)[2]) == "second"
        assert (one.request_count, two.request_count) == (1, 1)


CHANGES = {
    "messages": {"messages": [{"role": "user", "content": "is the passage relevant??"}]},
    "system": {"messages": [{"role": "system", "content": "be strict"}, *ASK["messages"]]},
    "content parts": {"messages": [{"role": "user", "content": [{"type": "text", "text": "is the passage relevant?"}]}]},
    "name": {"messages": [{"role": "user", "content": "is the passage relevant?", "name": "x"}]},
    "temperature": {"temperature": 0.2, "seed": 1},
    "seed": {"seed": 2},
    "top_p": {"top_p": 0.5},
    "max_tokens": {"max_tokens": 5},
    "max_completion_tokens": {"max_completion_tokens": 5},
    "logprobs": {"logprobs": True, "top_logprobs": 3},
    "top_logprobs": {"logprobs": True, "top_logprobs": 4},
    "stop": {"stop": ["\n"]},
    "response_format": {"response_format": {"type": "json_object"}},
    "tools": {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
    "n": {"n": 2},
    "presence_penalty": {"presence_penalty": 0.5},
    "logit_bias": {"logit_bias": {"17": 5}},
}


def test_every_parameter_that_can_change_the_answer_misses_the_cache(proxies, tmp_path):
    with OpenAITestServer(answers="2") as up:
        proxy = proxies(up.base_url, tmp_path / "s.sqlite")
        assert proxy.chat(ASK)[1]["x-judgeblender-cache"] == "miss"
        for name, change in CHANGES.items():
            status, headers, _ = proxy.chat({**ASK, **change})
            assert (status, headers["x-judgeblender-cache"]) == (200, "miss"), name
        assert up.request_count == 1 + len(CHANGES)
        for name, change in CHANGES.items():  # and each is a key of its own, answered from the store
            assert proxy.chat({**ASK, **change})[1]["x-judgeblender-cache"] == "hit", name
        assert up.request_count == 1 + len(CHANGES)


def test_upstream_errors_pass_back_and_are_never_stored(proxies, tmp_path):
    with OpenAITestServer(answers="2", script=["500", "400", "malformed_json", "empty_choices",
                                               Fault("ok", chunked=True)]) as up:
        proxy = proxies(up.base_url, tmp_path / "s.sqlite")
        assert proxy.chat(ASK)[0] == 500
        status, _, body = proxy.chat(ASK)
        assert status == 400 and json.loads(body)["error"]["message"] == "bad request"
        assert proxy.chat(ASK)[:2][0] == 200 and proxy.chat(ASK)[0] == 200  # not a completion: passed on
        assert up.request_count == 4
        good = proxy.chat(ASK)
        assert good[1]["x-judgeblender-cache"] == "miss" and content(good[2]) == "2"
        assert proxy.chat(ASK)[1]["x-judgeblender-cache"] == "hit"
        assert up.request_count == 5
        up.push(Fault("raw", body=json.dumps({"choices": [{"message": {"content": "x"}, "finish_reason": "abort"}]})
                      .encode()))
        aborted = {**ASK, "seed": 9}
        assert proxy.chat(aborted)[1]["x-judgeblender-cache"] == "error"  # a failed call, not an answer
        assert proxy.chat(aborted)[1]["x-judgeblender-cache"] == "miss"
    assert len(exported(tmp_path / "s.sqlite", tmp_path)) == 2


def test_an_unreachable_upstream_is_a_502(proxies, tmp_path):
    with OpenAITestServer() as up:
        url = up.base_url
    proxy = proxies(url, tmp_path / "s.sqlite")
    status, _, body = proxy.chat(ASK)
    assert status == 502 and "did not answer" in json.loads(body)["error"]["message"]


def test_models_are_listed_from_the_upstream(proxies, tmp_path):
    with OpenAITestServer(model="served-judge") as up:
        status, _, body = proxies(up.base_url, tmp_path / "s.sqlite").request("GET", "/v1/models")
        assert status == 200 and [m["id"] for m in json.loads(body)["data"]] == ["served-judge"]


# -- hostile bodies --------------------------------------------------------------------------------
HOSTILE = {
    "not json": b"{not json",
    "not an object": b"[1, 2]",
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "deep object": json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}],
                               "tools": json.loads("[" * 200 + "]" * 200)}).encode(),
    "nan": b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": NaN}',
    "no model": json.dumps({"messages": ASK["messages"]}).encode(),
    "model a number": json.dumps({**ASK, "model": 3}).encode(),
    "messages a string": json.dumps({**ASK, "messages": "hello"}).encode(),
    "no messages": json.dumps({**ASK, "messages": []}).encode(),
    "message without role": json.dumps({**ASK, "messages": [{"content": "x"}]}).encode(),
    "temperature a string": json.dumps({**ASK, "temperature": "hot"}).encode(),
    "temperature a bool": json.dumps({**ASK, "temperature": False}).encode(),
    "seed a float": json.dumps({**ASK, "seed": 1.5}).encode(),
    "stream": json.dumps({**ASK, "stream": True}).encode(),
    "stream a string": json.dumps({**ASK, "stream": "yes"}).encode(),
    "not utf-8": b'{"model": "\xff\xfe"}',
}


def test_hostile_bodies_get_one_clear_error_and_never_reach_the_upstream(proxies, tmp_path):
    with OpenAITestServer() as up:
        proxy = proxies(up.base_url, tmp_path / "s.sqlite")
        for name, body in HOSTILE.items():
            status, headers, answer = proxy.chat(body)
            assert status == 400, (name, status, answer[:200])
            error = json.loads(answer)["error"]
            assert error["type"] == "invalid_request_error" and error["message"], name
        assert json.loads(proxy.chat(HOSTILE["stream"])[2])["error"]["param"] == "stream"
        assert json.loads(proxy.chat(HOSTILE["temperature a string"])[2])["error"]["param"] == "temperature"
        huge = json.dumps({**ASK, "messages": [{"role": "user", "content": "x" * (17 * 1024 * 1024)}]}).encode()
        assert proxy.chat(huge)[0] == 413
        assert up.request_count == 0
        assert proxy.chat(ASK)[0] == 200  # still serving


# -- keys ------------------------------------------------------------------------------------------
def token_file(tmp_path: Path, *tokens: str) -> Path:
    path = tmp_path / "tokens.txt"
    path.write_text("# proxy tokens\n" + "".join(t + "\n" for t in tokens))
    path.chmod(0o600)
    return path


def test_without_tokens_the_clients_key_is_forwarded(proxies, tmp_path):
    with OpenAITestServer(answers="unused") as up:
        proxy = proxies(up.base_url, tmp_path / "s.sqlite")
        # a short key is a placeholder (the SDK's "unused"), not a secret: the answer keeps the word
        assert content(proxy.chat({**ASK, "seed": 0}, authorization="Bearer unused")[2]) == "unused"
        assert proxy.chat(ASK, authorization="Bearer sk-client-one-0123456789")[0] == 200
        assert proxy.chat({**ASK, "seed": 1}, authorization="Bearer sk-client-two-0123456789")[0] == 200
        assert proxy.chat({**ASK, "seed": 2})[0] == 200
        seen = [r.headers.get("authorization") for r in up.requests]
        assert seen == ["Bearer unused", "Bearer sk-client-one-0123456789", "Bearer sk-client-two-0123456789", None]


def test_with_tokens_clients_present_one_and_the_upstream_gets_the_proxys_key(proxies, tmp_path):
    token, other = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    with OpenAITestServer() as up:
        proxy = proxies(up.base_url, tmp_path / "s.sqlite", "--token-file", str(token_file(tmp_path, token, other)),
                        "--api-key-env", "UPSTREAM_KEY", env={"UPSTREAM_KEY": "sk-upstream-key-0123456789"})
        for headers in ({}, {"authorization": "Bearer wrong-token-0123456789"}, {"authorization": token},
                        {"authorization": f"Bearer {token[:-1]}"}, {"authorization": f"Basic {token}"}):
            status, answer_headers, body = proxy.chat(ASK, **headers)
            assert status == 401 and answer_headers["www-authenticate"] == "Bearer", headers
            assert proxy.request("GET", "/v1/models", headers=headers)[0] == 401
        assert up.request_count == 0
        assert proxy.chat(ASK, authorization=f"Bearer {token}")[0] == 200
        assert proxy.chat(ASK, authorization=f"bearer {other}")[1]["x-judgeblender-cache"] == "hit"  # shared
        assert proxy.request("GET", "/v1/models", headers={"authorization": f"Bearer {other}"})[0] == 200
        assert [r.headers.get("authorization") for r in up.requests] == ["Bearer sk-upstream-key-0123456789"] * 2


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "judgeblender", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def test_bad_arguments_are_one_line_naming_the_option(tmp_path):
    store = str(tmp_path / "s.sqlite")
    cases = [
        (["--upstream", "127.0.0.1:8000", "--store", store], "--upstream"),
        (["--upstream", "http://127.0.0.1:1/v1", "--store", store, "--host", "0.0.0.0"], "--host"),
        (["--upstream", "http://127.0.0.1:1/v1", "--store", store, "--api-key-env", "K"], "--api-key-env"),
        (["--upstream", "http://127.0.0.1:1/v1", "--store", store, "--token-file", str(tmp_path / "none")], "none"),
        (["--upstream", "http://127.0.0.1:1/v1", "--store", store, "--port", "70000"], "--port"),
    ]
    loose = tmp_path / "loose.txt"
    loose.write_text(secrets.token_urlsafe(24) + "\n")
    loose.chmod(0o644)
    cases.append((["--upstream", "http://127.0.0.1:1/v1", "--store", store, "--token-file", str(loose)], "chmod 600"))
    short = token_file(tmp_path, "short")
    cases.append((["--upstream", "http://127.0.0.1:1/v1", "--store", store, "--token-file", str(short)], ":2:"))
    for args, named in cases:
        done = run_cli("proxy", *args)
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and named in lines[0], (args, done.stderr)
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "s.sqlite").exists()  # refused before the store was made


def test_the_python_api_names_its_arguments(tmp_path, monkeypatch):
    """The checks the command runs are the library's (`proxy_settings`), told of Python's names."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    from judgeblender.errors import ArgumentError, InputError
    from judgeblender.serve.proxy import proxy_settings

    store = tmp_path / "s.sqlite"
    for kwargs, named in (({"upstream": "ftp://x"}, "upstream"), ({"host": "10.1.2.3"}, "host"),
                          ({"api_key_env": "K"}, "api_key_env"), ({"port": -1}, "port"),
                          ({"timeout_s": float("nan")}, "timeout_s")):
        with pytest.raises(ArgumentError) as caught:
            proxy_settings(**{"upstream": "http://127.0.0.1:1/v1", "store": store, **kwargs})
        assert caught.value.argument == named and str(caught.value).startswith(named + ":")
    with pytest.raises(InputError, match="chmod 600"):
        loose = tmp_path / "t.txt"
        loose.write_text(secrets.token_urlsafe(24))
        loose.chmod(0o640)
        proxy_settings("http://127.0.0.1:1/v1", store, token_file=loose)
    settings = proxy_settings("http://127.0.0.1:1/v1", store, host="0.0.0.0",
                              token_file=token_file(tmp_path, "a" * 20, "b" * 20))
    assert settings.tokens == ("a" * 20, "b" * 20) and settings.upstream_key is None
    assert not store.exists()


def test_no_key_reaches_the_store_or_the_logs_in_any_form(proxies, tmp_path):
    """The upstream echoes the key it is sent in its answers (raw, JSON-escaped, base64 and the
    other forms test_seams_secrets plants): the store file, its write-ahead log, its export and
    the proxy's stdout and stderr hold none of them, for the proxy's own key and a forwarded one."""
    from test_seams_secrets import encoded_forms

    def echo(body: dict) -> str:
        # the key the upstream was sent, in every form, in the answer: as a server echoing it would
        return " ".join(encoded_forms(up.requests[-1].headers["authorization"].split()[-1]).values())

    for mode in ("token", "forwarded"):
        key = planted_key()
        store = tmp_path / f"{mode}.sqlite"
        token = secrets.token_urlsafe(24)
        with OpenAITestServer(answers=echo) as up:
            if mode == "token":
                proxy = proxies(up.base_url, store, "--token-file", str(token_file(tmp_path, token)),
                                env={"OPENAI_API_KEY": key})
                auth = {"authorization": f"Bearer {token}"}
            else:
                proxy = proxies(up.base_url, store)
                auth = {"authorization": f"Bearer {key}"}
            answers = [proxy.chat({**ASK, "seed": i}, **auth) for i in range(3)]
            answers.append(proxy.chat({**ASK, "temperature": 0.5}, **auth))
            assert all(a[0] == 200 for a in answers)
            assert up.requests[-1].headers["authorization"] == f"Bearer {key}"
            assert proxy.chat({**ASK, "seed": 0}, **auth)[1]["x-judgeblender-cache"] == "hit"
            outputs = {"store": store.read_bytes(), "wal": Path(f"{store}-wal").read_bytes(),
                       **{f"answer {i}": a[2] for i, a in enumerate(answers)}}
            assert len(outputs["wal"]) > 0  # the answers are in the log while it runs
            assert proxy.stop() == 0
        outputs["stdout"] = proxy.stdout_first
        outputs["logs"] = proxy.logs.read_bytes()
        outputs["store after"] = store.read_bytes()
        outputs["export"] = json.dumps(exported(store, tmp_path))
        found = leaks(key, outputs) + (leaks(token, outputs) if mode == "token" else [])
        assert found == [], (mode, found)
        assert "***" in content(answers[0][2])  # the echo was there, masked


# -- rate limits -----------------------------------------------------------------------------------
def test_a_429_with_retry_after_pauses_every_client_of_the_proxys_key(proxies, tmp_path):
    """With --token-file every client's request goes upstream with the proxy's one key: a 429
    pauses them all."""
    a, b = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    with OpenAITestServer(script=[Fault("429", retry_after="2")]) as up:
        proxy = proxies(up.base_url, tmp_path / "s.sqlite", "--token-file", str(token_file(tmp_path, a, b)),
                        env={"OPENAI_API_KEY": "sk-upstream-key-0123456789"})
        started = time.monotonic()
        status, headers, _ = proxy.chat(ASK, authorization=f"Bearer {a}")
        assert status == 429 and headers["retry-after"] == "2"  # the upstream's own answer, passed back
        other = {**ASK, "messages": [{"role": "user", "content": "another client's question"}]}
        paused = []
        while time.monotonic() - started < 1.5:  # a second client, on its own connections
            status, headers, body = proxy.chat(other, authorization=f"Bearer {b}")
            paused.append((status, headers["x-judgeblender-cache"]))
            assert int(headers["retry-after"]) >= 1 and 0 < int(headers["retry-after-ms"]) <= 2000
            time.sleep(0.2)
        assert set(paused) == {(429, "paused")} and up.request_count == 1
        while time.monotonic() - started < 2.3:  # the pause counts from when the proxy had the 429
            time.sleep(0.05)
        late = proxy.chat(other, authorization=f"Bearer {b}")
        assert late[0] == 200, (late, up.outcomes())
        assert up.request_count == 2
        assert up.requests[1].started - up.requests[0].finished >= 1.95


def test_remaining_requests_zero_pauses_until_the_reset(proxies, tmp_path):
    completion = json.dumps({"id": "c", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "3"}, "finish_reason": "stop"}]}).encode()
    headers = (("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-reset-requests", "1.5s"))
    with OpenAITestServer(script=[Fault("raw", body=completion, headers=headers)]) as up:
        proxy = proxies(up.base_url, tmp_path / "s.sqlite")
        started = time.monotonic()
        first = proxy.chat(ASK)
        assert first[0] == 200 and content(first[2]) == "3"  # the answer itself is good and stored
        assert first[1]["x-ratelimit-remaining-requests"] == "0"
        assert proxy.chat(ASK)[1]["x-judgeblender-cache"] == "hit"  # the store still answers
        assert proxy.chat({**ASK, "seed": 3})[:1] == (429,)
        assert up.request_count == 1
        while time.monotonic() - started < 1.8:
            time.sleep(0.05)
        assert proxy.chat({**ASK, "seed": 3})[0] == 200 and up.request_count == 2


def test_rate_limit_headers_are_read_as_openai_writes_them():
    from judgeblender.serve.proxy import MAX_PAUSE_S, RateGate, parse_reset

    assert [parse_reset(t) for t in ("1s", "6m0s", "20ms", "1h2m3.5s", "2.5", " 7s ")] == [1, 360, 0.02, 3723.5, 2.5, 7]
    assert [parse_reset(t) for t in ("soon", "1x", "-3", "nan", "", "1s junk", None)] == [None] * 7
    gate = RateGate()
    gate.learn(200, {"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "9s"})
    assert gate.wait_s() == 0
    gate.learn(429, {"retry-after": "100000000"})  # a pause of years is cut to MAX_PAUSE_S
    assert MAX_PAUSE_S - 1 < gate.wait_s() <= MAX_PAUSE_S
    gate = RateGate()
    gate.learn(200, {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s"})
    assert 359 < gate.wait_s() <= 360


# -- whose key asked (issue 38, part 3) --------------------------------------------------------------
KEY_A, KEY_B = "Bearer sk-client-a-0123456789abcdef", "Bearer sk-client-b-0123456789abcdef"


def _refusal(status: int) -> Fault:
    """An upstream answer that depends on the key: 401, 403 or a 429 with Retry-After."""
    body = json.dumps({"error": {"message": f"refused with status {status}", "type": "key_error"}}).encode()
    headers = (("Retry-After", "2"),) if status == 429 else ()
    return Fault("raw", status=status, body=body, headers=headers)


@pytest.mark.parametrize("status", [401, 403, 429])
def test_an_error_for_one_key_is_never_handed_to_a_client_with_another(proxies, tmp_path, status):
    """Two clients with two keys ask the same deterministic question at once: the first key's
    refusal (slow, so the second arrives while it is in flight) goes to its own clients only, and
    the second key's request goes upstream and gets its own answer; a 429 pauses the first key
    only. Clients of one key still share one upstream call."""
    with OpenAITestServer(script=[_refusal(status)], delay_s=0.6) as up:
        proxy = proxies(up.base_url, tmp_path / "s.sqlite")
        with ThreadPoolExecutor(4) as pool:
            first = [pool.submit(proxy.chat, ASK, authorization=KEY_A)]
            time.sleep(0.2)  # the first key's request is upstream now
            first.append(pool.submit(proxy.chat, ASK, authorization=KEY_A))  # the same key: waits for it
            other = pool.submit(proxy.chat, ASK, authorization=KEY_B)
            a1, a2, b = first[0].result(), first[1].result(), other.result()
        assert (a1[0], a1[1]["x-judgeblender-cache"]) == (status, "error")
        assert (a2[0], a2[1]["x-judgeblender-cache"]) == (status, "shared") and a2[2] == a1[2]
        assert (b[0], b[1]["x-judgeblender-cache"]) == (200, "miss"), b
        assert [r.headers.get("authorization") for r in up.requests] == [KEY_A, KEY_B]
        question = {**ASK, "seed": 5}
        after_a = proxy.chat(question, authorization=KEY_A)
        after_b = proxy.chat(question, authorization=KEY_B)
        assert after_b[0] == 200 and after_b[1]["x-judgeblender-cache"] == "miss"  # never paused for A's 429
        if status == 429:
            assert (after_a[0], after_a[1]["x-judgeblender-cache"]) == (429, "paused")
            assert up.request_count == 3
        else:
            assert after_a[0] == 200 and up.request_count == 4  # 401 and 403 pause nothing


def test_a_cached_answer_is_shared_only_among_clients_with_the_same_key(proxies, tmp_path):
    """Forwarded keys: each key gets the answers asked with it, through a restart; a client with
    no key shares with no one who has one. The cache key holds a keyed hash of the key (a secret
    beside the store, made once, owner-only), never the key: nothing written holds it."""
    store = tmp_path / "s.sqlite"
    key_a, key_b = planted_key(), planted_key()
    with OpenAITestServer() as up:
        proxy = proxies(up.base_url, store)
        ways = [proxy.chat(ASK, **auth)[1]["x-judgeblender-cache"]
                for auth in ({"authorization": f"Bearer {key_a}"}, {"authorization": f"Bearer {key_a}"},
                             {"authorization": f"bearer {key_a}"}, {"authorization": f"Bearer {key_b}"},
                             {"authorization": f"Bearer {key_b}"}, {})]
        assert ways == ["miss", "hit", "hit", "miss", "hit", "miss"]
        assert proxy.chat(ASK, authorization=f"Basic {key_a}")[1]["x-judgeblender-cache"] == "miss"  # another scheme
        assert proxy.stop() == 0
        again = proxies(up.base_url, store)
        assert [again.chat(ASK, **auth)[1]["x-judgeblender-cache"]
                for auth in ({"authorization": f"Bearer {key_a}"}, {"authorization": f"Bearer {key_b}"}, {})
                ] == ["hit", "hit", "hit"]
        assert up.request_count == 4
        # with --token-file, the proxy's key asks for everyone: every token holder shares every answer
        token, other = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        shared = proxies(up.base_url, tmp_path / "t.sqlite", "--token-file", str(token_file(tmp_path, token, other)),
                         env={"OPENAI_API_KEY": "sk-upstream-key-0123456789"})
        assert [shared.chat(ASK, authorization=f"Bearer {t}")[1]["x-judgeblender-cache"]
                for t in (token, other)] == ["miss", "hit"]
        assert not Path(f"{tmp_path / 't.sqlite'}.proxy-secret").exists()  # no client keys: no secret
    secret = Path(f"{store}.proxy-secret")
    assert secret.stat().st_mode & 0o777 == 0o600 and len(secret.read_text().strip()) == 64
    outputs = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    outputs["export"] = json.dumps(exported(store, tmp_path))
    assert leaks(key_a, outputs) == [] and leaks(key_b, outputs) == []


def test_a_damaged_proxy_secret_is_one_error_naming_the_file(tmp_path):
    store = tmp_path / "s.sqlite"
    Path(f"{store}.proxy-secret").write_text("not hex\n")
    done = run_cli("proxy", "--upstream", "http://127.0.0.1:9/v1", "--store", str(store), "--port", "0")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: ") and f"{store}.proxy-secret" in done.stderr and "64 hex" in done.stderr


# -- single flight ---------------------------------------------------------------------------------
def test_concurrent_identical_requests_make_one_upstream_call(proxies, tmp_path):
    with OpenAITestServer(delay_s=0.5) as up:
        proxy = proxies(up.base_url, tmp_path / "s.sqlite")
        with ThreadPoolExecutor(32) as pool:
            answers = list(pool.map(lambda _: proxy.chat(ASK), range(32)))
        assert {a[0] for a in answers} == {200} and len({a[2] for a in answers}) == 1
        assert up.request_count == 1
        ways = [a[1]["x-judgeblender-cache"] for a in answers]  # one asked; the rest shared its outcome (or,
        assert ways.count("miss") == 1 and set(ways) <= {"miss", "shared", "hit"}  # arriving late, read it)
        distinct = [{**ASK, "seed": i} for i in range(16)]  # and different ones all go, side by side
        with ThreadPoolExecutor(16) as pool:
            assert {a[0] for a in pool.map(proxy.chat, distinct)} == {200}
        assert up.request_count == 17 and up.max_in_flight >= 8


# -- clients ---------------------------------------------------------------------------------------
def test_the_openai_sdk_works_through_the_proxy(proxies, tmp_path):
    import openai

    with OpenAITestServer(answers="2") as up:
        proxy = proxies(up.base_url, tmp_path / "s.sqlite")
        client = openai.OpenAI(base_url=proxy.url, api_key="sk-sdk-client-0123456789", max_retries=0)
        try:
            answers = [client.chat.completions.create(model="test-model", messages=ASK["messages"], temperature=0)
                       for _ in range(3)]
            assert [a.choices[0].message.content for a in answers] == ["2"] * 3
            assert len({a.id for a in answers}) == 1 and up.request_count == 1
            assert [m.id for m in client.models.list()] == ["test-model"]
            with pytest.raises(openai.BadRequestError):
                client.chat.completions.create(model="test-model", messages=ASK["messages"], stream=True)
        finally:
            client.close()


def test_judge_through_the_proxy_is_answered_from_its_store_the_second_time(proxies, tmp_path):
    tiny = TESTS / "data" / "tiny"
    with OpenAITestServer(answers="2") as up:
        proxy = proxies(up.base_url, tmp_path / "proxy.sqlite")
        outs = []
        for run in ("first", "second"):  # each judge run with a store of its own: only the proxy's is shared
            out = tmp_path / f"{run}.qrels"
            done = run_cli("judge", "-q", str(tiny / "queries.tsv"), "-c", str(tiny / "corpus.jsonl"),
                           "-p", str(tiny / "qrels.txt"), "-j", "openai:test-model", "--base-url", proxy.url,
                           "-o", str(out), "--store", str(tmp_path / f"{run}.sqlite"), "--no-progress")
            assert done.returncode == 0, done.stderr
            outs.append(out.read_text())
            if run == "first":
                asked = up.request_count
                assert asked > 0
        assert up.request_count == asked  # the second run's calls were all answered by the proxy's store
        assert outs[0] == outs[1] and outs[0].count(" 2\n") == asked


# -- stopping --------------------------------------------------------------------------------------
def test_sigkill_then_restart_serves_every_answer_returned_before(proxies, tmp_path):
    store = tmp_path / "s.sqlite"
    with OpenAITestServer(answers=lambda body: str(body.get("seed"))) as up:
        proxy = proxies(up.base_url, store)
        bodies = [{**ASK, "seed": i} for i in range(20)]
        with ThreadPoolExecutor(8) as pool:
            before = list(pool.map(proxy.chat, bodies))
        assert {b[0] for b in before} == {200}
        proxy.proc.kill()  # SIGKILL: no shutdown, no checkpoint
        proxy.proc.wait()
        assert Path(f"{store}-wal").stat().st_size > 0
        again = proxies(up.base_url, store)
        after = [again.chat(body) for body in bodies]
        assert [a[2] for a in after] == [b[2] for b in before]
        assert {a[1]["x-judgeblender-cache"] for a in after} == {"hit"} and up.request_count == 20


def test_sigterm_finishes_the_request_in_flight_and_exits_0(proxies, tmp_path):
    store = tmp_path / "s.sqlite"
    with OpenAITestServer(delay_s=1.0) as up:
        proxy = proxies(up.base_url, store)
        answer: list = []
        asking = threading.Thread(target=lambda: answer.append(proxy.chat(ASK)))
        asking.start()
        while up.request_count == 0:
            time.sleep(0.02)
        assert proxy.stop(signal.SIGTERM) == 0
        asking.join()
        assert answer[0][0] == 200
        assert "Traceback" not in proxy.logs.read_text()
    with sqlite3.connect(store) as db:  # committed before it was returned
        assert db.execute("SELECT COUNT(*) FROM calls").fetchone()[0] == 1


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs `unshare` (util-linux) for a private mount")
def test_a_full_disk_returns_no_answer_it_could_not_keep(proxies, tmp_path):
    """The store on a tmpfs of 600 KB, in a mount namespace of the proxy's own: answers of 30 KB
    fill it. The call that cannot be committed is a 507, not an answer; every answer returned
    before it is served from the store afterwards, and the one refused is asked again."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = ("unshare", "--mount", "--propagation", "private", "sh", "-c",
             'mount -t tmpfs -o size=600k tmpfs "$0" && exec "$@"', str(disk))
    with OpenAITestServer(answers=lambda body: hashlib.sha256(str(body["seed"]).encode()).hexdigest() * 470) as up:
        proxy = proxies(up.base_url, disk / "s.sqlite", prefix=mount)
        returned = {}
        for seed in range(200):
            status, headers, body = proxy.chat({**ASK, "seed": seed})
            if status != 200:
                break
            returned[seed] = body
        assert status == 507, (status, body[:300])
        error = json.loads(body)["error"]["message"]
        assert "could not store the answer" in error and "s.sqlite" in error
        assert len(returned) >= 3
        asked = up.request_count
        for seed, body in returned.items():
            again = proxy.chat({**ASK, "seed": seed})
            assert again[2] == body and again[1]["x-judgeblender-cache"] == "hit", seed
        assert up.request_count == asked
        assert proxy.chat({**ASK, "seed": len(returned)})[0] == 507  # not stored: asked again, still no room
        assert up.request_count == asked + 1


# -- the extra -------------------------------------------------------------------------------------
def test_the_serve_extra_is_loaded_only_by_the_command_and_its_absence_is_one_error(tmp_path):
    code = ("import sys, judgeblender, judgeblender.cli as c; c.build_app(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'uvicorn', 'prometheus_client')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr
    blocked = tmp_path / "blocked"
    (blocked / "starlette").mkdir(parents=True)
    (blocked / "starlette" / "__init__.py").write_text("raise ImportError('starlette is not installed')\n")
    done = subprocess.run([sys.executable, "-m", "judgeblender", "proxy", "--upstream", "http://127.0.0.1:1/v1",
                           "--store", str(tmp_path / "s.sqlite")], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(blocked), os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 2 and "judgeblender[serve]" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_bounded_load_of_2000_requests_at_concurrency_64_against_a_50_ms_upstream(proxies, tmp_path):
    """Issue 33, part 4: 2,000 distinct deterministic requests from 64 clients at once, each on its
    own keep-alive connection, through the proxy to an upstream that answers after 50 ms: every one
    answered with its own answer and passed through once; then the same 2,000 again, every one from
    the store, with no upstream call."""
    n, clients = 2000, 64
    bodies = [{**ASK, "messages": [{"role": "user", "content": f"question {i}"}]} for i in range(n)]

    def answer(body):  # each request's own answer, so a mix-up between requests shows
        return "answer to " + body["messages"][-1]["content"]

    with OpenAITestServer(answer, delay_s=0.05, max_requests=10**6) as up:
        proxy = proxies(up.base_url, tmp_path / "s.sqlite")

        def run_share(share: list[dict]) -> list[tuple[int, str, str]]:
            conn = http.client.HTTPConnection(proxy.address, timeout=120)
            out = []
            try:
                for body in share:
                    conn.request("POST", "/v1/chat/completions", json.dumps(body).encode(),
                                 {"content-type": "application/json"})
                    response = conn.getresponse()
                    data = json.loads(response.read())
                    out.append((response.status, response.getheader("x-judgeblender-cache"),
                                data["choices"][0]["message"]["content"] if response.status == 200 else data))
            finally:
                conn.close()
            return out

        def everyone() -> list[tuple[int, str, str]]:
            shares = [bodies[i::clients] for i in range(clients)]
            with ThreadPoolExecutor(clients) as pool:
                results = list(pool.map(run_share, shares))
            # back in the bodies' order
            ordered: list = [None] * n
            for i, share in enumerate(results):
                for j, result in enumerate(share):
                    ordered[i + j * clients] = result
            return ordered

        first = everyone()
        assert [r[0] for r in first] == [200] * n
        assert [r[2] for r in first] == [answer(b) for b in bodies]
        assert {r[1] for r in first} <= {"miss", "shared"} and up.request_count == n
        again = everyone()
        assert [r[0] for r in again] == [200] * n and {r[1] for r in again} == {"hit"}
        assert [r[2] for r in again] == [answer(b) for b in bodies]
        assert up.request_count == n  # nothing asked upstream the second time
