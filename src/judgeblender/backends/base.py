"""The contract every model backend fulfils: one `execute()` per LLM call.

A backend turns a CallRequest (chat messages plus decoding settings) into a CallResult; both
types live in the ground-floor `judgeblender.calls`, which the store shares.
Two scoring modes exist:
- generate: decode text greedily (temperature 0, fixed seed) and return it for parsing;
- logprobs: score the next token after the assistant's `answer_prefix` and return the
  probability of each candidate in `choices` (for example "0".."3"), without generating.

Everything the engine uses of a backend is declared on `Backend`, with the default a plain
backend needs: the engine never asks whether a backend has something (no getattr), so a new
backend is complete when it fills in `identity` and `execute`, and a reader finds the whole
contract here.
"""

from __future__ import annotations

import asyncio
import math
from abc import ABC, abstractmethod
from typing import Any, Protocol

from ..calls import CallRequest, CallResult


class RowStore(Protocol):
    """What a backend may use of the store its answers go to (`Backend.store_rows`): the Ray
    backend has its workers make the costly parts of each answer's row (store.compact.row_parts)
    against the dictionaries this store will choose. Declared here, as a protocol, because
    backends do not import the store (tests/test_module_structure.py)."""

    def row_hint(self, request: CallRequest, identity_id: int) -> tuple[int | None, int | None] | None:
        """The ids of the dictionaries the store will compress this call's messages and metadata
        against, where it knows them; None where no part made elsewhere may be used."""

    def dictionary_bytes(self, dictionary: int) -> bytes:
        """A dictionary's bytes, for the processes that compress against it."""

    def write_in_child(self) -> None:
        """Ask for the store's writer process (its SQLite work in a process of its own), chosen
        if the store has no writer yet: a store already written here keeps writing here."""


class LogprobsUnsupported(Exception):
    """Raised by a backend that cannot score choices; the judge decides whether to fall back."""


class Backend(ABC):
    """A model. Subclasses set `kind` and implement `identity()` and `execute()`."""

    kind: str = "base"
    supports_logprobs: bool = False
    # How many calls may be in flight at once (1 for an embedded model).
    max_concurrency: int = 1
    # Answers come over the network while this process waits: its event loop's CPU bounds the
    # rate, so the engine has the store's rows made and written in a process of their own.
    served: bool = False
    # The run's driver CPU per call is what bounds it (a Ray driver feeding many workers): its
    # store's rows are committed by the writer process (judges.commit.declare_writer), not here.
    rows_off_driver: bool = False
    # Transport retries made so far (429, 5xx, timeouts, connection errors): a backend that
    # retries counts here; the engine reads it through count_retries.
    retries_total: int = 0

    @abstractmethod
    def identity(self) -> dict[str, Any]:
        """What makes this model itself: file sha256, or served name + revision (not its endpoint)."""

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

    def token_prefix(self, text: str, n: int) -> tuple[int, int] | None:
        """From ONE tokenization of `text`: (its tokens, how many of its characters the first `n`
        tokens cover; a character split between token n and n+1 is not covered). None when this
        model cannot tell (no tokenizer, or pieces that do not spell the text): the passage is
        then cut by counting tokens of prefixes (judges/truncate.py)."""
        return None

    def max_token_chars(self) -> int | None:
        """A bound on the characters one token covers, when known: a passage is first cut to
        (budget + 1) x this many characters, so a 20 MB passage is never tokenized whole."""
        return None

    def close(self) -> None:
        """Release model memory or connections."""

    async def aprepare(self) -> None:
        """Load now, in the running event loop, what the first call would load there (an SDK and
        what it reads from disk, the loop's clients), so a server is ready when it says so and
        its first request blocks the loop on none of it. Nothing by default: an embedded model
        is loaded when it is built."""

    async def aclose(self) -> None:
        """Close what this backend opened on the running event loop (a served client's
        connections), on that loop: the engine calls it as a run's loop ends. Nothing by default."""

    async def count_retries(self) -> int:
        """Transport retries made so far (`retries_total`), read without blocking the running
        event loop: a backend whose count lives in other processes (Ray) collects it here. The
        engine takes the difference over a judge's run as its stats' backend_retries."""
        return self.retries_total

    def store_rows(self, store: RowStore | None) -> None:
        """The store the answers of the calls to come go to (None: none), told before the first
        of them in the run's event loop. A backend whose answers are made in other processes
        may have those processes make the costly parts of each answer's row (CallResult.row)
        for it; the store uses a part only where it is what the store makes itself. Nothing by
        default: the store makes every row."""

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
