"""Call types: one LLM call's request and answer, and the key the store files it under.

These are the words backends, judges and the store all speak, so they live on the ground
floor: this module imports nothing of the project, and `store` and `backends` both import
it instead of each other. A backend turns a CallRequest (chat messages plus decoding
settings) into a CallResult; the store keys that result by `call_key(identity, request)`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .hashing import sha256_text

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

    def messages_json(self) -> str:
        """canonical_json of the messages as [[role, content], ...]: the part of the store key that
        changes with every call, and the text the store compresses into the call's row. Made once
        per request, since both need it (6-7 us on a UMBRELA prompt), and left out of its pickles:
        a Ray worker or the store's writer process that needs it makes its own."""
        found = self.__dict__.get("_messages_json")
        if found is None:
            found = self.__dict__["_messages_json"] = canonical_json([[m.role, m.content] for m in self.messages])
        return found

    def forget_messages_json(self) -> None:
        """Drop the messages' JSON once the call's row is made: a wave holds its requests, and
        10^4 prompts' JSON would be 17 MB more at the window's peak."""
        self.__dict__.pop("_messages_json", None)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_messages_json", None)
        return state

    def settings_key(self) -> tuple | None:
        """The decoding settings (the key fields but the messages) as a dictionary key, so a wave's
        calls, which share them, make their JSON once: with the types of the numbers (0 and 0.0 are
        equal keys but different JSON); None where they cannot be a key (a JSON schema: a dict)."""
        if self.json_schema is not None or not isinstance(self.choices, tuple):
            return None
        return (self.mode, self.max_tokens, self.temperature, self.seed, self.answer_prefix, self.choices,
                type(self.max_tokens), type(self.temperature), type(self.seed))


# How a generated answer may end and still count as the model's whole answer: the finish
# reasons that mean "ended normally", each with the API that documents it. An allow-list:
# judges/answers.interpret makes a generate-mode answer with any other reason (length,
# content_filter, tool_calls, one never seen before) or with none invalid, with that reason.
FINISHED_NORMALLY = frozenset({
    # OpenAI chat completions: "the model hit a natural stop point or a provided stop sequence";
    # vLLM, SGLang, Ollama, the llama.cpp server, llama-cpp-python, TGI from 2.2.1 and the
    # embedded hf backend use OpenAI's name
    "stop",
    # TGI before 2.2.1 (huggingface/text-generation-inference#2344 renamed it "stop"): the
    # model's end-of-sequence token
    "eos_token",
    # TGI before 2.2.1 and Anthropic's Messages API: one of the request's stop sequences
    "stop_sequence",
    # Anthropic's Messages API: the model ended its turn (gateways that forward its names)
    "end_turn",
})
# Finish reasons that say the call failed, not that an answer ended: vLLM's and SGLang's
# "abort" (the server dropped the request) and OpenRouter's "error" (the provider failed
# mid-answer). The served backend retries them and, after its retries, fails the call: no
# answer is stored, the run exits 3, a re-run asks again.
FAILED_CALL = frozenset({"abort", "error"})


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
    # "finish_reason": how the answer ended; "refused": why the backend kept none of the answer
    # (answer too large), which makes it invalid in either mode
    extra: dict[str, Any] = field(default_factory=dict)
    # the costly parts of this answer's store row, made where the answer was made (a Ray worker:
    # store.compact.RowParts), so the driver only checks and inserts them; None: the store makes them
    row: Any = field(default=None, compare=False, repr=False)


# json.dumps with these options builds a new encoder for every call (a tenth of its cost on a
# prompt); one encoder, made once, writes the same text
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def canonical_json(obj: Any) -> str:
    """The one JSON spelling of `obj` (sorted keys, no spaces), so equal values hash equal."""
    return _CANONICAL.encode(obj)


def store_key(identity: dict[str, Any], request: dict[str, Any], client: str | None = None) -> str:
    """The store's one key rule: sha256 of the canonical JSON of {"identity": the model's
    identity, "request": every field of the request that can change the answer}, and, where
    answers are shared only among the clients of one credential (the proxy's forwarded keys),
    "client": that credential's keyed hash. Without `client` the key is what it always was, so
    every stored call keeps its key. `call_keys` builds the same text faster for many requests
    (tests/test_store_key.py checks they agree); the proxy and the schema 4 migration use this."""
    fields = {"identity": identity, "request": request}
    if client is not None:
        fields["client"] = client
    return sha256_text(canonical_json(fields))


def call_key(identity: dict[str, Any], request: CallRequest) -> str:
    """The store key of a call (`store_key` of its identity and its key fields)."""
    return call_keys(identity)(request)


def call_keys(identity: dict[str, Any]) -> Callable[[CallRequest], str]:
    """`store_key` for many requests to one model, the identity's JSON made once: canonical JSON
    of {"identity", "request"} is the two values' canonical JSON in that order (sorted keys, no
    spaces), so the text is built from the two parts; and the request's is its settings' JSON
    (made once per distinct settings) around its messages' JSON, "messages" in its sorted place."""
    head = '{"identity":' + canonical_json(identity) + ',"request":'
    around: dict[tuple, tuple[str, str]] = {}

    def key(request: CallRequest) -> str:
        settings = request.settings_key()
        parts = around.get(settings) if settings is not None else None
        if parts is None:
            fields = request.key_fields()
            before = canonical_json({k: v for k, v in fields.items() if k < "messages"})
            after = canonical_json({k: v for k, v in fields.items() if k > "messages"})
            parts = (f'{head}{before[:-1]},"messages":', f",{after[1:]}}}")
            if settings is not None:
                around[settings] = parts
        return sha256_text(parts[0] + request.messages_json() + parts[1])

    return key
