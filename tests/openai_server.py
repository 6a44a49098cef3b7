"""A small OpenAI-compatible HTTP server for tests and benchmarks (standard library only).

It binds 127.0.0.1 on a free port, serves `POST /v1/chat/completions` and `GET /v1/models`,
and can be scripted to misbehave, so clients are tested against real HTTP, not mocks.

    with OpenAITestServer(answers={"capital": "2"}, script=["429", "500"]) as srv:
        backend = create("m", base_url=srv.base_url)
        ...
        assert srv.request_count == 3

Behaviour of each chat request, in order of precedence:
1. request number > `max_requests`: 503 "request budget exhausted", then the server stops;
2. the next entry of `script` (consumed in arrival order), when one is left;
3. otherwise a random fault drawn from `fault_rates` (seeded), when any;
4. otherwise a normal answer after `delay_s`.

Faults (strings in `script` / keys of `fault_rates`, or `Fault(kind, ...)` for parameters):
    "ok"                normal answer (useful to interleave in a script)
    "429"               429 with a Retry-After header (`retry_after`, seconds, default "0.1")
    "500" "502" "503" "504"   that status with an OpenAI-style error body
    "400"               400 with `message` (default "bad request")
    "reject_logprobs"   400 "logprobs is not supported for this model"
    "hang"              sleeps `hang_s` (default 5 s) before answering, to trip client timeouts
    "close"             closes the connection without sending a response
    "close_mid"         sends headers and part of the body, then closes the connection
    "malformed_json"    200, Content-Type application/json, body that is not JSON
    "empty_choices"     200 with "choices": []
    "no_content"        200 with a message whose content is null
    "garbage"           200 with the text `message` (default "I cannot decide.")
    "no_logprobs"       200 answer without any logprobs even when they were asked for
    "finish_null"       200 answer whose finish_reason is null
    "finish_missing"    200 answer whose choice has no finish_reason at all
    "raw"               the bytes `body` as they are (Content-Type application/json), with
                        status `status` (default 200) and any `headers` (name, value) pairs
Any 200 answer can go out gzip-encoded (`gzip=True`, with Content-Encoding: gzip, whatever
the client accepts) and/or chunked (`chunked=True`: Transfer-Encoding: chunked, no
Content-Length), e.g. `Fault("ok", chunked=True)` or `Fault("raw", body=..., gzip=True)`.

Answers: `answers` is a string, a dict {substring of the last user message: answer} (first
match wins, else `default_answer`), or a callable(body) -> str.  Log-probabilities, for requests
with "logprobs": true, come from `top_logprobs` in the same three shapes, each value a list of
(token, logprob) pairs; the generated token is the one with the highest logprob.  Without
`top_logprobs`, the answer's text is given logprob 0.0 and is its own only alternative.
`finish_reason` (a string, or a callable(body) -> str or None) overrides the answer's finish
reason, which is otherwise "length" for max_tokens 1 and "stop" else.

Every request is recorded (method, path, headers, parsed body, timings, what was done), the
number in flight is tracked (`max_in_flight`), and the server stops by itself after
`max_requests` requests or `max_lifetime_s` seconds.
"""

from __future__ import annotations

import gzip
import json
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

try:  # fixtures only when pytest is importable (benchmarks may import this module without it)
    import pytest
except ImportError:  # pragma: no cover
    pytest = None  # type: ignore[assignment]

Answers = str | dict[str, str] | Callable[[dict[str, Any]], str]
TopLogprobs = list[tuple[str, float]] | dict[str, list[tuple[str, float]]] | Callable[[dict[str, Any]], list[tuple[str, float]]]

FAULT_KINDS = frozenset(
    {
        "ok",
        "429",
        "500",
        "502",
        "503",
        "504",
        "400",
        "reject_logprobs",
        "hang",
        "close",
        "close_mid",
        "malformed_json",
        "empty_choices",
        "no_content",
        "garbage",
        "no_logprobs",
        "finish_null",
        "finish_missing",
        "raw",
    }
)


@dataclass(frozen=True)
class Fault:
    kind: str
    retry_after: str | None = "0.1"  # 429: the Retry-After header value (None: no header)
    hang_s: float | None = None  # hang: how long to sleep (default: the server's hang_s)
    message: str | None = None  # 400 / garbage: the message or text
    body: bytes | None = None  # raw: the response body
    gzip: bool = False  # a 200 answer goes out with Content-Encoding: gzip
    chunked: bool = False  # a 200 answer goes out with Transfer-Encoding: chunked, no Content-Length
    status: int = 200  # raw: the status
    headers: tuple[tuple[str, str], ...] = ()  # raw: more response headers

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {self.kind!r}; known: {sorted(FAULT_KINDS)}")


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or the raw text when it was not JSON
    started: float
    finished: float = 0.0
    outcome: str = ""  # "ok" or the fault kind that was applied
    number: int = 0  # 1-based arrival number among chat-completion requests (0 for others)

    @property
    def last_user_message(self) -> str:
        return _last_user_text(self.body if isinstance(self.body, dict) else {})


def _last_user_text(body: dict[str, Any]) -> str:
    for msg in reversed(body.get("messages") or []):
        if isinstance(msg, dict) and msg.get("role") == "user":
            content = msg.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # content parts
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # listen backlog: 64+ clients connect at once in the benchmark

    def __init__(self, owner: OpenAITestServer):
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so clients can reuse connections
    # Headers and body go out in separate writes; with Nagle on, a keep-alive client's delayed
    # ACK would stall each response by ~40 ms.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # quiet; everything is recorded on the owner instead

    # --- plumbing -------------------------------------------------------------------
    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self._send_bytes(status, data, "application/json", headers)

    def _send_bytes(self, status: int, data: bytes, ctype: str, headers: dict[str, str] | None = None,
                    chunked: bool = False) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if chunked:
                for start in range(0, len(data), 1 << 16):
                    piece = data[start:start + (1 << 16)]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the client went away (timed out, or stopped reading)

    def _error(self, status: int, message: str, etype: str = "server_error", headers: dict[str, str] | None = None) -> None:
        self._send_json(status, {"error": {"message": message, "type": etype, "code": None}}, headers)

    def _read_body(self) -> tuple[bytes, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return raw, json.loads(raw.decode() or "null")
        except (UnicodeDecodeError, json.JSONDecodeError):
            return raw, raw.decode("utf-8", "replace")

    # --- endpoints ------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        owner = self.server.owner
        rec = owner._begin(self, None)
        try:
            if self.path.rstrip("/") == "/v1/models":
                rec.outcome = "ok"
                self._send_json(200, {"object": "list", "data": [{"id": owner.model, "object": "model", "owned_by": "test"}]})
            else:
                rec.outcome = "404"
                self._error(404, f"no route {self.path}", "invalid_request_error")
        finally:
            owner._end(rec)

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        owner = self.server.owner
        _, body = self._read_body()
        rec = owner._begin(self, body)
        try:
            if self.path.rstrip("/") != "/v1/chat/completions":
                rec.outcome = "404"
                self._error(404, f"no route {self.path}", "invalid_request_error")
                return
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                rec.outcome = "400"
                self._error(400, "request body must be a JSON object with 'messages'", "invalid_request_error")
                return
            if rec.number > owner.max_requests or owner.stopped:
                rec.outcome = "budget_exhausted"
                self._error(503, "request budget exhausted; the test server is stopping")
                self.close_connection = True
                owner._stop_soon()
                return
            fault = owner._next_fault()
            rec.outcome = fault.kind
            self._apply(owner, fault, body)
        finally:
            owner._end(rec)

    def _apply(self, owner: OpenAITestServer, fault: Fault, body: dict[str, Any]) -> None:
        kind = fault.kind
        if kind == "429":
            headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
            self._error(429, "Rate limit reached, slow down", "rate_limit_error", headers)
        elif kind in {"500", "502", "503", "504"}:
            self._error(int(kind), f"upstream failure {kind}")
        elif kind == "400":
            self._error(400, fault.message or "bad request", "invalid_request_error")
        elif kind == "reject_logprobs":
            self._error(400, "logprobs is not supported for this model", "invalid_request_error")
        elif kind == "close":
            self.close_connection = True
            self._hard_close()
        elif kind == "close_mid":
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "4096")
                self.end_headers()
                self.wfile.write(b'{"id": "chatcmpl-x", "choi')
                self.wfile.flush()
            except OSError:
                pass
            self.close_connection = True
            self._hard_close()
        elif kind == "malformed_json":
            self._send_bytes(200, b'{"id": "chatcmpl-x", "choices": [ {oops', "application/json")
        else:
            if kind == "hang":
                owner._stopped.wait(fault.hang_s if fault.hang_s is not None else owner.hang_s)
            elif owner.delay_s > 0:
                owner._stopped.wait(owner.delay_s)
            if kind == "raw":
                data = fault.body or b""
            else:
                data = json.dumps(owner._completion(body, fault)).encode()
            headers = dict(fault.headers)
            if fault.gzip:
                data = gzip.compress(data)
                headers["Content-Encoding"] = "gzip"
            self._send_bytes(fault.status, data, "application/json", headers, chunked=fault.chunked)

    def _hard_close(self) -> None:
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class OpenAITestServer:
    """A scripted OpenAI-compatible server on 127.0.0.1; use as a context manager."""

    def __init__(
        self,
        answers: Answers = "2",
        *,
        default_answer: str = "2",
        top_logprobs: TopLogprobs | None = None,
        script: list[str | Fault] | None = None,
        fault_rates: dict[str, float] | None = None,
        delay_s: float = 0.0,
        hang_s: float = 5.0,
        max_requests: int = 1000,
        max_lifetime_s: float = 300.0,
        model: str = "test-model",
        seed: int = 0,
        finish_reason: str | Callable[[dict[str, Any]], str | None] | None = None,
    ):
        self.answers = answers
        self.default_answer = default_answer
        self.top_logprobs = top_logprobs
        self._script: list[Fault] = [f if isinstance(f, Fault) else Fault(f) for f in (script or [])]
        self.fault_rates = {k: float(v) for k, v in (fault_rates or {}).items()}
        for k in self.fault_rates:
            Fault(k)  # validates the name
        if sum(self.fault_rates.values()) > 1.0:
            raise ValueError("fault rates add up to more than 1")
        self.delay_s = delay_s
        self.hang_s = hang_s
        self.max_requests = max_requests
        self.max_lifetime_s = max_lifetime_s
        self.model = model
        self.finish_reason = finish_reason
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self.requests: list[RecordedRequest] = []
        self._chat_count = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # --- lifecycle ------------------------------------------------------------------
    def start(self) -> OpenAITestServer:
        if self._httpd is not None:
            raise RuntimeError("server already started")
        self._httpd = _Server(self)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.max_lifetime_s, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        with self._lock:
            if self._stopped.is_set() or self._httpd is None:
                self._stopped.set()
                return
            self._stopped.set()
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.cancel()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _stop_soon(self) -> None:
        # shutdown() must not run on a handler thread that serve_forever waits for.
        threading.Thread(target=self.stop, daemon=True).start()

    def __enter__(self) -> OpenAITestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # --- scripting ------------------------------------------------------------------
    def push(self, *faults: str | Fault) -> None:
        """Append entries to the script (consumed by the next requests)."""
        with self._lock:
            self._script.extend(f if isinstance(f, Fault) else Fault(f) for f in faults)

    def _next_fault(self) -> Fault:
        with self._lock:
            if self._script:
                return self._script.pop(0)
            if self.fault_rates:
                x = self._rng.random()
                acc = 0.0
                for kind, rate in self.fault_rates.items():
                    acc += rate
                    if x < acc:
                        return Fault(kind)
        return Fault("ok")

    # --- recording ------------------------------------------------------------------
    def _begin(self, handler: _Handler, body: Any) -> RecordedRequest:
        rec = RecordedRequest(
            method=handler.command,
            path=handler.path,
            headers={k.lower(): v for k, v in handler.headers.items()},
            body=body,
            started=time.monotonic(),
        )
        with self._lock:
            self.requests.append(rec)
            if handler.command == "POST":
                self._chat_count += 1
                rec.number = self._chat_count
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return rec

    def _end(self, rec: RecordedRequest) -> None:
        rec.finished = time.monotonic()
        with self._lock:
            self.in_flight -= 1

    @property
    def request_count(self) -> int:
        """POST requests (chat completions) received so far."""
        with self._lock:
            return sum(1 for r in self.requests if r.method == "POST")

    def outcomes(self) -> list[str]:
        with self._lock:
            return [r.outcome for r in self.requests]

    def reset_counters(self) -> None:
        with self._lock:
            self.requests.clear()
            self.max_in_flight = self.in_flight

    # --- answers --------------------------------------------------------------------
    def _answer_text(self, body: dict[str, Any]) -> str:
        a = self.answers
        if callable(a):
            return a(body)
        if isinstance(a, dict):
            text = _last_user_text(body)
            for needle, answer in a.items():
                if needle in text:
                    return answer
            return self.default_answer
        return a

    def _alternatives(self, body: dict[str, Any], text: str) -> list[tuple[str, float]]:
        t = self.top_logprobs
        if t is None:
            return [(text, 0.0)]
        if callable(t):
            return list(t(body))
        if isinstance(t, dict):
            user = _last_user_text(body)
            for needle, alts in t.items():
                if needle in user:
                    return list(alts)
            return [(text, 0.0)]
        return list(t)

    def _finish_reason(self, body: dict[str, Any], max_tokens: Any) -> str:
        f = self.finish_reason
        chosen = f(body) if callable(f) else f
        return chosen or ("length" if max_tokens == 1 else "stop")

    def _completion(self, body: dict[str, Any], fault: Fault) -> dict[str, Any]:
        want_logprobs = bool(body.get("logprobs")) and fault.kind != "no_logprobs"
        text: str | None = self._answer_text(body)
        if fault.kind == "garbage":
            text = fault.message or "I cannot decide."
        logprobs = None
        if want_logprobs:
            alts = sorted(self._alternatives(body, text or ""), key=lambda p: p[1], reverse=True)
            k = int(body.get("top_logprobs") or 0)
            token, lp = alts[0]
            text = token
            logprobs = {
                "content": [
                    {
                        "token": token,
                        "logprob": lp,
                        "bytes": list(token.encode()),
                        "top_logprobs": [
                            {"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in alts[:k]
                        ],
                    }
                ],
                "refusal": None,
            }
        if fault.kind == "no_content":
            text = None
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        choices: list[dict[str, Any]] = [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": self._finish_reason(body, max_tokens),
                "logprobs": logprobs,
            }
        ]
        if fault.kind == "finish_null":
            choices[0]["finish_reason"] = None
        elif fault.kind == "finish_missing":
            del choices[0]["finish_reason"]
        if fault.kind == "empty_choices":
            choices = []
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body["messages"] if isinstance(m, dict))
        completion_tokens = len((text or "").split()) or (1 if text else 0)
        return {
            "id": f"chatcmpl-{self._rng.randrange(1 << 30):x}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "system_fingerprint": "fp_test",
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


@contextmanager
def openai_test_server(**kwargs: Any) -> Iterator[OpenAITestServer]:
    """`with openai_test_server(answers=...) as srv:` — same as OpenAITestServer(...) as a context manager."""
    srv = OpenAITestServer(**kwargs)
    with srv:
        yield srv


def _openai_server_factory() -> Iterator[Callable[..., OpenAITestServer]]:
    """A factory fixture: `srv = openai_server_factory(answers=..., script=[...])`, stopped at teardown."""
    started: list[OpenAITestServer] = []

    def make(**kwargs: Any) -> OpenAITestServer:
        srv = OpenAITestServer(**kwargs).start()
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop()


def _openai_server() -> Iterator[OpenAITestServer]:
    """A default server (answers "2"), stopped at teardown."""
    with OpenAITestServer() as srv:
        yield srv


if pytest is not None:
    openai_server_factory = pytest.fixture(_openai_server_factory, name="openai_server_factory")
    openai_server = pytest.fixture(_openai_server, name="openai_server")
