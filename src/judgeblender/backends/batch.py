"""Served judges through a provider's Batch API files (OpenAI's format) instead of live calls.

For large offline jobs: a batch costs half as much and returns within a day. The flow is the
normal `judge` command, run once per exchange of files:

1. `judge ... --batch-write requests.jsonl` answers what the store already has and writes every
   other call of the current wave to the file (custom_id = the call's store key); those pairs
   stay unjudged ("queued for the Batch API").
2. The user submits the file with the provider's tools and downloads the output file.
3. `judge ... --batch-read output.jsonl [--batch-write next.jsonl]` answers calls from the
   output file; each answer goes into the store like a live call, so any later run reuses it.
   A call not in the file is queued again with --batch-write (a retry after an invalid
   answer, the next step of a multi-step prompt), else made live.

The answers are parsed exactly as live answers are (openai_wire's parsers).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ..errors import ArgumentError, BackendError, CallDeferred
from ..calls import CallRequest, CallResult, call_key
from ..fileio import atomic_write_text
from .base import Backend
from .openai_batch import batch_request_line, batch_result, read_batch_lines
from .openai_compat import OpenAICompatBackend

QUEUED = "queued for the Batch API (run again with --batch-read once its results are back)"


class BatchRequests:
    """The requests to submit, collected over every judge of a run; one file per model, since
    the Batch API takes one model per file."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.lines: dict[str, dict[str, dict[str, Any]]] = {}  # model -> custom_id -> line

    def add(self, model: str, line: dict[str, Any]) -> None:
        self.lines.setdefault(model, {})[line["custom_id"]] = line

    def files(self) -> dict[str, Path]:
        """model -> the file its requests go to: the path given, or with the model in its name
        when several models have requests."""
        if len(self.lines) <= 1:
            return {model: self.path for model in self.lines}
        safe = {m: re.sub(r"[^A-Za-z0-9._-]+", "_", m) for m in self.lines}
        return {m: self.path.with_name(f"{self.path.stem}.{safe[m]}{self.path.suffix}") for m in self.lines}

    def write(self) -> dict[Path, int]:
        """Write the files (atomically); returns how many requests went to each."""
        written = {}
        for model, path in self.files().items():
            lines = self.lines[model].values()
            atomic_write_text(path, "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
            written[path] = len(lines)
        return written


class BatchBackend(Backend):
    """An OpenAI-compatible backend answered from Batch API output lines, queueing the rest."""

    def __init__(self, inner: OpenAICompatBackend, results: dict[str, tuple[int, dict[str, Any] | None, int]],
                 results_path: Path | None, queue: BatchRequests | None):
        self.inner = inner
        self.kind = inner.kind
        self.supports_logprobs = inner.supports_logprobs
        self.max_concurrency = inner.max_concurrency
        self._results = results
        self._results_path = results_path
        self._queue = queue

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()  # the same store keys as live calls

    def context_tokens(self) -> int | None:
        return self.inner.context_tokens()

    def count_tokens(self, text: str) -> int | None:
        return self.inner.count_tokens(text)

    def token_prefix(self, text: str, n: int) -> tuple[int, int] | None:
        return self.inner.token_prefix(text, n)

    def max_token_chars(self) -> int | None:
        return self.inner.max_token_chars()

    def execute(self, request: CallRequest) -> CallResult:
        key = call_key(self.identity(), request)
        if key in self._results or self._queue is not None:
            return self._from_files(key, request)
        return self.inner.execute(request)

    async def aexecute(self, request: CallRequest) -> CallResult:
        key = call_key(self.identity(), request)
        if key in self._results or self._queue is not None:
            return self._from_files(key, request)  # no I/O: answered from memory or queued
        return await self.inner.aexecute(request)

    def _from_files(self, key: str, request: CallRequest) -> CallResult:
        """The answer in the output file, or the request queued for the next requests file."""
        found = self._results.get(key)
        if found is not None:
            lineno, line, size = found
            try:
                result = batch_result(line, request, size, self.inner.top_logprobs)
            except BackendError as exc:
                raise BackendError(f"{self._results_path}:{lineno}: {exc}") from None
            result.extra["batch"] = True
            return result
        assert self._queue is not None  # _from_files is called only with a result or a queue
        self._queue.add(self.inner.model, batch_request_line(
            key, request, self.inner.model, top_logprobs=self.inner.top_logprobs,
            answer_prefix_mode=self.inner.answer_prefix_mode, max_tokens_param=self.inner.max_tokens_param))
        raise CallDeferred(QUEUED)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def close(self) -> None:
        self.inner.close()


def use_batch_files(judges: list, read: Path | None, write: Path | None) -> BatchRequests | None:
    """Route the judges' calls through Batch API files; returns the queue to write at the end
    (None without `write`). Only served (openai:) judges can."""
    if read is None and write is None:
        return None
    results = read_batch_lines(read) if read is not None else {}
    queue = BatchRequests(write) if write is not None else None
    for judge in judges:
        backend = getattr(judge, "backend", None)
        if not isinstance(backend, OpenAICompatBackend):
            raise ArgumentError("batch_write" if write is not None else "batch_read",
                                "served judges (openai:MODEL): Batch API files work with served models, whose "
                                "providers have a Batch API", described=f"the judge {judge.id}")
        judge.backend = BatchBackend(backend, results, read, queue)
    return queue
