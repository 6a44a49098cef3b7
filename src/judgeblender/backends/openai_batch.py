"""OpenAI Batch API files, without the network: write the requests, read the results.

A requests file holds one chat-completions body per line (built by openai_wire, as live
calls are) under a custom_id; a results file's answers are parsed as live answers are.
backends/batch.py routes a run's calls through these files.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import masking
from ..calls import CallRequest, CallResult
from ..errors import BackendError, InputError
from ..fileio import atomic_write_text
from .base import LogprobsUnsupported
from .openai_wire import (RESPONSE_HARD_CAP_BYTES, AnswerPrefixMode, Retryable, build_chat_body, parse_generate,
                          parse_logprobs, response_bound, too_large)

# A line over the hard cap is not parsed: its custom_id is read from its first bytes, where
# the Batch API writes it.
_HEAD_BYTES = 4096
_CUSTOM_ID = re.compile(rb'"custom_id"\s*:\s*("(?:[^"\\]|\\.)*")')

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
    top_logprobs: int = 20,
) -> dict[str, CallResult]:
    """custom_id -> CallResult from a Batch API output file.

    Pass the original `requests` (custom_id -> CallRequest) so logprobs-mode answers become
    choice probabilities; without them every line is read as generated text. A failed line
    (an error, a non-200 status, an answer without text) raises BackendError naming the failed
    ids, unless `allow_errors`, in which case failed ids are left out of the result. A line
    larger than its request's response bound (`top_logprobs` as the requests were written
    with) is an invalid answer ("answer too large") with none of its text.
    """
    results: dict[str, CallResult] = {}
    failures: list[tuple[str, str]] = []
    for cid, (lineno, line, size) in read_batch_lines(path).items():
        request = requests.get(cid) if requests is not None else None
        if requests is not None and request is None:
            raise InputError(path, lineno, "a custom_id among the requests given", cid)
        try:
            results[cid] = batch_result(line, request, size, top_logprobs)
        except BackendError as exc:
            failures.append((cid, str(exc)))
    if failures and not allow_errors:
        shown = "; ".join(f"{cid}: {why}" for cid, why in failures[:5])
        more = f" (and {len(failures) - 5} more)" if len(failures) > 5 else ""
        raise BackendError(f"{len(failures)} batch requests in {path} failed: {shown}{more}")
    return results


def read_batch_lines(path: str | os.PathLike[str]) -> dict[str, tuple[int, dict[str, Any] | None, int]]:
    """custom_id -> (line number, the parsed line, its size in bytes) of a Batch API output file.

    A line over the hard cap on responses is not read into memory, nor parsed (None): no
    request's answer may be that large. Each line is masked (masking.py) before it is read, as a
    live answer is: the provider's answers and errors may echo the API key."""
    mask = masking.current()
    lines: dict[str, tuple[int, dict[str, Any] | None, int]] = {}
    try:
        fh = Path(path).open("rb")
    except OSError as exc:
        raise InputError(path, None, "a Batch API output file", exc.strerror or type(exc).__name__) from None
    with fh:
        lineno = 0
        while raw := fh.readline(RESPONSE_HARD_CAP_BYTES + 1):
            lineno += 1
            size, line = len(raw), None
            if size > RESPONSE_HARD_CAP_BYTES:
                cid = _head_custom_id(raw[:_HEAD_BYTES])
                while not raw.endswith(b"\n") and (raw := fh.readline(1 << 20)):  # skip the rest
                    size += len(raw)
                if cid is None:
                    raise InputError(path, lineno, f"a Batch API output line of at most {RESPONSE_HARD_CAP_BYTES:,} "
                                     "bytes, or one with its custom_id first", f"{size:,} bytes")
            else:
                if not raw.strip():
                    continue
                raw = mask.bytes(raw)
                shown = raw.decode("utf-8", "replace").strip()
                try:
                    line = json.loads(raw)
                except (UnicodeDecodeError, json.JSONDecodeError):
                    raise InputError(path, lineno, "a JSON object (a Batch API output line)", shown[:200]) from None
                if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
                    raise InputError(path, lineno, "a JSON object with a string custom_id", shown[:200])
                cid = line["custom_id"]
            if cid in lines:
                raise InputError(path, lineno, f"a custom_id not seen before ({cid!r} repeats)")
            lines[cid] = (lineno, line, size)
    return lines


def _head_custom_id(head: bytes) -> str | None:
    found = _CUSTOM_ID.search(head)
    if found is None:
        return None
    try:
        cid = json.loads(found.group(1))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return cid if isinstance(cid, str) else None


def batch_result(line: dict[str, Any] | None, request: CallRequest | None, size: int = 0,
                 top_logprobs: int = 20) -> CallResult:
    """The CallResult of one Batch API output line (logprobs mode when `request` asks for it);
    BackendError with the reason when the line is a failure or its answer cannot be read. A
    line of `size` bytes over the request's response bound (the hard cap without a request)
    is the invalid answer "answer too large", as a live answer that size is."""
    bound = response_bound(request, top_logprobs) if request is not None else RESPONSE_HARD_CAP_BYTES
    if line is None or size > bound:
        return too_large(bound, f"the Batch API output line has {size:,} bytes")
    reason = _batch_failure(line)
    if reason is None:
        data = line["response"]["body"]
        try:
            if request is not None and request.mode == "logprobs":
                return parse_logprobs(data, request.choices)
            return parse_generate(data)
        except (Retryable, LogprobsUnsupported) as exc:
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
