"""Label-efficient seeds: human labels for pairs drawn with known probabilities (issue 14, part 3).

For a measure linear in the labels, such as P(rel=r)@k or DCG@k, a run's collection score is

    theta_r = sum over pooled pairs p of W[r, p] * g(h_p)

with g the gain of a human label h_p and W[r, p] the pair's weight in run r's mean (for P@k:
1 / (k N) when p is in the run's top k of its query; for DCG@k: 1 / (N log2(rank + 1))).
With an LLM label l_p for every pair and human labels for a Poisson sample of pairs (pair p
drawn independently with probability pi_p), the difference estimator

    theta_hat_r = sum_p W[r, p] lambda g(l_p) + sum_{p drawn} W[r, p] (g(h_p) - lambda g(l_p)) / pi_p

is unbiased for any fixed lambda (Horvitz-Thompson on the residuals), with the unbiased variance
estimate sum_{p drawn} (1 - pi_p) / pi_p^2 (W[r, p] (g(h_p) - lambda g(l_p)))^2 and a normal
interval. The design decides where people look: pi_p proportional to the pair's weight over
runs times the uncertainty of its LLM label (e.g. the spread of a jury's labels), which is
active statistical inference in its design-based form. nDCG is not linear (its normaliser
depends on every label of the query): these estimators do not apply to it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .. import arguments
from ..errors import JudgeblenderError
from ..pairs.design import inclusion_probabilities  # noqa: F401  (re-exported)
from ..pairs.qrels import Qrels
from ..pairs.runs import Run
from .intervals import CONFIDENCE, clip


# A difference or score is declared (or its interval trusted) only when at least this many drawn pairs
# carry a non-zero residual term for it: with fewer the Horvitz-Thompson sum is far from normal
# (DL19 simulation, docs/estimation.md: Holm's family-wise error up to 0.07 without it, 0.013 with it).
MIN_INFORMATIVE = 5


def linear_weights(runs: Sequence[Run], queries: Sequence[str], kind: str, k: int) -> tuple[list[tuple[str, str]],
                                                                                          np.ndarray]:
    """The pooled pairs (every run's top k on `queries`) and W (runs x pairs), so that W @ g(labels)
    is each run's mean over `queries` of P@k (kind "precision") or DCG@k (kind "dcg")."""
    if kind not in ("precision", "dcg"):
        raise JudgeblenderError(f"linear measures are 'precision' or 'dcg', got {kind!r}")
    index: dict[tuple[str, str], int] = {}
    entries = []
    for r, run in enumerate(runs):
        for q in queries:
            for rank, d in enumerate(run.top(q, k), start=1):
                p = index.setdefault((q, d), len(index))
                entries.append((r, p, 1.0 / k if kind == "precision" else 1.0 / math.log2(rank + 1)))
    w = np.zeros((len(runs), len(index)))
    for r, p, v in entries:
        w[r, p] += v
    return list(index), w / len(queries)


def gains(qrels: Qrels, pairs: Sequence[tuple[str, str]], kind: str, rel: int = 1) -> np.ndarray:
    """g(label) for each pair: 1[label >= rel] for precision, the label (if positive) for DCG;
    an unlabelled pair gains 0, as trec_eval counts it."""
    labels = np.array([qrels.get(q, {}).get(d, 0) for q, d in pairs], dtype=float)
    return (labels >= rel).astype(float) if kind == "precision" else np.maximum(labels, 0.0)


def poisson_estimate(w: np.ndarray, llm_gain: np.ndarray, human_gain: np.ndarray, sampled: np.ndarray,
                     pi: np.ndarray, confidence: float = CONFIDENCE, lam: float | None = 1.0,
                     bounds: tuple[float, float] | None = None) -> dict[str, np.ndarray]:
    """The difference (Horvitz-Thompson) estimator of W @ human_gain for each row of `sampled`
    (sims x pairs, booleans: which pairs people labelled) under Poisson sampling with `pi`.

    human_gain is read only where sampled. lam=None tunes lambda per (sim, run) on the sample
    (weighted least squares through the origin of the residual variance, clipped to [0, 1]:
    a small bias, as for any tuned estimator). `bounds`: the range the estimand can take, which
    the interval is clipped to (intervals.py). Returns (sims x runs) arrays.
    """
    arguments.confidence(confidence)
    from scipy import stats

    s = np.asarray(sampled, dtype=float)
    h = np.where(sampled, human_gain, 0.0)
    inv = s / pi  # 1/pi where drawn
    v = s * (1 - pi) / pi ** 2
    base = w @ llm_gain  # (runs,)
    if lam is None:
        # minimise sum v W^2 (h - lam l)^2 over lam, per (sim, run)
        w2 = w ** 2
        num = (v * h * llm_gain) @ w2.T
        den = (v * llm_gain ** 2) @ w2.T
        with np.errstate(invalid="ignore", divide="ignore"):
            lam_v = np.clip(np.where(den > 0, num / den, 1.0), 0.0, 1.0)
        est = lam_v * base + (inv * h) @ w.T - lam_v * ((inv * llm_gain) @ w.T)
        var = (v * h ** 2) @ w2.T - 2 * lam_v * ((v * h * llm_gain) @ w2.T) + lam_v ** 2 * ((v * llm_gain ** 2) @ w2.T)
    else:
        lam_v = np.full((s.shape[0], w.shape[0]), float(lam))
        resid = h - lam * llm_gain  # (sims x pairs), read where drawn
        est = lam * base + (inv * resid) @ w.T
        var = (v * resid ** 2) @ (w ** 2).T
    se = np.sqrt(np.maximum(var, 0.0))
    z = stats.norm.ppf(0.5 + confidence / 2)
    # A zero variance estimate means no drawn pair showed a residual for that row: nothing is
    # known about it, unless every pair it weighs was certain to be drawn (then it is exact).
    exact = ~np.any((w != 0) & (pi < 1)[None, :], axis=1)  # (runs,)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(se > 0, 2 * stats.norm.sf(np.abs(est) / se), np.where(exact & (est != 0), 0.0, 1.0))
    # drawn pairs whose residual term is not 0, per row: how many terms the normal approximation rests on
    informative = (s * (h - (1.0 if lam is None else lam) * llm_gain != 0)) @ (w != 0).T.astype(float)
    return {"estimate": est, "se": se, "ci_low": clip(est - z * se, bounds), "ci_high": clip(est + z * se, bounds),
            "lam": lam_v, "p": p,
            "informative": informative, "normal_ok": (informative >= MIN_INFORMATIVE) | exact[None, :]}
