"""What the judging cost, read from a call store: calls, tokens and seconds per model, and
how often each judge produced no usable label."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import JudgeblenderError
from ..store import CallStore


@dataclass
class JudgeValidity:
    judge: str
    pairs: int
    invalid: int  # pairs with neither a label nor a score
    reasons: list[tuple[str, int]] = field(default_factory=list)  # most common first

    @property
    def rate(self) -> float:
        return self.invalid / self.pairs if self.pairs else float("nan")


@dataclass
class StoreSummary:
    path: str
    models: dict[str, dict[str, float]]  # CallStore.call_stats(): calls, tokens_in, tokens_out, seconds
    judges: list[JudgeValidity]


def read_store_summary(path: str | Path) -> StoreSummary:
    path = Path(path)
    if not path.is_file():
        raise JudgeblenderError(f"{path}: no such store")  # opening would create an empty one
    with CallStore(path, read_only=True) as store:  # a store on a read-only medium serves
        models = store.call_stats()
        judges = []
        for judge_id in store.judge_ids():
            records = store.judgments(judge_id)
            bad = [r for r in records if r.get("label") is None and r.get("score") is None]
            reasons = Counter(r.get("invalid_reason") or "no reason recorded" for r in bad)
            judges.append(JudgeValidity(judge_id, len(records), len(bad), reasons.most_common(3)))
    return StoreSummary(str(path), models, judges)
