"""A scripted model FOR TESTS AND EXAMPLES ONLY: canned answers keyed by the prompt.

Rules are tried in order; the first whose `contains` text occurs in the prompt (system and
user messages joined) answers. A rule gives `output` (generate mode) and optionally `probs`
(logprobs mode, a distribution over the step's choices). A queue, when given, answers calls
in order before any rule. Generated answers end with finish_reason "stop" unless a rule gives
another (or null for none). Every request is recorded in `calls` for assertions, unless
"record": false (long benchmark runs, bench/stream.py). Without a delay it answers on the
event loop itself: an instant model needs no worker thread, so a benchmark of the engine's own
cost per pair does not time a thread hop per call.
Model string: `scripted:PATH.json` with {"rules": [...], "default": "...", "logprobs": true}.
"""

from __future__ import annotations

import json
import time
from collections import deque
from pathlib import Path
from typing import Any, Optional

from ..errors import BackendError, InputError
from ..calls import CallRequest, CallResult
from pydantic import Field

from .base import Backend, LogprobsUnsupported, normalise_choice_probs
from .registry import BackendOptions, Provider


class ScriptedBackend(Backend):
    kind = "scripted"

    def __init__(
        self,
        rules: list[dict[str, Any]] | None = None,
        queue: list[Any] | None = None,
        default: str | None = None,
        logprobs: bool = True,
        name: str = "scripted",
        delay_s: float = 0.0,
        concurrency: int = 1,
        record: bool = True,
    ):
        self.rules = list(rules or [])
        self.queue: deque = deque(queue or [])
        self.default = default
        self.supports_logprobs = logprobs
        self.model_name = name
        self.delay_s = delay_s
        self.max_concurrency = concurrency
        self.calls: list[CallRequest] | deque = [] if record else deque(maxlen=0)

    def identity(self) -> dict[str, Any]:
        return {"backend": "scripted", "model": self.model_name, "rules": self.rules, "default": self.default}

    def _answer(self, prompt: str) -> dict[str, Any]:
        if self.queue:
            item = self.queue.popleft()
            return item if isinstance(item, dict) else {"output": item}
        for rule in self.rules:
            if rule.get("contains", "") in prompt:
                return rule
        if self.default is not None:
            return {"output": self.default}
        raise BackendError(f"scripted model {self.model_name!r} has no answer for this prompt: {prompt[:80]!r}")

    async def aexecute(self, request: CallRequest) -> CallResult:
        if self.delay_s:
            return await super().aexecute(request)
        return self.execute(request)

    def execute(self, request: CallRequest) -> CallResult:
        self.calls.append(request)
        if self.delay_s:
            time.sleep(self.delay_s)
        prompt = "\n".join(m.content for m in request.messages) + request.answer_prefix
        answer = self._answer(prompt)
        if isinstance(answer.get("raise"), str):
            raise BackendError(answer["raise"])
        tokens_in = len(prompt.split())
        if request.mode == "generate":
            text = str(answer.get("output", ""))
            # it ended normally ("stop"), unless a rule says otherwise, as a server does ("length",
            # "content_filter"; null for a server that sends none)
            finish = answer.get("finish_reason", "stop")
            extra = {"finish_reason": finish} if finish is not None else {}
            return CallResult(text=text, tokens_in=tokens_in, tokens_out=len(text.split()), extra=extra)
        if not self.supports_logprobs:
            raise LogprobsUnsupported("this scripted model has no logprobs")
        if "probs" in answer:
            logps = {c: _log(answer["probs"].get(c, 0.0)) for c in request.choices}
        else:
            out = str(answer.get("output", "")).strip()
            logps = {c: (0.0 if c == out else float("-inf")) for c in request.choices}
        probs, mass = normalise_choice_probs(logps)
        best = max(probs, key=probs.get) if mass > 0 else ""
        return CallResult(text=best, probs=probs if mass > 0 else None, choice_mass=mass, tokens_in=tokens_in)


def _log(p: float) -> float:
    import math

    return math.log(p) if p > 0 else float("-inf")


class Options(BackendOptions):
    """`scripted:` options; they override the JSON file's."""

    concurrency: int = Field(1, ge=1)
    delay_s: Optional[float] = Field(None, ge=0)


def build(path: str, options: Options) -> ScriptedBackend:
    try:
        spec = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(path, None, "a scripted-model JSON file", "no such file") from None
    except json.JSONDecodeError as exc:
        raise InputError(path, exc.lineno, "valid JSON", exc.msg) from None
    delay = options.delay_s if options.delay_s is not None else float(spec.get("delay_s", 0.0))
    return ScriptedBackend(rules=spec.get("rules"), default=spec.get("default"), logprobs=spec.get("logprobs", True),
                           name=spec.get("name", Path(path).stem), delay_s=delay, concurrency=options.concurrency,
                           record=spec.get("record", True))


PROVIDER = Provider("scripted", Options, build)
create = PROVIDER.create
