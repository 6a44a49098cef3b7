"""Learning how to blend from human labels, and checking it on queries it did not see.

Three learners, each fitted on the pairs of some queries and applied to others:
  weights     each judge's weight = its Cohen's kappa with the gold labels on the training
              pairs (negative kappa -> 0); then a weighted vote.
  thresholds  the blended expected label (mean of the judges' expectations, a label-only
              vote counting as certain) cut at three thresholds chosen to maximise kappa on
              the training pairs, by coordinate ascent from 0.5/1.5/2.5.
  logistic    multinomial logistic regression (scikit-learn) from each judge's distribution
              (one-hot for a label-only vote) plus an abstained flag, to the gold label.

Pairs of one query are not independent (same topic, same judges' quirks), so splits and
folds are by query: cross_validate uses GroupKFold with the query as group and checks that
no query is on both sides. Every comparison (learned blend, plain mv, each member) is scored
on the same held-out pairs: those with a gold label that every member voted on and both
blends labelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import ArgumentError
from ..kappa import cohen_kappa, kappa_from_confusion
from .blender import Blender
from .probability import DEFAULT_THRESHOLDS, check_thresholds, cut, expected_score
from .votes import ABSTAIN, LABELS, N_LABELS, BallotTable

LEARNERS = ("weights", "thresholds", "logistic")
MAX_CANDIDATES = 64  # threshold candidates per cut point: keeps the search cheap on continuous scores


def gold_vector(table: BallotTable, gold: Mapping[str, Mapping[str, int]]) -> np.ndarray:
    """The gold label of every pair of the table, ABSTAIN where the gold qrels lack the pair."""
    out = np.full(table.n_pairs, ABSTAIN, dtype=int)
    for i, (qid, docid) in enumerate(table.pairs):
        label = gold.get(qid, {}).get(docid)
        if label is None:
            continue
        if label not in LABELS:
            raise ArgumentError("gold", f"labels in {list(LABELS)}", described=f"the label {label!r} for {qid} {docid}")
        out[i] = label
    return out


def expected_scores(table: BallotTable) -> np.ndarray:
    """Each pair's blended expected label (NaN where nobody voted)."""
    out = np.full(table.n_pairs, np.nan)
    for i in range(table.n_pairs):
        votes = table.votes(i)
        if votes:
            out[i] = expected_score(votes)
    return out


def _features(table: BallotTable) -> np.ndarray:
    """Per judge: its distribution over labels (one-hot for a bare label, zeros if it abstained)
    and a 1 if it abstained."""
    n, m = table.labels.shape
    feats = np.zeros((n, m, N_LABELS + 1))
    voted = table.voted
    rows, cols = voted.nonzero()
    feats[rows, cols, table.labels[rows, cols]] = 1.0
    if table.probs is not None:
        has = voted & ~np.isnan(table.probs).any(axis=2)
        feats[has, :N_LABELS] = table.probs[has]
    feats[~voted, N_LABELS] = 1.0
    return feats.reshape(n, -1)


def learn_thresholds(scores: np.ndarray, gold: np.ndarray, start: Sequence[float] = DEFAULT_THRESHOLDS,
                     max_rounds: int = 20) -> tuple[float, ...]:
    """Cut points maximising kappa of cut(score) against gold, one cut point at a time.

    Candidates are midpoints between consecutive distinct scores (at most MAX_CANDIDATES,
    spread by quantile); a cut point moves only on a strict gain, so ties keep the start.

    Each trial's kappa comes from a confusion matrix read off cumulative counts of the gold
    labels over the sorted distinct scores (a few subtractions), and all trials of one cut point
    are scored in one vectorised call, instead of re-cutting every score per trial: the same
    integer counts, so the same kappas and cut points, about 13 times faster on 300 random
    inputs. Panel selection fits this learner once per fold for every candidate panel.
    """
    scores = np.asarray(scores, dtype=float)
    gold = np.asarray(gold)
    distinct = np.unique(scores)
    mids = (distinct[1:] + distinct[:-1]) / 2
    if len(mids) > MAX_CANDIDATES:
        mids = np.unique(np.quantile(mids, np.linspace(0, 1, MAX_CANDIDATES)))
    cuts = list(check_thresholds(start))  # cut points between the labels, increasing, as cut() needs
    kept = np.isin(gold, LABELS)  # cohen_kappa leaves other gold values out; so does the histogram
    where = np.searchsorted(distinct, scores[kept])
    hist = np.zeros((len(distinct), N_LABELS), dtype=np.int64)
    np.add.at(hist, (where, np.searchsorted(LABELS, gold[kept])), 1)
    below = np.vstack([np.zeros((1, N_LABELS), dtype=np.int64), np.cumsum(hist, axis=0)])  # below[i]: scores < distinct[i]

    def kappas_of(trials: np.ndarray) -> np.ndarray:
        """Kappa of each row of cut points (trials x 3, each row increasing), in one call."""
        # label l = the scores reaching l of the cut points (cut(): a score on a point goes up)
        inner = np.searchsorted(distinct, trials, side="left")
        edges = np.concatenate([np.zeros((len(trials), 1), dtype=int), inner,
                                np.full((len(trials), 1), len(distinct))], axis=1)
        confusion = (below[edges[:, 1:]] - below[edges[:, :-1]]).transpose(0, 2, 1)  # rows gold, as cohen_kappa
        return kappa_from_confusion(confusion)

    best = float(kappas_of(np.asarray([cuts]))[0])
    for _ in range(max_rounds):
        moved = False
        for k in range(len(cuts)):
            low = cuts[k - 1] if k > 0 else -np.inf
            high = cuts[k + 1] if k + 1 < len(cuts) else np.inf
            options = mids[(mids > low) & (mids < high)]
            if not len(options):
                continue
            trials = np.repeat(np.asarray([cuts], dtype=float), len(options), axis=0)
            trials[:, k] = options
            # every trial of cut point k keeps the others as they are, so all are scored at once;
            # then taken in order, each kept only on a strict gain over the best so far
            for c, kappa in zip(options, kappas_of(trials)):
                if kappa > best + 1e-12:
                    best, moved = float(kappa), True
                    cuts = cuts[:k] + [float(c)] + cuts[k + 1:]
        if not moved:
            break
    return tuple(float(c) for c in cuts)


@dataclass
class LearnedBlend:
    """A blend fitted on labelled pairs; `predict` applies it to any table with the same judges."""

    learner: str
    judges: tuple[str, ...]
    tie: str = "avg"
    seed: int | None = 0
    weights: dict[str, float] | None = None
    thresholds: tuple[float, ...] | None = None
    model: object | None = None

    def describe(self) -> str:
        if self.learner == "weights":
            return "weights " + ", ".join(f"{j}={w:.3f}" for j, w in self.weights.items())
        if self.learner == "thresholds":
            return "thresholds " + "/".join(f"{t:.3f}" for t in self.thresholds)
        return f"logistic regression on {len(self.judges)} judges' votes"

    def predict(self, table: BallotTable) -> list[int | None]:
        """A label per pair of the table, None where no judge voted."""
        if tuple(table.judges) != self.judges:
            table = table.only_judges(self.judges)
        if self.learner == "weights":
            return Blender("weighted", tie=self.tie, seed=self.seed, weights=self.weights).blend(table).labels
        if self.learner == "thresholds":
            return [None if np.isnan(s) else cut(s, self.thresholds) for s in expected_scores(table)]
        pred = self.model.predict(_features(table))
        return [int(p) if table.voted[i].any() else None for i, p in enumerate(pred)]


def fit_blend(table: BallotTable, gold: Mapping[str, Mapping[str, int]], learner: str = "thresholds",
              *, tie: str = "avg", seed: int | None = 0) -> LearnedBlend:
    """Fit a learner (see the module docstring) on the table's pairs that have a gold label."""
    if learner not in LEARNERS:
        raise ArgumentError("learner", f"one of {', '.join(LEARNERS)}", described=f"unknown learner {learner!r}")
    y = gold_vector(table, gold)
    rows = np.flatnonzero((y != ABSTAIN) & table.voted.any(axis=1))
    if len(rows) == 0:
        raise ArgumentError("gold", "labels of pairs the judges voted on",
                            described="no pair has both a gold label and a judge's vote: nothing to learn from")
    learned = LearnedBlend(learner, tuple(table.judges), tie, seed)
    if learner == "weights":
        weights = {}
        for j, judge in enumerate(table.judges):
            mine = rows[table.voted[rows, j]]
            kappa = cohen_kappa(y[mine], table.labels[mine, j])
            weights[judge] = max(kappa, 0.0) if np.isfinite(kappa) else 0.0
        if not any(weights.values()):
            raise ArgumentError("gold", "labels some judge agrees with better than chance",
                                described="no judge agrees with the gold labels better than chance on the training "
                                          "pairs")
        learned.weights = weights
    elif learner == "thresholds":
        learned.thresholds = learn_thresholds(expected_scores(table)[rows], y[rows])
    else:
        from sklearn.linear_model import LogisticRegression

        learned.model = LogisticRegression(max_iter=2000, class_weight="balanced").fit(_features(table)[rows], y[rows])
    return learned


@dataclass(frozen=True)
class FoldReport:
    """Held-out kappa on one split: the learned blend, plain mv, and each member alone."""

    fold: int
    train_queries: tuple[str, ...]
    test_queries: tuple[str, ...]
    test_pairs: int
    scored_pairs: int
    learned: str
    blend_kappa: float
    mv_kappa: float
    member_kappa: dict[str, float]

    @property
    def best_member(self) -> tuple[str, float]:
        judge = max(self.member_kappa, key=lambda j: (np.nan_to_num(self.member_kappa[j], nan=-np.inf)))
        return judge, self.member_kappa[judge]

    @property
    def worse_than_best_member(self) -> bool:
        return self.blend_kappa < self.best_member[1]


def _scored_rows(y: np.ndarray, table: BallotTable, *predictions: Sequence[int | None]) -> np.ndarray:
    """Rows with gold, every member's vote and every prediction: the common ground for comparing."""
    ok = (y != ABSTAIN) & table.voted.all(axis=1)
    for pred in predictions:
        ok &= np.array([p is not None for p in pred], dtype=bool)
    return np.flatnonzero(ok)


def _kappas(y, table, rows, blend_pred, mv_pred) -> tuple[float, float, dict[str, float]]:
    pick = lambda pred: [pred[i] for i in rows]  # noqa: E731
    members = {judge: cohen_kappa(y[rows], table.labels[rows, j]) for j, judge in enumerate(table.judges)}
    return cohen_kappa(y[rows], pick(blend_pred)), cohen_kappa(y[rows], pick(mv_pred)), members


def evaluate_split(train: BallotTable, test: BallotTable, gold: Mapping[str, Mapping[str, int]],
                   learner: str = "thresholds", *, tie: str = "avg", seed: int | None = 0,
                   fold: int = 1) -> tuple[FoldReport, list[int | None]]:
    """Fit on `train`, score on `test`; the two must not share a query. Returns the report
    and the learned blend's labels for the test pairs."""
    train_q = set(train.query_ids())
    test_q = set(test.query_ids())
    shared = train_q & test_q
    if shared:
        raise ArgumentError("test", "pairs of other queries than train's (splits must be by query)",
                            described=f"train and test share queries {sorted(shared)[:5]}")
    learned = fit_blend(train, gold, learner, tie=tie, seed=seed)
    blend_pred = learned.predict(test)
    mv_pred = Blender("mv", tie=tie, seed=seed).blend(test).labels
    y = gold_vector(test, gold)
    rows = _scored_rows(y, test, blend_pred, mv_pred)
    blend_k, mv_k, members = _kappas(y, test, rows, blend_pred, mv_pred)
    report = FoldReport(fold, tuple(sorted(train_q)), tuple(sorted(test_q)), test.n_pairs, len(rows),
                        learned.describe(), blend_k, mv_k, members)
    return report, blend_pred


def split_by_queries(table: BallotTable, test_queries: Sequence[str]) -> tuple[BallotTable, BallotTable]:
    """(pairs of the other queries, pairs of test_queries)."""
    is_test = np.isin(table.query_ids(), np.asarray(list(test_queries), dtype=object))
    return table.select(np.flatnonzero(~is_test)), table.select(np.flatnonzero(is_test))


@dataclass(frozen=True)
class CalibrationReport:
    learner: str
    folds: tuple[FoldReport, ...]
    overall: FoldReport  # every pair predicted once, by the fold that held its query out
    gold_pairs: int
    warnings: tuple[str, ...] = field(default=())
    pairs: tuple[tuple[str, str], ...] = ()  # the pairs with a gold label, and
    predictions: tuple[int | None, ...] = ()  # the learned blend's held-out label for each

    @property
    def worse_than_best_member(self) -> bool:
        return self.overall.worse_than_best_member

    def lines(self) -> list[str]:
        """A plain-text report, one line per fold, then the pooled held-out result and warnings."""
        out = [f"calibration: learner {self.learner}, {len(self.folds)} folds by query (GroupKFold), "
               f"{self.gold_pairs} pairs with a gold label; kappa on held-out queries"]
        for f in (*self.folds, self.overall):
            name = "overall" if f is self.overall else f"fold {f.fold}"
            judge, best = f.best_member
            members = ", ".join(f"{j} {k:.3f}" for j, k in f.member_kappa.items())
            verdict = "WORSE than best member" if f.worse_than_best_member else "not worse than best member"
            learned = "" if f is self.overall else f"; learned {f.learned}"
            out.append(f"{name}: {len(f.test_queries)} queries, {f.scored_pairs} pairs scored{learned}; "
                       f"blend {f.blend_kappa:.3f}, mv {f.mv_kappa:.3f}, members {members}; "
                       f"best member {judge} {best:.3f}: {verdict}")
        out.extend(f"WARNING: {w}" for w in self.warnings)
        return out


def cross_validate(table: BallotTable, gold: Mapping[str, Mapping[str, int]], learner: str = "thresholds",
                   *, folds: int = 5, seed: int | None = 0, tie: str = "avg") -> CalibrationReport:
    """K-fold cross-validation over queries: learn on k-1 folds' queries, score on the rest."""
    from sklearn.model_selection import GroupKFold

    y_all = gold_vector(table, gold)
    table = table.select(np.flatnonzero(y_all != ABSTAIN))
    groups = table.query_ids()
    n_queries = len(set(groups))
    if n_queries < folds:
        raise ArgumentError("folds", f"at most as many folds as queries with gold labels ({n_queries})", folds,
                            hint=f"{folds} folds need at least {folds} queries with gold labels")
    # No shuffling: GroupKFold balances fold sizes deterministically (and works on every
    # scikit-learn the project supports); the seed only drives random tie-breaking.
    splitter = GroupKFold(n_splits=folds)
    reports = []
    pooled: list[int | None] = [None] * table.n_pairs
    seen = np.zeros(table.n_pairs, dtype=int)
    for k, (train_idx, test_idx) in enumerate(splitter.split(np.zeros(table.n_pairs), groups=groups), start=1):
        # Guard the property everything here relies on, whatever the splitter does.
        if set(groups[train_idx]) & set(groups[test_idx]):
            raise RuntimeError(f"fold {k} puts a query on both sides of the split")
        report, pred = evaluate_split(table.select(train_idx), table.select(test_idx), gold, learner,
                                      tie=tie, seed=seed, fold=k)
        reports.append(report)
        for i, p in zip(test_idx, pred):
            pooled[i] = p
        seen[test_idx] += 1
    if not (seen == 1).all():
        raise RuntimeError("cross-validation did not predict every pair exactly once")
    mv_pred = Blender("mv", tie=tie, seed=seed).blend(table).labels
    y = gold_vector(table, gold)
    rows = _scored_rows(y, table, pooled, mv_pred)
    blend_k, mv_k, members = _kappas(y, table, rows, pooled, mv_pred)
    overall = FoldReport(0, (), tuple(sorted(set(groups))), table.n_pairs, len(rows), "per fold",
                         blend_k, mv_k, members)
    warnings = []
    worse = [f.fold for f in reports if f.worse_than_best_member]
    if worse:
        warnings.append(f"the learned blend ({learner}) is worse than its best member on held-out queries "
                        f"in {len(worse)} of {len(reports)} folds ({', '.join(map(str, worse))})")
    if overall.worse_than_best_member:
        judge, best = overall.best_member
        warnings.append(f"overall, the learned blend ({learner}, kappa {blend_k:.3f}) is worse than its best "
                        f"member {judge} (kappa {best:.3f}) on held-out queries: use {judge} alone")
    return CalibrationReport(learner, tuple(reports), overall, table.n_pairs, tuple(warnings),
                             table.pairs, tuple(pooled))
