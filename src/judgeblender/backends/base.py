"""The contract every model backend fulfils: one `execute()` per LLM call.

A backend turns a CallRequest (chat messages plus decoding settings) into a CallResult.
Two scoring modes exist:
- generate: decode text greedily (temperature 0, fixed seed) and return it for parsing;
- logprobs: score the next token after the assistant's `answer_prefix` and return the
  probability of each candidate in `choices` (for example "0".."3"), without generating.
"""

from __future__ import annotations

import asyncio
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal

Mode = Literal["generate", "logprobs"]


@dataclass(frozen=True)
class Message:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class CallRequest:
    messages: tuple[Message, ...]
    mode: Mode = "generate"
    max_tokens: int = 256
    temperature: float = 0.0
    seed: int = 0
    # logprobs mode: the assistant turn starts with this text, then the label token is read.
    answer_prefix: str = ""
    choices: tuple[str, ...] = ()
    # optional JSON schema for structured output (rubric judges); backends may ignore it.
    json_schema: dict[str, Any] | None = None

    def key_fields(self) -> dict[str, Any]:
        """Everything that can change the model's answer, for the store's cache key."""
        # Built field by field, not with dataclasses.asdict: its recursive deep copy cost a tenth
        # of the client CPU per served call. The keys and values are asdict's, so keys stay stable.
        # Callers only serialise it, so the schema is shared, not copied.
        return {"messages": [[m.role, m.content] for m in self.messages], "mode": self.mode,
                "max_tokens": self.max_tokens, "temperature": self.temperature, "seed": self.seed,
                "answer_prefix": self.answer_prefix, "choices": list(self.choices),
                "json_schema": self.json_schema}


@dataclass
class CallResult:
    text: str
    # logprobs mode: probability per choice, renormalised over the choices.
    probs: dict[str, float] | None = None
    # logprobs mode: how much of the model's whole next-token mass fell on the choices.
    choice_mass: float | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


class LogprobsUnsupported(Exception):
    """Raised by a backend that cannot score choices; the judge decides whether to fall back."""


class Backend(ABC):
    """A model. Subclasses set `kind` and implement `identity()` and `execute()`."""

    kind: str = "base"
    supports_logprobs: bool = False
    # How many calls may be in flight at once (1 for an embedded model).
    max_concurrency: int = 1

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """What makes this model itself: file sha256, or served name + revision + endpoint."""

    @abstractmethod
    def execute(self, request: CallRequest) -> CallResult:
        """Run one call synchronously."""

    async def aexecute(self, request: CallRequest) -> CallResult:
        """Run one call from async code; blocking backends run in a worker thread."""
        return await asyncio.to_thread(self.execute, request)

    def context_tokens(self) -> int | None:
        """The model's context window in tokens, when known."""
        return None

    def count_tokens(self, text: str) -> int | None:
        """Tokens in `text` under this model's tokenizer, when one is available."""
        return None

    def close(self) -> None:
        """Release model memory or connections."""

    @property
    def name(self) -> str:
        ident = self.identity()
        return f"{self.kind}:{ident.get('model', '?')}"


def normalise_choice_probs(logprob_by_choice: dict[str, float]) -> tuple[dict[str, float], float]:
    """Turn per-choice log-probabilities into a distribution over the choices.

    Returns (probabilities summing to 1, the choices' total share of the full distribution).
    A choice the model gave no probability at all has log-probability -inf.
    """
    finite = [lp for lp in logprob_by_choice.values() if math.isfinite(lp)]
    if not finite:
        return {c: 0.0 for c in logprob_by_choice}, 0.0
    top = max(finite)
    weights = {c: (math.exp(lp - top) if math.isfinite(lp) else 0.0) for c, lp in logprob_by_choice.items()}
    total = sum(weights.values())
    mass = math.exp(top) * total
    return {c: w / total for c, w in weights.items()}, min(mass, 1.0)
