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
  sends one, else exponential backoff with jitter (a random wait between half and all of
  0.5 s, 1 s, 2 s, 4 s, ... capped at 30 s);
- each attempt has `timeout_s` (default 30 s) in all, not the SDK's 10 minutes;
- gives up after `max_retries` retries with a BackendError naming the last failure;
- any other 4xx fails at once with a BackendError carrying the status and the server's message.

The API key comes from an environment variable (OPENAI_API_KEY unless `api_key_env` names
another) or from a key file readable by its owner only; it never appears in repr(), identity(),
logs or error messages.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import logging
import math
import os
import random
import stat
import threading
import time
from collections import Counter
from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import dataclass
from datetime import timezone
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ..errors import BackendError, InputError
from ..calls import CallRequest, CallResult
from ..fileio import atomic_write_text
from .base import Backend, LogprobsUnsupported, normalise_choice_probs

log = logging.getLogger(__name__)

__all__ = [
    "OpenAICompatBackend",
    "create",
    "build_chat_body",
    "parse_generate",
    "parse_logprobs",
    "parse_retry_after",
    "public_base_url",
    "read_key_file",
    "resolve_api_key",
    "write_batch_file",
    "read_batch_results",
    "read_batch_lines",
    "batch_result",
    "batch_request_line",
]

T = TypeVar("T")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# Stands in for the key on local servers that need none: the SDK insists on some string.
NO_KEY_PLACEHOLDER = "unused"

AnswerPrefixMode = Literal["instruct", "prefill"]


# --------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------
class _Secret:
    """Holds the API key; its repr and str never show it."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


class _Retryable(Exception):
    """One attempt failed in a way worth retrying."""

    def __init__(self, reason: str, retry_after: float | None = None):
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


def public_base_url(url: str) -> str:
    """The URL without user:password@, query string or fragment, and without a trailing slash."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


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


def read_key_file(path: str | os.PathLike[str]) -> str:
    """The key in `path`, which must be a regular file that only its owner can read (0600 or 0400)."""
    p = Path(path).expanduser()
    try:
        st = p.stat()
    except FileNotFoundError:
        raise BackendError(f"API key file {p} does not exist") from None
    except OSError as exc:
        raise BackendError(f"cannot read API key file {p}: {exc.strerror or type(exc).__name__}") from None
    if not stat.S_ISREG(st.st_mode):
        raise BackendError(f"API key file {p} is not a regular file")
    if os.name == "posix" and st.st_mode & 0o077:
        raise BackendError(
            f"API key file {p} has permissions {stat.S_IMODE(st.st_mode):04o}, so other users can read it; "
            f"it must be readable by its owner only: run `chmod 600 {p}`"
        )
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BackendError(f"cannot read API key file {p}: {type(exc).__name__}") from None
    key = text.strip()
    if not key:
        raise BackendError(f"API key file {p} is empty")
    if any(ch.isspace() for ch in key):
        raise BackendError(f"API key file {p} should hold only the key, on one line")
    return key


def resolve_api_key(api_key_env: str | None, api_key_file: str | os.PathLike[str] | None, base_url: str) -> str | None:
    """The key to send: from the key file when given, else from the environment; None when there is none.

    The default OpenAI endpoint always needs a key, so its absence there is an error.
    """
    if api_key_file:
        return read_key_file(api_key_file)
    if api_key_env:
        value = os.environ.get(api_key_env, "").strip()
        if value:
            return value
    if public_base_url(base_url) == DEFAULT_BASE_URL:
        where = f"the environment variable {api_key_env}" if api_key_env else "an environment variable (api_key_env)"
        raise BackendError(
            f"no API key for {DEFAULT_BASE_URL}: set {where}, or pass api_key_file (a file readable by its owner only)"
        )
    return None


# --------------------------------------------------------------------------------------
# request bodies and answer parsing (shared by live calls and the Batch API files)
# --------------------------------------------------------------------------------------
def _instruction_for(request: CallRequest) -> str:
    labels = ", ".join(request.choices)
    prefix = request.answer_prefix.strip()
    lead = f'Complete "{prefix}" with the label alone' if prefix else "Reply with the label alone"
    return f"{lead}: one of {labels}. Output nothing else."


def build_chat_body(
    request: CallRequest,
    model: str,
    *,
    top_logprobs: int = 20,
    answer_prefix_mode: AnswerPrefixMode = "instruct",
    max_tokens_param: str = "max_tokens",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(standard chat-completions parameters, server-specific extra parameters) for one request."""
    messages: list[dict[str, str]] = [{"role": m.role, "content": m.content} for m in request.messages]
    extra: dict[str, Any] = {}
    body: dict[str, Any] = {"model": model, "messages": messages, "seed": request.seed}
    if request.mode == "logprobs":
        if not request.choices:
            raise BackendError("a logprobs-mode request needs its choices (for example 0, 1, 2, 3)")
        if answer_prefix_mode == "prefill":
            # vLLM and SGLang continue a final assistant message when asked to.
            if request.answer_prefix:
                messages.append({"role": "assistant", "content": request.answer_prefix})
                extra = {"continue_final_message": True, "add_generation_prompt": False}
        elif request.answer_prefix:
            # Most servers start a fresh assistant turn, so ask for the bare label: then the
            # first generated token is the label, the token the logprobs are read from.
            instruction = _instruction_for(request)
            if messages and messages[-1]["role"] == "user":
                messages[-1] = {"role": "user", "content": messages[-1]["content"].rstrip() + "\n\n" + instruction}
            else:
                messages.append({"role": "user", "content": instruction})
        body.update({"temperature": 0.0, max_tokens_param: 1, "logprobs": True, "top_logprobs": top_logprobs})
    else:
        body.update({"temperature": request.temperature, max_tokens_param: request.max_tokens})
        if request.json_schema is not None:
            name = str(request.json_schema.get("title") or "judgment")
            name = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in name)[:64] or "judgment"
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": request.json_schema, "strict": False},
            }
    return body, extra


def _first_choice(data: dict[str, Any]) -> dict[str, Any]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise _Retryable("malformed answer: no choices")
    first = choices[0]
    if not isinstance(first, dict):
        raise _Retryable("malformed answer: a choice is not an object")
    return first


def _usage(data: dict[str, Any]) -> tuple[int, int]:
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return 0, 0
    tin, tout = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return (tin if isinstance(tin, int) else 0), (tout if isinstance(tout, int) else 0)


def _extra(data: dict[str, Any], choice: dict[str, Any]) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    for key in ("model", "system_fingerprint", "id"):
        if isinstance(data.get(key), str):
            extra["served_" + key if key != "id" else "response_id"] = data[key]
    if isinstance(choice.get("finish_reason"), str):
        extra["finish_reason"] = choice["finish_reason"]
    return extra


def parse_generate(data: dict[str, Any]) -> CallResult:
    """A CallResult from a chat completion, or _Retryable when it carries no text."""
    choice = _first_choice(data)
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _Retryable("malformed answer: the choice has no message")
    content = message.get("content")
    if not isinstance(content, str):
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            raise _Retryable(f"the model refused: {refusal[:200]}")
        raise _Retryable("malformed answer: the message has no content")
    tin, tout = _usage(data)
    return CallResult(text=content, tokens_in=tin, tokens_out=tout, extra=_extra(data, choice))


def _logprob(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    if math.isnan(value) or value > 0:
        return None
    return value


def parse_logprobs(data: dict[str, Any], choices: tuple[str, ...]) -> CallResult:
    """Choice probabilities from the first generated token's top_logprobs.

    Each choice takes the highest log-probability among tokens whose text, stripped of
    whitespace, equals it (" 2" and "2" both count for "2"); a choice absent from the list
    gets -inf. Raises LogprobsUnsupported when the server sent no log-probabilities.
    """
    choice = _first_choice(data)
    lp = choice.get("logprobs")
    content = lp.get("content") if isinstance(lp, dict) else None
    if not isinstance(content, list) or not content:
        raise LogprobsUnsupported("the server answered without logprobs")
    first = content[0]
    if not isinstance(first, dict):
        raise _Retryable("malformed answer: a logprobs entry is not an object")
    top = first.get("top_logprobs")
    if not isinstance(top, list) or not top:
        raise LogprobsUnsupported("the server answered without top_logprobs alternatives")
    candidates = [first, *top]
    by_choice = {c: -math.inf for c in choices}
    seen: list[list[Any]] = []
    for cand in candidates:
        if not isinstance(cand, dict) or not isinstance(cand.get("token"), str):
            raise _Retryable("malformed answer: a logprobs entry has no token")
        value = _logprob(cand.get("logprob"))
        if value is None:
            raise _Retryable(f"malformed answer: token {cand['token']!r} has logprob {cand.get('logprob')!r}")
        seen.append([cand["token"], value])
        key = cand["token"].strip()
        if key in by_choice and value > by_choice[key]:
            by_choice[key] = value
    probs, mass = normalise_choice_probs(by_choice)
    text = max(probs, key=lambda c: probs[c]) if mass > 0 else ""
    tin, tout = _usage(data)
    extra = _extra(data, choice)
    extra["generated_token"] = first["token"]
    extra["top_logprobs"] = seen[1:]
    return CallResult(text=text, probs=probs, choice_mass=mass, tokens_in=tin, tokens_out=tout, extra=extra)


def _decode(payload: bytes) -> dict[str, Any]:
    """The response body as a JSON object, or _Retryable."""
    try:
        data = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError):
        shown = payload[:80].decode("utf-8", "replace").replace("\n", " ")
        raise _Retryable(f"malformed answer: not JSON ({shown!r})") from None
    if not isinstance(data, dict):
        raise _Retryable(f"malformed answer: a JSON {type(data).__name__}, not an object")
    return data


# --------------------------------------------------------------------------------------
# the backend
# --------------------------------------------------------------------------------------
# The header that asks the SDK for the unparsed HTTP response (what `with_raw_response` sets).
_RAW_RESPONSE_HEADER = "X-Stainless-Raw-Response"

# Calls in flight per AsyncOpenAI client. The HTTP pool under a client scans all its
# connections on every request, so at high concurrency a few clients of 8 connections each
# cost far less CPU than one client of 64 (measured: about 1 ms less per call at 64).
CALLS_PER_CLIENT = 8


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
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BackendError(f"openai: base URL {public_base_url(base_url)!r} should look like http(s)://HOST[:PORT]/v1")
        self.model = model
        # The URL as given may carry credentials (user:password@, ?key=...): kept out of sight.
        self._base_url = _Secret(base_url)
        self.public_base_url = public_base_url(base_url)
        self._key = _Secret(api_key) if api_key else None
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

    # --- identity -------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {
            "backend": "openai",
            "model": self.model,
            "revision": self.model_revision,
            "base_url": self.public_base_url,
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
        return -(-len(text.encode("utf-8")) // 3)

    def __repr__(self) -> str:
        return (
            f"OpenAICompatBackend(model={self.model!r}, base_url={self.public_base_url!r}, "
            f"concurrency={self.max_concurrency}, timeout_s={self.timeout_s}, max_retries={self.max_retries})"
        )

    # --- clients --------------------------------------------------------------------
    def _new_client(self) -> Any:
        import openai

        ssl_context = _shared_ssl_context()
        return openai.AsyncOpenAI(
            api_key=self._key.reveal() if self._key else NO_KEY_PLACEHOLDER,
            base_url=self._base_url.reveal(),
            timeout=self.timeout_s,
            max_retries=0,  # our own loop retries, and counts
            # the SDK's own HTTP client settings, with one TLS context for all clients
            http_client=openai.DefaultAsyncHttpxClient(verify=ssl_context) if ssl_context is not None else None,
        )

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

    def _count_retry(self, reason: str) -> None:
        with self._lock:
            self.retries_total += 1
            self.retry_reasons[reason.split(":")[0]] += 1

    def _scrub(self, text: str) -> str:
        if self._key:
            text = text.replace(self._key.reveal(), "***")
        return text

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
            if retry_after > self.max_retry_after_s:
                raise BackendError(
                    f"{self.name} at {self.public_base_url}: the server asks to wait {retry_after:.0f} s before "
                    f"retrying, more than max_retry_after_s={self.max_retry_after_s:.0f}"
                )
            return retry_after * self._rng.uniform(1.0, 1.1)
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
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                result = await self._attempt(client, request, body, extra_body)
            except _Retryable as failure:
                reason = self._scrub(failure.reason)
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
        self, client: Any, request: CallRequest, body: dict[str, Any], extra_body: dict[str, Any]
    ) -> CallResult:
        import openai

        header = getattr(getattr(openai, "_constants", None), "RAW_RESPONSE_HEADER", _RAW_RESPONSE_HEADER)
        try:
            # The raw response: we read the JSON ourselves (cheaper than the SDK's models, and a
            # body that is not JSON is caught here rather than handed back as text). The body is
            # posted as built: `chat.completions.create` would first walk it against the SDK's
            # typed parameters, which cost about as much client CPU as the HTTP exchange itself.
            post = client.post(
                "/chat/completions",
                cast_to=object,
                body={**body, **extra_body} if extra_body else body,
                options={"headers": {header: "true"}, "timeout": self.timeout_s},
            )
            # A limit on the attempt as a whole; asyncio.timeout (3.11+) adds no task per call.
            if hasattr(asyncio, "timeout"):
                async with asyncio.timeout(self.timeout_s):
                    raw = await post
            else:  # pragma: no cover - Python 3.10
                raw = await asyncio.wait_for(post, timeout=self.timeout_s)
            payload = raw.http_response.content
            if self._key:  # a server that echoes the key into its answer must not get it stored
                payload = payload.replace(self._key.reveal().encode(), b"***")
        except (asyncio.TimeoutError, TimeoutError):
            raise _Retryable(f"timeout: no answer within {self.timeout_s:g} s") from None
        except openai.APITimeoutError:
            raise _Retryable(f"timeout: no answer within {self.timeout_s:g} s") from None
        except openai.APIConnectionError as exc:
            cause = type(exc.__cause__).__name__ if exc.__cause__ else "no detail"
            raise _Retryable(f"connection error: {cause}") from None
        except openai.APIStatusError as exc:
            self._status_failure(exc, request)
        except openai.OpenAIError as exc:
            raise BackendError(f"{self.name} at {self.public_base_url}: {self._scrub(str(exc))}") from None
        data = _decode(payload)
        if request.mode == "logprobs":
            try:
                result = parse_logprobs(data, request.choices)
            except LogprobsUnsupported as exc:
                if self._logprobs_answers >= self.max_concurrency:
                    # This server has scored many times: one answer without logprobs is a glitch to
                    # retry, not a reason to switch the whole judge to generate mode. (Below that
                    # count, answers racing in the first wave keep the old rule: cannot score.)
                    raise _Retryable(f"malformed answer: {exc}") from None
                raise LogprobsUnsupported(f"{self.name} at {self.public_base_url}: {exc}") from None
            with self._lock:
                self._logprobs_answers += 1
            return result
        return parse_generate(data)

    def _status_failure(self, exc: Any, request: CallRequest) -> None:
        """Turn an HTTP error status into _Retryable, LogprobsUnsupported or BackendError (always raises)."""
        status = int(exc.status_code)
        message = self._scrub(_server_message(exc))
        if status in RETRYABLE_STATUS:
            headers = dict(exc.response.headers) if getattr(exc, "response", None) is not None else None
            raise _Retryable(f"HTTP {status}: {message}", parse_retry_after(headers)) from None
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
            for client in state.clients:
                await client.close()

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
def _shared_ssl_context() -> Any:
    """The TLS context the SDK's HTTP library would build for each client, built once: each one
    loads the CA bundle (about 25 ms), and a backend opens a client per 8 calls in flight.
    None (each client builds its own) when the SDK's HTTP library is not the expected one."""
    import sys

    import openai

    base = next((c for c in openai.DefaultAsyncHttpxClient.__mro__ if c.__name__ == "AsyncClient"), None)
    library = sys.modules.get(base.__module__.split(".")[0]) if base is not None else None
    create = getattr(library, "create_ssl_context", None)
    return create() if callable(create) else None


async def _close_all(clients: list[Any]) -> None:
    for client in clients:
        await client.close()


def _server_message(exc: Any) -> str:
    """The server's own words from an error response, shortened."""
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
    text = " ".join(str(message).split())
    return text if len(text) <= 500 else text[:497] + "..."


# --------------------------------------------------------------------------------------
# factory
# --------------------------------------------------------------------------------------
def create(
    model: str,
    base_url: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    api_key_file: str | os.PathLike[str] | None = None,
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
    **ignored: Any,
) -> OpenAICompatBackend:
    """Build `openai:MODEL`. The base URL comes from `base_url`, else $OPENAI_BASE_URL, else OpenAI's."""
    url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    key = resolve_api_key(api_key_env, api_key_file, url)
    return OpenAICompatBackend(
        model,
        base_url=url,
        api_key=key,
        concurrency=int(concurrency),
        timeout_s=float(timeout_s),
        max_retries=int(max_retries),
        model_revision=model_revision,
        context_tokens=int(context_tokens) if context_tokens is not None else None,
        top_logprobs=int(top_logprobs),
        answer_prefix_mode=answer_prefix_mode,
        max_tokens_param=max_tokens_param,
        backoff_base_s=float(backoff_base_s),
        backoff_max_s=float(backoff_max_s),
        max_retry_after_s=float(max_retry_after_s),
    )


# --------------------------------------------------------------------------------------
# OpenAI Batch API files (no network: write the requests, read the results)
# --------------------------------------------------------------------------------------
def write_batch_file(
    requests: Mapping[str, CallRequest] | Iterable[tuple[str, CallRequest]],
    path: str | os.PathLike[str],
    model: str,
    *,
    top_logprobs: int = 20,
    answer_prefix_mode: AnswerPrefixMode = "instruct",
    max_tokens_param: str = "max_tokens",
) -> int:
    """Write one Batch API request line per (custom_id, request); returns the number written.

    The bodies are exactly what the live backend would send (logprobs-mode requests included).
    """
    items = list(requests.items()) if isinstance(requests, Mapping) else list(requests)
    seen: set[str] = set()
    lines: list[str] = []
    for custom_id, request in items:
        if not isinstance(custom_id, str) or not custom_id:
            raise BackendError(f"batch custom_id must be a non-empty string, got {custom_id!r}")
        if custom_id in seen:
            raise BackendError(f"batch custom_id {custom_id!r} appears twice")
        seen.add(custom_id)
        line = batch_request_line(custom_id, request, model, top_logprobs=top_logprobs,
                                  answer_prefix_mode=answer_prefix_mode, max_tokens_param=max_tokens_param)
        lines.append(json.dumps(line, ensure_ascii=False))
    atomic_write_text(path, "".join(line + "\n" for line in lines))
    return len(lines)


def batch_request_line(custom_id: str, request: CallRequest, model: str, *, top_logprobs: int = 20,
                       answer_prefix_mode: AnswerPrefixMode = "instruct",
                       max_tokens_param: str = "max_tokens") -> dict[str, Any]:
    """One Batch API request line: the body exactly as the live backend would post it."""
    body, extra = build_chat_body(request, model, top_logprobs=top_logprobs, answer_prefix_mode=answer_prefix_mode,
                                  max_tokens_param=max_tokens_param)
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": {**body, **extra}}


def read_batch_results(
    path: str | os.PathLike[str],
    requests: Mapping[str, CallRequest] | None = None,
    *,
    allow_errors: bool = False,
) -> dict[str, CallResult]:
    """custom_id -> CallResult from a Batch API output file.

    Pass the original `requests` (custom_id -> CallRequest) so logprobs-mode answers become
    choice probabilities; without them every line is read as generated text. A failed line
    (an error, a non-200 status, an answer without text) raises BackendError naming the failed
    ids, unless `allow_errors`, in which case failed ids are left out of the result.
    """
    results: dict[str, CallResult] = {}
    failures: list[tuple[str, str]] = []
    for cid, (lineno, line) in read_batch_lines(path).items():
        request = requests.get(cid) if requests is not None else None
        if requests is not None and request is None:
            raise InputError(path, lineno, "a custom_id among the requests given", cid)
        try:
            results[cid] = batch_result(line, request)
        except BackendError as exc:
            failures.append((cid, str(exc)))
    if failures and not allow_errors:
        shown = "; ".join(f"{cid}: {why}" for cid, why in failures[:5])
        more = f" (and {len(failures) - 5} more)" if len(failures) > 5 else ""
        raise BackendError(f"{len(failures)} batch requests in {path} failed: {shown}{more}")
    return results


def read_batch_lines(path: str | os.PathLike[str]) -> dict[str, tuple[int, dict[str, Any]]]:
    """custom_id -> (line number, the parsed line) of a Batch API output file."""
    lines: dict[str, tuple[int, dict[str, Any]]] = {}
    try:
        fh = Path(path).open(encoding="utf-8")
    except OSError as exc:
        raise InputError(path, None, "a Batch API output file", exc.strerror or type(exc).__name__) from None
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except json.JSONDecodeError:
                raise InputError(path, lineno, "a JSON object (a Batch API output line)", raw.strip()) from None
            if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
                raise InputError(path, lineno, "a JSON object with a string custom_id", raw.strip())
            cid = line["custom_id"]
            if cid in lines:
                raise InputError(path, lineno, f"a custom_id not seen before ({cid!r} repeats)")
            lines[cid] = (lineno, line)
    return lines


def batch_result(line: dict[str, Any], request: CallRequest | None) -> CallResult:
    """The CallResult of one Batch API output line (logprobs mode when `request` asks for it);
    BackendError with the reason when the line is a failure or its answer cannot be read."""
    reason = _batch_failure(line)
    if reason is None:
        data = line["response"]["body"]
        try:
            if request is not None and request.mode == "logprobs":
                return parse_logprobs(data, request.choices)
            return parse_generate(data)
        except (_Retryable, LogprobsUnsupported) as exc:
            reason = str(exc)
    raise BackendError(reason)


def _batch_failure(line: dict[str, Any]) -> str | None:
    error = line.get("error")
    if error:
        if isinstance(error, dict):
            return f"{error.get('code') or 'error'}: {error.get('message') or 'no message'}"
        return str(error)
    response = line.get("response")
    if not isinstance(response, dict):
        return "no response"
    status = response.get("status_code")
    if status != 200:
        body = response.get("body")
        err = body.get("error") if isinstance(body, dict) else None
        msg = err.get("message") if isinstance(err, dict) else None
        return f"HTTP {status}: {msg or 'no message'}"
    if not isinstance(response.get("body"), dict):
        return "response without a body"
    return None
