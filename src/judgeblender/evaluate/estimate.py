"""Estimates with guarantees: system scores and their differences from LLM labels for every
query plus human labels for a random seed of whole queries (query-level PPI++).

What is estimated. For a run r and a measure m, the target is the run's score under human
labels, averaged over a fixed set of N queries:

* ``target="collection"`` (the default): the mean over the collection's N queries, the
  number a full human judgment of this collection would give. The LLM's per-query score
  f_q is known for every one of them; the only randomness is which n queries were drawn
  (simple random sampling without replacement). The estimator is the power-tuned PPI
  (PPI++) mean with the whole collection as its unlabelled set, which for a fixed lambda is
  the survey-sampling difference estimator

      theta = ybar_seed + lambda * (fbar_all - fbar_seed)

  unbiased under the design, with variance (1 - n/N) * S^2(y - lambda f) / n: the finite
  population correction makes the interval shrink to nothing when the seed is the whole
  collection. The interval is ``theta +- t(n-2) * se`` (Student t, since n is small, with
  one degree of freedom spent on lambda, as for a regression estimator; the residual
  variance is divided by n - 2 too). A fixed lambda (0: human-only) keeps n - 1.
* ``target="superpopulation"``: the mean over a population of queries the collection's
  queries stand for (queries i.i.d.). This is ppi-python's ``ppi_mean_ci`` as it is, with
  the seed as the labelled set and the other queries' LLM scores as the unlabelled set
  (normal quantiles, lambda tuned and clipped to [0, 1] by ppi-python).

lambda is tuned on the seed to minimise the variance (cov(y, f) / var(f) for the
collection, ppi-python's formula for the superpopulation) and clipped to [0, 1] as
ppi-python does: lambda = 0 is the human-only estimate, lambda = 1 plain PPI. Tuning on the
same seed costs an O(1/n) bias, as for any regression estimator.

Differences between runs are estimated the same way from the per-query differences, which
keeps the pairing of runs on the same queries. Every pair's p-value (two-sided, no
difference) is adjusted with Holm's step-down method, which controls the family-wise error
rate over all pairs of runs at 1 - confidence; ``significant`` is Holm's verdict. Each pair
also gets a Bonferroni interval (level 1 - alpha / pairs), which holds for all pairs at
once.

Assumptions (stated in every result): the seed queries are a simple random sample of the
collection's queries (check with a design file from ``pool --sample-queries``); the seed
labels are complete for each seed query (every pair the LLM labelled there); the LLM labels
were not fitted to the seed (a seed used to calibrate the panel must be split first); the
t/normal approximation of the mean holds, which is weakest for seeds under 10 queries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .. import arguments
from ..errors import ArgumentError, InputError, JudgeblenderError, require
from ..pairs.design import (  # noqa: F401
    Design, PairDesign, design_path_for, draw_query_design, read_design, write_design,
)
from ..pairs.qrels import Qrels
from ..pairs.runs import Run
from ..pairs.textfile import iter_lines
from .agreement import json_ready
from .intervals import CONFIDENCE, clip, difference_range, measure_range
# The fast per-query measures: the one place this module reaches into the leaderboard code.
from .leaderboard import RunSet, evaluate_runs, parse_measures

TARGETS = ("collection", "superpopulation")


# ---------------------------------------------------------------------------------------
# The estimator, vectorised over any leading axes (runs, pairs of runs, simulated seeds)
# ---------------------------------------------------------------------------------------

def query_ppi(y: np.ndarray, f: np.ndarray, seeded: np.ndarray, *, target: str = "collection",
              confidence: float = CONFIDENCE, lam: float | np.ndarray | None = None,
              bounds: tuple[float, float] | None = None) -> dict[str, np.ndarray]:
    """Query-level PPI++ estimates of the mean of `y` over the last axis.

    `y` and `f` are (..., N) per-query human and LLM scores (y is read only where `seeded`);
    `seeded` is a boolean (..., N) mask of the human seed, broadcast against them, with the
    same number n >= 2 of seed queries in every row. `lam` None tunes lambda per row; a
    number fixes it (0: the human-only estimate). `bounds` (lo, hi): the range the mean can
    take; the interval is clipped to it (intervals.py). Returns arrays of shape (...): estimate,
    se, ci_low, ci_high, p (two-sided, of a zero mean), lam, n.
    """
    if target not in TARGETS:
        raise JudgeblenderError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    arguments.confidence(confidence)
    y = np.asarray(y, dtype=float)
    f = np.asarray(f, dtype=float)
    m = np.broadcast_to(np.asarray(seeded, dtype=bool), np.broadcast_shapes(y.shape, f.shape, np.shape(seeded)))
    y = np.where(m, np.broadcast_to(y, m.shape), 0.0)
    f = np.broadcast_to(f, m.shape)
    big_n = m.shape[-1]
    n = m.sum(axis=-1)
    if np.any(n < 2 + (lam is None)):
        raise JudgeblenderError(f"an interval needs at least {2 + (lam is None)} seed queries")
    fm = np.where(m, f, 0.0)
    ybar = y.sum(-1) / n
    fbar_s = fm.sum(-1) / n
    yc = np.where(m, y - ybar[..., None], 0.0)
    fc = np.where(m, f - fbar_s[..., None], 0.0)
    cov_yf = (yc * fc).sum(-1)  # sums of products, divided below
    if target == "collection":
        fbar_all = f.mean(-1)
        if lam is None:
            var_f = (fc * fc).sum(-1)
            with np.errstate(invalid="ignore", divide="ignore"):
                lam_v = np.where(var_f > 0, cov_yf / var_f, 0.0)
            lam_v = np.clip(lam_v, 0.0, 1.0)
        else:
            lam_v = np.broadcast_to(np.asarray(lam, dtype=float), ybar.shape)
        est = ybar + lam_v * (fbar_all - fbar_s)
        resid = np.where(m, yc - lam_v[..., None] * fc, 0.0)
        # A tuned lambda is one more parameter fitted to the seed: n - 2 degrees of freedom,
        # as for the residual variance of a regression estimator.
        df = n - 1 - (lam is None)
        s2 = (resid * resid).sum(-1) / df
        se = np.sqrt(np.maximum(1.0 - n / big_n, 0.0) * s2 / n)
        from scipy import stats

        crit = stats.t.ppf(0.5 + confidence / 2, df)
        with np.errstate(invalid="ignore", divide="ignore"):
            # se = 0 with part of the collection unseen: the seed showed no spread, which proves
            # nothing (p = 1); with the whole collection seen the estimate is exact.
            p = np.where(se > 0, 2 * stats.t.sf(np.abs(est) / se, df), np.where((n == big_n) & (est != 0), 0.0, 1.0))
    else:
        # ppi-python's ppi_mean_ci / ppi_mean_pval, written out to run on many rows at once
        # (tests check it equals ppi-python's own numbers).
        rest = ~m
        n_u = big_n - n
        if np.any(n_u < 1):
            raise JudgeblenderError("the superpopulation target needs at least one query outside the seed")
        fr = np.where(rest, f, 0.0)
        fbar_u = fr.sum(-1) / n_u
        var_u0 = (np.where(rest, f - fbar_u[..., None], 0.0) ** 2).sum(-1) / n_u
        if lam is None:
            fbar_tot = f.mean(-1)
            var_tot1 = ((f - fbar_tot[..., None]) ** 2).sum(-1) / (big_n - 1)
            with np.errstate(invalid="ignore", divide="ignore"):
                lam_v = np.where(var_tot1 > 0, (cov_yf / n) / ((1 + n / n_u) * var_tot1), 0.0)
            lam_v = np.clip(lam_v, 0.0, 1.0)
        else:
            lam_v = np.broadcast_to(np.asarray(lam, dtype=float), ybar.shape)
        est = lam_v * fbar_u + ybar - lam_v * fbar_s
        resid = np.where(m, yc - lam_v[..., None] * fc, 0.0)
        rect_var0 = (resid * resid).sum(-1) / n
        se = np.sqrt(lam_v ** 2 * var_u0 / n_u + rect_var0 / n)
        from scipy import stats

        crit = stats.norm.ppf(0.5 + confidence / 2)
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.where(se > 0, 2 * stats.norm.sf(np.abs(est) / se), np.where(est == 0, 1.0, 0.0))
    # Cochran's rule for the normal approximation of a mean from a skewed population: n > 25 g1^2,
    # g1 the skewness of the residuals (a seed where the values are all equal cannot show it holds).
    with np.errstate(invalid="ignore", divide="ignore"):
        r2 = (resid * resid).sum(-1) / n
        g1 = np.where(r2 > 0, ((resid ** 3).sum(-1) / n) / r2 ** 1.5, np.inf)
    return {"estimate": est, "se": se, "ci_low": clip(est - crit * se, bounds),
            "ci_high": clip(est + crit * se, bounds), "p": p,
            "lam": np.asarray(lam_v, dtype=float) + 0.0, "n": n, "crit": np.broadcast_to(crit, est.shape),
            "skewness": g1, "normal_ok": n > 25 * g1 ** 2}


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (monotone, capped at 1) for a 1-D array."""
    p = np.asarray(p, dtype=float)
    k = len(p)
    if k == 0:
        return p
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((k - np.arange(k)) * p[order]))
    out = np.empty(k)
    out[order] = adj
    return out


# ---------------------------------------------------------------------------------------
# Checking the inputs
# ---------------------------------------------------------------------------------------

def check_seed(llm: Qrels, human: Qrels, human_path: str | Path, llm_path: str | Path,
               design: Design | None = None, design_path: str | Path | None = None) -> list[str]:
    """The seed queries, after checking the seed can serve query-level PPI.

    Every seed label must be for a pair the LLM labelled (else: the seed file's first such
    line). Without a design, the seed must be whole queries: every pair the LLM labelled
    for a seed query is labelled by people too. With a design, the seed's queries must be
    the design's seed.
    """
    stray = [(q, d) for q, docs in human.items() for d in docs if d not in llm.get(q, {})]
    if stray:
        _raise_stray(llm, human_path, llm_path, stray)
    seed = sorted(q for q, docs in human.items() if docs)
    if design is not None:
        if set(seed) != set(design.seed):
            extra = sorted(set(seed) - set(design.seed))
            missing = sorted(set(design.seed) - set(seed))
            raise InputError(design_path or "design", None, f"the queries of {human_path} as its seed",
                             f"{len(extra)} seed queries not in the design (first: {', '.join(extra[:3])}), "
                             f"{len(missing)} design queries without labels (first: {', '.join(missing[:3])})")
        not_llm = sorted(set(design.population) - set(llm))
        if not_llm:
            raise InputError(design_path or "design", None, f"population queries that {llm_path} labels",
                             f"{len(not_llm)} without LLM labels (first: {', '.join(not_llm[:3])})")
    for q in seed:
        missing = set(llm.get(q, {})) - set(human[q])
        if missing:
            raise InputError(
                human_path, None,
                "a seed of whole queries (query-level PPI needs every pair of a seed query labelled by people)",
                f"query {q} has human labels for {len(human[q])} of the {len(llm[q])} pairs the LLM labels there",
                hint=f"label the rest of the pairs {llm_path} labels there, or draw the seed with "
                     "`pool --sample-queries`")
    return seed


# ---------------------------------------------------------------------------------------
# The whole estimate
# ---------------------------------------------------------------------------------------

@dataclass
class RunEstimate:
    run: str
    measure: str
    estimate: float
    ci_low: float
    ci_high: float
    se: float
    lam: float
    llm_only: float  # mean over all N queries under the LLM labels
    human_only: float  # mean over the seed queries under the human labels
    human_only_low: float
    human_only_high: float
    n_seed: int
    n_queries: int
    confidence: float
    target: str
    normal_ok: bool  # Cochran's rule n > 25 g1^2 on the seed residuals: the interval's approximation is credible

    def to_dict(self) -> dict:
        return json_ready(asdict(self))


@dataclass
class PairEstimate:
    measure: str
    run_a: str
    run_b: str
    difference: float  # estimate of score(a) - score(b)
    ci_low: float
    ci_high: float
    ci_low_bonferroni: float
    ci_high_bonferroni: float
    p: float
    p_holm: float
    normal_ok: bool  # Cochran's rule n > 25 g1^2 on the seed's residual differences
    significant: bool  # Holm at 1 - confidence, and normal_ok
    confidence: float  # of ci_low / ci_high (the Bonferroni interval's is 1 - (1 - confidence) / pairs)

    def to_dict(self) -> dict:
        return json_ready(asdict(self))


@dataclass
class EstimateResult:
    runs: list[RunEstimate]
    pairs: list[PairEstimate]
    method: dict
    notes: list[str] = field(default_factory=list)


def method_description(target: str, confidence: float, n: int, big_n: int, n_pairs: int) -> dict:
    if target == "collection":
        estimand = (f"each run's mean score over the collection's {big_n} queries under human labels "
                    f"(a finite population; the seed is {n / big_n:.0%} of it and the interval is corrected for that)")
        estimator = ("query-level PPI++ with the whole collection as unlabelled set: ybar_seed + lambda * "
                     "(fbar_all - fbar_seed), lambda = cov/var on the seed clipped to [0, 1]; variance "
                     "(1 - n/N) s^2(y - lambda f) / n with s^2 on n - 2 degrees of freedom; Student t with "
                     "n - 2 degrees of freedom")
    else:
        estimand = ("each run's mean score over a population of queries that the collection's queries are an "
                    "i.i.d. sample of (no finite-population correction)")
        estimator = ("ppi-python's ppi_mean_ci (PPI++, lambda tuned by ppi-python and clipped to [0, 1]): the "
                     "seed as labelled set, the other queries' LLM scores as unlabelled set; normal quantiles")
    return {
        "estimand": estimand,
        "estimator": estimator,
        "confidence": confidence,
        "seed_queries": n,
        "queries": big_n,
        "human_only": "mean over the seed queries, same variance formula with lambda = 0 (n - 1 degrees of freedom)",
        "pairwise": (f"differences a - b estimated the same way from per-query differences; {n_pairs} pairs; "
                     f"p-values adjusted by Holm's step-down method (family-wise error {1 - confidence:.2g}); "
                     "a pair is declared ordered only if Holm rejects and its seed passes Cochran's rule "
                     "(n > 25 g1^2, g1 the skewness of the residual differences: two runs that differ on a "
                     "few queries only break the normal approximation); Bonferroni intervals hold for all "
                     "pairs at once"),
        "assumptions": [
            "the seed queries are a simple random sample of the queries (a design file from "
            "`pool --sample-queries` records it)",
            "every pair of a seed query that the LLM labelled is labelled by people (whole queries)",
            "the LLM labels were not fitted to the seed (a seed used to calibrate the panel must be split "
            "first; `--calibration-seed` warns when the two overlap)",
            "the t / normal approximation of a mean of n per-query values; weakest under 10 seed queries",
        ],
    }


def seed_design(human_path: str | Path, design_path: str | Path | None = None) -> tuple[Design | None, Path | None]:
    """The design of a seed and its file: `design_path` when given, else SEED.design.json beside the
    seed when it exists (`pool --sample-queries` writes it there), else (None, None)."""
    path = Path(design_path) if design_path is not None else design_path_for(human_path)
    if design_path is None and not path.is_file():
        return None, None
    return read_design(path), path


def scoped_seed(llm: Qrels, human: Qrels, runs: Sequence[Run], scope: str, depth: int, *, llm_name: str,
                whole_queries: bool = True) -> tuple[Qrels, Qrels, str | None]:
    """The LLM labels and the seed in `scope` (evaluate/scope.py): as given for 'labels', only the
    runs' pooled pairs at `depth` for 'pool'; then, for a seed of whole queries, restricted to the
    pool it was drawn from where the LLM labels cover more (scope.fit_seed): (llm, seed, the note
    saying so, or None)."""
    from .scope import by_query, check_scope, fit_seed, pool_of, restrict

    scope = check_scope(scope)
    pooled = pool_of(runs, depth, set(llm)) if runs else []
    if scope == "pool":
        llm, human = restrict(llm, by_query(pooled)), restrict(human, by_query(pooled))
    if not whole_queries:
        return llm, human, None
    return fit_seed(llm, human, pooled, depth, llm_name=llm_name)


def estimate_with_seed(llm: Qrels, human: Qrels, runs: Sequence[Run], measures: Sequence | None, *,
                       confidence: float, llm_path: str | Path, human_path: str | Path,
                       design_path: str | Path | None = None, pairs: bool = True,
                       target: str = "collection", scope: str = "labels", depth: int = 10) -> EstimateResult:
    """`estimate` or, for a seed of pairs (a pairs-poisson design), `estimate_pair_design`, with the
    seed's design found as `seed_design` does; `measures` None: nDCG@10 for whole queries, P(rel=2)@10
    (linear in the labels, so unbiased under the design) for pairs. method["design"] says which.

    `scope` (evaluate/scope.py): 'labels' takes the LLM labels as given, 'pool' only those of the
    runs' pooled pairs at `depth` (and the seed's labels of those), so that the LLM-only figures are
    the llm column of `experiment` in the same scope. A seed drawn from the pool with LLM labels that
    cover more (a published label file) is restricted to the pool it was drawn from: a fallback,
    recorded in method["restricted"] and the first note."""
    runs = list(runs)  # an iterator of runs is read once
    design, path = seed_design(human_path, design_path)
    llm, human, restricted = scoped_seed(llm, human, runs, scope, depth, llm_name=str(llm_path),
                                         whole_queries=not isinstance(design, PairDesign))
    if isinstance(design, PairDesign):
        if target != "collection":
            raise ArgumentError("target", "'collection' with a seed of pairs (pairs-poisson design)", target)
        result = estimate_pair_design(llm, human, runs, measures or ["P(rel=2)@10"], design, confidence=confidence,
                                      llm_path=llm_path, human_path=human_path, design_path=path, pairs=pairs)
    else:
        result = estimate(llm, human, runs, measures or ["nDCG@10"], confidence=confidence, target=target,
                          llm_path=llm_path, human_path=human_path, design=design, design_path=path, pairs=pairs)
    result.method = {**result.method, "design": str(path) if design is not None
                     else "none: the seed was checked to be whole queries",
                     "scope": scope, "depth": depth if scope == "pool" or restricted else None,
                     "restricted": restricted}
    if restricted:
        result.notes.insert(0, restricted)
    return result


def estimate(llm: Qrels, human: Qrels, runs: Sequence[Run], measures: Sequence, *, confidence: float = CONFIDENCE,
             target: str = "collection", llm_path: str | Path = "LLM qrels",
             human_path: str | Path = "seed qrels", design: Design | None = None,
             design_path: str | Path | None = None, pairs: bool = True) -> EstimateResult:
    """Per run and measure: LLM-only, human-only and query-level PPI++ estimates with intervals,
    and (with `pairs`) every pair of runs' difference. See the module docstring."""
    runs = list(runs)  # an iterator of runs is read once
    arguments.confidence(confidence)
    arguments.one_of("target", target, TARGETS)
    if not runs:
        raise JudgeblenderError("estimate needs at least one run")
    seed = check_seed(llm, human, human_path, llm_path, design, design_path)
    population = sorted(design.population) if design is not None else sorted(q for q, d in llm.items() if d)
    from .scope import query_set

    # the collection is the queries the LLM labels (the design's population where there is one)
    counted = query_set(llm, candidates=population, reference_name=str(llm_path),
                        outside="not in the seed design's population")
    if len(seed) < 3:
        raise InputError(human_path, None, "human labels for at least 3 queries (a tuned interval needs 3)",
                         f"{len(seed)} quer{'y' if len(seed) == 1 else 'ies'}")
    runset = RunSet(runs, population)
    seeded = np.isin(np.array(population), np.array(seed))
    for run, row in zip(runs, runset.retrieved):
        if not row[seeded].any():
            raise InputError(run.path, None, f"a run that ranks documents for at least one seed query of {human_path}",
                             "none of the seed queries")
    if target == "superpopulation":
        require("ppi_py", "estimate", "estimate --target superpopulation")
    parsed = parse_measures(measures)
    names = [str(m) for m in parsed]
    llm_pq = evaluate_runs(runset, llm, parsed)
    human_pq = evaluate_runs(runset, {q: human[q] for q in seed}, parsed)
    n, big_n = int(seeded.sum()), len(population)
    out_runs: list[RunEstimate] = []
    out_pairs: list[PairEstimate] = []
    run_names = runset.names
    for measure, name in zip(parsed, names):
        y, f = human_pq[name], llm_pq[name]
        bounds = measure_range(measure)
        if target == "superpopulation":
            ppi = _ppi_python_rows(y, f, seeded, confidence, bounds)
        else:
            ppi = query_ppi(y, f, seeded, target=target, confidence=confidence, bounds=bounds)
        h = query_ppi(y, f, seeded, target=target, confidence=confidence, lam=0.0, bounds=bounds)
        for i, run in enumerate(run_names):
            out_runs.append(RunEstimate(
                run=run, measure=name, estimate=float(ppi["estimate"][i]), ci_low=float(ppi["ci_low"][i]),
                ci_high=float(ppi["ci_high"][i]), se=float(ppi["se"][i]), lam=float(ppi["lam"][i]),
                llm_only=float(f[i].mean()), human_only=float(h["estimate"][i]),
                human_only_low=float(h["ci_low"][i]), human_only_high=float(h["ci_high"][i]),
                n_seed=n, n_queries=big_n, confidence=confidence, target=target,
                normal_ok=bool(ppi["normal_ok"][i])))
        if pairs and len(run_names) > 1:
            out_pairs.extend(_pair_estimates(name, run_names, y, f, seeded, target, confidence,
                                             difference_range(bounds)))
    n_pairs = len(run_names) * (len(run_names) - 1) // 2 if pairs else 0
    notes = []
    doubtful = sorted({r.run for r in out_runs if not r.normal_ok})
    if doubtful:
        notes.append(f"{len(doubtful)} run(s) fail Cochran's rule (n > 25 g1^2) on the seed, so their interval's "
                     f"normal approximation is doubtful (skewed per-query scores): {', '.join(doubtful[:8])}"
                     + (" ..." if len(doubtful) > 8 else ""))
    if n < 10:
        notes.append(f"only {n} seed queries: intervals rest on a normal approximation that is rough this small "
                     "(see docs/estimation.md for the measured coverage)")
    if counted.note():
        notes.append(counted.note())
    method = {**method_description(target, confidence, n, big_n, n_pairs), **counted.to_dict(),
              "queries": big_n}
    return EstimateResult(out_runs, out_pairs, method, notes)


def _ppi_python_rows(y: np.ndarray, f: np.ndarray, seeded: np.ndarray, confidence: float,
                     bounds: tuple[float, float] | None = None) -> dict[str, np.ndarray]:
    """ppi-python's own ppi_mean_ci, one run at a time (the superpopulation target)."""
    ppi_py = require("ppi_py", "estimate", "estimate --target superpopulation")
    out = {k: np.empty(len(y)) for k in ("estimate", "ci_low", "ci_high", "se", "lam")}
    alpha = 1 - confidence
    from scipy import stats

    z = stats.norm.ppf(1 - alpha / 2)
    lam = query_ppi(y, f, seeded, target="superpopulation", confidence=confidence)["lam"]
    for i in range(len(y)):
        ys, fs, fu = y[i][seeded], f[i][seeded], f[i][~seeded]
        lo, hi = ppi_py.ppi_mean_ci(ys, fs, fu, alpha=alpha)
        out["ci_low"][i], out["ci_high"][i] = float(np.ravel(lo)[0]), float(np.ravel(hi)[0])
        out["estimate"][i] = float(np.ravel(ppi_py.ppi_mean_pointestimate(ys, fs, fu))[0])
        out["se"][i] = (out["ci_high"][i] - out["ci_low"][i]) / (2 * z)
        out["lam"][i] = lam[i]
    out["ci_low"], out["ci_high"] = clip(out["ci_low"], bounds), clip(out["ci_high"], bounds)
    return out


def _pair_estimates(measure: str, run_names: list[str], y: np.ndarray, f: np.ndarray, seeded: np.ndarray,
                    target: str, confidence: float, bounds: tuple[float, float] | None = None) -> list[PairEstimate]:
    a, b = np.triu_indices(len(run_names), 1)
    d = query_ppi(y[a] - y[b], f[a] - f[b], seeded, target=target, confidence=confidence, bounds=bounds)
    k = len(a)
    alpha = 1 - confidence
    bonf = query_ppi(y[a] - y[b], f[a] - f[b], seeded, target=target, confidence=1 - alpha / k, lam=d["lam"],
                     bounds=bounds)
    p_holm = holm(d["p"])
    return [PairEstimate(measure, run_names[i], run_names[j], float(d["estimate"][t]), float(d["ci_low"][t]),
                         float(d["ci_high"][t]), float(bonf["ci_low"][t]), float(bonf["ci_high"][t]),
                         float(d["p"][t]), float(p_holm[t]), bool(d["normal_ok"][t]),
                         bool(p_holm[t] < alpha and d["normal_ok"][t]), confidence)
            for t, (i, j) in enumerate(zip(a.tolist(), b.tolist()))]


def per_query_scores(runs: Sequence[Run], queries: Sequence[str], qrels_by_name: Mapping[str, Qrels],
                     measures: Sequence) -> dict[str, dict[str, np.ndarray]]:
    """{qrels name: {measure: (runs x queries)}}: what a simulation needs, computed once."""
    runset = RunSet(runs, list(queries))
    parsed = parse_measures(measures)
    return {name: evaluate_runs(runset, qrels, parsed) for name, qrels in qrels_by_name.items()}


# ---------------------------------------------------------------------------------------
# Planning: how many seed queries for a target width
# ---------------------------------------------------------------------------------------

@dataclass
class PlanRow:
    run: str
    measure: str
    pilot_width: float  # the PPI++ interval width on the pilot seed
    queries_needed: int | None  # PPI++ seed queries for width <= target; None: not even the whole collection
    queries_needed_human_only: int | None
    pairs_needed: int | None  # queries_needed x the mean number of LLM-labelled pairs per query

    def to_dict(self) -> dict:
        return json_ready(asdict(self))


def queries_needed(s2: np.ndarray, big_n: int, target_width: float, confidence: float, tuned: bool) -> list:
    """Smallest seed size n (3..N) whose collection interval, 2 t(df) sqrt((1 - n/N) s2 / n), is at most
    `target_width`, per row of `s2` (the per-query residual variance); None where no n < N reaches it
    (n = N, the whole collection, always does: its width is 0)."""
    from scipy import stats

    ns = np.arange(3, big_n + 1)
    df = ns - 1 - int(tuned)
    half = stats.t.ppf(0.5 + confidence / 2, df)[None, :] * np.sqrt(
        np.maximum(1 - ns / big_n, 0)[None, :] * np.asarray(s2, dtype=float)[:, None] / ns[None, :])
    ok = 2 * half <= target_width
    return [int(ns[row.argmax()]) if row.any() else None for row in ok]


def plan(llm: Qrels, human: Qrels, runs: Sequence[Run], measures: Sequence, *, target_width: float,
         confidence: float = CONFIDENCE, llm_path: str | Path = "LLM qrels", human_path: str | Path = "seed qrels",
         design: Design | None = None, design_path: str | Path | None = None) -> list[PlanRow]:
    """From a pilot seed: how many seed queries (and human labels) the collection target needs for
    intervals no wider than `target_width`, per run and measure, with PPI++ and with the seed alone.

    The per-query residual variance of the pilot is taken as the truth: with a small pilot it is
    itself uncertain, so plan for the larger runs' needs and re-check with `estimate` afterwards.
    """
    runs = list(runs)  # an iterator of runs is read once
    arguments.bounded("target_width", target_width)
    result = estimate(llm, human, runs, measures, confidence=confidence, llm_path=llm_path,
                      human_path=human_path, design=design, design_path=design_path, pairs=False)
    seed = sorted(q for q, d in human.items() if d)
    population = sorted(design.population) if design is not None else sorted(q for q, d in llm.items() if d)
    runset = RunSet(runs, population)
    seeded = np.isin(np.array(population), np.array(seed))
    parsed = parse_measures(measures)
    llm_pq = evaluate_runs(runset, llm, parsed)
    human_pq = evaluate_runs(runset, {q: human[q] for q in seed}, parsed)
    big_n = len(population)
    pairs_per_query = np.mean([len(llm.get(q, {})) for q in population])
    out = []
    for m in parsed:
        name = str(m)
        y, f = human_pq[name], llm_pq[name]
        ppi = query_ppi(y, f, seeded, confidence=confidence)
        n = ppi["n"]
        lam = ppi["lam"]
        ys = np.where(seeded, y, 0.0)
        yc = np.where(seeded, y - (ys.sum(-1) / n)[:, None], 0.0)
        fc = np.where(seeded, f - (np.where(seeded, f, 0.0).sum(-1) / n)[:, None], 0.0)
        s2_ppi = ((yc - lam[:, None] * fc) ** 2).sum(-1) / (n - 2)
        s2_h = (yc ** 2).sum(-1) / (n - 1)
        need = queries_needed(s2_ppi, big_n, target_width, confidence, tuned=True)
        need_h = queries_needed(s2_h, big_n, target_width, confidence, tuned=False)
        rows = [r for r in result.runs if r.measure == name]
        for r, k, kh in zip(rows, need, need_h):
            out.append(PlanRow(r.run, name, r.ci_high - r.ci_low, k, kh,
                               None if k is None else int(round(k * pairs_per_query))))
    return out



# ---------------------------------------------------------------------------------------
# Seeds of pairs drawn with known probabilities (pool --sample-pairs)
# ---------------------------------------------------------------------------------------

def _linear_cutoff(measure, depth: int) -> tuple[int, int]:
    """(k, rel) of a P@k / P(rel=r)@k measure the design's pool covers; anything else is refused."""
    params = measure.params
    k, rel = params.get("cutoff"), params.get("rel", 1)
    if (measure.NAME != "P" or not isinstance(k, int) or set(params) - {"cutoff", "rel"}
            or not isinstance(rel, int)):
        raise JudgeblenderError(
            f"{measure}: a seed of pairs supports measures linear in the labels, P@k or P(rel=r)@k; nDCG's "
            "normaliser needs every label of a query (use a seed of whole queries: `pool --sample-queries`)")
    if k > depth:
        raise JudgeblenderError(f"{measure}: the design's pool is only {depth} deep; use k <= {depth}")
    return k, rel


def estimate_pair_design(llm: Qrels, human: Qrels, runs: Sequence[Run], measures: Sequence, design: PairDesign, *,
                         confidence: float = CONFIDENCE, llm_path: str | Path = "LLM qrels",
                         human_path: str | Path = "seed qrels", design_path: str | Path = "design",
                         pairs: bool = True) -> EstimateResult:
    """Per run and measure (P@k): the difference (Horvitz-Thompson) estimator under the design's
    Poisson sampling of pairs, lambda = 1 (exactly unbiased), with a normal interval; human-only is
    the same with lambda = 0. Differences between runs as for whole queries (Holm, Bonferroni)."""
    from scipy import stats

    from .pair_design import MIN_INFORMATIVE, gains, linear_weights, poisson_estimate

    runs = list(runs)  # an iterator of runs is read once
    arguments.confidence(confidence)
    stray = [(q, d) for q, docs in human.items() for d in docs if d not in llm.get(q, {})]
    if stray:
        _raise_stray(llm, human_path, llm_path, stray)
    missing = [(q, d) for q, d in design.seed if d not in human.get(q, {})]
    if missing:
        raise InputError(human_path, None, f"a human label for every pair the design {design_path} drew",
                         f"{len(missing)} of {len(design.seed)} missing (first: {missing[0][0]} {missing[0][1]})")
    parsed = parse_measures(measures)
    cut = [_linear_cutoff(m, design.depth) for m in parsed]
    pi_of = dict(zip(design.pairs, design.pi.tolist()))
    drawn = set(design.seed)
    n_queries = len(design.queries)
    out_runs, out_pairs = [], []
    run_names = [r.name for r in runs]
    alpha = 1 - confidence
    for m, (k, rel) in zip(parsed, cut):
        name = str(m)
        pair_list, w = linear_weights(runs, design.queries, "precision", k)
        outside = [pr for pr in pair_list if pr not in pi_of]
        if outside:
            raise InputError(design_path, None, f"an inclusion probability for every pair the runs rank in their "
                             f"top {k}", f"{len(outside)} pairs without one (first: {outside[0][0]} {outside[0][1]})")
        pi = np.array([pi_of[pr] for pr in pair_list])
        sampled = np.array([[pr in drawn for pr in pair_list]])
        lg, hg = gains(llm, pair_list, "precision", rel), gains(human, pair_list, "precision", rel)
        bounds = measure_range(m)
        ppi = poisson_estimate(w, lg, hg, sampled, pi, confidence, lam=1.0, bounds=bounds)
        ho = poisson_estimate(w, lg, hg, sampled, pi, confidence, lam=0.0, bounds=bounds)
        for i, run in enumerate(run_names):
            out_runs.append(RunEstimate(
                run=run, measure=name, estimate=float(ppi["estimate"][0, i]), ci_low=float(ppi["ci_low"][0, i]),
                ci_high=float(ppi["ci_high"][0, i]), se=float(ppi["se"][0, i]), lam=1.0,
                llm_only=float(w[i] @ lg), human_only=float(ho["estimate"][0, i]),
                human_only_low=float(ho["ci_low"][0, i]), human_only_high=float(ho["ci_high"][0, i]),
                n_seed=int(sampled.sum()), n_queries=n_queries, confidence=confidence, target="collection",
                normal_ok=bool(ppi["normal_ok"][0, i])))
        if pairs and len(run_names) > 1:
            a, b = np.triu_indices(len(run_names), 1)
            d_bounds = difference_range(bounds)
            d = poisson_estimate(w[a] - w[b], lg, hg, sampled, pi, confidence, lam=1.0, bounds=d_bounds)
            z_b = stats.norm.ppf(1 - alpha / (2 * len(a)))
            p_holm = holm(d["p"][0])
            out_pairs.extend(PairEstimate(
                name, run_names[i], run_names[j], float(d["estimate"][0, t]), float(d["ci_low"][0, t]),
                float(d["ci_high"][0, t]), clip(float(d["estimate"][0, t] - z_b * d["se"][0, t]), d_bounds),
                clip(float(d["estimate"][0, t] + z_b * d["se"][0, t]), d_bounds), float(d["p"][0, t]),
                float(p_holm[t]), bool(d["normal_ok"][0, t]), bool(p_holm[t] < alpha and d["normal_ok"][0, t]),
                confidence)
                for t, (i, j) in enumerate(zip(a.tolist(), b.tolist())))
    n_pairs = len(run_names) * (len(run_names) - 1) // 2 if pairs else 0
    method = {
        "estimand": f"each run's mean score over the design's {n_queries} queries under human labels (a finite "
                    "population of pooled pairs)",
        "estimator": "difference (Horvitz-Thompson) estimator under Poisson sampling of pairs: sum_p W[r,p] g(l_p) "
                     "+ sum over drawn pairs of W[r,p] (g(h_p) - g(l_p)) / pi_p, exactly unbiased; its unbiased "
                     "variance estimate; normal quantiles",
        "confidence": confidence, "seed_queries": len({q for q, _ in design.seed}), "queries": n_queries,
        "seed_pairs": len(design.seed), "design_pairs": len(design.pairs),
        "human_only": "Horvitz-Thompson estimate from the drawn pairs alone (lambda = 0)",
        "pairwise": (f"differences a - b by the same estimator; {n_pairs} pairs; p-values adjusted by Holm's "
                     f"step-down method (family-wise error {1 - confidence:.2g}); a pair is declared ordered only if "
                     f"Holm rejects and at least {MIN_INFORMATIVE} drawn pairs carry a non-zero residual for it; "
                     "Bonferroni intervals hold for all pairs at once"),
        "assumptions": [
            "the seed pairs were drawn independently with the design's probabilities (pool --sample-pairs)",
            "the LLM labels were not fitted to the seed (`--calibration-seed` warns when the two overlap)",
            "the normal approximation of a Horvitz-Thompson sum: docs/estimation.md measures coverage of 0.88-0.90 "
            "from about 150 labels on DL19, and under-coverage with fewer",
        ],
    }
    notes = []
    doubtful = sorted({r.run for r in out_runs if not r.normal_ok})
    if doubtful:
        notes.append(f"{len(doubtful)} run(s) have fewer than {MIN_INFORMATIVE} drawn pairs with a residual: their "
                     f"interval is not to be trusted: {', '.join(doubtful[:8])}" + (" ..." if len(doubtful) > 8 else ""))
    if len(design.seed) < 150:
        notes.append(f"only {len(design.seed)} seed pairs: the normal approximation under-covered below about 150 "
                     "labels on DL19 (docs/estimation.md)")
    return EstimateResult(out_runs, out_pairs, method, notes)


def _raise_stray(llm: Qrels, human_path, llm_path, stray) -> None:
    why = (f"a pair that {llm_path} labels (seed labels must be for pairs the LLM labelled, since each "
           "query's LLM score uses them all)")
    if Path(human_path).is_file():
        for lineno, line in iter_lines(human_path, report=False):
            cols = line.split()
            if len(cols) == 4 and cols[2] not in llm.get(cols[0], {}):
                raise InputError(human_path, lineno, why, line.strip())
    raise InputError(human_path, None, why, f"{len(stray)} pairs such as {stray[0][0]} {stray[0][1]}")
