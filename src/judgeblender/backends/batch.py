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

The Batch API takes one model per file, so a run of several served models writes one requests
file per model, the model's name in the file's name. Two names may map to one file name (only
letters, digits, `.`, `_` and `-` are kept, so `a/b` and `a_b` meet; `M` and `m` meet on a file
system that ignores case): one file would hold, or overwrite, the other's requests. So the files
are planned before any call (`use_batch_files`): two models meeting in one file, or a file that
the output checks refuse (an input, another output, a store, a directory, a full or read-only
disk), is one error naming them, and the requests are written only after the same checks.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .. import validate
from ..errors import ArgumentError, BackendError, CallDeferred, JudgeblenderError
from ..calls import CallRequest, CallResult, call_key
from ..fileio import atomic_write_text
from .base import Backend
from .openai_batch import batch_request_line, batch_result, read_batch_lines
from .openai_compat import OpenAICompatBackend

QUEUED = "queued for the Batch API (run again with --batch-read once its results are back)"


class BatchRequests:
    """The requests to submit, collected over every judge of a run; one file per model, since
    the Batch API takes one model per file.

    `inputs` and `outputs` ((what, path) pairs) are the other files the command reads and
    writes: a model's requests file may be none of them (the CLI passes its own; a library
    caller may pass its own, or none)."""

    def __init__(self, path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]] = (),
                 outputs: Iterable[tuple[str, str | os.PathLike[str]]] = ()):
        self.path = Path(path)
        self.inputs = [Path(p) for p in inputs]
        self.outputs = [(what, Path(p)) for what, p in outputs]
        self.lines: dict[str, dict[str, dict[str, Any]]] = {}  # model -> custom_id -> line

    def add(self, model: str, line: dict[str, Any]) -> None:
        self.lines.setdefault(model, {})[line["custom_id"]] = line

    def files(self) -> dict[str, Path]:
        """model -> the file its requests go to: the path given, or with the model in its name
        when several models have requests."""
        return self.files_for(list(self.lines))

    def files_for(self, models: Iterable[str]) -> dict[str, Path]:
        """model -> the file its requests would go to, were these the models with requests;
        JudgeblenderError (exit 2) naming both models and the file when two would share one."""
        models = list(dict.fromkeys(models))
        if len(models) <= 1:
            return {model: self.path for model in models}
        files = {m: self.path.with_name(f"{self.path.stem}.{_file_part(m)}{self.path.suffix}") for m in models}
        seen: dict[str, str] = {}
        for model, path in files.items():
            # case folded: on a file system that ignores case (macOS, Windows) M and m are one file
            other = seen.setdefault(path.name.casefold(), model)
            if other != model:
                raise JudgeblenderError(
                    f"{path}: the Batch API requests of models {other!r} and {model!r} would both go to this file, "
                    f"as {files[other].name} and {path.name} (a file name keeps only the letters, digits, '.', '_' "
                    "and '-' of a model's name, and some file systems ignore case), and one model's requests would "
                    "be lost; judge with these two models in separate runs")
        return files

    def check(self, models: Iterable[str]) -> None:
        """Before any call: the files these models' requests may go to (one per model, or the
        path given when one has requests) are distinct and pass the checks every output passes
        (validate.output_file: not a directory, an input, a store, nor on a read-only or full
        disk), none the same file as another output of the command."""
        files = self.files_for(models)
        planned = {self.path: "the Batch API requests file", **{
            path: f"the Batch API requests file of model {model!r}" for model, path in files.items()
            if path != self.path}}
        for path, what in planned.items():
            validate.output_file(path, self.inputs, what)
        validate.distinct_outputs([*self.outputs, *((what, path) for path, what in planned.items())])

    def write(self) -> dict[Path, int]:
        """Write the files (atomically), each checked as check() checks them, every one before
        the first byte; returns how many requests went to each."""
        files = self.files()
        self.check(self.lines)
        written = {}
        for model, path in files.items():
            lines = self.lines[model].values()
            atomic_write_text(path, "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
            written[path] = len(lines)
        return written


def _file_part(model: str) -> str:
    """A model's name as a part of a file name: runs of other characters than letters, digits,
    '.', '_' and '-' become one '_'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model)


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


def served_models(model_strings: Iterable[str]) -> list[str]:
    """The served models (`openai:NAME`: NAME) among model strings, as their requests files are
    named: what a command can check before it builds its judges, or opens its store, whose file
    is a byte written too. use_batch_files checks again with the judges' own backends."""
    from .openai_compat import PROVIDER
    from .registry import split_model_string

    return [name for prefix, name in map(split_model_string, model_strings) if prefix == PROVIDER.prefix]


def use_batch_files(judges: list, read: Path | None, write: Path | BatchRequests | None) -> BatchRequests | None:
    """Route the judges' calls through Batch API files; returns the queue to write at the end
    (None without --batch-write). Only served (openai:) judges can. `write` is the requests
    file, or a BatchRequests that knows the command's other files; the files the judges'
    models may write are checked here, before any call (BatchRequests.check), with `read`
    among the files they may not be."""
    if read is None and write is None:
        return None
    queue = write if isinstance(write, BatchRequests) or write is None else BatchRequests(write)
    served = []
    for judge in judges:
        backend = getattr(judge, "backend", None)
        if not isinstance(backend, OpenAICompatBackend):
            raise ArgumentError("batch_write" if write is not None else "batch_read",
                                "served judges (openai:MODEL): Batch API files work with served models, whose "
                                "providers have a Batch API", described=f"the judge {judge.id}")
        served.append(backend)
    if queue is not None:
        if read is not None:
            queue.inputs.append(Path(read))
        queue.check(backend.model for backend in served)
    results = read_batch_lines(read) if read is not None else {}
    for judge, backend in zip(judges, served):
        judge.backend = BatchBackend(backend, results, read, queue)
    return queue
