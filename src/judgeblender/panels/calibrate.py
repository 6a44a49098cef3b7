"""Choose a panel's blend on a human-labelled seed set.

Candidates: each member alone, each fixed aggregator over all members, and the learned
blends a panel file can hold (per-judge weights for `weighted`, expected-score cut points
for `prob-expected`). Each is scored by Cohen's kappa on held-out queries: folds split by
query (a query's pairs are never split), learned blends are fitted on the other folds.
The choice follows the one-standard-error rule: among the candidates whose mean held-out
kappa is within one standard error of the best, the simplest wins (a single judge, then a
fixed rule, then a learned blend), because on a small seed set the rest is noise.

Two findings are reported apart, because they call for different actions: no candidate is
more than one standard error above chance (kappa 0: the seed teaches nothing about these
judges; the panel is still written, marked, so a pipeline does not break), and several
candidates are within one standard error of the best (the seed cannot tell them apart; the
rule picked the simplest). Below the seed minimums (blend/seed_rules.py, shared with
`calibrate --select`) nothing is chosen: with fewer, one standard error spans the whole kappa range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..blend import BallotTable, Blender, blend
from ..blend.blender import fitted_blender
from ..blend.calibrate import evaluate_split, fit_blend, gold_vector, split_by_queries
from ..blend.seed_rules import chance_alert, too_small
from ..errors import JudgeblenderError
from ..kappa import cohen_kappa, fold_mean_se

FIXED = [("mv", "avg"), ("mv", "random"), ("mv", "min"), ("mv", "max"), ("av", "avg"), ("median", "avg"),
         ("min", "avg"), ("max", "avg"), ("prob-expected", "avg"), ("dawid-skene", "avg")]
LEARNED = ("weights", "thresholds")


@dataclass
class Candidate:
    name: str
    kind: str  # "member", "fixed", "learned"
    fold_kappas: list[float]
    method: str | None = None
    tie: str = "avg"
    judges: tuple[str, ...] = ()
    weights: dict[str, float] | None = None
    thresholds: tuple[float, ...] | None = None
    tau: float | None = None
    note: str | None = None

    @property
    def mean(self) -> float:
        return fold_mean_se(self.fold_kappas)[0]

    @property
    def se(self) -> float:
        return fold_mean_se(self.fold_kappas)[1]

    @property
    def simplicity(self) -> int:
        return {"member": 0, "fixed": 1, "learned": 2}[self.kind]


@dataclass
class Calibration:
    candidates: list[Candidate]
    chosen: Candidate | None
    n_queries: int
    n_pairs: int
    folds: int
    warnings: list[str] = field(default_factory=list)
    no_chance: str | None = None  # set when no candidate is more than one se above kappa 0
    tied: str | None = None  # set when several candidates are within one se of the best

    def alerts(self) -> list[str]:
        """The findings a user must act on, one line each (the CLI prints them as `warning:`)."""
        return [a for a in (self.no_chance, self.tied) if a]


def _folds(table: BallotTable, y: np.ndarray, k: int) -> list[list[str]]:
    """Query ids of each test fold: queries dealt round-robin in sorted order (deterministic)."""
    queries = sorted({q for (q, _), g in zip(table.pairs, y) if g >= 0})
    return [queries[i::k] for i in range(k)]


def _fold_kappa(y: np.ndarray, table: BallotTable, test_queries: list[str], labels: list[int | None]) -> float:
    qset = set(test_queries)
    rows = [i for i, (q, _) in enumerate(table.pairs) if q in qset and y[i] >= 0 and labels[i] is not None]
    if len(rows) < 2:
        return float("nan")
    return cohen_kappa(y[rows], np.array([labels[i] for i in rows]))


def calibrate(table: BallotTable, gold: dict[str, dict[str, int]], folds: int = 5, seed: int = 0) -> Calibration:
    y = gold_vector(table, gold)
    labelled = y >= 0
    n_pairs = int(labelled.sum())
    queries = {q for (q, _), ok in zip(table.pairs, labelled) if ok}
    k = max(2, min(folds, len(queries)))
    result = Calibration([], None, len(queries), n_pairs, k)
    if n_pairs == 0:
        raise JudgeblenderError("no judged pair has a human label: nothing to calibrate on")
    fold_queries = _folds(table, y, k)
    has_probs = table.probs is not None and not np.isnan(table.probs).all()

    for j, judge in enumerate(table.judges):
        labels = [None if v < 0 else int(v) for v in table.labels[:, j]]
        result.candidates.append(Candidate(f"member {judge}", "member",
                                           [_fold_kappa(y, table, f, labels) for f in fold_queries],
                                           method="mv", judges=(judge,)))
    if len(table.judges) > 1:
        for method, tie in FIXED:
            if method == "prob-expected" and not has_probs:
                continue
            try:
                labels = blend(table, method, tie=tie, seed=seed).labels
            except Exception as exc:  # e.g. crowd-kit missing: recorded, not fatal
                result.warnings.append(f"{method}: skipped ({exc})")
                continue
            name = f"{method}({tie})" if method in ("mv", "median") else method
            result.candidates.append(Candidate(name, "fixed", [_fold_kappa(y, table, f, labels) for f in fold_queries],
                                               method=method, tie=tie, judges=tuple(table.judges)))
        for learner in LEARNED:
            kappas = []
            index = {p: i for i, p in enumerate(table.pairs)}
            for test_q in fold_queries:
                train, test = split_by_queries(table, test_q)
                try:
                    _, pred = evaluate_split(train, test, gold, learner)
                except ValueError as exc:
                    result.warnings.append(f"learned {learner}: a fold could not be fitted ({exc})")
                    kappas.append(float("nan"))
                    continue
                labels: list[int | None] = [None] * table.n_pairs
                for pair, label in zip(test.pairs, pred):
                    labels[index[pair]] = label
                kappas.append(_fold_kappa(y, table, test_q, labels))  # scored like every other candidate
            try:
                final = fit_blend(table, gold, learner, seed=seed)
            except ValueError as exc:
                result.warnings.append(f"learned {learner}: {exc}")
                continue
            cand = Candidate(f"learned {learner}", "learned", kappas, judges=tuple(table.judges))
            if learner == "weights":
                cand.method, cand.weights = "weighted", final.weights
            else:
                cand.method, cand.thresholds = "prob-expected", final.thresholds
            result.candidates.append(cand)

    small = too_small(len(queries), n_pairs)
    if small:
        result.warnings.append(small)
        return result
    scored = [c for c in result.candidates if math.isfinite(c.mean)]
    if not scored:
        result.warnings.append("no candidate has a finite held-out kappa")
        return result
    best = max(scored, key=lambda c: c.mean)
    bar = best.mean - (best.se if math.isfinite(best.se) else 0.0)
    close = [c for c in scored if c.mean >= bar]
    result.chosen = min(close, key=lambda c: (c.simplicity, -c.mean))
    result.no_chance = chance_alert(((c.name, c.mean, c.se) for c in scored), n_pairs)
    if len(close) > 1:
        shown = ", ".join(f"{c.name} {c.mean:.3f}" for c in sorted(close, key=lambda c: -c.mean)[:5])
        more = f" and {len(close) - 5} more" if len(close) > 5 else ""
        result.tied = (f"the seed cannot tell the best candidates apart: {len(close)} are within one standard error "
                       f"({best.se:.3f}) of the best ({shown}{more}); the one-standard-error rule chose the simplest, "
                       f"{result.chosen.name}; label more queries to separate them")
    return result


def blender_for(c: Candidate, seed: int = 0) -> Blender:
    return fitted_blender(c.method, c.tie, c.weights, c.thresholds, seed)
