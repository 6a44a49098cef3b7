"""`judgeblender proxy`: an OpenAI-compatible caching proxy in front of one served model endpoint.

Any OpenAI client (the SDK, judgeblender's own `openai:` judges, another tool) pointed at it
shares one judgeblender store: a deterministic chat request (temperature 0, or a seed given)
identical to one already answered is answered from the store, without an upstream call; every
other request passes through and its answer is stored too. A proxied call is a stored call like
any other (`store stats`, `store export` show it): its key is `calls.call_key`'s definition, the
sha256 of the canonical JSON of {"identity", "request"}, where the identity is the upstream's
public URL and the model and the request is the whole body but `model`, `stream` and `user` (the
only fields that cannot change the answer), so two models, two upstreams or any changed
parameter never share an answer. A chat body is richer than the store's row shape (content
parts, tool calls, any parameter), so the row keeps each message as [role, text] (a message that
is not plain text as its JSON), every parameter as the row's settings, and the upstream's JSON
body, as it was returned, as the raw output.

Why it is built as it is:
- an answer is returned only once it is committed, so a proxy killed at any moment has every
  answer it returned in its store, and a restart serves them without an upstream call. Its row
  goes in by the store's one door (CallStore.put_many_later) and is made and committed by the
  store's writer process (on POSIX), so the event loop neither blocks on the commit nor hands
  it to a thread;
- a failed upstream call (an error status, a body that is not a completion, a finish reason that
  says the call failed) is passed back with its status and never stored as an answer;
- concurrent identical deterministic requests make one upstream call (single flight): the first
  asks, the rest wait for its outcome;
- what is shared follows whose key asked. With --token-file the proxy's own key asks for every
  client, so every token holder shares every answer. With forwarded keys (no --token-file) each
  client's key is its own account upstream: an answer, an error (a 401, 403 or 429 depends on
  the key) and a request in flight are shared only among clients presenting the same key, and
  the cache key holds a keyed hash of it (HMAC-SHA256 under a per-store secret, `client_of`),
  never the key in any form: a stored answer is not served to a client whose key the upstream
  never saw, who might not be allowed that model at all;
- the upstream's rate limits are learned from its headers, per key (one for every client with
  --token-file; one per forwarded key, so one client's 429 pauses only that client's key):
  after a 429 with Retry-After, or `x-ratelimit-remaining-requests: 0`, no request with that key
  goes upstream until the pause is over; a client that would have been sent upstream meanwhile
  gets a 429 at once, with Retry-After, which every OpenAI client honours (holding it instead
  would pile connections up on the proxy). Cached answers are still served during a pause;
- streaming requests are refused (400): a streamed answer reaches the client before it could be
  committed, and could be neither stored whole nor replayed;
- no key is stored or logged: keys travel in headers, never in a key or a row, and every key the
  proxy sees (the upstream key, each forwarded client key, the proxy tokens) is registered with
  `masking`, which masks every form of it in the store's rows and in every log line.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import arguments, masking
from ..backends.openai_compat import parse_retry_after
from ..backends.openai_keys import resolve_api_key
from ..masking import public_base_url
from ..calls import FAILED_CALL, CallRequest, CallResult, Message, canonical_json, store_key
from ..errors import ArgumentError, BackendError, InputError, JudgeblenderError, shown
from ..flight import SingleFlight
from ..hashing import hmac_sha256_text, sha256_text
from ..store import CallStore
from ..store.rows import CallRow
from .server import bearer_allowed, bind, is_loopback, read_tokens, run, url_of

# The largest request body read (a long prompt with tools fits many times over); larger: 413.
MAX_BODY_BYTES = 16 * 1024 * 1024
# The largest upstream answer relayed; larger: 502, nothing stored.
MAX_ANSWER_BYTES = 32 * 1024 * 1024
# How deep a request's JSON may nest: real tool schemas nest a dozen levels; deeper is hostile
# (and would exhaust the JSON codec's recursion).
MAX_DEPTH = 64
# Body fields that cannot change the answer, left out of the cache key (model is in the identity).
NOT_IN_KEY = frozenset({"model", "stream", "user"})
BACKEND = "proxy"
# A forwarded key shorter than this is a placeholder for a server that needs none (judgeblender's
# `unused`, vLLM's `EMPTY`), not a secret: masking it would cut that word out of every answer.
MIN_KEY_CHARS = 16


@dataclass(frozen=True)
class ProxiedRequest(CallRequest):
    """A chat-completions body as the store holds a call's request: its messages as [role, text]
    pairs (the row's messages) and its parameters (every field but the messages and those in
    NOT_IN_KEY) as the row's settings; the key covers the messages whole (`wire`), so two bodies
    whose text pairs look alike never share an answer."""

    wire: tuple = ()
    parameters: dict = field(default_factory=dict)

    def key_fields(self) -> dict[str, Any]:
        return {"messages": list(self.wire), **self.parameters}

    def settings_key(self) -> None:
        return None  # its settings are any JSON: never a dictionary key (calls.CallRequest.settings_key)


def _as_text(message: dict[str, Any]) -> str:
    """A message as the row's text: its content where that is all it holds, else its JSON."""
    if set(message) == {"role", "content"} and isinstance(message["content"], str):
        return message["content"]
    return canonical_json({k: v for k, v in message.items() if k != "role"})


def proxied_request(body: dict[str, Any]) -> ProxiedRequest:
    """The store's request for a chat body (checked by `check_body`)."""
    return ProxiedRequest(messages=tuple(Message(m["role"], _as_text(m)) for m in body["messages"]),
                          wire=tuple(body["messages"]),
                          parameters={k: v for k, v in body.items() if k not in NOT_IN_KEY and k != "messages"})


def _integral(value: Any) -> Any:
    """`value` with every float that is a whole number written as an int, so `"temperature": 0`
    and `0.0` are one key (JSON gives them two spellings; no server tells them apart)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


def identity_of(upstream: str, model: str) -> dict[str, Any]:
    """The identity a proxied call is stored under: the upstream's public URL (no credentials in
    it) and the model, so two upstreams or two models never share an answer."""
    return {"api": "chat.completions", "model": model, "upstream": public_base_url(upstream)}


def cache_key(upstream: str, body: dict[str, Any], client: str | None = None) -> str:
    """The store key of a chat body sent to `upstream` (calls.store_key, with the
    whole messages: see the module's docstring). `client`, where answers are shared only among
    the clients of one key, is that key's keyed hash (`client_of`); None (every client shares the
    answer) leaves the key as it always was."""
    request = _integral({k: v for k, v in body.items() if k not in NOT_IN_KEY})
    return store_key(identity_of(upstream, body["model"]), request, client)


# The per-store secret that keys clients' keys (`client_secret`): 32 random bytes, in hex.
SECRET_SUFFIX = ".proxy-secret"


def client_secret(store: Path) -> bytes:
    """The store's secret for hashing clients' keys, kept beside it (STORE.proxy-secret, readable
    by its owner only) and made the first time: a restarted proxy finds each client's answers
    again, and a store copied without it only asks again. Made under a name of its own, then
    linked into place, so two proxies starting on one store at once agree on one secret."""
    path = Path(f"{store}{SECRET_SUFFIX}")
    if not path.exists():
        draft = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(os.urandom(32).hex() + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            try:
                os.link(draft, path)
            except FileExistsError:
                pass  # another proxy made it first: its secret is the store's
        finally:
            draft.unlink(missing_ok=True)
    try:
        text = path.read_text(encoding="ascii").strip()
        secret = bytes.fromhex(text)
    except OSError as exc:
        raise InputError(path, None, "the store's proxy secret, readable", exc.strerror or type(exc).__name__) from None
    except (UnicodeDecodeError, ValueError):
        secret = b""
    if len(secret) != 32:
        raise InputError(path, 1, "the store's proxy secret: 64 hex digits, as the proxy wrote it", None,
                         hint="remove the file to make a new one (answers stored per client key are then asked again)")
    return secret


def deterministic(body: dict[str, Any]) -> bool:
    """Whether a request asks for the same answer every time: temperature 0, or a seed given.
    (Without a temperature, OpenAI's default is 1: a sample.)"""
    return body.get("seed") is not None or body.get("temperature") == 0


class BadRequest(Exception):
    """A request the proxy refuses: its HTTP status and one message naming the field."""

    def __init__(self, status: int, message: str, field: str | None = None):
        super().__init__(message)
        self.status = status
        self.field = field


def _depth(value: Any) -> int:
    """How deep a JSON value nests, counted without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if level > MAX_DEPTH:
            break
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def _got(value: Any) -> str:
    """A value a client sent, as an error shows it: cut visibly, and masked."""
    return masking.text(shown(value, 80))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _number(body: dict[str, Any], name: str, *, integer: bool = False) -> None:
    value = body.get(name)
    if value is None:
        return
    ok = isinstance(value, int) if integer else isinstance(value, (int, float)) and math.isfinite(value)
    if not ok or isinstance(value, bool):
        raise BadRequest(400, f"{name}: expected {'an integer' if integer else 'a number'}, got {_got(value)}", name)


def check_body(raw: bytes) -> dict[str, Any]:
    """The request's JSON, checked for what the proxy itself reads (model, messages, stream and
    the fields that decide whether it is cached); the rest is the upstream's to judge."""
    try:
        body = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise BadRequest(400, f"the body nests deeper than {MAX_DEPTH} levels") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(400, f"the body is not JSON ({str(exc)[:120]})") from None
    if not isinstance(body, dict):
        raise BadRequest(400, f"the body: expected a JSON object, got {type(body).__name__}")
    if _depth(body) > MAX_DEPTH:
        raise BadRequest(400, f"the body nests deeper than {MAX_DEPTH} levels")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise BadRequest(400, f"model: expected the model's name (a non-empty string), got {_got(model)}", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest(400, "messages: expected a non-empty list of messages", "messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise BadRequest(400, f"messages[{i}]: expected an object with a string 'role'", f"messages[{i}]")
    stream = body.get("stream")
    if stream is not None and stream is not False:
        if stream is not True:
            raise BadRequest(400, "stream: expected true or false", "stream")
        raise BadRequest(400, "stream: the proxy does not stream (a streamed answer could not be committed before "
                         "it is returned); send \"stream\": false", "stream")
    _number(body, "temperature")
    _number(body, "seed", integer=True)
    _number(body, "n", integer=True)
    return body


# -- rate limits -----------------------------------------------------------------------------------
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_reset(text: str | None) -> float | None:
    """Seconds in an `x-ratelimit-reset-*` header: OpenAI's durations ("1s", "6m0s", "20ms",
    "1h2m3.5s") or plain seconds; None when it is neither."""
    if text is None:
        return None
    text = text.strip()
    try:
        value = float(text)
        return value if math.isfinite(value) and value >= 0 else None
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


# A 429 without a Retry-After, or a "remaining: 0" without a reset time: how long to pause.
DEFAULT_PAUSE_S = 1.0
# The longest pause learned from one answer: an upstream asking for hours (a misread date, a bug)
# would otherwise refuse every client for as long; after it, the next call asks again.
MAX_PAUSE_S = 600.0


class RateGate:
    """The upstream's rate limits as learned from its answers' headers, one per key that asks
    (Proxy.gate): `wait_s()` is how long no request with that key may go upstream yet (0: go)."""

    def __init__(self) -> None:
        self.until = 0.0  # time.monotonic() when requests may go upstream again

    def wait_s(self) -> float:
        return max(0.0, self.until - time.monotonic())

    def learn(self, status: int, headers: Any) -> None:
        pause = None
        if status == 429:
            pause = parse_retry_after(dict(headers))
            pause = DEFAULT_PAUSE_S if pause is None else pause
        remaining = headers.get("x-ratelimit-remaining-requests")
        if remaining is not None and remaining.strip() == "0":
            reset = parse_reset(headers.get("x-ratelimit-reset-requests"))
            pause = max(pause or 0.0, DEFAULT_PAUSE_S if reset is None else reset)
        if pause:
            self.until = max(self.until, time.monotonic() + min(pause, MAX_PAUSE_S))


# Rate gates kept before those whose pause is over are dropped (Proxy.gate).
MAX_GATES = 1024


# -- configuration ---------------------------------------------------------------------------------
@dataclass
class ProxySettings:
    """What a proxy serves: checked by `proxy_settings`, the one place the CLI and Python both go."""

    upstream: str
    store: Path
    host: str = "127.0.0.1"
    port: int = 0
    tokens: tuple[str, ...] | None = None  # None: the client's Authorization is forwarded upstream
    upstream_key: str | None = field(default=None, repr=False)  # with tokens: the key sent upstream
    timeout_s: float = 600.0


def proxy_settings(upstream: str, store: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int = 0,
                   token_file: str | os.PathLike[str] | None = None, api_key_env: str | None = None,
                   timeout_s: float = 600.0) -> ProxySettings:
    """Check a proxy's arguments (named as Python's; the CLI renames them to its flags). The
    upstream's credentials (user:password@) are masked from here on, its errors included."""
    masking.register_url(upstream)
    if not isinstance(upstream, str) or not re.match(r"^https?://[^/\s]+", upstream or ""):
        raise ArgumentError("upstream", "the upstream's base URL, http:// or https:// (as base_url takes it, e.g. "
                            "http://127.0.0.1:8000/v1)", upstream)
    if not arguments.in_bounds("port", port):
        raise ArgumentError("port", "a port number from 0 (any free port) to 65535", port)
    if not (isinstance(timeout_s, (int, float)) and math.isfinite(timeout_s) and timeout_s > 0):
        raise ArgumentError("timeout_s", "a positive number of seconds", timeout_s)
    if token_file is None:
        if not is_loopback(host):
            raise ArgumentError("host", "a loopback address (127.0.0.1, ::1, localhost) without token_file", host,
                                hint="beyond loopback the proxy must check bearer tokens: pass token_file")
        if api_key_env is not None:
            raise ArgumentError("api_key_env", "nothing without token_file (each client's own key is forwarded "
                                "upstream)", api_key_env, hint="pass token_file to send the proxy's own key upstream")
        return ProxySettings(upstream, Path(store), host, port, None, None, float(timeout_s))
    # like an API key file: only its owner may read it, and no token is short enough to guess
    tokens = tuple(read_tokens(token_file, owner_only=True, min_length=16))
    try:
        key = resolve_api_key(api_key_env or "OPENAI_API_KEY", None, upstream)
    except BackendError as exc:
        raise ArgumentError("api_key_env", "an environment variable holding the upstream's API key",
                            api_key_env or "OPENAI_API_KEY", hint=str(exc)) from None
    return ProxySettings(upstream, Path(store), host, port, tokens, key, float(timeout_s))


# -- the app ---------------------------------------------------------------------------------------
@dataclass
class Outcome:
    """What one request is answered with: the status, the body's bytes, the headers to pass on
    and how it was answered: "hit" (from the store), "miss" (asked upstream, stored), "shared" (the
    outcome of the same request asked at the same time), "pass" (a sample: asked, stored, never
    looked up), "paused" (the upstream's rate limit) or "error" (refused, or the upstream failed)."""

    status: int
    body: bytes
    headers: dict[str, str]
    cache: str


def _error_body(message: str, kind: str, field_name: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": field_name, "code": None}}).encode()


# Upstream answer headers passed back to the client
PASSED_HEADERS = ("content-type", "retry-after", "retry-after-ms", "x-ratelimit-limit-requests",
                  "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests", "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens",
                  "x-ratelimit-reset-tokens", "x-request-id")


class Proxy:
    """The proxy's state (store, upstream client, rate gate, requests in flight) and its work,
    apart from Starlette's routing (`make_app`)."""

    def __init__(self, settings: ProxySettings):
        self.settings = settings
        self.base = settings.upstream.rstrip("/")
        self._tokens = [t.encode() for t in settings.tokens] if settings.tokens is not None else None
        for token in settings.tokens or ():
            masking.register(token)
        masking.register(settings.upstream_key)
        self.store = CallStore(settings.store)
        # with forwarded keys, whose answers a request shares is told by its key's keyed hash
        self._client_secret = client_secret(settings.store) if settings.tokens is None else None
        self.gates: dict[str | None, RateGate] = {}  # per key's hash (None: the proxy's own key, or none)
        self.flight = SingleFlight()  # the deterministic requests being asked, by cache key (its client's part too)
        self.client: Any = None

    async def start(self) -> None:
        import openai  # the SDK's HTTP client (httpx or httpx2, whichever it brings), with its defaults

        self.client = openai.DefaultAsyncHttpxClient(timeout=self.settings.timeout_s)
        # the store's writer: its process, whose pipe the loop reads (POSIX only, not Windows' proactor
        # loop); else this process, committing each answer before put_many_later returns
        self.store.writer_for(child=os.name == "posix")

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()
        self.store.close()

    # -- keys
    def authorized(self, header: str | None) -> bool:
        """Whether a request may use the proxy: any client on loopback without tokens; else one
        presenting a token, each compared in constant time (all of them, whichever matches)."""
        return bearer_allowed(header, self._tokens)

    def upstream_headers(self, authorization: str | None) -> dict[str, str]:
        if self.settings.tokens is None:
            if not authorization:
                return {}
            key = authorization.split(None, 1)[-1]
            if len(key) >= MIN_KEY_CHARS:  # the client's key: masked wherever the upstream echoes it
                masking.register(key)
            return {"authorization": authorization}
        key = self.settings.upstream_key
        return {"authorization": f"Bearer {key}"} if key else {}

    def client_of(self, authorization: str | None) -> str | None:
        """Whose answers, errors and rate limits a request shares (see the module's docstring):
        None with --token-file (the proxy's key asks for everyone) or for a request with no key;
        else the HMAC of the key it forwards under the store's secret (the scheme, read in any
        case, is part of it: `Basic X` and `Bearer X` are two credentials)."""
        if self._client_secret is None or not authorization or not authorization.strip():
            return None
        scheme, _, credential = authorization.strip().partition(" ")
        return hmac_sha256_text(self._client_secret, f"{scheme.lower()} {credential.strip()}")

    def gate(self, client: str | None) -> RateGate:
        """The rate gate of one key's requests. Gates whose pause is over are dropped once there
        are many, so a proxy that sees many keys keeps only those paused."""
        gate = self.gates.get(client)
        if gate is None:
            if len(self.gates) >= MAX_GATES:
                self.gates = {c: g for c, g in self.gates.items() if g.wait_s() > 0}
            gate = self.gates[client] = RateGate()
        return gate

    # -- chat completions
    async def chat(self, raw: bytes, authorization: str | None) -> Outcome:
        try:
            body = check_body(raw)
        except BadRequest as exc:
            return Outcome(exc.status, _error_body(str(exc), "invalid_request_error", exc.field), {}, "error")
        headers = self.upstream_headers(authorization)
        client = self.client_of(authorization)
        if not deterministic(body):
            return await self._ask(body, raw, headers, None, client)
        key = cache_key(self.base, body, client)
        outcome, shared = await self.flight.run(key, lambda: self._answer(body, raw, headers, key, client))
        return Outcome(outcome.status, outcome.body, outcome.headers, "shared") if shared else outcome

    async def _answer(self, body: dict[str, Any], raw: bytes, headers: dict[str, str], key: str,
                      client: str | None) -> Outcome:
        """A deterministic request's answer, as the leader of its flight: from the store, read
        here, on the loop (nothing can commit this key between the read and the flight's start,
        since only the flight's leader asks upstream for it), or asked upstream."""
        stored = self.store.get(key)
        if stored is not None:
            return Outcome(200, stored.result.text.encode(), {}, "hit")
        return await self._ask(body, raw, headers, key, client)

    async def _ask(self, body: dict[str, Any], raw: bytes, headers: dict[str, str], key: str | None,
                   client: str | None) -> Outcome:
        """Ask the upstream (unless its rate limit pauses the requests of `client`'s key) and
        store a good answer under `key` (None: a sample, stored under a key of its own, never
        looked up)."""
        gate = self.gate(client)
        wait = gate.wait_s()
        if wait > 0:
            whose = "" if self._client_secret is None else " for this key"
            return Outcome(429, _error_body(f"the upstream's rate limit{whose}: no request goes to it for {wait:.2f} s "
                                            "more; retry after that", "rate_limit_error"),
                           {"retry-after": str(max(1, math.ceil(wait))), "retry-after-ms": str(math.ceil(wait * 1000))},
                           "paused")
        started = time.monotonic()
        try:
            response = await self.client.post(f"{self.base}/chat/completions", content=raw,
                                              headers={"content-type": "application/json", **headers})
        except Exception as exc:  # the transport failed: nothing came back
            timeout = "timeout" in type(exc).__name__.lower()
            return Outcome(504 if timeout else 502, _error_body(masking.text(
                f"the upstream {public_base_url(self.base)} did not answer: {type(exc).__name__}: {exc}")[:500],
                "upstream_error"), {}, "error")
        latency = time.monotonic() - started
        gate.learn(response.status_code, response.headers)
        data = masking.current().bytes(response.content)
        passed = {h: response.headers[h] for h in PASSED_HEADERS if h in response.headers}
        if len(data) > MAX_ANSWER_BYTES:
            return Outcome(502, _error_body(f"the upstream's answer is larger than {MAX_ANSWER_BYTES} bytes",
                                            "upstream_error"), passed, "error")
        answer = _answer(data) if response.status_code == 200 else None
        if answer is None:  # an error, or not a completion: passed back, never stored
            return Outcome(response.status_code, data, passed, "error")
        result = CallResult(text=data.decode("utf-8"), tokens_in=answer["tokens_in"],
                            tokens_out=answer["tokens_out"], latency_s=latency,
                            extra={"finish_reason": answer["finish_reason"], "status": 200})
        row = CallRow(key or sha256_text(f"sample:{uuid.uuid4().hex}"), BACKEND, identity_of(self.base, body["model"]),
                      proxied_request(masking.value(body)), result, None)
        try:
            failed = await self.commit(row)
        except JudgeblenderError as exc:
            failed = exc
        if failed is not None:  # the answer could not be committed: it is not returned
            return Outcome(507 if getattr(failed, "full", False) else 500,
                           _error_body(f"the proxy could not store the answer: {failed}", "proxy_error"), passed, "error")
        return Outcome(200, data, passed, "miss" if key else "pass")

    async def commit(self, row: CallRow) -> BaseException | None:
        """`row` committed, in a transaction of its own, by the store's writer: None once it is,
        else the error naming the store. A request cancelled meanwhile leaves the row to be
        committed all the same; nobody waits for it."""
        committed = asyncio.get_running_loop().create_future()
        self.store.put_many_later([row], None, lambda exc: committed.done() or committed.set_result(exc))
        return await committed

    async def models(self, authorization: str | None) -> Outcome:
        try:
            response = await self.client.get(f"{self.base}/models", headers=self.upstream_headers(authorization))
        except Exception as exc:
            return Outcome(502, _error_body(masking.text(f"the upstream did not answer: {type(exc).__name__}")[:500],
                                            "upstream_error"), {}, "error")
        return Outcome(response.status_code, masking.current().bytes(response.content), {}, "pass")


def _answer(data: bytes) -> dict[str, Any] | None:
    """What is stored of a good completion (tokens and finish reason), or None where the body is
    not one: not JSON in UTF-8, no choices, or a choice that ended in failure (calls.FAILED_CALL)."""
    try:
        parsed = json.loads(data.decode("utf-8"))  # only UTF-8 is stored: the store keeps text
    except (ValueError, RecursionError):  # (UnicodeDecodeError is a ValueError)
        return None
    choices = parsed.get("choices") if isinstance(parsed, dict) else None
    if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
        return None
    if any(c.get("finish_reason") in FAILED_CALL for c in choices):
        return None
    usage = parsed.get("usage") if isinstance(parsed.get("usage"), dict) else {}
    count = lambda name: usage.get(name) if isinstance(usage.get(name), int) else 0  # noqa: E731
    return {"tokens_in": count("prompt_tokens"), "tokens_out": count("completion_tokens"),
            "finish_reason": choices[0].get("finish_reason")}


def make_app(settings: ProxySettings, ready: Any = None) -> Any:
    """The ASGI app (Starlette) serving `settings`: POST /v1/chat/completions, GET /v1/models;
    `ready()` is called once it can answer (its store open, its upstream client made)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    proxy = Proxy(settings)

    def respond(outcome: Outcome) -> Response:
        return Response(outcome.body, outcome.status, {**outcome.headers, "x-judgeblender-cache": outcome.cache},
                        media_type="application/json")

    def refused() -> Response:
        return Response(_error_body("a bearer token of this proxy is required (Authorization: Bearer TOKEN)",
                                    "authentication_error"), 401, {"www-authenticate": "Bearer"},
                        media_type="application/json")

    async def chat(request: Request) -> Response:
        authorization = request.headers.get("authorization")
        if not proxy.authorized(authorization):
            return refused()
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            return respond(Outcome(413, _error_body(f"the body is larger than {MAX_BODY_BYTES} bytes",
                                                    "invalid_request_error"), {}, "error"))
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                return respond(Outcome(413, _error_body(f"the body is larger than {MAX_BODY_BYTES} bytes",
                                                        "invalid_request_error"), {}, "error"))
            chunks.append(chunk)
        return respond(await proxy.chat(b"".join(chunks), authorization))

    async def models(request: Request) -> Response:
        authorization = request.headers.get("authorization")
        if not proxy.authorized(authorization):
            return refused()
        return respond(await proxy.models(authorization))

    @asynccontextmanager
    async def lifespan(app: Any) -> Any:
        await proxy.start()
        if ready is not None:
            ready()
        try:
            yield
        finally:
            await proxy.close()

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                            Route("/v1/models", models, methods=["GET"])], lifespan=lifespan)
    app.state.proxy = proxy
    return app


def run_proxy(settings: ProxySettings, *, announce: Any = print) -> None:
    """Serve `settings` until SIGTERM or SIGINT; `announce(url)` is called once it answers (a
    client that reads the URL and connects is not kept waiting for the start-up)."""
    sock = bind(settings.host, settings.port)
    app = make_app(settings, ready=lambda: announce(url_of(sock) + "/v1"))
    run(app, sock, f"judgeblender proxy (store {settings.store})", timeout_graceful_shutdown=30)
