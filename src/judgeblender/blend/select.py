"""Choosing who sits on the panel: subsets of judges x aggregators, scored on held-out queries.

Search. With at most EXHAUSTIVE_MAX candidate judges every non-empty subset is scored
(2^8 - 1 = 255 subsets); beyond that, greedy forward selection (add the judge that helps
most) and greedy backward elimination (drop the judge whose loss hurts least), stopped
by a time limit. Every visited subset is scored with every fast aggregator (below);
the slow ones (learned thresholds, dawid-skene, and the probability rules when the table
has distributions) are scored only on the subsets on the fast candidates' cost-quality
frontier and on the full panel, cheapest first, within the same time limit, because one
fit costs seconds. GLAD (tens of seconds a fit) is not searched.

Scoring. Queries are dealt round-robin into folds (sorted ids, as `calibrate` does); a
candidate's score is its mean Cohen's kappa (labels 0-3) over the folds, each fold scored
on its own queries' pairs that have a gold label and a prediction. Learned weights are
fitted on the other folds only. Fixed rules need no fitting.

Choice: the one-standard-error rule. Among the candidates whose mean kappa is within one
standard error (of the best candidate's fold kappas) of the best, the cheapest wins, then
the one with fewer members, then the simplest aggregator, then the higher mean. Cost is a
price per call (one call per judge and pair) given per judge; with no prices every judge
costs 1, so cost is the number of members.

Honest figure: `nested_select` runs the whole selection inside each outer fold's training
queries and scores the chosen panel on the outer fold's queries, which took no part in
choosing it, next to every member alone on the same pairs.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import ArgumentError
from ..kappa import cohen_kappa, fold_mean_se
from .blender import Blender, fitted_blender
from .votes import ABSTAIN, N_LABELS, BallotTable

EXHAUSTIVE_MAX = 8  # candidate judges up to which every subset is scored
DEFAULT_TIME_LIMIT = 120.0  # seconds for a greedy search

# (candidate name, method, tie) of the fast aggregators, computed on label matrices in numpy.
FAST_RULES: tuple[tuple[str, str, str], ...] = (
    ("mv(avg)", "mv", "avg"), ("mv(min)", "mv", "min"), ("mv(max)", "mv", "max"),
    ("av", "av", "avg"), ("av-even", "av-even", "avg"), ("median(avg)", "median", "avg"),
    ("min", "min", "avg"), ("max", "max", "avg"), ("learned weights", "weighted", "avg"),
)
# Scored on frontier subsets only (slow): name, method, tie, learner (None: nothing fitted).
SLOW_RULES: tuple[tuple[str, str, str, str | None], ...] = (
    ("learned thresholds", "prob-expected", "avg", "thresholds"),
    ("prob-argmax(avg)", "prob-argmax", "avg", None),
    ("prob-expected", "prob-expected", "avg", None),
    ("dawid-skene", "dawid-skene", "avg", None),
)
# Not searched: glad (about 23 s per fit on LLMJudge dev's 7 judges x 7,263 pairs); `blend --method glad` has it.
SIMPLICITY = {"member": 0, "fixed": 1, "learned": 2}


# ---- vectorised aggregators on a label matrix (pairs x judges, ABSTAIN where no vote) ----

def _counts(labels: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    w = np.ones(labels.shape[1]) if weights is None else np.asarray(weights, dtype=float)
    out = np.zeros((labels.shape[0], N_LABELS))
    for k in range(N_LABELS):
        out[:, k] = (labels == k) @ w
    return out


def _tie_pick(top: np.ndarray, tie: str) -> np.ndarray:
    """Label per row from a boolean (rows x labels) mask of the tied top labels."""
    idx = np.arange(N_LABELS)
    if tie == "min":
        return top.argmax(axis=1)
    if tie == "max":
        return N_LABELS - 1 - top[:, ::-1].argmax(axis=1)
    count = top.sum(axis=1)
    total = (top * idx).sum(axis=1)
    if tie == "avg":
        return (2 * total + count) // np.maximum(2 * count, 1)
    raise ArgumentError("tie", "a tie rule the fast path has", tie)


def fast_labels(labels: np.ndarray, method: str, tie: str = "avg", weights: np.ndarray | None = None) -> np.ndarray:
    """The blend of every row (ABSTAIN where nobody voted), equal to Blender's on label-only votes."""
    voted = labels != ABSTAIN
    k = voted.sum(axis=1)
    out = np.full(labels.shape[0], ABSTAIN)
    has = k > 0
    if method in ("mv", "weighted"):
        scores = _counts(labels, weights)
        best = scores.max(axis=1)
        top = np.isclose(scores, best[:, None], rtol=1e-9, atol=1e-12) & (best[:, None] > 0)
        pick = _tie_pick(top, tie)
        has = has & (best > 0)
        out[has] = pick[has]
        return out
    total = np.where(voted, labels, 0).sum(axis=1)
    if method == "av":
        out[has] = ((2 * total + k) // np.maximum(2 * k, 1))[has]
    elif method == "av-even":
        out[has] = np.round(total[has] / k[has]).astype(int)  # exact halves round to even, as round()
    elif method == "min":
        out[has] = np.where(voted, labels, N_LABELS).min(axis=1)[has]
    elif method == "max":
        out[has] = labels.max(axis=1)[has]
    elif method == "median":
        srt = np.sort(np.where(voted, labels, N_LABELS + 1), axis=1)  # abstentions sort last
        rows = np.flatnonzero(has)
        lo = srt[rows, (k[rows] - 1) // 2]
        hi = srt[rows, k[rows] // 2]
        top = np.zeros((len(rows), N_LABELS), dtype=bool)
        top[np.arange(len(rows)), lo] = True
        top[np.arange(len(rows)), hi] = True
        out[rows] = _tie_pick(top, tie)
    else:
        raise ArgumentError("method", "a method the fast path has", method)
    return out


# ---- candidates ----

@dataclass(eq=False)
class Choice:
    """One scored (members, aggregator) candidate."""

    name: str  # aggregator name as shown ("member" for a single judge alone)
    judges: tuple[str, ...]
    method: str
    tie: str
    kind: str  # "member", "fixed", "learned"
    fold_kappas: list[float]
    cost: float
    learner: str | None = None
    weights: dict[str, float] | None = None
    thresholds: tuple[float, ...] | None = None

    @property
    def label(self) -> str:
        return f"{self.name} of {{{', '.join(self.judges)}}}" if self.kind != "member" else f"member {self.judges[0]}"

    @property
    def mean(self) -> float:
        return fold_mean_se(self.fold_kappas)[0]

    @property
    def se(self) -> float:
        return fold_mean_se(self.fold_kappas)[1]

    def key(self) -> tuple:
        return (self.cost, len(self.judges), SIMPLICITY[self.kind], -self.mean)


@dataclass
class Selection:
    candidates: list[Choice]
    chosen: Choice | None
    best: Choice | None
    frontier: list[Choice]
    search: str  # "exhaustive" or "greedy"
    subsets: int
    folds: int
    n_queries: int
    n_pairs: int
    seconds: float
    warnings: list[str] = field(default_factory=list)


def gold_array(table: BallotTable, gold: Mapping[str, Mapping[str, int]]) -> np.ndarray:
    return np.array([gold.get(q, {}).get(d, ABSTAIN) for q, d in table.pairs], dtype=int)


def query_folds(table: BallotTable, y: np.ndarray, k: int) -> list[list[str]]:
    """Queries with a gold label dealt round-robin in sorted order (as `calibrate` does)."""
    queries = sorted({q for (q, _), g in zip(table.pairs, y) if g >= 0})
    return [queries[i::k] for i in range(k)]


class _Scorer:
    def __init__(self, table: BallotTable, y: np.ndarray, folds: list[list[str]], seed: int):
        self.table, self.y, self.seed = table, y, seed
        qids = table.query_ids()
        self.fold_rows = [np.isin(qids, np.asarray(f, dtype=object)) & (y >= 0) for f in folds]
        self.col = {j: i for i, j in enumerate(table.judges)}

    def fold_kappas(self, pred_per_fold: Sequence[np.ndarray]) -> list[float]:
        out = []
        for rows, pred in zip(self.fold_rows, pred_per_fold):
            ok = rows & (pred != ABSTAIN)
            out.append(cohen_kappa(self.y[ok], pred[ok]) if ok.sum() >= 2 else float("nan"))
        return out

    def member_weights(self, judges: Sequence[str], train: np.ndarray) -> np.ndarray:
        w = []
        for j in judges:
            lab = self.table.labels[:, self.col[j]]
            ok = train & (lab != ABSTAIN)
            k = cohen_kappa(self.y[ok], lab[ok]) if ok.any() else float("nan")
            w.append(max(k, 0.0) if math.isfinite(k) else 0.0)
        return np.asarray(w)

    def fast(self, judges: tuple[str, ...], costs: Mapping[str, float]) -> list[Choice]:
        labels = self.table.labels[:, [self.col[j] for j in judges]]
        cost = float(sum(costs[j] for j in judges))
        if len(judges) == 1:
            pred = labels[:, 0]
            return [Choice("member", judges, "mv", "avg", "member", self.fold_kappas([pred] * len(self.fold_rows)), cost)]
        out = []
        for name, method, tie in FAST_RULES:
            if method == "weighted":
                preds = []
                for rows in self.fold_rows:
                    w = self.member_weights(judges, ~rows & (self.y >= 0))
                    preds.append(fast_labels(labels, "weighted", tie, w) if w.any() else np.full(len(labels), ABSTAIN))
                out.append(Choice(name, judges, method, tie, "learned", self.fold_kappas(preds), cost, learner="weights"))
            else:
                pred = fast_labels(labels, method, tie)
                out.append(Choice(name, judges, method, tie, "fixed", self.fold_kappas([pred] * len(self.fold_rows)), cost))
        return out

    def slow(self, judges: tuple[str, ...], costs: Mapping[str, float], warnings: list[str]) -> list[Choice]:
        from .calibrate import fit_blend

        if len(judges) < 2:
            return []
        sub = self.table.only_judges(list(judges))
        has_probs = sub.probs is not None and not np.isnan(sub.probs).all()
        cost = float(sum(costs[j] for j in judges))
        gold = {}
        for (q, d), g in zip(sub.pairs, self.y):
            if g >= 0:
                gold.setdefault(q, {})[d] = int(g)
        out = []
        for name, method, tie, learner in SLOW_RULES:
            if method.startswith("prob-") and learner is None and not has_probs:
                continue  # on labels alone these equal mv / av, already scored
            try:
                if learner is None:
                    lab = Blender(method, tie=tie, seed=self.seed).blend(sub).labels
                    pred = np.array([ABSTAIN if v is None else v for v in lab])
                    preds = [pred] * len(self.fold_rows)
                    kind = "fixed"
                else:
                    preds = []
                    for rows in self.fold_rows:
                        train = sub.select(np.flatnonzero(~rows & (self.y >= 0)))
                        lab = fit_blend(train, gold, learner, tie=tie, seed=self.seed).predict(sub)
                        preds.append(np.array([ABSTAIN if v is None else v for v in lab]))
                    kind = "learned"
            except Exception as exc:  # e.g. crowd-kit missing: recorded, not fatal
                msg = f"{name}: skipped ({exc})"
                if msg not in warnings:
                    warnings.append(msg)
                continue
            out.append(Choice(name, judges, method, tie, kind, self.fold_kappas(preds), cost, learner=learner))
        return out


def frontier(candidates: Sequence[Choice]) -> list[Choice]:
    """Cost-quality frontier: by rising cost, each candidate whose mean kappa beats every cheaper one."""
    out: list[Choice] = []
    for c in sorted((c for c in candidates if math.isfinite(c.mean)), key=lambda c: (c.cost, -c.mean, c.key())):
        if not out or c.mean > out[-1].mean + 1e-12:
            out.append(c)
    return out


def one_se_choice(candidates: Sequence[Choice]) -> tuple[Choice | None, Choice | None]:
    """(chosen, best): the cheapest/smallest/simplest candidate within one SE of the best mean."""
    scored = [c for c in candidates if math.isfinite(c.mean)]
    if not scored:
        return None, None
    best = max(scored, key=lambda c: (c.mean, -c.cost))
    bar = best.mean - (best.se if math.isfinite(best.se) else 0.0)
    return min((c for c in scored if c.mean >= bar), key=Choice.key), best


def select(table: BallotTable, gold: Mapping[str, Mapping[str, int]], *, folds: int = 5,
           costs: Mapping[str, float] | None = None, exhaustive_max: int = EXHAUSTIVE_MAX,
           time_limit: float = DEFAULT_TIME_LIMIT, slow: bool = True, seed: int = 0,
           candidates: Sequence[str] | None = None) -> Selection:
    """Search subsets of `candidates` (default: every judge of the table); see the module docstring."""
    start = time.monotonic()
    judges = tuple(candidates or table.judges)
    costs = {j: float((costs or {}).get(j, 1.0)) for j in judges}
    y = gold_array(table, gold)
    n_queries = len({q for (q, _), g in zip(table.pairs, y) if g >= 0})
    k = max(2, min(folds, n_queries))
    if n_queries < 2:
        raise ArgumentError("gold", "labels of at least 2 queries (selection folds by query)",
                            described=f"labels of {n_queries}")
    scorer = _Scorer(table, y, query_folds(table, y, k), seed)
    warnings: list[str] = []
    scored: dict[tuple[str, ...], list[Choice]] = {}

    def score(subset: Sequence[str]) -> float:
        key = tuple(j for j in judges if j in subset)
        if key not in scored:
            scored[key] = scorer.fast(key, costs)
        return max((c.mean for c in scored[key] if math.isfinite(c.mean)), default=float("-inf"))

    if len(judges) <= exhaustive_max:
        search = "exhaustive"
        for r in range(1, len(judges) + 1):
            for subset in itertools.combinations(judges, r):
                score(subset)
    else:
        search = "greedy"
        chosen: list[str] = []
        while len(chosen) < len(judges) and time.monotonic() - start < time_limit:  # forward
            best_j = max((j for j in judges if j not in chosen), key=lambda j: score([*chosen, j]))
            chosen.append(best_j)
        remaining = list(judges)
        while len(remaining) > 1 and time.monotonic() - start < time_limit:  # backward
            drop = max(remaining, key=lambda j: score([x for x in remaining if x != j]))
            remaining.remove(drop)
        if time.monotonic() - start >= time_limit:
            warnings.append(f"greedy search stopped at the time limit ({time_limit:.0f} s) after "
                            f"{len(scored)} subsets")
    fast_all = [c for cs in scored.values() for c in cs]
    everything = list(fast_all)
    if slow:
        refine = {c.judges for c in frontier(fast_all)} | {judges}
        todo = sorted(refine, key=lambda s: (sum(costs[j] for j in s), len(s)))
        for n, subset in enumerate(todo):
            if time.monotonic() - start >= time_limit:
                warnings.append(f"slow aggregators scored on {n} of {len(todo)} frontier subsets: time limit "
                                f"({time_limit:.0f} s) reached")
                break
            everything += scorer.slow(subset, costs, warnings)
    chosen_c, best = one_se_choice(everything)
    return Selection(everything, chosen_c, best, frontier(everything), search, len(scored), k, n_queries,
                     int((y >= 0).sum()), time.monotonic() - start, warnings)


# ---- applying a choice, and nested evaluation ----

def fit_choice(c: Choice, table: BallotTable, gold: Mapping[str, Mapping[str, int]], seed: int = 0) -> Choice:
    """The candidate with its learned parts fitted on all of `table`'s labelled pairs."""
    from .calibrate import fit_blend

    out = Choice(c.name, c.judges, c.method, c.tie, c.kind, list(c.fold_kappas), c.cost, c.learner)
    if c.learner is not None:
        learned = fit_blend(table.only_judges(list(c.judges)), gold, c.learner, tie=c.tie, seed=seed)
        out.weights, out.thresholds = learned.weights, learned.thresholds
    return out


def blender_of(c: Choice, seed: int = 0) -> Blender:
    return fitted_blender(c.method, c.tie, c.weights, c.thresholds, seed)


def apply_choice(c: Choice, table: BallotTable, seed: int = 0) -> np.ndarray:
    """Labels of a fitted candidate on another table (ABSTAIN where it gives none)."""
    sub = table.only_judges(list(c.judges))
    if c.kind == "member":
        return sub.labels[:, 0].copy()
    lab = blender_of(c, seed).blend(sub).labels
    return np.array([ABSTAIN if v is None else v for v in lab])


@dataclass
class OuterFold:
    fold: int
    test_queries: tuple[str, ...]
    chosen: str
    chosen_kappa: float
    inner_best_member: str
    inner_best_member_kappa: float
    member_kappa: dict[str, float]


@dataclass
class NestedReport:
    folds: list[OuterFold]
    pooled_chosen: float
    pooled_inner_member: float
    pooled_members: dict[str, float]
    n_pairs: int

    @property
    def best_member(self) -> tuple[str, float]:
        j = max(self.pooled_members, key=lambda j: np.nan_to_num(self.pooled_members[j], nan=-np.inf))
        return j, self.pooled_members[j]


def nested_select(table: BallotTable, gold: Mapping[str, Mapping[str, int]], *, outer: int = 5, inner: int = 5,
                  progress: Callable[[str], None] | None = None, **kwargs) -> NestedReport:
    """Selection inside each outer fold's training queries; the chosen panel scored on the outer
    fold's queries (the honest figure), pooled over outer folds, next to each member alone and
    to the member the inner selection would pick among members only."""
    y = gold_array(table, gold)
    outer_folds = query_folds(table, y, outer)
    qids = table.query_ids()
    pooled_pred = np.full(table.n_pairs, ABSTAIN)
    pooled_member = np.full(table.n_pairs, ABSTAIN)
    in_test = np.zeros(table.n_pairs, dtype=bool)
    reports = []
    for n, test_q in enumerate(outer_folds, start=1):
        test = np.isin(qids, np.asarray(test_q, dtype=object))
        train_t = table.select(np.flatnonzero(~test))
        train_q = set(train_t.query_ids())
        if train_q & set(test_q):
            raise RuntimeError(f"outer fold {n} puts a query on both sides")
        train_gold = {q: g for q, g in gold.items() if q in train_q}
        sel = select(train_t, train_gold, folds=inner, **kwargs)
        if sel.chosen is None:
            continue
        chosen = fit_choice(sel.chosen, train_t, train_gold, kwargs.get("seed", 0))
        members = [c for c in sel.candidates if c.kind == "member" and math.isfinite(c.mean)]
        inner_member = max(members, key=lambda c: c.mean)
        pred = apply_choice(chosen, table)
        mpred = apply_choice(inner_member, table)
        rows = test & (y >= 0) & (pred != ABSTAIN) & table.voted.all(axis=1)
        pooled_pred[test] = pred[test]
        pooled_member[test] = mpred[test]
        in_test |= test
        per_member = {j: cohen_kappa(y[rows], table.labels[rows, i]) for i, j in enumerate(table.judges)}
        reports.append(OuterFold(n, tuple(test_q), chosen.label, cohen_kappa(y[rows], pred[rows]), inner_member.judges[0],
                                 cohen_kappa(y[rows], mpred[rows]), per_member))
        if progress:
            progress(f"outer fold {n}: chose {chosen.label} (inner {sel.chosen.mean:.3f}); "
                     f"held out {reports[-1].chosen_kappa:.3f}")
    rows = in_test & (y >= 0) & (pooled_pred != ABSTAIN) & table.voted.all(axis=1)
    members = {j: cohen_kappa(y[rows], table.labels[rows, i]) for i, j in enumerate(table.judges)}
    return NestedReport(reports, cohen_kappa(y[rows], pooled_pred[rows]), cohen_kappa(y[rows], pooled_member[rows]), members,
                        int(rows.sum()))
