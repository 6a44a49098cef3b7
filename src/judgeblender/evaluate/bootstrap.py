"""Bootstrap over queries: confidence intervals for leaderboard correlations and label agreement.

Queries are drawn with replacement (one draw per `correlate` call, shared by every
prediction and measure, so a file's interval does not depend on which other files are
compared); each sample's leaderboard is a count-weighted mean over queries, one matrix
product, and its correlations come from the vectorised rows in rank_correlation.py.
"""

from __future__ import annotations

import math

import numpy as np

from .intervals import CONFIDENCE
from .rank_correlation import centred_ranks, pairwise_rows, spearman_rows


def bootstrap_query_counts(n_queries: int, samples: int, seed: int) -> np.ndarray:
    """(samples x queries) counts: how often each query is drawn, with replacement.

    Drawn once per `correlate` call and shared by every prediction and measure, so a
    file's interval does not depend on which other files are on the command line.
    """
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_queries, size=(samples, n_queries))
    counts = np.zeros((samples, n_queries))
    np.add.at(counts, (np.arange(samples)[:, None], draws), 1.0)
    return counts


def bootstrap_intervals(gold: np.ndarray, pred: np.ndarray, counts: np.ndarray,
                        confidence: float = CONFIDENCE) -> dict[str, tuple[float, float]]:
    """Percentile intervals of tau, rho and tau_AP when queries are resampled.

    `gold` and `pred` are (runs x queries) per-query scores. Each bootstrap sample's
    leaderboard is the count-weighted mean over queries, i.e. one matrix product.
    """
    return BootstrapGold(gold, counts).intervals(pred, confidence)


class BootstrapGold:
    """The gold side of the bootstrap for one measure, computed once for every prediction."""

    def __init__(self, gold: np.ndarray, counts: np.ndarray):
        self.counts = counts
        self.n_queries = gold.shape[1]
        self.means = counts @ gold.T / self.n_queries  # (samples x runs)
        self.ranks = centred_ranks(self.means)

    def intervals(self, pred: np.ndarray, confidence: float) -> dict[str, tuple[float, float]]:
        """Percentile intervals of tau, rho and tau_AP for one prediction's (runs x queries) scores."""
        g = self.means
        p = self.counts @ pred.T / self.n_queries
        tau_b, tau_ap_values = pairwise_rows(g, p)
        values = {"kendall_tau": tau_b, "spearman_rho": spearman_rows(g, p, self.ranks), "tau_ap": tau_ap_values}
        return {key: percentile_interval(vals, confidence) for key, vals in values.items()}


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """The percentile interval of bootstrap replicates; replicates where the statistic is
    undefined (NaN) are left out, and (NaN, NaN) when every one is."""
    values = np.asarray(values, dtype=float)
    if values.size == 0 or np.all(np.isnan(values)):
        return (math.nan, math.nan)
    lo_q, hi_q = 50 * (1 - confidence), 50 * (1 + confidence)
    return (float(np.nanpercentile(values, lo_q)), float(np.nanpercentile(values, hi_q)))
