"""`openai:MODEL` — any server that speaks the OpenAI chat-completions API.

That covers OpenAI itself, OpenRouter, vLLM, SGLang, Ollama, the llama.cpp server and many
others (see docs/served-models.md). The backend keeps its AsyncOpenAI clients (one per event
loop it is used from, or one per 8 concurrent calls at higher concurrency) and their
connections alive between calls; at most `concurrency` calls are in flight per event loop.
The SDK's own retries are switched off; this module retries by itself so that every retry is
counted (`retries_total`, `retry_reasons`) and the policy is the same on every server:

- retried: HTTP 408, 429, 500, 502, 503, 504, timeouts, connection errors, and malformed
  answers (a body that is not JSON, no choices, no message content, no logprobs from a
  server that has sent them at least `concurrency` times: an answer without them before
  that means "cannot score");
- waits: the server's Retry-After (seconds, HTTP date, or OpenAI's retry-after-ms) when it
  sends one, up to `max_retry_after_s` (default 120 s; a longer wait is cut to it, then the
  call is retried, and the reason says so), else exponential backoff with jitter (a random wait between half and all of
  0.5 s, 1 s, 2 s, 4 s, ... capped at 30 s);
- each attempt has `timeout_s` (default 30 s) in all, not the SDK's 10 minutes;
- gives up after `max_retries` retries with a BackendError naming the last failure;
- any other 4xx fails at once with a BackendError carrying the status and the server's message.

A response body is read no further than a bound derived from the request (openai_wire's
response_bound): an answer over it is recorded invalid ("answer too large") with none of its
text, so a runaway or hostile server cannot fill memory, the store or the event loop's time.

The API key comes from an environment variable (OPENAI_API_KEY unless `api_key_env` names
another) or from a key file readable by its owner only; it never appears in repr(), identity(),
logs or error messages. The backend registers it with `judgeblender.masking`, which masks it,
in every form a server may echo it, in the response bytes before they are read, in error
messages, and wherever the process writes text.

This module is the client pool and the retries. Keys and the public URL are in
openai_keys.py, request bodies and answer parsing in openai_wire.py, Batch API files in
openai_batch.py.
"""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import functools
import logging
import math
import os
import random
import threading
import time
import zlib
from collections import Counter
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from datetime import timezone
from typing import Any, Optional, TypeVar
from urllib.parse import urlsplit

from .. import masking
from ..calls import CallRequest, CallResult
from ..errors import BackendError
from pydantic import Field

from .base import Backend, LogprobsUnsupported
from .openai_keys import DEFAULT_BASE_URL, NO_KEY_PLACEHOLDER, Secret, resolve_api_key
from .registry import BackendOptions, Provider
from .openai_wire import (RESPONSE_HARD_CAP_BYTES, AnswerPrefixMode, Retryable, build_chat_body, decode_answer,
                          parse_generate, parse_logprobs, response_bound, too_large)

log = logging.getLogger(__name__)

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds the server asks us to wait: retry-after-ms, or Retry-After in seconds or as an HTTP date."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
            if math.isfinite(value) and value >= 0:
                return value
        except ValueError:
            pass
    raw = lower.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        value = float(raw)
        return value if math.isfinite(value) and value >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    now_ts = time.time() if now is None else now
    return max(0.0, when.timestamp() - now_ts)


# --------------------------------------------------------------------------------------
# the backend: client pool and retries
# --------------------------------------------------------------------------------------
# The header that asks the SDK for the unparsed HTTP response (what `with_raw_response` sets).
_RAW_RESPONSE_HEADER = "X-Stainless-Raw-Response"

# The bound on a response body travels from a call to its HTTP client's response hook in this
# context variable: the hook runs in the calling task, which set it (a header taken out again by a
# request hook cost two hook calls and a header's parsing per call).
_BOUND: contextvars.ContextVar[int] = contextvars.ContextVar("judgeblender_response_bound",
                                                              default=RESPONSE_HARD_CAP_BYTES)
# The SDK's telemetry headers (the OS, CPU, Python and SDK versions; its retry count, always 0
# as its retries are off, and read timeout) are not sent: 9 headers of 18 fewer to build and check
# (about 35 us of client CPU per call), and nothing about this machine told to the server.
_CLIENT_TELEMETRY = ("X-Stainless-Lang", "X-Stainless-Package-Version", "X-Stainless-OS", "X-Stainless-Arch",
                     "X-Stainless-Runtime", "X-Stainless-Runtime-Version", "X-Stainless-Async")
_CALL_TELEMETRY = ("X-Stainless-Retry-Count", "X-Stainless-Read-Timeout")


@functools.lru_cache(maxsize=1)
def _headers() -> tuple[dict[str, Any], dict[str, Any]]:
    """(each client's default headers, each call's headers): uncompressed answers, the raw
    response, and the SDK's telemetry headers left out (where the SDK can leave them out)."""
    import openai

    raw = getattr(getattr(openai, "_constants", None), "RAW_RESPONSE_HEADER", _RAW_RESPONSE_HEADER)
    omit = getattr(openai, "Omit", None)
    client: dict[str, Any] = {"Accept-Encoding": "identity"}
    call: dict[str, Any] = {raw: "true"}
    if omit is not None:
        client.update((name, omit()) for name in _CLIENT_TELEMETRY)
        call.update((name, omit()) for name in _CALL_TELEMETRY)
    return client, call


# Set in a response's extensions when its body was not read: (too large?, why).
_REFUSED = "judgeblender_refused"
# Compressed answers are not asked for (Accept-Encoding: identity): a few KB gain little, and
# the HTTP library would inflate any size in memory. A server that compresses anyway is read
# only in these codings, inflated up to the bound (decompression bombs stop there).
_INFLATE = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}
_IDENTITY = ("", "identity")
_HTTP1 = ("HTTP/1.1", "HTTP/1.0")


async def _bound_body(response: Any) -> None:
    """httpx response hook (before the body is read): a body that may pass its bound is read
    through _BoundedBody. An uncompressed HTTP/1 body with a Content-Length within the bound and
    no Transfer-Encoding (which would override the length) is left as it is, since the HTTP/1
    parser (h11) reads no byte past the Content-Length: most answers, which skip the wrapper's
    async generator (tests/test_trust_bounds.py sends 2 MB past a Content-Length)."""
    headers = response.headers
    encoding = headers.get("content-encoding", "").strip().lower()
    bound = _BOUND.get()
    if encoding in _IDENTITY:
        length = headers.get("content-length", "")
        if (length.isdigit() and int(length) <= bound and "transfer-encoding" not in headers
                and response.http_version in _HTTP1):
            return
    else:
        del headers["content-encoding"]  # inflated here, within the bound, not by httpx
    response.stream = _bounded_body_class()(response, bound, encoding)


@functools.lru_cache(maxsize=1)
def _bounded_body_class() -> type:
    """_BoundedBody as the stream class of the SDK's HTTP library, which its responses must be."""
    return type("BoundedBody", (_BoundedBody, _http_library().AsyncByteStream), {})


class _BoundedBody:
    """A response body read no further than its bound (inflated bytes, for compressed bodies).

    Past the bound it stops, closes the connection with the rest unread, and marks the
    response refused; what was read is all httpx sees. (Used as _bounded_body_class().)"""

    def __init__(self, response: Any, bound: int, encoding: str):
        self._inner = response.stream
        # What it needs of the response, not the response itself: the response holds this body
        # as its stream, so a reference back made every response a cycle (about 60 objects per
        # call) that only the garbage collector frees, where the SDK's own are freed at once.
        self._extensions = response.extensions
        self._length = response.headers.get("content-length", "")
        self._bound = bound
        self._encoding = encoding

    def _refuse(self, too_large: bool, why: str) -> None:
        self._extensions[_REFUSED] = (too_large, why)

    async def __aiter__(self) -> Any:
        bound, encoding = self._bound, self._encoding
        if encoding in _IDENTITY:
            length = self._length
            if length.isdigit() and int(length) > bound:
                self._refuse(True, f"the response has {int(length):,} bytes (Content-Length)")
                return
            size = 0
            async for chunk in self._inner:
                size += len(chunk)
                if size > bound:
                    self._refuse(True, f"the response passed {bound:,} bytes")
                    return
                yield chunk
            return
        if encoding not in _INFLATE:
            self._refuse(False, f"malformed answer: a body in the {encoding!r} coding, which was not asked for")
            return
        inflate, size = zlib.decompressobj(_INFLATE[encoding]), 0
        try:
            async for chunk in self._inner:
                while chunk:
                    out = inflate.decompress(chunk, bound + 1 - size)
                    size += len(out)
                    if size > bound:
                        self._refuse(True, f"the response inflates past {bound:,} bytes ({encoding})")
                        return
                    yield out
                    chunk = inflate.unconsumed_tail
        except zlib.error as exc:
            self._refuse(False, f"malformed answer: a {encoding} body that does not inflate ({exc})")

    async def aclose(self) -> None:
        await self._inner.aclose()


# Calls in flight per AsyncOpenAI client. The HTTP pool under a client scans all its
# connections on every request, so at high concurrency a few clients of 8 connections each
# cost far less CPU than one client of 64 (measured: about 1 ms less per call at 64).
CALLS_PER_CLIENT = 8
# A served model's tokenizer is unknown: with --context-tokens, a token is estimated as 3 UTF-8
# bytes, above the usual ~4 characters per token of English text, so a cut passage fits.
BYTES_PER_TOKEN = 3


@dataclass
class _LoopState:
    clients: list[Any]  # openai.AsyncOpenAI, each with its own connection pool
    active: list[int]  # calls in flight on each client
    semaphore: asyncio.Semaphore

    def acquire_client(self) -> int:
        """The index of the least busy client (counted busy until release_client)."""
        i = min(range(len(self.clients)), key=self.active.__getitem__)
        self.active[i] += 1
        return i

    def release_client(self, i: int) -> None:
        self.active[i] -= 1


class _LoopThread:
    """A private event loop in a daemon thread, for the synchronous execute()."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("execute() called from the backend's own event loop; use aexecute()")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


class OpenAICompatBackend(Backend):
    kind = "openai"
    served = True
    supports_logprobs = True  # the server decides at call time (LogprobsUnsupported)

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None,
        concurrency: int = 8,
        timeout_s: float = 30.0,
        max_retries: int = 5,
        model_revision: str | None = None,
        context_tokens: int | None = None,
        top_logprobs: int = 20,
        answer_prefix_mode: AnswerPrefixMode = "instruct",
        max_tokens_param: str = "max_tokens",
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
        max_retry_after_s: float = 120.0,
    ):
        if not model:
            raise BackendError("openai: the model name is empty (use openai:MODEL)")
        if concurrency < 1:
            raise BackendError(f"openai: concurrency must be at least 1, got {concurrency}")
        if timeout_s <= 0:
            raise BackendError(f"openai: timeout_s must be positive, got {timeout_s}")
        if max_retries < 0:
            raise BackendError(f"openai: max_retries must be 0 or more, got {max_retries}")
        if not 1 <= top_logprobs <= 20:
            raise BackendError(f"openai: top_logprobs must be between 1 and 20, got {top_logprobs}")
        if answer_prefix_mode not in ("instruct", "prefill"):
            raise BackendError(f"openai: answer_prefix_mode must be 'instruct' or 'prefill', got {answer_prefix_mode!r}")
        if max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise BackendError(
                f"openai: max_tokens_param must be 'max_tokens' or 'max_completion_tokens', got {max_tokens_param!r}"
            )
        masking.register_url(base_url)  # its user:password@, before any message or call could show it
        parts = urlsplit(base_url)
        # a space or control character (a newline from a shell substitution that matched twice)
        # would reach the HTTP client and end the run with its traceback at the first call
        spaced = any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname or spaced:
            why = " (it holds a space or a control character such as a newline)" if spaced else ""
            raise BackendError(f"openai: base URL {masking.public_base_url(base_url)!r} should look like http(s)://HOST[:PORT]/v1"
                               + why)
        self.model = model
        # The URL as given may carry credentials (user:password@, ?key=...): kept out of sight.
        self._base_url = Secret(base_url)
        self.public_base_url = masking.public_base_url(base_url)
        self._key = Secret(api_key) if api_key else None
        masking.register(api_key)  # before any call: what the server echoes of it is masked everywhere
        self.max_concurrency = int(concurrency)
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.model_revision = model_revision
        self._context_tokens = context_tokens
        self.top_logprobs = int(top_logprobs)
        self.answer_prefix_mode: AnswerPrefixMode = answer_prefix_mode
        self.max_tokens_param = max_tokens_param
        self.backoff_base_s = float(backoff_base_s)
        self.backoff_max_s = float(backoff_max_s)
        self.max_retry_after_s = float(max_retry_after_s)
        self.retries_total = 0
        self.retry_reasons: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._loops: dict[asyncio.AbstractEventLoop, _LoopState] = {}
        self._runner: _LoopThread | None = None
        self._rng = random.Random()
        self._logprobs_answers = 0  # answers that carried logprobs
        # the endpoint's full URL, made once as the SDK makes it from "/chat/completions" (given
        # that relative path, it parses and joins URLs three times per call)
        self._chat_url: str | None = None

    # --- identity -------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        # What the server serves, not where it listens: a server restarted on another port (or
        # moved to another host) answers from the same stored calls. Two servers serving
        # different weights under one model name are told apart by `model_revision`.
        ident: dict[str, Any] = {
            "backend": "openai",
            "model": self.model,
            "revision": self.model_revision,
        }
        # Settings that change what logprobs mode sends or reads, named only when not the
        # default, so cached answers made one way are not reused for the other.
        if self.answer_prefix_mode != "instruct":
            ident["answer_prefix_mode"] = self.answer_prefix_mode
        if self.top_logprobs != 20:
            ident["top_logprobs"] = self.top_logprobs
        return ident

    def context_tokens(self) -> int | None:
        return self._context_tokens

    def count_tokens(self, text: str) -> int | None:
        """An estimate, only when a context size is set (so long passages get cut, not sent whole):
        one token per 3 UTF-8 bytes, above the usual ~4 characters per token of English text."""
        if self._context_tokens is None:
            return None
        return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)

    def token_prefix(self, text: str, n: int) -> tuple[int, int] | None:
        """The estimate's cut: the characters whole within the first n x 3 bytes."""
        if self._context_tokens is None:
            return None
        data = text.encode("utf-8")
        head = data[: n * BYTES_PER_TOKEN]
        return -(-len(data) // BYTES_PER_TOKEN), len(head.decode("utf-8", errors="ignore"))

    def max_token_chars(self) -> int | None:
        return BYTES_PER_TOKEN  # a character is at least one byte

    def __repr__(self) -> str:
        return (
            f"OpenAICompatBackend(model={self.model!r}, base_url={self.public_base_url!r}, "
            f"concurrency={self.max_concurrency}, timeout_s={self.timeout_s}, max_retries={self.max_retries})"
        )

    # --- clients --------------------------------------------------------------------
    def _new_client(self) -> Any:
        import openai

        ssl_context = _shared_ssl_context()
        # the SDK's own HTTP client settings, with one TLS context for all clients, and the hooks
        # that bound each response body
        http = {"event_hooks": {"response": [_bound_body]}}
        if ssl_context is not None:
            http["verify"] = ssl_context
        client = openai.AsyncOpenAI(
            api_key=self._key.reveal() if self._key else NO_KEY_PLACEHOLDER,
            base_url=self._base_url.reveal(),
            timeout=self.timeout_s,
            max_retries=0,  # our own loop retries, and counts
            default_headers=_headers()[0],
            http_client=openai.DefaultAsyncHttpxClient(**http),
        )
        if getattr(client, "_platform", False) is None:
            client._platform = _sdk_platform()
        if self._chat_url is None:  # the clients share the base URL
            self._chat_url = chat_url(client.base_url)
        return client

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        with self._lock:
            state = self._loops.get(loop)
            if state is None:
                for old in [lp for lp in self._loops if lp.is_closed()]:
                    del self._loops[old]  # its connections died with it
                n = -(-self.max_concurrency // CALLS_PER_CLIENT)
                state = _LoopState(
                    clients=[self._new_client() for _ in range(n)],
                    active=[0] * n,
                    semaphore=asyncio.Semaphore(self.max_concurrency),
                )
                self._loops[loop] = state
            return state

    async def aprepare(self) -> None:
        """The SDK imported and what its clients read from disk (the CA bundle, the platform)
        loaded in a worker thread, then this loop's clients made, and the asyncio backend their
        connections use loaded: 0.5-1.6 s that the first request of a server paid on its event
        loop, every other request (GET /v1/health too) waiting on it."""
        await asyncio.to_thread(_load_sdk)
        self._state()
        # anyio, under the SDK's HTTP library, loads its asyncio backend at the first connection
        # (0.1 s of imports); its first call loads it now
        try:
            import anyio
        except ImportError:  # pragma: no cover - an HTTP library without it
            return
        await anyio.sleep(0)

    def _count_retry(self, reason: str) -> None:
        with self._lock:
            self.retries_total += 1
            self.retry_reasons[reason.split(":")[0]] += 1

    # --- calls ----------------------------------------------------------------------
    def execute(self, request: CallRequest) -> CallResult:
        with self._lock:
            if self._runner is None:
                self._runner = _LoopThread(f"judgeblender-openai-{self.model}")
            runner = self._runner
        return runner.run(self.aexecute(request))

    async def aexecute(self, request: CallRequest) -> CallResult:
        state = self._state()
        async with state.semaphore:
            i = state.acquire_client()
            try:
                return await self._call_with_retries(state.clients[i], request)
            finally:
                state.release_client(i)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            # The server's wait, up to the cap: a longer one is waited for the cap, then the call is
            # retried like any other (it still has at most max_retries retries).
            return min(retry_after, self.max_retry_after_s) * self._rng.uniform(1.0, 1.1)
        cap = min(self.backoff_max_s, self.backoff_base_s * (2**attempt))
        return self._rng.uniform(cap / 2, cap)

    async def _call_with_retries(self, client: Any, request: CallRequest) -> CallResult:
        body, extra_body = build_chat_body(
            request,
            self.model,
            top_logprobs=self.top_logprobs,
            answer_prefix_mode=self.answer_prefix_mode,
            max_tokens_param=self.max_tokens_param,
        )
        bound = response_bound(request, self.top_logprobs)
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                result = await self._attempt(client, request, body, extra_body, bound)
            except Retryable as failure:
                reason = masking.text(failure.reason)
                if failure.retry_after is not None and failure.retry_after > self.max_retry_after_s:
                    reason += (f" (Retry-After {failure.retry_after:.0f} s, waited at most the cap "
                               f"max_retry_after_s={self.max_retry_after_s:g} s)")
                if attempt >= self.max_retries:
                    raise BackendError(
                        f"{self.name} at {self.public_base_url}: failed after {attempt + 1} attempts; last: {reason}"
                    ) from None
                delay = self._delay(attempt, failure.retry_after)
                attempt += 1
                self._count_retry(reason)
                log.info("%s: %s; retry %d/%d in %.2f s", self.name, reason, attempt, self.max_retries, delay)
                await asyncio.sleep(delay)
                continue
            result.latency_s = time.monotonic() - started
            result.extra["retries"] = attempt
            return result

    async def _attempt(
        self, client: Any, request: CallRequest, body: dict[str, Any], extra_body: dict[str, Any], bound: int
    ) -> CallResult:
        import openai

        try:
            # The raw response: we read the JSON ourselves (cheaper than the SDK's models, and a
            # body that is not JSON is caught here rather than handed back as text). The body is
            # posted as built: `chat.completions.create` would first walk it against the SDK's
            # typed parameters, which cost about as much client CPU as the HTTP exchange itself.
            _BOUND.set(bound)  # read by _bound_body in this task; every attempt sets its own
            post = client.post(
                self._chat_url,
                cast_to=object,
                body={**body, **extra_body} if extra_body else body,
                options={"headers": dict(_headers()[1])},  # the client's own timeout is timeout_s
            )
            # A limit on the attempt as a whole; asyncio.timeout (3.11+) adds no task per call.
            if hasattr(asyncio, "timeout"):
                async with asyncio.timeout(self.timeout_s):
                    raw = await post
            else:  # pragma: no cover - Python 3.10
                raw = await asyncio.wait_for(post, timeout=self.timeout_s)
            refused = raw.http_response.extensions.get(_REFUSED)
            if refused is not None:  # the body was not read past its bound
                too_big, why = refused
                if not too_big:
                    raise Retryable(why)
                return too_large(bound, why)
            payload = raw.http_response.content
        except (asyncio.TimeoutError, TimeoutError):
            raise Retryable(f"timeout: no answer within {self.timeout_s:g} s") from None
        except openai.APITimeoutError:
            raise Retryable(f"timeout: no answer within {self.timeout_s:g} s") from None
        except openai.APIConnectionError as exc:
            cause = type(exc.__cause__).__name__ if exc.__cause__ else "no detail"
            raise Retryable(f"connection error: {cause}") from None
        except openai.APIStatusError as exc:
            self._status_failure(exc, request)
        except openai.OpenAIError as exc:
            raise BackendError(f"{self.name} at {self.public_base_url}: {masking.text(str(exc))}") from None
        data = decode_answer(payload)  # masked before it is decoded: a server may echo the key
        if request.mode == "logprobs":
            try:
                result = parse_logprobs(data, request.choices)
            except LogprobsUnsupported as exc:
                if self._logprobs_answers >= self.max_concurrency:
                    # This server has scored many times: one answer without logprobs is a glitch to
                    # retry, not a reason to switch the whole judge to generate mode. (Below that
                    # count, answers racing in the first wave keep the old rule: cannot score.)
                    raise Retryable(f"malformed answer: {exc}") from None
                raise LogprobsUnsupported(f"{self.name} at {self.public_base_url}: {exc}") from None
            with self._lock:
                self._logprobs_answers += 1
            return result
        return parse_generate(data)

    def _status_failure(self, exc: Any, request: CallRequest) -> None:
        """Turn an HTTP error status into Retryable, LogprobsUnsupported or BackendError (always raises)."""
        status = int(exc.status_code)
        message = _server_message(exc)
        if status in RETRYABLE_STATUS:
            headers = dict(exc.response.headers) if getattr(exc, "response", None) is not None else None
            raise Retryable(f"HTTP {status}: {message}", parse_retry_after(headers)) from None
        if request.mode == "logprobs" and status in (400, 422, 501) and "logprob" in message.lower():
            raise LogprobsUnsupported(
                f"{self.name} at {self.public_base_url} rejects logprobs requests (HTTP {status}: {message})"
            ) from None
        raise BackendError(f"{self.name} at {self.public_base_url}: HTTP {status}: {message}") from None

    # --- cleanup --------------------------------------------------------------------
    async def aclose(self) -> None:
        """Close the client of the running event loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            state = self._loops.pop(loop, None)
        if state is not None:
            await _close_all(state.clients)

    def close(self) -> None:
        """Close every client and stop the private loop of execute(); later calls reconnect."""
        with self._lock:
            states = list(self._loops.items())
            self._loops.clear()
            runner, self._runner = self._runner, None
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for loop, state in states:
            if loop.is_closed():
                continue  # its connections went with it
            closing = _close_all(state.clients)
            if runner is not None and loop is runner.loop:
                runner.run(closing)
            elif loop is current:
                loop.create_task(closing)
            elif loop.is_running():
                asyncio.run_coroutine_threadsafe(closing, loop).result(timeout=5)
            else:
                loop.run_until_complete(closing)
        if runner is not None:
            runner.stop()


@functools.lru_cache(maxsize=1)
def _http_library() -> Any:
    """The HTTP library under the SDK's client (httpx, or httpx2 in newer SDKs), imported with it."""
    import sys

    import openai

    base = next((c for c in openai.DefaultAsyncHttpxClient.__mro__ if c.__name__ == "AsyncClient"), None)
    library = sys.modules.get(base.__module__.split(".")[0]) if base is not None else None
    if library is None or not hasattr(library, "AsyncByteStream"):
        raise BackendError("openai: this openai SDK's HTTP client is not httpx-like; judgeblender cannot bound "
                           "its response bodies (install an openai SDK version it supports)")
    return library


def chat_url(base_url: Any) -> str:
    """The chat-completions endpoint's full URL, joined to the client's base URL (its public
    `base_url`, which the SDK ends with a slash) as the SDK joins a relative path: the path
    appended to the base's raw path. Given the full URL, the SDK parses it once per call instead
    of parsing and joining URLs three times."""
    return str(base_url.copy_with(raw_path=base_url.raw_path + b"chat/completions"))


# The SDK's private parts used here, each checked by tests/test_openai_sdk.py so an upgrade that
# changes one fails there, naming it: openai._constants.RAW_RESPONSE_HEADER (_headers), the
# telemetry headers' names (_CLIENT_TELEMETRY, _CALL_TELEMETRY), openai._base_client.get_platform
# and AsyncOpenAI._platform (_sdk_platform). Everything else is the SDK's public API.
@functools.lru_cache(maxsize=1)
def _sdk_platform() -> Any:
    """The platform the SDK names in its X-Stainless-OS header, found once per process.

    An AsyncOpenAI client finds it on its first request, in a thread (it may read files), and
    every request that starts before the first has found it does the same. A run on a fresh
    event loop has fresh clients, so its first wave made one thread hop per call (64 at
    concurrency 64). Set on each client as it is made, the SDK finds it there, and a run hands
    nothing to the loop's thread pool (tests/test_served_fast.py). The header itself is not sent
    (_headers), but the SDK looks for the platform on every request. None (the SDK finds it as
    before) where this SDK has no such function."""
    try:
        from openai._base_client import get_platform
    except ImportError:  # pragma: no cover - another SDK layout
        return None
    return get_platform()


@functools.lru_cache(maxsize=1)
def _shared_ssl_context() -> Any:
    """The TLS context the SDK's HTTP library would build for each client, built once: each one
    loads the CA bundle (about 25 ms), and a backend opens a client per 8 calls in flight.
    None (each client builds its own) when the SDK's HTTP library has no such function."""
    create = getattr(_http_library(), "create_ssl_context", None)
    return create() if callable(create) else None


def _load_sdk() -> None:
    """Everything of the SDK a call loads once per process (each cached where it is defined)."""
    _headers()
    _bounded_body_class()
    _shared_ssl_context()
    _sdk_platform()


async def _close_all(clients: list[Any]) -> None:
    """Close the clients together: closing a connection waits a turn of the event loop, so
    closing 64 connections one after another took 64 turns (6-11 ms at the end of every run)."""
    await asyncio.gather(*(client.close() for client in clients))


def _server_message(exc: Any) -> str:
    """The server's own words from an error response, masked (masking.py), then shortened: a key
    cut in two by the shortening would no longer be found whole."""
    body = getattr(exc, "body", None)
    message: Any = None
    if isinstance(body, dict):
        err = body.get("error", body)
        message = err.get("message") if isinstance(err, dict) else err
        if message is None:
            message = body.get("message") or body.get("detail")
    elif isinstance(body, str):
        message = body
    if not message:
        message = getattr(exc, "message", "") or "no message"
    text = " ".join(masking.text(str(message)).split())
    return text if len(text) <= 500 else text[:497] + "..."


# --------------------------------------------------------------------------------------
# factory
# --------------------------------------------------------------------------------------
class Options(BackendOptions):
    """`openai:` options (any OpenAI-compatible server)."""

    base_url: Optional[str] = Field(None, description="server URL (else $OPENAI_BASE_URL, else OpenAI's)")
    api_key_env: str = "OPENAI_API_KEY"
    api_key_file: Optional[str] = None
    concurrency: int = Field(8, ge=1, description="requests in flight")
    timeout_s: float = Field(30.0, gt=0)
    max_retries: int = Field(5, ge=0)
    model_revision: Optional[str] = None
    context_tokens: Optional[int] = Field(None, ge=1)
    top_logprobs: int = Field(20, ge=1)
    answer_prefix_mode: AnswerPrefixMode = "instruct"
    max_tokens_param: str = "max_tokens"
    backoff_base_s: float = Field(0.5, ge=0)
    backoff_max_s: float = Field(30.0, ge=0)
    max_retry_after_s: float = Field(120.0, ge=0)


def build(model: str, options: Options) -> OpenAICompatBackend:
    """Build `openai:MODEL`. The base URL comes from `base_url`, else $OPENAI_BASE_URL, else OpenAI's."""
    url = options.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    key = resolve_api_key(options.api_key_env, options.api_key_file, url)
    return OpenAICompatBackend(model, base_url=url, api_key=key,
                               **options.model_dump(exclude={"base_url", "api_key_env", "api_key_file"}))


PROVIDER = Provider("openai", Options, build)
create = PROVIDER.create
