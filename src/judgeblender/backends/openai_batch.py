"""OpenAI Batch API files, without the network: write the requests, read the results.

A requests file holds one chat-completions body per line (built by openai_wire, as live
calls are) under a custom_id; a results file's answers are parsed as live answers are.
backends/batch.py routes a run's calls through these files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..calls import CallRequest, CallResult
from ..errors import BackendError, InputError
from ..fileio import atomic_write_text
from .base import LogprobsUnsupported
from .openai_wire import AnswerPrefixMode, Retryable, build_chat_body, parse_generate, parse_logprobs

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
