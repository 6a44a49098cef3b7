"""The call a judge makes for one step of one pair: messages, scoring mode and decoding settings.

Everything that can change the answer is in the request, so it is also the store's key
(calls.call_key): the same judge asking the same step of the same pair makes the same request,
in the engine, in the demo's fingerprint and in the bench scripts alike.
"""

from __future__ import annotations

from ..calls import CallRequest, Message
from ..prompts import Step
from .judge import Judge

RETRY_TEMPERATURE = 0.5  # a retry of an invalid answer samples, else it would repeat itself


def build_request(judge: Judge, step: Step, values: dict[str, str], attempt: int) -> CallRequest:
    """The call that asks `step` of one pair, given the pair's values (query, passage, earlier
    steps' answers); `attempt` 0 is the first ask, 1 a retry after an invalid answer."""
    return request_from_prompt(judge, step, judge.template.render_step(step, values), attempt)


def request_from_prompt(judge: Judge, step: Step, prompt: tuple[str | None, str], attempt: int,
                        choices: tuple[str, ...] | None = None) -> CallRequest:
    """build_request from the step's rendered prompt (system, user), which a wave renders once to
    sort its calls by; `choices` is step.choices(scale), which a wave makes once."""
    system, user = prompt
    messages = ((Message("system", system),) if system else ()) + (Message("user", user),)
    seed = judge.spec.seed + attempt
    temperature = 0.0 if attempt == 0 else RETRY_TEMPERATURE
    if judge.mode == "logprobs" and step.output != "text":
        return CallRequest(messages, mode="logprobs", max_tokens=1, temperature=0.0, seed=seed,
                           answer_prefix=step.answer_prefix or "",
                           choices=step.choices(judge.template.scale) if choices is None else choices)
    return CallRequest(messages, mode="generate", max_tokens=step.max_tokens, temperature=temperature, seed=seed,
                       json_schema=step.json_schema if step.output == "json" else None)
