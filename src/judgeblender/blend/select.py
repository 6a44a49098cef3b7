"""Choosing who sits on the panel: candidate panels (members x aggregator), scored on held-out queries.

Families (`family=`, what is searched):
  subsets  every non-empty subset of the judges up to EXHAUSTIVE_MAX of them (2^8 - 1 = 255),
           beyond that greedy forward selection then backward elimination within a time limit;
           each subset with every fast aggregator (FAST_RULES), learned cut points (FRONTIER_RULES)
           on the fast candidates' cost-quality frontier and the full panel, and with `slow` the
           SLOW_RULES there too (dawid-skene, probability rules when the votes carry
           distributions; seconds a fit). GLAD is not searched.
  ranked   the judges ranked by their seed score (the optimised statistic with the human
           labels), and for every k the top k with every RANKED_RULES aggregator: about
           10 x (judges - 1) + 2 candidates. Inside each fold the ranking is redone on that
           fold's training queries, so a candidate's held-out score is the score of the whole
           procedure "rank, keep k, blend", ranking included.
  order    the ranked family's ranking with two rules only (ORDER_RULES: the median and the
           majority vote of the top k): 2 x (judges - 1) + 1 candidates, nothing learned but the
           ranking and k, so what it chooses on a small seed holds on other queries.
  single   each judge alone.
  auto     (default, issue 37) `decide`: one judge, the order family or the rich family (subsets
           while every subset is searched, judges <= exhaustive_max, ranked beyond: issue 32's
           auto), whichever an out-of-sample comparison supports (below).

Scoring. Queries with a human label are dealt round-robin into folds (sorted ids, as `calibrate`
does). Every candidate gives each labelled pair one held-out label: fixed rules need no fitting;
learned parts (weights, cut points) and the ranked family's ranking are fitted on the other folds'
queries. A candidate keeps one 4x4 confusion matrix (human label x its label) per seed query, so
every figure - per-fold kappa, kappa pooled over all folds' pairs, Krippendorff's ordinal alpha,
query-bootstrap intervals - is a sum and one vectorised formula (kappa.py), not a call per
candidate. `optimise=` names the statistic the choice maximises: "kappa" (Cohen's, 0-3; the
default, the figure the project and the LLMJudge challenge report) or "alpha" (ordinal).

Choice (`rule=`):
  paired-bound (default) a panel must earn its seats: each candidate's pooled figure minus the
           best single judge's, less one standard error of that difference over 200 resamples of
           the seed queries (paired: both on the same drawn queries); the best judge alone scores
           0, so a blend is chosen only when it beats that judge by more than the noise of its
           own gain, and then the one with the highest such bound.
  best     the highest statistic pooled over all folds' pairs.
  one-se   among the candidates whose mean per-fold statistic is within one standard error (of
           the best candidate's folds) of the best, the cheapest, then fewest members, then
           simplest, then higher mean (the default before issue 32).
Equal candidates go to the cheapest, then the fewest members, then the simplest aggregator. Cost
is a price per call (one call per judge and pair) given per judge; with no prices every judge
costs 1, so cost is the number of members.

Why these defaults: docs/aggregators.md ("Juries that earn their seats"), measured by
bench/selection.py with nested query cross-fitting on DL19, DL20, LLMJudge dev and synthetic
33-judge juries. The one-SE rule's error is dominated by how hard each fold's queries are, so it
sees nearly every blend as tied and keeps one member; the best inner figure among thousands of
candidates is partly luck (on the synthetic juries the held-out kappa falls as more subsets are
searched while the inner one rises); the paired bound cancels the fold difficulty that both
figures share and charges each candidate for its own noise.

Honest figure: `nested_select` runs the whole selection inside each outer fold's training queries
and scores what it chose on the outer fold's queries, which took no part in choosing it, next to
the best single member chosen the same way and the majority vote of all members, with intervals
from resampling the outer folds' queries.

The default's decision (issue 37, `decide`): issue 32's rule chose among thousands of candidates
on the seed's own folds, and what won there could lose on new queries (LLMJudge dev: `min` of
three judges, below its best judge on the challenge's test split). So the default makes the
nested comparison decide: one judge, the order family and the rich family are each run whole
inside 5 outer folds, and a procedure replaces the baseline (one judge; the order family beyond
MANY_JUDGES judges) only when its held-out gain beats DECISION_Z standard errors of the paired
difference. Every figure counts coverage: an unlabelled pair is scored as a disagreement
(`scored`). The seed minimums and the no-chance finding are plain calibrate's (seed_rules).
docs/aggregators.md ("Seats earned on unseen queries") has the measurements.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .. import arguments
from ..errors import ArgumentError
from ..kappa import alpha_ordinal_from_confusion, fold_mean_se, kappa_from_confusion
from .seed_rules import chance_alert, too_small
from .blender import Blender, fitted_blender
from .calibrate import learn_thresholds
from .votes import ABSTAIN, LABELS, N_LABELS, BallotTable

EXHAUSTIVE_MAX = 8  # candidate judges up to which every subset is scored
DEFAULT_TIME_LIMIT = 120.0  # seconds for a greedy search
FAMILIES = ("auto", "order", "single", "ranked", "subsets")
RULES = ("paired-bound", "best", "one-se")
PAIRED_SAMPLES, PAIRED_Z = 200, 1.0  # the paired-bound rule: query resamples, standard errors
STATISTICS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "kappa": kappa_from_confusion, "alpha": alpha_ordinal_from_confusion}
DEFAULT_FAMILY, DEFAULT_RULE, DEFAULT_OPTIMISE = "auto", "paired-bound", "kappa"
# The out-of-sample comparison (nested estimate). From MIN_OUTER_QUERIES labelled queries, 5 outer
# folds each hold out 2 queries or more and choose on 8 or more: below that an outer fold would
# hold out one query, whose kappa alone is mostly noise, so the default seats one judge instead.
# Figures from fewer than 20 queries are rough: their intervals, always shown, say how rough.
MIN_OUTER_QUERIES = 10
DEFAULT_OUTER = 5
BOOTSTRAP = 1000  # query resamples for the nested estimate's intervals
# The default's decision (`decide`): the procedures it weighs, simplest first.
PROCEDURES = ("single", "order", "rich")
# With more judges than this, the order family is the baseline the others must beat, not one judge:
# the best of J judges ranked on a small seed leads its true standing by about sqrt(2 ln J) standard
# errors (the maximum of J noisy figures), 2 at 8 judges and growing, while a vote of the top k
# averages that luck away. Up to 8, every subset is searched (EXHAUSTIVE_MAX) and judges differ
# enough that the best one alone is a baseline a panel must beat.
MANY_JUDGES = 8
# A procedure replaces the baseline when its gain beats this many standard errors of the paired
# difference: a one-sided test at 95%. Measured on 50 random seeds of 10, 15 and 20 queries per
# collection (bench/selection_z.py, docs/aggregators.md): at z = 1 blends that won by luck cost
# up to 0.005 kappa against the best seed judge on LLMJudge dev; at 1.645 at most 0.0034, while
# on DL19 and DL20, where a blend wins by 0.1, it still seats one on most seeds.
DECISION_Z = 1.645

# (candidate name, method, tie) of the fast aggregators, computed on label matrices in numpy.
FAST_RULES: tuple[tuple[str, str, str], ...] = (
    ("mv(avg)", "mv", "avg"), ("mv(min)", "mv", "min"), ("mv(max)", "mv", "max"),
    ("av", "av", "avg"), ("av-even", "av-even", "avg"), ("median(avg)", "median", "avg"),
    ("min", "min", "avg"), ("max", "max", "avg"), ("learned weights", "weighted", "avg"),
)
FAST_METHODS = frozenset(method for _, method, _ in FAST_RULES)
# The ranked family's aggregators: the fast ones and learned cut points on the mean expected
# label (cheap since learn_thresholds reads cumulative counts).
RANKED_RULES: tuple[tuple[str, str, str], ...] = (*FAST_RULES, ("learned thresholds", "prob-expected", "avg"))
# Scored on the frontier subsets and the full panel: learned cut points (cheap, always), and with
# slow=True (`--slow`) the rules Blender runs pair by pair or through crowd-kit (seconds a fit).
FRONTIER_RULES: tuple[tuple[str, str, str], ...] = (("learned thresholds", "prob-expected", "avg"),)
SLOW_RULES: tuple[tuple[str, str, str], ...] = (
    ("prob-argmax(avg)", "prob-argmax", "avg"),
    ("prob-expected", "prob-expected", "avg"),
    ("dawid-skene", "dawid-skene", "avg"),
)
# The order family (issue 37): order statistics and votes of the top k judges by seed figure, two
# rules x k: few degrees of freedom (the ranking and k), so what it chose on 20 queries holds on
# others; the default's fallback with many judges.
ORDER_RULES: tuple[tuple[str, str, str], ...] = (("median(avg)", "median", "avg"), ("mv(avg)", "mv", "avg"))
# Not searched: glad (about 23 s per fit on LLMJudge dev's 7 judges x 7,263 pairs); `blend --method glad` has it.
SIMPLICITY = {"member": 0, "fixed": 1, "learned": 2}


def check_choice_args(family: str, rule: str, optimise: str, folds: int) -> None:
    """The selection's settings, checked before any work (names the Python argument)."""
    for argument, value, allowed in (("family", family, FAMILIES), ("rule", rule, RULES),
                                     ("optimise", optimise, tuple(STATISTICS))):
        if value not in allowed:
            raise ArgumentError(argument, "one of " + ", ".join(allowed), value)
    arguments.bounded("folds", folds)


# ---- vectorised aggregators on a label matrix (pairs x judges, ABSTAIN where no vote) ----

def _counts(labels: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """(rows x labels) votes for each label, each judge counting its weight (1 without weights)."""
    onehot = labels[:, :, None] == np.arange(N_LABELS)
    if weights is None:
        return onehot.sum(axis=1).astype(float)
    return np.einsum("nkl,k->nl", onehot, np.asarray(weights, dtype=float))


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


def fast_labels(labels: np.ndarray, method: str, tie: str = "avg", weights: np.ndarray | None = None,
                scores: np.ndarray | None = None) -> np.ndarray:
    """The blend of every row (ABSTAIN where nobody voted), equal to Blender's on label-only votes.
    `scores`: mv's and weighted's vote counts (`_counts`) when the caller already has them."""
    voted = labels != ABSTAIN
    k = voted.sum(axis=1)
    out = np.full(labels.shape[0], ABSTAIN)
    has = k > 0
    if method in ("mv", "weighted"):
        scores = _counts(labels, weights) if scores is None else scores
        best = scores.max(axis=1)
        # equal within a relative 1e-9 (as math.isclose), so float weights that sum alike tie
        top = (scores >= best[:, None] - 1e-9 * np.maximum(np.abs(best[:, None]), 1e-3)) & (best[:, None] > 0)
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


def fixed_labels(labels: np.ndarray, counts: np.ndarray) -> dict[tuple[str, str], np.ndarray]:
    """Every fixed FAST_RULES aggregator's labels at once, sharing what they have in common (the
    vote counts and the tied top labels of mv's three tie rules, the votes' sum for av): equal to
    fast_labels rule by rule, at a fraction of the passes over the rows."""
    voted = labels != ABSTAIN
    k = voted.sum(axis=1)
    has = k > 0
    out: dict[tuple[str, str], np.ndarray] = {}
    best = counts.max(axis=1)
    top = (counts == best[:, None]) & (best[:, None] > 0)
    for tie in ("avg", "min", "max"):
        out[("mv", tie)] = np.where(has & (best > 0), _tie_pick(top, tie), ABSTAIN)
    total = np.where(voted, labels, 0).sum(axis=1)
    safe_k = np.maximum(k, 1)
    out[("av", "avg")] = np.where(has, (2 * total + k) // (2 * safe_k), ABSTAIN)
    out[("av-even", "avg")] = np.where(has, np.round(total / safe_k).astype(int), ABSTAIN)
    out[("min", "avg")] = np.where(has, np.where(voted, labels, N_LABELS).min(axis=1), ABSTAIN)
    out[("max", "avg")] = np.where(has, labels.max(axis=1), ABSTAIN)
    out[("median", "avg")] = fast_labels(labels, "median", "avg")
    return out


# ---- candidates ----

def fold_statistic(confusion: np.ndarray, statistic: str) -> np.ndarray:
    """The statistic of each matrix of a stack; NaN where it holds fewer than 2 pairs (one pair
    says nothing about agreement, and per-fold figures have always left such folds out)."""
    confusion = np.asarray(confusion)
    values = STATISTICS[statistic](confusion)
    return np.where(confusion.sum(axis=(-1, -2)) >= 2, values, np.nan)


@dataclass(eq=False)
class Choice:
    """One scored (members, aggregator) candidate: its held-out confusion counts per seed query."""

    name: str  # aggregator name as shown ("member" for a single judge alone)
    judges: tuple[str, ...]  # the members on the whole seed (the ranked family: its top k there)
    method: str
    tie: str
    kind: str  # "member", "fixed", "learned"
    confusion: np.ndarray  # (seed queries, 4, 4): held-out counts, rows human label, columns this label
    cost: float
    folds: np.ndarray  # the fold of each seed query
    optimise: str = DEFAULT_OPTIMISE
    learner: str | None = None
    weights: dict[str, float] | None = None
    thresholds: tuple[float, ...] | None = None
    top: int | None = None  # ranked family: the top `top` judges, re-ranked inside every fold
    missed: int = 0  # labelled seed pairs it left unlabelled (scored as disagreements: `scored`)

    @property
    def coverage(self) -> float:
        """The share of the labelled seed pairs it labelled (held out)."""
        n = int(self.confusion.sum())
        return (n - self.missed) / n if n else float("nan")

    @property
    def label(self) -> str:
        if self.top is not None:
            who = f"top {self.top} {{{', '.join(self.judges)}}}"
            return f"member {self.judges[0]} (top 1)" if self.kind == "member" else f"{self.name} of {who}"
        return f"{self.name} of {{{', '.join(self.judges)}}}" if self.kind != "member" else f"member {self.judges[0]}"

    @cached_property
    def fold_confusion(self) -> np.ndarray:
        out = np.zeros((int(self.folds.max()) + 1, N_LABELS, N_LABELS), dtype=np.int64)
        np.add.at(out, self.folds, self.confusion)
        return out

    def fold_values(self, statistic: str | None = None) -> list[float]:
        return fold_statistic(self.fold_confusion, statistic or self.optimise).tolist()

    @property
    def fold_kappas(self) -> list[float]:
        return self.fold_values("kappa")

    @cached_property
    def kappa_mean_se(self) -> tuple[float, float]:
        """Mean and standard error of the per-fold kappas (what the no-chance finding reads)."""
        return fold_mean_se(self.fold_kappas)

    @cached_property
    def _mean_se(self) -> tuple[float, float]:
        return fold_mean_se(self.fold_values())

    @property
    def mean(self) -> float:
        """Mean per-fold statistic (the optimised one): what the one-SE rule and the frontier use."""
        return self._mean_se[0]

    @property
    def se(self) -> float:
        return self._mean_se[1]

    def pooled(self, statistic: str | None = None) -> float:
        """The statistic on all folds' held-out pairs together."""
        return float(fold_statistic(self.confusion.sum(axis=0), statistic or self.optimise))

    @cached_property
    def value(self) -> float:
        """The optimised statistic pooled over every fold's pairs: what the `best` rule maximises."""
        return self.pooled()

    @property
    def n_pairs(self) -> int:
        return int(self.confusion.sum())

    def key(self) -> tuple:
        return (self.cost, len(self.judges), SIMPLICITY[self.kind], -self.mean)


def prime(candidates: Sequence[Choice]) -> None:
    """Every candidate's figures (pooled, per fold, their mean and standard error) computed in one
    vectorised pass and cached on it, rather than one statistic call per candidate and fold: the
    rules and the frontier read them for thousands of candidates. Candidates of one scorer share
    their folds and statistic."""
    groups: dict[tuple[int, str], list[Choice]] = {}
    for c in candidates:
        groups.setdefault((id(c.folds), c.optimise), []).append(c)
    for (_, statistic), group in groups.items():
        conf = np.stack([c.confusion for c in group])  # (C, Q, 4, 4)
        folds = group[0].folds
        deal = (folds[None, :] == np.arange(int(folds.max()) + 1)[:, None]).astype(np.int64)  # (F, Q)
        fold_conf = np.einsum("fq,cqij->cfij", deal, conf)
        pooled = fold_statistic(conf.sum(axis=1), statistic)
        stats = {s: _mean_se_rows(fold_statistic(fold_conf, s)) for s in {statistic, "kappa"}}  # (C, F) each
        for i, c in enumerate(group):
            c.__dict__["fold_confusion"] = fold_conf[i]
            c.__dict__["_mean_se"] = (float(stats[statistic][0][i]), float(stats[statistic][1][i]))
            c.__dict__["kappa_mean_se"] = (float(stats["kappa"][0][i]), float(stats["kappa"][1][i]))
            c.__dict__["value"] = float(pooled[i])


def _mean_se_rows(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """fold_mean_se of each row at once: NaN folds left out; NaN mean without a fold, NaN error
    with fewer than two."""
    finite = np.isfinite(values)
    n = finite.sum(axis=1)
    v = np.where(finite, values, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = v.sum(axis=1) / n
        dev = np.where(finite, values - mean[:, None], 0.0)
        se = np.sqrt((dev ** 2).sum(axis=1) / (n - 1)) / np.sqrt(n)
    return np.where(n > 0, mean, np.nan), np.where(n > 1, se, np.nan)


@dataclass
class Selection:
    candidates: list[Choice]
    chosen: Choice | None
    best: Choice | None  # the candidate with the highest figure the rule looks at
    frontier: list[Choice]
    search: str  # "ranked", "exhaustive" or "greedy"
    subsets: int
    folds: int
    n_queries: int
    n_pairs: int
    seconds: float
    warnings: list[str] = field(default_factory=list)
    members: list[Choice] = field(default_factory=list)  # each judge alone, scored the same way
    all_vote: Choice | None = None  # mv (tie avg) of every judge: no human label used
    family: str = DEFAULT_FAMILY
    rule: str = DEFAULT_RULE
    optimise: str = DEFAULT_OPTIMISE
    notes: list[str] = field(default_factory=list)  # judges left out or seated once, and why
    no_chance: str | None = None  # the seed_rules finding: no candidate beats chance on this seed
    too_small: str | None = None  # the seed_rules finding: the seed is below the minimums, nothing chosen
    decision: Decision | None = None  # family "auto": the out-of-sample comparison that chose the family

    @property
    def best_member(self) -> Choice | None:
        """The single judge the same rule picks among the judges alone."""
        return choose(self.members, self.rule, self.members)[0]

    def alerts(self) -> list[str]:
        """The findings a user must act on, one line each (the CLI prints them as `warning:`)."""
        return [a for a in (self.too_small, self.no_chance, self.decision.tell_apart if self.decision else None) if a]


def scored(pred: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The label a choice is scored with on pairs with a human label `y`: its own, or, where it
    gave none (ABSTAIN), the label farthest from the human's. At scale a pair the panel leaves
    unlabelled is a hole, never an agreement, so a judge that labels few seed pairs cannot win on
    those alone; farthest, so that alpha gives it no credit for a near miss either."""
    return np.where(pred == ABSTAIN, np.where(y <= 1, N_LABELS - 1, 0), pred)


def gold_array(table: BallotTable, gold: Mapping[str, Mapping[str, int]]) -> np.ndarray:
    return np.array([gold.get(q, {}).get(d, ABSTAIN) for q, d in table.pairs], dtype=int)


def query_folds(table: BallotTable, y: np.ndarray, k: int) -> list[list[str]]:
    """Queries with a gold label dealt round-robin in sorted order (as `calibrate` does)."""
    queries = sorted({q for (q, _), g in zip(table.pairs, y) if g >= 0})
    return [queries[i::k] for i in range(k)]


def expectations(table: BallotTable) -> np.ndarray:
    """Each vote's expected label (pairs x judges): from its distribution where it has one, else
    its label; NaN where the judge abstained. The mean over a panel's voters is prob-expected's
    score (equal to blend.calibrate.expected_scores up to rounding), for every panel at once."""
    out = np.where(table.voted, table.labels, np.nan).astype(float)
    if table.probs is not None:
        dist = table.voted & ~np.isnan(table.probs).any(axis=2)
        out[dist] = table.probs[dist] @ np.asarray(LABELS, dtype=float)
    return out


def rank_order(values: np.ndarray) -> np.ndarray:
    """Column order by falling value (NaN last), ties kept in table order."""
    return np.argsort(-np.nan_to_num(np.asarray(values, dtype=float), nan=-np.inf), kind="stable")


class FixedLabels:
    """The fixed aggregators' labels (`fixed_labels`) of judge subsets on one table, computed once
    per subset and sliced for the tables made of its rows. The default's decision searches every
    subset on each outer fold's training queries and then on the whole seed; a fixed rule's label
    of a pair does not depend on which other pairs are in the table, so each is computed once."""

    def __init__(self, table: BallotTable):
        self.table = table
        self._by_subset: dict[tuple[str, ...], dict[tuple[str, str], np.ndarray]] = {}

    def of(self, judges: tuple[str, ...], rows: np.ndarray) -> dict[tuple[str, str], np.ndarray]:
        if judges not in self._by_subset:
            labels = self.table.labels[:, [self.table.judges.index(j) for j in judges]].astype(int)
            self._by_subset[judges] = {k: v.astype(np.int8) for k, v in fixed_labels(labels, _counts(labels)).items()}
        return {k: v[rows].astype(int) for k, v in self._by_subset[judges].items()}


class CandidateScorer:
    """Held-out labels of candidates on one seed set split into query folds, as confusion counts.
    `fixed`: the parent table's FixedLabels and the rows of it that `table` holds, in order."""

    def __init__(self, table: BallotTable, y: np.ndarray, folds: list[list[str]], seed: int,
                 optimise: str = DEFAULT_OPTIMISE, fixed: tuple[FixedLabels, np.ndarray] | None = None):
        self.table, self.y, self.seed, self.optimise, self.fixed = table, y, seed, optimise, fixed
        queries = [q for f in folds for q in f]
        self.fold_of_query = np.repeat(np.arange(len(folds)), [len(f) for f in folds])
        index = {q: i for i, q in enumerate(queries)}
        self.query_of_row = np.array([index.get(q, -1) if g >= 0 else -1 for (q, _), g in zip(table.pairs, y)],
                                     dtype=np.int64)
        labelled = self.query_of_row >= 0
        row_fold = np.where(labelled, self.fold_of_query[np.maximum(self.query_of_row, 0)], -1)
        self.fold_rows = [row_fold == f for f in range(len(folds))]
        self.labelled = labelled
        self.n_queries = len(queries)
        self.col = {j: i for i, j in enumerate(table.judges)}
        self._expect: np.ndarray | None = None
        self._fold_weights: list[np.ndarray] | None = None

    def confusion(self, pred: np.ndarray) -> np.ndarray:
        """(queries, 4, 4) counts of (human label, scored label) over every labelled pair, from
        `pred` (every pair's held-out label, ABSTAIN where none): an abstention is scored as a
        disagreement (`scored`), so coverage counts."""
        ok = self.labelled
        cells = (self.query_of_row[ok] * N_LABELS + self.y[ok]) * N_LABELS + scored(pred[ok], self.y[ok])
        return np.bincount(cells, minlength=self.n_queries * N_LABELS * N_LABELS).reshape(-1, N_LABELS, N_LABELS)

    def choice(self, name: str, judges: tuple[str, ...], method: str, tie: str, kind: str, pred: np.ndarray,
               cost: float, **extra) -> Choice:
        missed = int((self.labelled & (pred == ABSTAIN)).sum())
        return Choice(name, judges, method, tie, kind, self.confusion(pred), cost, self.fold_of_query,
                      self.optimise, missed=missed, **extra)

    def held_out(self, per_fold: Sequence[np.ndarray]) -> np.ndarray:
        """One label per pair, each fold's pairs taken from the prediction made for that fold."""
        out = np.full(self.table.n_pairs, ABSTAIN)
        for rows, pred in zip(self.fold_rows, per_fold):
            out[rows] = pred[rows]
        return out

    def member_weights(self, judges: Sequence[str], train: np.ndarray) -> np.ndarray:
        """Learned weights: each judge's kappa with the human labels on the training pairs, >= 0."""
        w = []
        for j in judges:
            lab = self.table.labels[:, self.col[j]]
            ok = train & (lab != ABSTAIN)
            conf = np.bincount(self.y[ok] * N_LABELS + lab[ok], minlength=N_LABELS * N_LABELS)
            k = float(kappa_from_confusion(conf.reshape(N_LABELS, N_LABELS))) if ok.any() else float("nan")
            w.append(max(k, 0.0) if math.isfinite(k) else 0.0)
        return np.asarray(w)

    def member(self, judge: str, cost: float) -> Choice:
        return self.choice("member", (judge,), "mv", "avg", "member", self.table.labels[:, self.col[judge]].astype(int),
                           cost)

    def fast(self, judges: tuple[str, ...], costs: Mapping[str, float]) -> list[Choice]:
        labels = self.table.labels[:, [self.col[j] for j in judges]]
        cost = float(sum(costs[j] for j in judges))
        if len(judges) == 1:
            return [self.member(judges[0], cost)]
        out = []
        if self._fold_weights is None:  # every judge's learned weight per fold, once for all subsets
            self._fold_weights = [self.member_weights(self.table.judges, ~rows & self.labelled) for rows in self.fold_rows]
        cols = [self.col[j] for j in judges]
        onehot = (labels[:, :, None] == np.arange(N_LABELS)).astype(float)  # the weights' vote counts
        fixed = (self.fixed[0].of(judges, self.fixed[1]) if self.fixed is not None
                 else fixed_labels(labels, onehot.sum(axis=1)))
        for name, method, tie in FAST_RULES:
            if method == "weighted":  # each fold's pairs weighted by the weights learned on the other folds
                held = np.full(len(labels), ABSTAIN)
                for rows, weights in zip(self.fold_rows, self._fold_weights):
                    w = weights[cols]
                    if w.any():
                        held[rows] = fast_labels(labels[rows], "weighted", tie,
                                                 scores=np.einsum("nkl,k->nl", onehot[rows], w))
                out.append(self.choice(name, judges, method, tie, "learned", held, cost, learner="weights"))
            else:
                out.append(self.choice(name, judges, method, tie, "fixed", fixed[(method, tie)], cost))
        return out

    def on_frontier(self, judges: tuple[str, ...], costs: Mapping[str, float], slow: bool,
                    warnings: list[str]) -> list[Choice]:
        """The rules scored on the frontier subsets only: learned cut points (FRONTIER_RULES), and
        with `slow` the Blender-run SLOW_RULES (dawid-skene, and the probability rules when the
        votes carry distributions; on labels alone those equal mv and av, already scored)."""
        if len(judges) < 2:
            return []
        cost = float(sum(costs[j] for j in judges))
        out = [self.choice(name, judges, method, tie, "learned", self.thresholds(judges), cost, learner="thresholds")
               for name, method, tie in FRONTIER_RULES]
        if not slow:
            return out
        sub = self.table.only_judges(list(judges))
        has_probs = sub.probs is not None and not np.isnan(sub.probs).all()
        for name, method, tie in SLOW_RULES:
            if method.startswith("prob-") and not has_probs:
                continue
            try:
                lab = Blender(method, tie=tie, seed=self.seed).blend(sub).labels
            except Exception as exc:  # e.g. crowd-kit missing: recorded, not fatal
                msg = f"{name}: skipped ({exc})"
                if msg not in warnings:
                    warnings.append(msg)
                continue
            pred = np.array([ABSTAIN if v is None else v for v in lab])
            out.append(self.choice(name, judges, method, tie, "fixed", pred, cost))
        return out

    def expectations(self) -> np.ndarray:
        if self._expect is None:
            self._expect = expectations(self.table)
        return self._expect

    def thresholds(self, judges: tuple[str, ...]) -> np.ndarray:
        """Held-out labels of learned cut points on the judges' mean expected label: fitted on the
        other folds' pairs (learn_thresholds, as fit_blend does), applied to each fold's pairs."""
        cols = [self.col[j] for j in judges]
        expect = self.expectations()[:, cols]
        voted = ~np.isnan(expect)
        count = voted.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            score = np.where(voted, expect, 0.0).sum(axis=1) / count
        return self.held_out([self._cut(score, count, rows) for rows in self.fold_rows])

    def _cut(self, score: np.ndarray, count: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Cut points learned on the labelled pairs outside `rows`, applied to every pair."""
        fit = self.labelled & ~rows & (count > 0)
        cuts = np.asarray(learn_thresholds(score[fit], self.y[fit]))
        return np.where(np.isnan(score), ABSTAIN, np.searchsorted(cuts, np.nan_to_num(score), side="right"))

    def ranked(self, judges: tuple[str, ...], costs: Mapping[str, float],
               rules: Sequence[tuple[str, str, str]] = RANKED_RULES) -> list[Choice]:
        """The ranked family (and the order family, with ORDER_RULES): for every k, the top k
        judges by seed score with every one of `rules`. Within each fold the judges are ranked on
        the training queries only, and the learned parts are fitted there, so each candidate is
        scored as the whole procedure."""
        cols = np.array([self.col[j] for j in judges])
        labels = self.table.labels[:, cols].astype(int)
        expect = self.expectations()[:, cols]
        voted = labels != ABSTAIN
        member_conf = np.stack([self.confusion(labels[:, i]) for i in range(len(judges))])  # (J, Q, 4, 4)
        stat = STATISTICS[self.optimise]
        whole = rank_order(stat(member_conf.sum(axis=1)))
        n, m = len(judges), len(rules)
        preds = np.full((n, m, self.table.n_pairs), ABSTAIN, dtype=np.int8)  # per k and rule: every pair's held-out label
        for f, rows in enumerate(self.fold_rows):
            train_conf = member_conf[:, self.fold_of_query != f].sum(axis=1)
            order = rank_order(stat(train_conf))
            kappas = kappa_from_confusion(train_conf)
            weights = np.where(np.isfinite(kappas), np.maximum(kappas, 0.0), 0.0)[order]
            test_labels = labels[rows][:, order]
            # prefix sums of the ranked judges' expected labels: every k's mean score at once
            total = np.cumsum(np.where(voted, expect, 0.0)[:, order], axis=1)
            count = np.cumsum(voted[:, order], axis=1)
            for k in range(1, n + 1):
                sub = test_labels[:, :k]
                for r, (_, method, tie) in enumerate(rules):
                    if method == "weighted":
                        w = weights[:k]
                        out = fast_labels(sub, "weighted", tie, w) if w.any() else np.full(len(sub), ABSTAIN)
                    elif method == "prob-expected":
                        with np.errstate(invalid="ignore", divide="ignore"):
                            score = total[:, k - 1] / count[:, k - 1]
                        out = self._cut(score, count[:, k - 1], rows)[rows]
                    else:
                        out = fast_labels(sub, method, tie)
                    preds[k - 1, r, rows] = out
        result = []
        for k in range(1, n + 1):
            members = tuple(judges[i] for i in whole[:k])
            cost = float(sum(costs[j] for j in members))
            scored_rules = enumerate(rules)
            if k == 1:  # one judge: every vote rule is its own label; learned cut points can still relabel it
                result.append(self.choice("member", members, "mv", "avg", "member", preds[0, 0], cost, top=1))
                scored_rules = [(r, rule) for r, rule in scored_rules if rule[1] == "prob-expected"]
            for r, (name, method, tie) in scored_rules:
                learner = {"weighted": "weights", "prob-expected": "thresholds"}.get(method)
                result.append(self.choice(name, members, method, tie, "learned" if learner else "fixed", preds[k - 1, r],
                                          cost, learner=learner, top=k))
        return result


def frontier(candidates: Sequence[Choice]) -> list[Choice]:
    """Cost-quality frontier: by rising cost, each candidate whose mean statistic beats every cheaper one."""
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


def best_choice(candidates: Sequence[Choice]) -> tuple[Choice | None, Choice | None]:
    """(chosen, best): the highest pooled statistic; equal ones (within 1e-12) go to the cheapest,
    then fewest members, then simplest."""
    scored = [c for c in candidates if math.isfinite(c.value)]
    if not scored:
        return None, None
    top = max(c.value for c in scored)
    chosen = min((c for c in scored if c.value >= top - 1e-12), key=Choice.key)
    return chosen, chosen


def paired_bound_choice(candidates: Sequence[Choice], members: Sequence[Choice], *, seed: int = 0,
                        samples: int = PAIRED_SAMPLES, z: float = PAIRED_Z) -> tuple[Choice | None, Choice | None]:
    """(chosen, best): a panel must earn its seats. The reference is the best single judge (highest
    pooled figure among `members`); each candidate's bound is its pooled figure minus the
    reference's, less `z` standard errors of that difference over `samples` resamples of the seed
    queries (paired: both figures on the same drawn queries). The reference's own bound is 0, so a
    blend is chosen only when it beats the best judge by more than the noise of its own gain, and
    then the one with the highest bound (equal ones: cheapest, fewest members, simplest)."""
    from ..evaluate.bootstrap import bootstrap_query_counts

    ref = best_choice(members)[0]
    pool = [c for c in candidates if math.isfinite(c.value)]
    if ref is None:
        return best_choice(pool)
    pool.append(ref)
    queries = len(ref.confusion)
    counts = bootstrap_query_counts(queries, samples, seed)
    stack = np.stack([c.confusion.reshape(queries, -1) for c in pool]).astype(float)  # (candidates, queries, 16)
    replicates = np.einsum("bq,cqk->bck", counts, stack).reshape(samples, len(pool), N_LABELS, N_LABELS)
    values = STATISTICS[ref.optimise](replicates)  # (samples, candidates)
    with np.errstate(invalid="ignore"):
        se = np.nanstd(values - values[:, [-1]], axis=0, ddof=1)
    bound = np.array([c.value for c in pool]) - ref.value - z * np.where(np.isfinite(se), se, np.inf)
    bound[-1] = 0.0
    top = float(np.max(bound))
    chosen = min((c for c, b in zip(pool, bound) if b >= top - 1e-12), key=Choice.key)
    return chosen, max(pool, key=lambda c: c.value)


def choose(candidates: Sequence[Choice], rule: str = DEFAULT_RULE, members: Sequence[Choice] = (),
           seed: int = 0) -> tuple[Choice | None, Choice | None]:
    """(chosen, best) by the named rule (RULES); `members` (each judge alone) are the reference
    of the paired-bound rule."""
    if rule == "one-se":
        return one_se_choice(candidates)
    if rule == "paired-bound":
        return paired_bound_choice(candidates, members, seed=seed)
    return best_choice(candidates)


def screen_judges(table: BallotTable, y: np.ndarray, judges: Sequence[str]) -> tuple[tuple[str, ...], list[str]]:
    """The judges a selection can seat, and a note for each one it cannot: a judge that labelled
    none of the seed's labelled pairs is left out (nothing says how good it is), and judges whose
    labels are identical on every pair are considered once, as the first of them (seating both
    would count one opinion twice)."""
    labelled = y >= 0
    notes, kept, seen = [], [], {}
    n = int(labelled.sum())
    for j in judges:
        col = table.labels[:, table.judges.index(j)]
        if not ((col != ABSTAIN) & labelled).any():
            notes.append(f"{j} labelled none of the {n} labelled seed pairs: left out")
            continue
        key = col.tobytes()
        if key in seen:
            notes.append(f"{j} gives the same label as {seen[key]} on every pair: considered once, as {seen[key]}")
            continue
        seen[key] = j
        kept.append(j)
    return tuple(kept), notes


def select(table: BallotTable, gold: Mapping[str, Mapping[str, int]], *, folds: int = 5,
           costs: Mapping[str, float] | None = None, family: str = DEFAULT_FAMILY, rule: str = DEFAULT_RULE,
           optimise: str = DEFAULT_OPTIMISE, exhaustive_max: int = EXHAUSTIVE_MAX,
           time_limit: float = DEFAULT_TIME_LIMIT, slow: bool = False, seed: int = 0,
           candidates: Sequence[str] | None = None, fold_queries: Sequence[Sequence[str]] | None = None,
           outer: int | None = None, bootstrap: int = BOOTSTRAP, confidence: float = 0.95,
           progress: Callable[[str], None] | None = None,
           fixed: tuple[FixedLabels, np.ndarray] | None = None) -> Selection:
    """Choose a panel on a human seed (module docstring). `family="auto"` (the default) lets an
    out-of-sample comparison decide between one judge, the order family and the richer family
    (`decide`: `outer` outer query folds, None for the default); any other family is scored on
    held-out query folds and chosen by `rule`. `candidates`: the judges to choose among (default
    every judge of the table); `fold_queries`: the query folds to use instead of the round-robin
    deal (a bench's repeated splits); `fixed`: fixed rules' labels computed on a table `table` is
    made of (FixedLabels, and the rows of it `table` holds). The seed minimums of plain
    `calibrate` (seed_rules) apply: below them nothing is chosen (`chosen` None, a warning says why)."""
    check_choice_args(family, rule, optimise, folds)
    start = time.monotonic()
    judges = tuple(candidates or table.judges)
    unknown = [j for j in judges if j not in table.judges]
    if unknown:
        raise ArgumentError("candidates", "judges of the table (" + ", ".join(table.judges) + ")", unknown)
    y = gold_array(table, gold)
    n_queries = len({q for (q, _), g in zip(table.pairs, y) if g >= 0})
    if n_queries < 2:
        raise ArgumentError("gold", "labels of at least 2 queries (selection folds by query)",
                            described=f"labels of {n_queries}")
    judges, notes = screen_judges(table, y, judges)
    if not judges:
        raise ArgumentError("gold", "human labels on pairs that some judge labelled", described="none such")
    costs = {j: float((costs or {}).get(j, 1.0)) for j in judges}
    if family == "auto":
        sel = decide(table, gold, judges=judges, folds=folds, costs=costs, rule=rule, optimise=optimise,
                     exhaustive_max=exhaustive_max, time_limit=time_limit, slow=slow, seed=seed, outer=outer,
                     bootstrap=bootstrap, confidence=confidence, progress=progress)
        sel.notes[:0] = notes
        sel.seconds = time.monotonic() - start
        return sel
    if fold_queries is None:
        fold_queries = query_folds(table, y, max(2, min(folds, n_queries)))
    fold_queries = [list(f) for f in fold_queries if len(f)]
    scorer = CandidateScorer(table, y, fold_queries, seed, optimise, fixed)
    warnings: list[str] = []
    members = [scorer.member(j, costs[j]) for j in judges]
    all_vote = scorer.choice("mv(avg)", judges, "mv", "avg", "fixed",
                             fast_labels(table.labels[:, [scorer.col[j] for j in judges]], "mv", "avg"),
                             float(sum(costs.values())))
    if family == "single":
        everything, search, n_subsets = list(members), "members", len(judges)
    elif family in ("ranked", "order"):
        everything = scorer.ranked(judges, costs, ORDER_RULES if family == "order" else RANKED_RULES)
        search, n_subsets = family, len(judges)
    else:
        everything, search, n_subsets = _search_subsets(scorer, judges, costs, exhaustive_max, time_limit, slow,
                                                        start, warnings)
    prime([*everything, *members, all_vote])
    n_pairs = int((y >= 0).sum())
    small = too_small(n_queries, n_pairs)
    if small:
        chosen_c = best = None
    else:
        chosen_c, best = choose(everything, rule, members, seed)
    no_chance = None if small else chance_alert(
        ((c.label, *c.kappa_mean_se) for c in everything), n_pairs)
    return Selection(everything, chosen_c, best, frontier(everything), search, n_subsets, len(fold_queries),
                     n_queries, n_pairs, time.monotonic() - start, warnings, members, all_vote, family,
                     rule, optimise, notes, no_chance, small)


def _search_subsets(scorer: CandidateScorer, judges: tuple[str, ...], costs: Mapping[str, float], exhaustive_max: int,
                    time_limit: float, slow: bool, start: float, warnings: list[str]) -> tuple[list[Choice], str, int]:
    """The subsets family: exhaustive up to `exhaustive_max` judges, else greedy; learned cut points
    (and with `slow` the slow rules) on the frontier subsets."""
    scored: dict[tuple[str, ...], list[Choice]] = {}

    def score(subset: Sequence[str], primed: bool = True) -> float:
        key = tuple(j for j in judges if j in subset)
        if key not in scored:
            scored[key] = scorer.fast(key, costs)
            if not primed:
                return float("nan")
            prime(scored[key])
        return max((c.mean for c in scored[key] if math.isfinite(c.mean)), default=float("-inf"))

    if len(judges) <= exhaustive_max:
        search = "exhaustive"
        for r in range(1, len(judges) + 1):
            for subset in itertools.combinations(judges, r):
                score(subset, primed=False)
        prime([c for cs in scored.values() for c in cs])  # one vectorised pass for every candidate
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
    refine = {c.judges for c in frontier(fast_all)} | {judges}
    todo = sorted(refine, key=lambda s: (sum(costs[j] for j in s), len(s)))
    for n, subset in enumerate(todo):
        if time.monotonic() - start >= time_limit:
            warnings.append(f"frontier aggregators scored on {n} of {len(todo)} frontier subsets: time limit "
                            f"({time_limit:.0f} s) reached")
            break
        everything += scorer.on_frontier(subset, costs, slow, warnings)
    return everything, search, len(scored)


# ---- applying a choice, and nested evaluation ----

def fit_choice(c: Choice, table: BallotTable, gold: Mapping[str, Mapping[str, int]], seed: int = 0) -> Choice:
    """The candidate with its learned parts fitted on all of `table`'s labelled pairs."""
    from .calibrate import fit_blend

    out = Choice(c.name, c.judges, c.method, c.tie, c.kind, c.confusion, c.cost, c.folds, c.optimise, c.learner,
                 top=c.top)
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
        return sub.labels[:, 0].astype(int)
    if sub.probs is None and c.method in FAST_METHODS and c.tie in ("avg", "min", "max") and (
            c.method != "weighted" or c.weights is not None):  # label-only votes: the vectorised equal of Blender
        w = np.array([c.weights.get(j, 0.0) for j in c.judges]) if c.method == "weighted" else None
        if w is None or w.any():
            return fast_labels(sub.labels.astype(int), c.method, c.tie, w)
    lab = blender_of(c, seed).blend(sub).labels
    return np.array([ABSTAIN if v is None else v for v in lab])




def outer_folds_for(n_queries: int, outer: int | None) -> tuple[int, str | None]:
    """(outer folds to run, why none are run). `outer` None: DEFAULT_OUTER when the seed has at
    least MIN_OUTER_QUERIES labelled queries. With fewer, an outer fold would hold out a single
    query, so the estimate would mostly say which query fell where."""
    if outer is not None:
        if isinstance(outer, bool) or not isinstance(outer, int) or outer < 0 or outer == 1:
            raise ArgumentError("outer", "0 (no nested estimate) or an integer of at least 2", outer)
        if outer == 0:
            return 0, "outer folds turned off"
        if outer > n_queries:
            raise ArgumentError("outer", f"at most as many outer folds as labelled queries ({n_queries})", outer)
        if n_queries - math.ceil(n_queries / outer) < 2:  # the biggest outer fold leaves the rest to choose on
            raise ArgumentError("outer", f"outer folds that leave each fold's selection at least 2 of the "
                                         f"{n_queries} labelled queries", outer,
                                hint="the selection inside an outer fold scores candidates on held-out queries")
        return outer, None
    if n_queries < MIN_OUTER_QUERIES:
        return 0, (f"{n_queries} labelled queries, under the {MIN_OUTER_QUERIES} the nested estimate needs "
                   f"({DEFAULT_OUTER} outer folds would each hold out a single query)")
    return DEFAULT_OUTER, None


@dataclass
class OuterFold:
    fold: int
    test_queries: tuple[str, ...]
    chosen: str
    chosen_kappa: float
    inner_best_member: str
    inner_best_member_kappa: float
    member_kappa: dict[str, float]
    chosen_alpha: float = float("nan")
    inner_value: float = float("nan")  # what the inner folds said of the chosen candidate


@dataclass
class Estimate:
    """One procedure's held-out figures over the outer folds' pooled pairs, with percentile
    intervals from resampling the outer folds' queries."""

    name: str
    confusion: np.ndarray  # (queries, 4, 4)
    kappa: float
    alpha: float
    kappa_ci: tuple[float, float]
    alpha_ci: tuple[float, float]

    def value(self, statistic: str) -> float:
        return self.kappa if statistic == "kappa" else self.alpha

    def ci(self, statistic: str) -> tuple[float, float]:
        return self.kappa_ci if statistic == "kappa" else self.alpha_ci

    def figures(self) -> dict:
        return {"kappa": self.kappa, "kappa_ci": list(self.kappa_ci), "alpha": self.alpha,
                "alpha_ci": list(self.alpha_ci)}


@dataclass
class NestedReport:
    folds: list[OuterFold]
    chosen: Estimate  # the whole selection, re-run inside each outer fold
    member: Estimate  # the single judge the same rule picks inside each outer fold
    vote: Estimate  # mv (tie avg) of every judge: no human label used
    pooled_members: dict[str, float]  # each judge alone, in hindsight (kappa)
    n_pairs: int
    n_queries: int = 0
    outer: int = 0
    inner: int = 0
    optimise: str = DEFAULT_OPTIMISE
    bootstrap: int = BOOTSTRAP
    confidence: float = 0.95
    differences: dict[str, dict[str, tuple[float, tuple[float, float]]]] = field(default_factory=dict)
    same_as_member: bool = False  # the chosen procedure gave the member's labels on every scored pair

    @property
    def pooled_chosen(self) -> float:
        return self.chosen.kappa

    @property
    def pooled_inner_member(self) -> float:
        return self.member.kappa

    @property
    def best_member(self) -> tuple[str, float]:
        """The judge with the best pooled kappa in hindsight (chosen on the test labels: not a procedure)."""
        j = max(self.pooled_members, key=lambda j: np.nan_to_num(self.pooled_members[j], nan=-np.inf))
        return j, self.pooled_members[j]

    @property
    def beats_both(self) -> bool:
        """The chosen procedure's held-out figure (the optimised statistic) is above both the best
        member chosen the same way and the all-member vote."""
        s = self.optimise
        return self.chosen.value(s) > self.member.value(s) and self.chosen.value(s) > self.vote.value(s)

    def warning(self) -> str | None:
        """One line when the chosen panel does not beat both comparisons on new queries. A procedure
        that chose the very member the comparison chose, in every outer fold, cannot beat it: then
        only the all-member vote is a finding."""
        s = self.optimise
        if self.beats_both or (self.same_as_member and self.chosen.value(s) > self.vote.value(s)):
            return None
        s = self.optimise
        return (f"on held-out queries the chosen panels ({s} {self.chosen.value(s):.3f}) do not beat both the best "
                f"member chosen the same way ({self.member.value(s):.3f}) and the majority vote of all members "
                f"({self.vote.value(s):.3f}); {self._advice()}")

    def _advice(self) -> str:
        s = self.optimise
        if self.vote.value(s) >= self.member.value(s):
            return "a plain mv of every judge needs no human label and did as well"
        return "the best single judge did as well at a fraction of the calls"

    def figures(self) -> dict:
        """What a panel file records: the three procedures' figures and the paired differences."""
        return {"outer_folds": self.outer, "inner_folds": self.inner, "queries": self.n_queries,
                "pairs": self.n_pairs, "optimise": self.optimise, "bootstrap": self.bootstrap,
                "confidence": self.confidence, "chosen": self.chosen.figures(), "best_member": self.member.figures(),
                "all_member_vote": self.vote.figures(), "same_as_member": self.same_as_member,
                "differences": {k: {s: {"value": v, "ci": list(ci)} for s, (v, ci) in d.items()}
                                for k, d in self.differences.items()}}


def replicates(named: Mapping[str, np.ndarray], bootstrap: int, seed: int, confidence: float
               ) -> tuple[dict[str, Estimate], dict[str, dict[str, np.ndarray]]]:
    """Estimates of per-query confusion stacks (same queries, same order) and every statistic of
    every bootstrap replicate: one matrix product over the same drawn queries for all of them, so
    differences between any two are paired."""
    from ..evaluate.bootstrap import bootstrap_query_counts, percentile_interval

    first = next(iter(named))
    n_queries = len(named[first])
    counts = bootstrap_query_counts(n_queries, bootstrap, seed) if bootstrap else np.zeros((0, n_queries))
    values: dict[str, dict[str, np.ndarray]] = {}
    out: dict[str, Estimate] = {}
    for name, conf in named.items():
        reps = (counts @ conf.reshape(n_queries, -1)).reshape(-1, N_LABELS, N_LABELS)
        values[name] = {s: STATISTICS[s](reps) for s in STATISTICS}
        total = conf.sum(axis=0)
        out[name] = Estimate(name, conf, float(kappa_from_confusion(total)), float(alpha_ordinal_from_confusion(total)),
                             percentile_interval(values[name]["kappa"], confidence),
                             percentile_interval(values[name]["alpha"], confidence))
    return out, values


def paired_difference(est: Mapping[str, Estimate], values: Mapping[str, Mapping[str, np.ndarray]], a: str, b: str,
                      confidence: float) -> dict[str, tuple[float, tuple[float, float]]]:
    """a minus b for each statistic, with its percentile interval over the paired replicates."""
    from ..evaluate.bootstrap import percentile_interval

    return {s: (est[a].value(s) - est[b].value(s), percentile_interval(values[a][s] - values[b][s], confidence))
            for s in STATISTICS}


def estimates(named: Mapping[str, np.ndarray], bootstrap: int, seed: int, confidence: float
              ) -> tuple[dict[str, Estimate], dict[str, dict[str, tuple[float, tuple[float, float]]]]]:
    """Estimates of per-query confusion stacks (same queries, same order), and the paired
    differences of the first to each other one (`replicates`)."""
    out, values = replicates(named, bootstrap, seed, confidence)
    first = next(iter(named))
    return out, {name: paired_difference(out, values, first, name, confidence) for name in list(named)[1:]}


def nested_select(table: BallotTable, gold: Mapping[str, Mapping[str, int]], *, outer: int = DEFAULT_OUTER,
                  inner: int = 5, progress: Callable[[str], None] | None = None, bootstrap: int = BOOTSTRAP,
                  confidence: float = 0.95, **kwargs) -> NestedReport:
    """The honest figure of a selection procedure: the whole selection (`select` with `kwargs`)
    re-run inside each outer fold's training queries, what it chose scored on the outer fold's
    queries, which took no part in choosing it; pooled over the outer folds' pairs, next to the
    single judge the same rule picks inside each fold and the majority vote of all judges, on the
    same pairs (a human label and every judge's vote), with intervals over the queries."""
    rule = kwargs.get("rule", DEFAULT_RULE)
    check_choice_args(kwargs.get("family", DEFAULT_FAMILY), rule, kwargs.get("optimise", DEFAULT_OPTIMISE), inner)
    if isinstance(outer, bool) or not isinstance(outer, int) or outer < 2:
        raise ArgumentError("outer", "an integer of at least 2 (outer query folds)", outer)
    seed = kwargs.get("seed", 0)
    y = gold_array(table, gold)
    outer_folds_for(len({q for (q, _), g in zip(table.pairs, y) if g >= 0}), outer)  # enough queries for each fold
    outer_folds = query_folds(table, y, outer)
    qids = table.query_ids()
    preds = {name: np.full(table.n_pairs, ABSTAIN) for name in ("chosen", "member")}
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
        member = sel.best_member
        if sel.chosen is None or member is None:
            continue
        chosen = fit_choice(sel.chosen, train_t, train_gold, seed)
        pred, mpred = apply_choice(chosen, table, seed), apply_choice(member, table, seed)
        preds["chosen"][test] = pred[test]
        preds["member"][test] = mpred[test]
        in_test |= test
        rows = test & (y >= 0)
        per_member = {j: _kappa(y[rows], table.labels[rows, i]) for i, j in enumerate(table.judges)}
        reports.append(OuterFold(n, tuple(test_q), chosen.label, _kappa(y[rows], pred[rows]), member.judges[0],
                                 _kappa(y[rows], mpred[rows]), per_member, _alpha(y[rows], pred[rows]),
                                 sel.chosen.value if rule == "best" else sel.chosen.mean))
        if progress:
            progress(f"outer fold {n}: chose {chosen.label} (inner {sel.optimise} {reports[-1].inner_value:.3f}); "
                     f"held out kappa {reports[-1].chosen_kappa:.3f}")
    vote = fast_labels(table.labels.astype(int), "mv", "avg")
    rows = in_test & (y >= 0)
    if not rows.any():
        raise ArgumentError("gold", "held-out pairs with a human label", 0, hint="no outer fold left a pair to score")
    per_query, tested = per_query_counter(table, y, rows)
    named = {"chosen": per_query(preds["chosen"]), "member": per_query(preds["member"]), "vote": per_query(vote)}
    est, diffs = estimates(named, bootstrap, seed, confidence)
    members = {j: _kappa(y[rows], table.labels[rows, i]) for i, j in enumerate(table.judges)}
    return NestedReport(reports, est["chosen"], est["member"], est["vote"], members, int(rows.sum()), len(tested),
                        outer, inner, kwargs.get("optimise", DEFAULT_OPTIMISE), bootstrap, confidence, diffs,
                        bool(np.array_equal(preds["chosen"][rows], preds["member"][rows])))


def per_query_counter(table: BallotTable, y: np.ndarray, rows: np.ndarray
                      ) -> tuple[Callable[[np.ndarray], np.ndarray], list[str]]:
    """(labels -> (queries, 4, 4) counts of human x scored label over `rows`, the queries counted)."""
    qids = table.query_ids()
    tested = sorted({q for q, r in zip(qids, rows) if r})
    index = {q: i for i, q in enumerate(tested)}
    qrow = np.array([index.get(q, -1) for q in qids])

    def per_query(pred: np.ndarray) -> np.ndarray:
        cells = (qrow[rows] * N_LABELS + y[rows]) * N_LABELS + scored(pred[rows], y[rows])
        return np.bincount(cells, minlength=len(tested) * N_LABELS * N_LABELS).reshape(-1, N_LABELS, N_LABELS)

    return per_query, tested


def _kappa(a: np.ndarray, b: np.ndarray) -> float:
    return float(fold_statistic(_confusion(a, b), "kappa"))


def _alpha(a: np.ndarray, b: np.ndarray) -> float:
    return float(fold_statistic(_confusion(a, b), "alpha"))


def _confusion(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Counts of (human label a, scored label of b): an abstention in b is a disagreement."""
    a = np.asarray(a)
    return np.bincount(a * N_LABELS + scored(np.asarray(b), a),
                       minlength=N_LABELS * N_LABELS).reshape(N_LABELS, N_LABELS)


# ---- the default's decision: which procedure seats the panel, decided out of sample ----

PROCEDURE_TEXT = {
    "single": "one judge (the best seed {s})",
    "order": "the order family (median or majority vote of the top k judges by seed {s}; k and rule chosen on inner folds)",
    "rich": "the rich family ({family}: every aggregator, learned weights and cut points; {rule} rule)",
}


@dataclass
class Decision:
    """What the default (`family="auto"`) weighed and why it seated what it seated. Each procedure
    (PROCEDURES) was run inside each outer fold's training queries and what it chose labelled the
    outer fold's queries, which took no part in choosing it; `estimates` pools those labels (and
    the all-member vote's) over the outer folds' labelled pairs, abstentions scored as
    disagreements, with intervals over the queries. A procedure replaces the baseline only when
    its gain over it, less DECISION_Z standard errors of the paired difference, is above 0."""

    procedure: str  # the one seated: "single", "order" or "rich"
    baseline: str  # what the others had to beat ("single"; "order" beyond MANY_JUDGES judges)
    reason: str
    family: str  # the family the chosen procedure searches
    optimise: str = DEFAULT_OPTIMISE
    estimates: dict[str, Estimate] = field(default_factory=dict)  # PROCEDURES and "vote"
    gains: dict[str, tuple[float, float]] = field(default_factory=dict)  # over the baseline: (gain, its se)
    differences: dict[str, dict[str, tuple[float, tuple[float, float]]]] = field(default_factory=dict)
    outer: int = 0
    inner: int = 0
    n_queries: int = 0
    n_pairs: int = 0
    bootstrap: int = BOOTSTRAP
    confidence: float = 0.95
    folds: list[dict[str, str]] = field(default_factory=list)  # per outer fold: each procedure's choice
    tell_apart: str | None = None  # the seed cannot tell the chosen from its runner-up: how many more queries would
    skipped: str | None = None  # why no comparison ran (then the baseline is seated)
    texts: dict[str, str] = field(default_factory=dict)  # each procedure, in words

    def figures(self) -> dict:
        """What a panel file records of the decision."""
        out = {"procedure": self.procedure, "baseline": self.baseline, "reason": self.reason, "family": self.family,
               "optimise": self.optimise}
        if self.skipped:
            return {**out, "skipped": self.skipped}
        out.update({"outer_folds": self.outer, "inner_folds": self.inner, "queries": self.n_queries,
                    "pairs": self.n_pairs, "bootstrap": self.bootstrap, "confidence": self.confidence})
        for name, est in self.estimates.items():
            out[name] = est.figures()
        for name, (gain, se) in self.gains.items():
            out[f"{name}_gain_over_{self.baseline}"] = gain
            out[f"{name}_gain_se"] = se
        for name, d in self.differences.items():
            for s, (value, ci) in d.items():
                out[f"chosen_minus_{name}_{s}"] = value
                out[f"chosen_minus_{name}_{s}_ci"] = list(ci)
        if self.tell_apart:
            out["tell_apart"] = self.tell_apart
        return out


def procedure_settings(judges: Sequence[str], rule: str, exhaustive_max: int) -> dict[str, dict]:
    """`select`'s settings of each of PROCEDURES for these judges (the rich family: issue 32's auto)."""
    rich = "subsets" if len(judges) <= exhaustive_max else "ranked"
    return {"single": {"family": "single", "rule": "best"}, "order": {"family": "order", "rule": "best"},
            "rich": {"family": rich, "rule": rule}}


def _more_queries(gain: float, sd: float, n_queries: int, confidence: float) -> str:
    """How many more labelled queries would tell a paired difference from 0 at `confidence`, if
    it held: its standard error falls as one over the square root of the queries."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    if not math.isfinite(sd) or abs(gain) < 1e-9:
        return "no number of queries would, at a difference of 0"
    need = math.ceil(n_queries * (z * sd / abs(gain)) ** 2) - n_queries
    return f"about {need:,} more labelled queries would, if the difference held" if need < 100_000 else \
        "over 100,000 more labelled queries would"


def decide(table: BallotTable, gold: Mapping[str, Mapping[str, int]], *, judges: tuple[str, ...], folds: int,
           costs: Mapping[str, float], rule: str, optimise: str, exhaustive_max: int, time_limit: float, slow: bool,
           seed: int, outer: int | None, bootstrap: int = BOOTSTRAP, confidence: float = 0.95,
           progress: Callable[[str], None] | None = None) -> Selection:
    """The default: which procedure seats the panel, decided by an out-of-sample comparison.

    Each of PROCEDURES (one judge; the order family; the rich family of issue 32) is run inside
    each outer fold's training queries and scored on the outer fold's queries, which took no part
    in choosing it. The baseline is one judge, or with more than MANY_JUDGES judges the order
    family; another procedure replaces it only when its pooled gain over the baseline, less
    DECISION_Z standard errors of the paired difference over query resamples, is above 0 (then
    the one with the highest such bound). Below MIN_OUTER_QUERIES labelled queries (or with
    `outer=0`) no comparison runs and the baseline is seated, said in the reason. The chosen
    procedure then chooses on the whole seed."""
    kw = dict(candidates=judges, folds=folds, costs=costs, optimise=optimise, exhaustive_max=exhaustive_max,
              time_limit=time_limit, slow=slow, seed=seed)
    cache = FixedLabels(table)  # every subset's fixed labels once, for all outer folds and the final choice
    settings = procedure_settings(judges, rule, exhaustive_max)
    texts = {p: PROCEDURE_TEXT[p].format(s=optimise, family=settings[p]["family"], rule=rule) for p in PROCEDURES}
    baseline = "single" if len(judges) <= MANY_JUDGES else "order"
    y = gold_array(table, gold)
    labelled_queries = {q for (q, _), g in zip(table.pairs, y) if g >= 0}
    n_queries, n_pairs = len(labelled_queries), int((y >= 0).sum())
    n_outer, skipped = outer_folds_for(n_queries, outer)
    small = too_small(n_queries, n_pairs)
    if small:
        n_outer, skipped = 0, small
    decision = Decision(baseline, baseline, "", settings[baseline]["family"], optimise, texts=texts,
                        bootstrap=bootstrap, confidence=confidence)
    if n_outer:
        decision = _compare(table, gold, y, n_outer, settings, baseline, texts, kw, bootstrap, confidence, progress,
                            cache)
        if decision.skipped:
            skipped = decision.skipped
    if skipped:
        decision.skipped = skipped
        decision.reason = (f"{texts[baseline]}: no out-of-sample comparison ran ({skipped}), so the baseline "
                           f"is seated" + ("" if baseline == "single" else f" ({len(judges)} judges, more than "
                                                                            f"{MANY_JUDGES})"))
    sel = select(table, gold, **kw, **settings[decision.procedure], fixed=(cache, np.arange(table.n_pairs)))
    sel.decision = decision
    return sel


def _compare(table: BallotTable, gold: Mapping[str, Mapping[str, int]], y: np.ndarray, n_outer: int,
             settings: dict[str, dict], baseline: str, texts: dict[str, str], kw: dict, bootstrap: int,
             confidence: float, progress: Callable[[str], None] | None, cache: FixedLabels) -> Decision:
    """The outer loop of `decide` and its rule (see there)."""
    optimise, seed = kw["optimise"], kw["seed"]
    qids = table.query_ids()
    preds = {p: np.full(table.n_pairs, ABSTAIN) for p in PROCEDURES}
    in_test = np.zeros(table.n_pairs, dtype=bool)
    fold_notes: list[dict[str, str]] = []
    for n, test_q in enumerate(query_folds(table, y, n_outer), start=1):
        test = np.isin(qids, np.asarray(test_q, dtype=object))
        train_rows = np.flatnonzero(~test)
        train = table.select(train_rows)
        train_q = set(train.query_ids())
        train_gold = {q: g for q, g in gold.items() if q in train_q}
        order_sel = select(train, train_gold, **kw, **settings["order"])
        chosen = {"single": best_choice(order_sel.members)[0], "order": order_sel.chosen,
                  "rich": select(train, train_gold, **kw, **settings["rich"], fixed=(cache, train_rows)).chosen}
        if any(c is None for c in chosen.values()):
            return Decision(baseline, baseline, "", settings[baseline]["family"], optimise, texts=texts,
                            skipped=f"outer fold {n}'s training queries were too few to choose on")
        test_rows = np.flatnonzero(test)
        held_out = table.select(test_rows)  # only the outer fold's pairs are labelled (Blender runs pair by pair)
        for p, c in chosen.items():
            preds[p][test_rows] = apply_choice(fit_choice(c, train, train_gold, seed), held_out, seed)
        in_test |= test
        fold_notes.append({p: c.label for p, c in chosen.items()})
        if progress:
            progress(f"outer fold {n} of {n_outer}: " + "; ".join(f"{p} {c.label}" for p, c in chosen.items()))
    rows = in_test & (y >= 0)
    per_query, tested = per_query_counter(table, y, rows)
    judges = list(kw["candidates"])
    vote = fast_labels(table.labels[:, [table.judges.index(j) for j in judges]].astype(int), "mv", "avg")
    named = {**{p: per_query(preds[p]) for p in PROCEDURES}, "vote": per_query(vote)}
    est, values = replicates(named, bootstrap, seed, confidence)
    s = optimise
    gains, bounds = {}, {baseline: 0.0}
    for p in PROCEDURES:
        if p == baseline:
            continue
        d = values[p][s] - values[baseline][s]
        sd = float(np.nanstd(d, ddof=1)) if np.isfinite(d).sum() > 1 else float("inf")
        gain = est[p].value(s) - est[baseline].value(s)
        gains[p] = (gain, sd)
        bounds[p] = gain - DECISION_Z * sd if math.isfinite(gain) else float("-inf")
    top = max(bounds.values())
    chosen_p = baseline if top <= 1e-12 else next(p for p in PROCEDURES if bounds[p] >= top - 1e-12)
    diff_with = {"single": "single", "vote": "vote", **({} if chosen_p == "order" else {"order": "order"}),
                 **({} if chosen_p == "rich" else {"rich": "rich"})}
    differences = {k: paired_difference(est, values, chosen_p, k, confidence) for k in diff_with if k != chosen_p}
    decision = Decision(chosen_p, baseline, "", settings[chosen_p]["family"], optimise, est, gains, differences,
                        n_outer, kw["folds"], len(tested), int(rows.sum()), bootstrap, confidence, fold_notes,
                        texts=texts)
    decision.reason = _reason(decision, values, len(kw["candidates"]))
    labels = {**preds, "vote": vote}
    same = {k for k in labels if k != chosen_p and np.array_equal(labels[k][rows], labels[chosen_p][rows])}
    decision.tell_apart = _tell_apart(decision, values, same)
    return decision


def _ci_text(ci: tuple[float, float]) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _reason(d: Decision, values: Mapping[str, Mapping[str, np.ndarray]], n_judges: int) -> str:
    s, pct = d.optimise, f"{100 * d.confidence:g}%"
    gain_text = {p: (f"{g:+.3f} {_ci_text(paired_difference(d.estimates, values, p, d.baseline, d.confidence)[s][1])}"
                     f" ({pct}; se {sd:.3f})") for p, (g, sd) in d.gains.items()}
    many = f" ({n_judges} judges, more than {MANY_JUDGES}: a vote of the top judges is the baseline)" \
        if d.baseline == "order" else ""
    if d.procedure == d.baseline:
        others = "; ".join(f"{p} {gain_text[p]}" for p in d.gains)
        return (f"{d.texts[d.baseline]}{many}: no other procedure beat it out of sample by more than "
                f"{DECISION_Z:g} standard errors of the paired difference ({s} gain over it: {others})")
    return (f"{d.texts[d.procedure]}: it beat {d.texts[d.baseline]}{many} out of sample by {gain_text[d.procedure]}, "
            f"more than {DECISION_Z:g} standard errors of the paired difference")


def _tell_apart(d: Decision, values: Mapping[str, Mapping[str, np.ndarray]], same: set[str]) -> str | None:
    """One line when the chosen procedure's interval of difference to its nearest competitor (the
    best other procedure or the all-member vote, leaving out those that gave the very same labels:
    they are not a different choice) holds 0: how many more queries would tell."""
    s = d.optimise
    others = [k for k in d.estimates if k != d.procedure and k not in same]
    if not others:
        return None
    rival = max(others, key=lambda k: np.nan_to_num(d.estimates[k].value(s), nan=-np.inf))
    diff = paired_difference(d.estimates, values, d.procedure, rival, d.confidence)[s]
    lo, hi = diff[1]
    if not (lo <= 0 <= hi):
        return None
    sd = float(np.nanstd(values[d.procedure][s] - values[rival][s], ddof=1))
    name = "the all-member vote" if rival == "vote" else rival
    return (f"the seed cannot tell {d.procedure} from {name} apart ({s} {diff[0]:+.3f} {_ci_text(diff[1])} over "
            f"{d.n_queries} queries): {_more_queries(diff[0], sd, d.n_queries, d.confidence)}")
