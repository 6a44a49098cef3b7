"""Combining a jury's continuous or binary scores into one score per item (the jury's `pooling`
rule, the name its users know; the module is not called "pooling", which pairs/pool.py means).

Judges that gave no valid verdict abstain: they are left out, never counted as 0. An item
with fewer valid verdicts than `min_votes` gets no pooled score, with the reason.

- mean:         arithmetic mean of the valid scores.
- median:       median of the valid scores (the mean of the two middle ones for an even count).
- trimmed-mean: mean after cutting `trim` (a fraction) of the scores at each end (scipy's trim_mean).
- max:          the highest score: "any judge flags it" (e.g. hallucination detection).
- min:          the lowest score: "every judge must pass it".
- hard-vote:    each judge votes pass if its score >= threshold; the pooled score is the share
                of pass votes, the verdict is pass when that share is above 1/2; an exact tie
                is left undecided unless `tie` is "pass" or "fail".
- soft-vote:    the mean score, with verdict pass when it is >= threshold.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from ..errors import ArgumentError

POOLING_METHODS = ("mean", "median", "trimmed-mean", "max", "min", "hard-vote", "soft-vote")
TIE_RULES = ("undecided", "pass", "fail")


@dataclass(frozen=True)
class Pooled:
    score: float | None
    verdict: bool | None = None  # pass/fail for voting methods and soft-vote
    reason: str | None = None  # why there is no score or no verdict


def pool(scores: Sequence[float | None], method: str = "mean", threshold: float = 0.5, trim: float = 0.1,
         tie: str = "undecided", min_votes: int = 1) -> Pooled:
    if method not in POOLING_METHODS:
        raise ArgumentError("pooling", f"one of {', '.join(POOLING_METHODS)}", described=f"unknown pooling {method!r}")
    if tie not in TIE_RULES:
        raise ArgumentError("tie", f"one of {', '.join(TIE_RULES)}", described=f"unknown tie rule {tie!r}")
    valid = [float(s) for s in scores if s is not None]
    if len(valid) < max(1, min_votes):
        return Pooled(None, None, f"{len(valid)} valid verdicts, {max(1, min_votes)} needed")
    if method == "mean":
        return Pooled(statistics.fmean(valid))
    if method == "median":
        return Pooled(float(statistics.median(valid)))
    if method == "trimmed-mean":
        from scipy.stats import trim_mean

        return Pooled(float(trim_mean(valid, trim)))
    if method == "max":
        return Pooled(max(valid), max(valid) >= threshold)
    if method == "min":
        return Pooled(min(valid), min(valid) >= threshold)
    if method == "soft-vote":
        mean = statistics.fmean(valid)
        return Pooled(mean, mean >= threshold)
    share = sum(s >= threshold for s in valid) / len(valid)
    if share == 0.5:
        verdict = {"undecided": None, "pass": True, "fail": False}[tie]
        return Pooled(share, verdict, "tie" if verdict is None else f"tie broken: {tie}")
    return Pooled(share, share > 0.5)
