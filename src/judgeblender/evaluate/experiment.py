"""An experiment's table: systems scored under human, filled and LLM labels, compared with a baseline.

This is the evaluation half of `jb.experiment` (the pooling and judging half is holes.py): given
the systems' runs and three qrels over the same pool (the human labels, the human labels with
their holes filled by LLM labels, and the LLM labels alone), one row per system and measure says
what each gives, how much of the system's top k people judged (Judged@k), and how many of its top
k pairs the LLM filled. Against a baseline it adds a paired t-test on the filled labels with a
named multiple-comparison correction (as pt.Experiment's `correction=`); with a human seed drawn
at random (and its design), the query-level PPI++ estimates and difference intervals of
evaluate/estimate.py. Every score is a mean over one set of queries, the population.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import arguments
from ..errors import JudgeblenderError
from ..pairs.qrels import Qrels
from ..pairs.runs import Run
from .estimate import estimate_with_seed, holm
from .leaderboard import RunSet, evaluate_runs, parse_measures
from .intervals import CONFIDENCE
from .scope import DEFAULT_SCOPE, by_query, describe_scope, pool_of, restrict

CORRECTIONS = ("holm", "bonferroni", "none")
# The default of pt.Experiment's `correction=` is none; a table that tests every system against a
# baseline should not be read without one, so here Holm's step-down method is the default.
DEFAULT_CORRECTION = "holm"


@dataclass
class Seed:
    """A human seed drawn at random from the pool, for PPI++: its labels and where its design is."""

    qrels: Qrels
    path: str | Path  # the seed's file (its design is found beside it) or a name
    design: str | Path | None = None


@dataclass
class ExperimentInputs:
    runs: list[Run]
    population: list[str]  # the queries every score is a mean over
    human: Qrels | None
    filled: Qrels
    llm: Qrels  # the LLM labels of the scope's pairs (evaluate/scope.py)
    llm_sources: dict[tuple[str, str], str] = field(default_factory=dict)  # pairs of `filled` the LLM labelled
    llm_complete: bool = True  # whether the LLM was asked about every pair of the scope (else its column is NaN)
    pool_judged: bool = True  # whether the LLM labelled every pooled pair: what PPI++ with a pool's seed needs
    scope: str = DEFAULT_SCOPE  # the scope human, llm and filled were built in


def adjust(p: np.ndarray, correction: str | None) -> np.ndarray:
    """p-values adjusted for multiple comparisons: holm (step-down), bonferroni, or none."""
    name = (correction or "none").lower()
    if name not in CORRECTIONS:
        raise JudgeblenderError(f"correction must be one of {', '.join(CORRECTIONS)}, got {correction!r}")
    p = np.asarray(p, dtype=float)
    if name == "holm":
        return holm(p)
    if name == "bonferroni":
        return np.minimum(1.0, p * len(p))
    return p


def paired_tests(scores: np.ndarray, baseline: int, correction: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided paired t-tests of every row of `scores` (systems x queries) against row `baseline`:
    the raw and adjusted p-values (NaN for the baseline itself; the family is the other systems).
    A difference that is the same on every query gives NaN (scipy's answer: no variance)."""
    from scipy import stats

    others = [i for i in range(len(scores)) if i != baseline]
    raw = np.full(len(scores), np.nan)
    adj = np.full(len(scores), np.nan)
    if not others:
        return raw, adj
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.array([stats.ttest_rel(scores[i], scores[baseline]).pvalue for i in others], dtype=float)
    raw[others] = p
    finite = ~np.isnan(p)
    out = np.full(len(p), np.nan)
    out[finite] = adjust(p[finite], correction)
    adj[others] = out
    return raw, adj


def _top_k_counts(runset: RunSet, k: int, labelled: set[tuple[str, str]]) -> np.ndarray:
    """Per run: how many of its top-k pairs over the population are in `labelled`."""
    return np.array([sum((q, d) in labelled for q in runset.queries for d in run.top(q, k))
                     for run in runset.runs], dtype=int)


def experiment_table(inputs: ExperimentInputs, measures: Sequence, *, k: int = 10, baseline: str | None = None,
                     correction: str | None = DEFAULT_CORRECTION, seed: Seed | None = None,
                     confidence: float = CONFIDENCE):
    """One row per (system, measure); see the module docstring. Columns: system, measure, human,
    filled, llm, judged (Judged@k under the human labels), filled_pairs (top-k pairs labelled by the
    LLM), unlabelled (top-k pairs without any label); with a baseline: delta (filled labels), p,
    p_adjusted, significant; with a seed: human_pool (the human score over the pooled pairs, which
    ppi estimates), ppi, ppi_low, ppi_high, and against the baseline ppi_delta, ppi_delta_low,
    ppi_delta_high, ppi_p_holm, ppi_significant, ppi_verdict (why a flag is False beside a small p:
    Cochran's rule, with a note). attrs["columns"] says what each column is and over which pairs."""
    import pandas as pd

    arguments.confidence(confidence)
    adjust(np.zeros(0), correction)  # a bad name fails before any work
    runs = inputs.runs
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise JudgeblenderError(f"two systems share the name {next(n for n in names if names.count(n) > 1)!r}")
    if baseline is not None and baseline not in names:
        raise JudgeblenderError(f"baseline {baseline!r} is none of the systems: {', '.join(names)}")
    parsed = parse_measures(measures)
    runset = RunSet(runs, inputs.population)
    human_pq = evaluate_runs(runset, inputs.human, parsed + parse_measures([f"Judged@{k}"])) \
        if inputs.human is not None else None
    filled_pq = evaluate_runs(runset, inputs.filled, parsed)
    llm_pq = evaluate_runs(runset, inputs.llm, parsed) if inputs.llm_complete else None
    filled_pairs = _top_k_counts(runset, k, set(inputs.llm_sources))
    labelled = {(q, d) for q, docs in inputs.filled.items() for d in docs}
    top_k = np.array([sum(len(run.top(q, k)) for q in runset.queries) for run in runs], dtype=int)
    unlabelled = top_k - _top_k_counts(runset, k, labelled)
    b = names.index(baseline) if baseline is not None else None
    notes: list[str] = []
    estimates = _seed_estimates(inputs, runs, parsed, seed, confidence, baseline, k, notes) if seed is not None else {}
    if seed is not None and inputs.human is not None:  # what the PPI++ interval estimates, shown beside it
        pooled = restrict(inputs.human, by_query(pool_of(runs, k, inputs.population)))
        human_pool = evaluate_runs(runset, pooled, parsed)
        for m in map(str, parsed):
            for i, run in enumerate(names):
                estimates[(run, m)] = {"human_pool": float(human_pool[m][i].mean()), **estimates.get((run, m), {})}
    rows = []
    for m in parsed:
        name = str(m)
        f = filled_pq[name]
        if b is not None:
            p, p_adj = paired_tests(f, b, correction)
        for i, run in enumerate(names):
            row = {"system": run, "measure": name,
                   "human": float(human_pq[name][i].mean()) if human_pq is not None else np.nan,
                   "filled": float(f[i].mean()),
                   "llm": float(llm_pq[name][i].mean()) if llm_pq is not None else np.nan,
                   f"judged@{k}": float(human_pq[f"Judged@{k}"][i].mean()) if human_pq is not None else np.nan,
                   "filled_pairs": int(filled_pairs[i]), "unlabelled": int(unlabelled[i])}
            if b is not None:
                row.update({"delta": float(f[i].mean() - f[b].mean()), "p": p[i], "p_adjusted": p_adj[i],
                            "significant": bool(p_adj[i] < 1 - confidence) if i != b else False})
            row.update(estimates.get((run, name), {}))
            rows.append(row)
    table = pd.DataFrame(rows)
    table.attrs.update({"queries": len(inputs.population), "k": k, "confidence": confidence,
                        "correction": (correction or "none") if b is not None else None, "baseline": baseline,
                        "scope": inputs.scope, "notes": notes,
                        "columns": column_scopes(table.columns, inputs.scope, k, confidence, correction, baseline)})
    return table


def column_scopes(columns, scope: str, k: int, confidence: float, correction: str | None,
                  baseline: str | None) -> dict[str, str]:
    """{column: what it is and over which pairs}: the table's caption, in `attrs["columns"]`, so that
    no figure is read against the wrong truth (human, filled and llm are over the scope's pairs; the
    PPI++ columns estimate the human score over the pooled pairs, whatever the scope)."""
    over = describe_scope(scope, k)
    pooled = f"the pooled pairs of the systems' top {k}"
    words = {
        "human": f"score under the human labels alone ({over}; a pair without a human label counts as not relevant)",
        "filled": f"score under the human labels, LLM labels where people gave none ({over})",
        "llm": f"score under the LLM labels alone ({over})",
        f"judged@{k}": f"Judged@{k} under the human labels: share of each system's top {k} people labelled "
                       "(ties at rank k broken as trec_eval does: docs/api.md)",
        "filled_pairs": f"pairs of the system's top {k} labelled by the LLM in the filled labels",
        "unlabelled": f"pairs of the system's top {k} without any label",
        "delta": f"filled minus {baseline}'s filled",
        "p": f"two-sided paired t-test of filled against {baseline} over the queries",
        "p_adjusted": f"p adjusted for the other systems ({correction or 'none'})",
        "significant": f"p_adjusted < {1 - confidence:.2g}",
        "human_pool": f"score under the human labels over {pooled} (a hole counts as not relevant): the quantity "
                      "ppi estimates, exactly so where people labelled every pooled pair",
        "ppi": f"PPI++ estimate, from the seed and the LLM labels, of the human score over {pooled} (human_pool)",
        "ppi_low": f"{confidence:.0%} interval of ppi, low end (targets human_pool's quantity, not human)",
        "ppi_high": f"{confidence:.0%} interval of ppi, high end",
        "ppi_delta": f"PPI++ estimate of the human score's difference from {baseline}, over {pooled}",
        "ppi_delta_low": f"{confidence:.0%} interval of ppi_delta, low end",
        "ppi_delta_high": f"{confidence:.0%} interval of ppi_delta, high end",
        "ppi_p_holm": "p of ppi_delta, Holm-adjusted over the other systems",
        "ppi_significant": f"ppi_p_holm < {1 - confidence:.2g} and the test was made (ppi_verdict)",
        "ppi_verdict": "significant, not significant, or not tested: the seed fails Cochran's rule "
                       "(n > 25 g1^2) for this difference, so its normal approximation is not trusted",
    }
    return {c: words[c] for c in columns if c in words}


def _seed_estimates(inputs: ExperimentInputs, runs: list[Run], measures: list, seed: Seed, confidence: float,
                    baseline: str | None, k: int, notes: list[str]) -> dict[tuple[str, str], dict]:
    """{(system, measure): PPI++ columns}: estimate's numbers from the LLM labels of the scope and
    the seed (restricted to the pool the seed was drawn from where the LLM labels cover more, with a
    note added to `notes`); the differences against the baseline get Holm's correction over the
    other systems."""
    if not inputs.pool_judged:
        raise JudgeblenderError("PPI++ needs LLM labels for every pooled pair: judge the whole pool (or give "
                                "llm_labels that cover it)")
    result = estimate_with_seed(inputs.llm, seed.qrels, runs, measures, confidence=confidence,
                                llm_path="the LLM labels", human_path=seed.path,
                                design_path=seed.design, pairs=baseline is not None, scope=inputs.scope, depth=k)
    notes.extend(n for n in result.notes if n == result.method.get("restricted"))
    out: dict[tuple[str, str], dict] = {}
    for r in result.runs:
        out[(r.run, r.measure)] = {"ppi": r.estimate, "ppi_low": r.ci_low, "ppi_high": r.ci_high}
    if baseline is None:
        return out
    alpha = 1 - confidence
    for measure in dict.fromkeys(r.measure for r in result.runs):
        against = []
        for pe in result.pairs:
            if pe.measure == measure and baseline in (pe.run_a, pe.run_b):
                sign = 1.0 if pe.run_a != baseline else -1.0
                other = pe.run_a if sign > 0 else pe.run_b
                lo, hi = (pe.ci_low, pe.ci_high) if sign > 0 else (-pe.ci_high, -pe.ci_low)
                against.append((other, sign * pe.difference, lo, hi, pe.p, pe.normal_ok))
        p_holm = holm(np.array([a[4] for a in against]))
        untested = []
        for (other, diff, lo, hi, _, ok), ph in zip(against, p_holm):
            verdict = (NOT_TESTED if not ok else "significant" if ph < alpha else "not significant")
            out[(other, measure)].update({"ppi_delta": diff, "ppi_delta_low": lo, "ppi_delta_high": hi,
                                          "ppi_p_holm": float(ph), "ppi_significant": bool(ph < alpha and ok),
                                          "ppi_verdict": verdict})
            if not ok:
                untested.append(other)
        if untested:
            notes.append(f"{measure}: {len(untested)} system(s) not tested against {baseline} with PPI++, "
                         f"{NOT_TESTED_WHY.format(n=result.method['seed_queries'])}, so ppi_significant is False "
                         f"whatever ppi_p_holm says (ppi_verdict): {', '.join(untested)}")
    return out


# A difference whose seed fails Cochran's rule is not tested (evaluate/estimate.py): said so, in the
# table's ppi_verdict and in the report's order matrix, apart from a difference found not significant.
NOT_TESTED = "not tested: Cochran's rule"
NOT_TESTED_WHY = ("the {n} seed queries are too few for Cochran's rule (n > 25 g1^2, g1 the skewness of the "
                  "per-query differences) to trust the normal approximation")
