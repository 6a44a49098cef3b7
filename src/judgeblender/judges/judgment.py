"""What one judge concluded about one pair, with everything needed to audit it."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any


@dataclass
class StepOutcome:
    step: str
    raw: str
    value: int | str | None  # label, 1/0 for yes/no, text for explanations; None when invalid
    invalid_reason: str | None = None
    probs: dict[str, float] | None = None
    choice_mass: float | None = None
    cached: bool = False
    attempt: int = 0
    reason: str | None = None  # json verdicts: the judge's stated reason
    repaired: bool | None = None  # json verdicts: cut out of prose or fixed trailing commas


_STEP_FIELDS = tuple(f.name for f in fields(StepOutcome))  # dataclasses.fields costs more than the record
# a step's values in _STEP_FIELDS' order, read at once: half the cost of a getattr per field,
# and every pair's record (to the store, to the details file) lists its steps
_step_values = attrgetter(*_STEP_FIELDS)


@dataclass
class Judgment:
    judge_id: str
    qid: str
    docid: str
    label: int | None = None
    probs: dict[str, float] | None = None  # over the template's scale, logprobs mode only
    expected: float | None = None
    # a scorer's raw score (embedding cosine, cross-encoder logit), for score-aware blends
    score: float | None = None
    reason: str | None = None  # a rubric judge's one-line reason
    invalid_reason: str | None = None
    steps: list[StepOutcome] = field(default_factory=list)
    truncated: dict[str, int | None] | None = None
    fallback: str | None = None
    stopped_at: str | None = None
    # logprobs mode: the least share of next-token mass on the label tokens an answer needed
    min_choice_mass: float | None = None
    # the Ray workers (node id, pid) that answered each step's call; empty in a local run
    workers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.label is not None or self.score is not None

    @property
    def raw_output(self) -> str | None:
        return self.steps[-1].raw if self.steps else None

    @property
    def reasoning(self) -> str | None:
        texts = [s.value for s in self.steps if isinstance(s.value, str)]
        return "\n\n".join(texts) if texts else None

    @classmethod
    def from_record(cls, judge_id: str, qid: str, docid: str, record: dict[str, Any]) -> "Judgment":
        """The judgment a record (`record()`: a details line's, the service's answer) was made
        from: `jb.Client` rebuilds a run from the service's answer with it, so its labels, blends
        and agreement are the in-process run's by construction. raw_output and reasoning are
        derived from the steps, so they are not read back."""
        steps = [StepOutcome(**{name: step.get(name) for name in _STEP_FIELDS if name in step})
                 for step in record.get("steps") or []]
        return cls(judge_id, qid, docid, label=record.get("label"), probs=record.get("probs"),
                   expected=record.get("expected"), score=record.get("score"), reason=record.get("reason"),
                   invalid_reason=record.get("invalid_reason"), steps=steps, truncated=record.get("truncated"),
                   fallback=record.get("fallback"), stopped_at=record.get("stopped_at"),
                   min_choice_mass=record.get("min_choice_mass"), workers=list(record.get("workers") or []))

    def record(self) -> dict[str, Any]:
        """The JSON-able form written to the details file and the store."""
        return {
            "label": self.label,
            "probs": self.probs,
            "expected": self.expected,
            "score": self.score,
            "reason": self.reason,
            "invalid_reason": self.invalid_reason,
            "raw_output": self.raw_output,
            "reasoning": self.reasoning,
            "truncated": self.truncated,
            "fallback": self.fallback,
            "stopped_at": self.stopped_at,
            # fields one level deep (dicts of floats at most): asdict's deep copy is not needed
            **({"min_choice_mass": self.min_choice_mass} if self.min_choice_mass is not None else {}),
            "steps": [dict(zip(_STEP_FIELDS, _step_values(s))) for s in self.steps],
            **({"workers": self.workers} if self.workers else {}),  # only where Ray workers answered
        }
