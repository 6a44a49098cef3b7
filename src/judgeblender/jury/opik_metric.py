"""A jury as an Opik metric: `JuryMetric(jury)` is an `opik.evaluation.metrics.BaseMetric`.

    from judgeblender.judges import JudgeSpec
    from judgeblender.jury import Jury
    from judgeblender.jury.opik_metric import JuryMetric   # needs: pip install 'judgeblender[opik]'

    jury = Jury([JudgeSpec("llamacpp:default", prompt="factual-accuracy"),
                 JudgeSpec("llamacpp:gemma-270m", prompt="factual-accuracy")], pooling="median")
    metric = JuryMetric(jury, name="factual_accuracy_jury")
    result = metric.score(input="Who wrote Hamlet?", output="Dickens.", reference="Shakespeare")
    result.value, result.reason, result.metadata["judges"]

`score()` grades one item: the keyword arguments Opik passes (input, output, reference,
context, and any other dataset field a rubric declares as an input) become the item; a list
(Opik's `context` often is one) is joined with newlines. The ScoreResult carries the pooled
score, a reason that lists every member's score and reason, and metadata with each member's
score, reason and invalid_reason under its unique id, the pooling settings and who abstained.

No valid verdict, no score: when the jury has no pooled score (every member invalid, or fewer
than `min_votes` valid), the result is returned with `scoring_failed=True`, Opik's own flag
for a metric that could not score. Opik then leaves it out of its averages (counting it as
failed) and does not log it as a feedback score. Its value is NaN, not the 0.0 Opik uses
for crashed metrics, so code that ignores the flag cannot mistake it for a real zero.

Opik is optional: this module imports without it, and the class is built on first use of
`JuryMetric`, raising an error that names the extra to install when Opik is missing.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from ..errors import require
from .jury import ItemResult, Jury

_OPIK_FIELDS = ("input", "output", "reference", "context")
_CLASS: type | None = None


def _field(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "\n".join(str(v) for v in value)
    return str(value)


def describe(result: ItemResult, pooling: str) -> str:
    """A one-line summary: the pooled score (or why there is none), then each member's score and reason."""
    valid = len(result.judges) - len(result.abstained)
    head = (f"{pooling} of {valid}/{len(result.judges)} judges: {result.score:.3f}" if result.score is not None
            else f"no pooled score: {result.reason}")
    if result.verdict is not None:
        head += f" ({'pass' if result.verdict else 'fail'})"
    elif result.reason and result.score is not None:
        head += f" ({result.reason})"
    parts = [head]
    for jid, v in result.judges.items():
        if v.score is None:
            parts.append(f"{jid}: invalid ({v.invalid_reason})")
        else:
            parts.append(f"{jid}: {v.score:g}" + (f" ({v.reason})" if v.reason else ""))
    return "; ".join(parts)


def _build_class() -> type:
    require("opik", "opik", "the Opik metric adapter")
    from opik.evaluation.metrics import BaseMetric
    from opik.evaluation.metrics.score_result import ScoreResult

    class JuryMetric(BaseMetric):
        """An Opik metric whose score is a judgeblender jury's pooled verdict on one item."""

        def __init__(self, jury: Jury, name: str = "jury", track: bool = True, project_name: str | None = None):
            super().__init__(name=name, track=track, project_name=project_name)
            self.jury = jury
            self._inputs = list(dict.fromkeys(f for j in jury.judges for f in j.template.inputs))

        def _item(self, fields: dict[str, Any]) -> dict[str, str]:
            wanted = set(_OPIK_FIELDS) | set(self._inputs)
            item = {k: _field(v) for k, v in fields.items() if k in wanted and v is not None}
            # Opik scores one item per call: name it by its content, so the judgments a store
            # keeps per item id stay apart instead of all being item "1".
            digest = hashlib.sha256(json.dumps(item, sort_keys=True).encode("utf-8")).hexdigest()
            return {**item, "id": f"opik-{digest[:16]}"}

        def _result(self, result: ItemResult) -> ScoreResult:
            jury = self.jury
            metadata = {
                "judges": {jid: {"score": v.score, "reason": v.reason, "invalid_reason": v.invalid_reason}
                           for jid, v in result.judges.items()},
                "pooling": {"method": jury.pooling, "threshold": jury.threshold, "trim": jury.trim,
                            "tie": jury.tie, "min_votes": jury.min_votes},
                "abstained": result.abstained,
                "verdict": result.verdict,
            }
            failed = result.score is None
            return ScoreResult(value=math.nan if failed else float(result.score), name=self.name,
                               reason=describe(result, jury.pooling), metadata=metadata, scoring_failed=failed)

        def score(self, input: Any = None, output: Any = None, reference: Any = None, context: Any = None,
                  **ignored_kwargs: Any) -> ScoreResult:
            item = self._item({"input": input, "output": output, "reference": reference, "context": context,
                               **ignored_kwargs})
            return self._result(self.jury.score([item])[0])

        async def ascore(self, input: Any = None, output: Any = None, reference: Any = None, context: Any = None,
                         **ignored_kwargs: Any) -> ScoreResult:
            item = self._item({"input": input, "output": output, "reference": reference, "context": context,
                               **ignored_kwargs})
            return self._result((await self.jury.ascore([item]))[0])

    JuryMetric.__module__ = __name__
    return JuryMetric


def metric_class() -> type:
    """The JuryMetric class (built once; raises MissingExtraError without Opik)."""
    global _CLASS
    if _CLASS is None:
        _CLASS = _build_class()
    return _CLASS


def __getattr__(name: str) -> Any:
    if name == "JuryMetric":
        return metric_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
