"""The OpenAI chat-completions wire format: request bodies out, answers in.

Shared by live calls (openai_compat.py) and the Batch API files (openai_batch.py), so a
batch answer is parsed exactly as a live one. A malformed answer raises Retryable (worth
asking again); a server that cannot score choices raises LogprobsUnsupported.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from .. import masking
from ..calls import FAILED_CALL, CallRequest, CallResult
from ..errors import BackendError
from ..parse.tokens import token_choice
from .base import LogprobsUnsupported, normalise_choice_probs

AnswerPrefixMode = Literal["instruct", "prefill"]

# The largest response body kept for a request: RESPONSE_OVERHEAD_BYTES for the envelope (id,
# model, usage, fingerprints and the extra fields servers add), plus RESPONSE_BYTES_PER_TOKEN
# for each token the request allows and each of its top_logprobs alternatives, and never more
# than RESPONSE_HARD_CAP_BYTES. A body over it is not read further: the answer is recorded
# invalid ("answer too large"), with none of its text. Why these values: docs/served-models.md.
RESPONSE_OVERHEAD_BYTES = 16 * 1024
RESPONSE_BYTES_PER_TOKEN = 256
RESPONSE_HARD_CAP_BYTES = 4 * 1024 * 1024


class Retryable(Exception):
    """One attempt failed in a way worth retrying."""

    def __init__(self, reason: str, retry_after: float | None = None):
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


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


def response_bound(request: CallRequest, top_logprobs: int = 20) -> int:
    """The most bytes a response to `request` may have: overhead + max_tokens x the per-token
    allowance x (1 + top_logprobs), capped. Logprobs mode asks for one token and top_logprobs
    alternatives; generate mode for max_tokens tokens and none."""
    tokens, alternatives = (1, top_logprobs) if request.mode == "logprobs" else (request.max_tokens, 0)
    return min(RESPONSE_HARD_CAP_BYTES,
               RESPONSE_OVERHEAD_BYTES + max(tokens, 1) * RESPONSE_BYTES_PER_TOKEN * (1 + alternatives))


def too_large(bound: int, seen: str) -> CallResult:
    """The answer kept for a response over its bound: none of its text, only why (interpret
    reads `refused` as invalid, in either mode)."""
    return CallResult(text="", extra={"refused": f"answer too large: {seen}, over the bound of {bound:,} "
                                                 "bytes for this request"})


def _first_choice(data: dict[str, Any]) -> dict[str, Any]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise Retryable("malformed answer: no choices")
    first = choices[0]
    if not isinstance(first, dict):
        raise Retryable("malformed answer: a choice is not an object")
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
    finish = finish_reason(choice)
    if finish is not None:
        extra["finish_reason"] = finish
    return extra


def finish_reason(choice: dict[str, Any]) -> str | None:
    """The choice's finish_reason as the server spelled it (cut to 40 characters, as it is
    shown in invalid reasons), or None when it is missing or null."""
    finish = choice.get("finish_reason")
    if finish is None:
        return None
    if not isinstance(finish, str):
        finish = json.dumps(finish)
    return finish[:40]


def parse_generate(data: dict[str, Any]) -> CallResult:
    """A CallResult from a chat completion, or Retryable when it carries no text or the server
    says the call failed (calls.FAILED_CALL: aborted, errored), whatever text it holds."""
    choice = _first_choice(data)
    finish = finish_reason(choice)
    if finish in FAILED_CALL:
        raise Retryable(f"the server ended the call without an answer (finish_reason: {finish})")
    message = choice.get("message")
    if not isinstance(message, dict):
        raise Retryable("malformed answer: the choice has no message")
    content = message.get("content")
    if not isinstance(content, str):
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            raise Retryable(f"the model refused: {refusal[:200]}")
        raise Retryable("malformed answer: the message has no content")
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

    Each choice takes the highest log-probability among the tokens that stand for it, read as
    generate mode reads an answer (`parse.tokens.token_choice`: " 2", "2", "2." and full-width
    "２" all count for "2"; "10" counts for none); a choice absent from the list gets -inf.
    Raises LogprobsUnsupported when the server sent no log-probabilities.
    """
    choice = _first_choice(data)
    lp = choice.get("logprobs")
    content = lp.get("content") if isinstance(lp, dict) else None
    if not isinstance(content, list) or not content:
        raise LogprobsUnsupported("the server answered without logprobs")
    first = content[0]
    if not isinstance(first, dict):
        raise Retryable("malformed answer: a logprobs entry is not an object")
    top = first.get("top_logprobs")
    if not isinstance(top, list) or not top:
        raise LogprobsUnsupported("the server answered without top_logprobs alternatives")
    candidates = [first, *top]
    choices = tuple(choices)
    by_choice = {c: -math.inf for c in choices}
    seen: list[list[Any]] = []
    for cand in candidates:
        if not isinstance(cand, dict) or not isinstance(cand.get("token"), str):
            raise Retryable("malformed answer: a logprobs entry has no token")
        value = _logprob(cand.get("logprob"))
        if value is None:
            raise Retryable(f"malformed answer: token {cand['token']!r} has logprob {cand.get('logprob')!r}")
        seen.append([cand["token"], value])
        key = token_choice(cand["token"], choices)
        if key is not None and value > by_choice[key]:
            by_choice[key] = value
    probs, mass = normalise_choice_probs(by_choice)
    text = max(probs, key=lambda c: probs[c]) if mass > 0 else ""
    tin, tout = _usage(data)
    extra = _extra(data, choice)
    extra["generated_token"] = first["token"]
    extra["top_logprobs"] = seen[1:]
    return CallResult(text=text, probs=probs, choice_mass=mass, tokens_in=tin, tokens_out=tout, extra=extra)


def decode_answer(payload: bytes) -> dict[str, Any]:
    """The response body as a JSON object, or Retryable. Every secret the process holds is masked
    in it first (masking.py): a server may echo the API key, in any encoding, anywhere in it."""
    payload = masking.current().bytes(payload)
    try:
        data = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError):
        shown = payload[:80].decode("utf-8", "replace").replace("\n", " ")
        raise Retryable(f"malformed answer: not JSON ({shown!r})") from None
    if not isinstance(data, dict):
        raise Retryable(f"malformed answer: a JSON {type(data).__name__}, not an object")
    return data
