"""Rank correlation between two leaderboards: Kendall's tau-b, Spearman's rho and tau_AP.

`kendall_tau` and `spearman_rho` call scipy (imported on use: it costs about a second, half
of a whole `correlate` run). `correlate` and the bootstrap use the vectorised
`pairwise_rows` and `spearman_rows` instead, which score thousands of resampled leaderboards
at once and are tested equal to scipy's.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np


def kendall_tau(gold_scores: Sequence[float], pred_scores: Sequence[float]) -> float:
    """Kendall's tau-b (ties in either leaderboard reduce the denominator), via scipy."""
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.kendalltau(gold_scores, pred_scores, variant="b").statistic)


def spearman_rho(gold_scores: Sequence[float], pred_scores: Sequence[float]) -> float:
    """Spearman's rho (Pearson correlation of average ranks), via scipy."""
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.spearmanr(gold_scores, pred_scores).statistic)


def tau_ap(reference: Sequence[float], estimate: Sequence[float]) -> float:
    """AP rank correlation of Yilmaz, Aslam and Robertson (SIGIR 2008).

    Walk down the ranking by `estimate` (best first). For the item at position i (i = 2..N),
    p(i) = C(i) / (i - 1), where C(i) counts the items above it that `reference` also
    places above it. Then tau_AP = 2 / (N - 1) * sum_i p(i) - 1.

    Unlike Kendall's tau it is asymmetric: a swap near the top of the estimated ranking
    costs more than one near the bottom. Here `reference` is the human leaderboard and
    `estimate` the LLM one. Ties, which the paper leaves open: a pair tied in exactly one
    of the two leaderboards counts half, a pair tied in both counts fully; tied items keep
    their input order when positions are assigned.
    """
    ref = np.asarray(reference, dtype=float)[None, :]
    est = np.asarray(estimate, dtype=float)[None, :]
    return float(pairwise_rows(ref, est)[1][0])


def tau_ap_symmetric(a: Sequence[float], b: Sequence[float]) -> float:
    """Mean of tau_AP in both directions, for when neither leaderboard is the reference."""
    return (tau_ap(a, b) + tau_ap(b, a)) / 2


def pairwise_rows(ref: np.ndarray, est: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kendall's tau-b and tau_AP for each row of two (samples x items) arrays at once.

    Both come from one set of pairwise comparisons taken in the estimate's order, so for
    every pair (above, below) the estimate has est[above] >= est[below].
    """
    n_rows, n = est.shape
    if n < 2:
        return np.full(n_rows, np.nan), np.full(n_rows, np.nan)
    order = np.argsort(-est, axis=1, kind="stable")
    e = np.take_along_axis(est, order, axis=1)
    r = np.take_along_axis(ref, order, axis=1)
    num = np.zeros(n_rows, dtype=np.int64)  # concordant - discordant
    e_untied = np.zeros(n_rows, dtype=np.int64)
    r_untied = np.zeros(n_rows, dtype=np.int64)
    correct = np.empty((n_rows, n - 1))  # C(i) for positions 2..N
    # Rows without ties in either leaderboard (the usual bootstrap sample): every pair is
    # untied, and C(i) counts the items above i that the reference also ranks higher.
    r_sorted = np.sort(r, axis=1)
    plain = ~(np.any(e[:, 1:] == e[:, :-1], axis=1) | np.any(r_sorted[:, 1:] == r_sorted[:, :-1], axis=1))
    if plain.any():
        rp = r[plain]
        above = np.triu(np.ones((n, n), dtype=bool), 1)  # [j, i]: position j above position i
        agree = np.count_nonzero((rp[:, :, None] > rp[:, None, :]) & above, axis=1)  # (rows, n)
        pairs = n * (n - 1) // 2
        total = agree.sum(axis=1)
        num[plain] = 2 * total - pairs
        e_untied[plain] = pairs
        r_untied[plain] = pairs
        correct[plain] = agree[:, 1:]
    tied = np.flatnonzero(~plain)
    if tied.size:
        e, r = e[tied], r[tied]
        # Pairs grouped by the lower item (position 1, then 2, ...), one position at a time:
        # the item at position i against the i items above it.
        for i in range(1, n):
            e_tie = e[:, :i] == e[:, i, None]
            r_gt = r[:, :i] > r[:, i, None]
            r_lt = r[:, :i] < r[:, i, None]
            r_tie = ~(r_gt | r_lt)
            e_strict = ~e_tie
            agree_i = np.count_nonzero(e_strict & r_gt, axis=1)
            num[tied] += agree_i - np.count_nonzero(e_strict & r_lt, axis=1)
            e_untied[tied] += np.count_nonzero(e_strict, axis=1)
            r_untied[tied] += i - np.count_nonzero(r_tie, axis=1)
            # tau_AP: C(i) sums, over the items above i, 1 for an agreeing pair, 0.5 for a pair
            # tied in one leaderboard only, 1 for a pair tied in both.
            correct[tied, i - 1] = agree_i + np.count_nonzero(e_tie & r_tie, axis=1) + 0.5 * np.count_nonzero(
                e_tie ^ r_tie, axis=1)

    # tau-b = (concordant - discordant) / sqrt(pairs untied in est * pairs untied in ref),
    # the same as scipy's variant "b".
    den = np.sqrt(e_untied * r_untied.astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau_b = np.where(den > 0, num / den, np.nan)
    tau_ap_values = 2.0 / (n - 1) * (correct / np.arange(1, n)).sum(axis=1) - 1.0
    return tau_b, tau_ap_values


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n along each row of a 2-D array, ties sharing their average (scipy's
    rankdata "average"). Leaderboards are short: counting the smaller and the equal values of
    each item is quick and exact; long rows go to scipy."""
    x = np.asarray(x, dtype=float)
    if x.shape[1] > 256:
        from scipy import stats

        return stats.rankdata(x, axis=1)
    n = x.shape[1]
    out = np.empty(x.shape)
    step = max(1, 4_000_000 // max(1, n * n))  # rows per chunk: a few MB of comparisons at a time
    for lo in range(0, x.shape[0], step):
        part = x[lo:lo + step]
        below = np.count_nonzero(part[:, None, :] < part[:, :, None], axis=2)
        equal = np.count_nonzero(part[:, None, :] == part[:, :, None], axis=2)
        out[lo:lo + step] = below + (equal + 1) / 2
    return out


def centred_ranks(x: np.ndarray) -> np.ndarray:
    return average_ranks(x) - (x.shape[1] + 1) / 2


def spearman_rows(x: np.ndarray, y: np.ndarray, rx: np.ndarray | None = None) -> np.ndarray:
    """Spearman's rho for each row: Pearson correlation of average ranks (rx: x's, if known)."""
    rx = centred_ranks(x) if rx is None else rx
    ry = centred_ranks(y)
    den = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (rx * ry).sum(axis=1) / den, np.nan)
