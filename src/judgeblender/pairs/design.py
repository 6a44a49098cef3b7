"""Seed designs: how the human seed was drawn, written beside it for `estimate`.

A design file (JSON) records who was eligible (the population), the inclusion
probabilities, the seed itself and the random seed of the draw. Two designs:

* "queries": a simple random sample without replacement of n whole queries from the N
  pooled queries (`pool --sample-queries`); every query's inclusion probability is n / N.
  Query-level PPI (`estimate`) needs this one.
* "pairs-poisson": every pooled pair drawn independently with a known probability
  (`pool --sample-pairs B`: B pairs expected, probabilities proportional to sqrt(the number of
  runs that have the pair in their top k), or equal); `estimate` uses it for measures linear
  in the labels (P@k) with a Horvitz-Thompson difference estimator.
* "pairs-stratified": pairs stratified by query and rank band (`pool --sample`), a simple
  random sample of a fixed number within each stratum; a pair's inclusion probability is
  drawn / size of its stratum. `estimate` refuses it, with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ArgumentError, InputError, JudgeblenderError
from ..fileio import atomic_write_text

DESIGN_VERSION = 1


@dataclass
class Design:
    """A seed's sampling design, as `pool --sample-queries` writes it beside the seed.

    kind "queries": a simple random sample without replacement of `len(seed)` whole queries
    from `population`; every query's inclusion probability is n / N.
    """

    kind: str
    population: list[str]
    seed: list[str]
    random_seed: int | None = None
    note: str = ""

    @property
    def inclusion_probability(self) -> float:
        return len(self.seed) / len(self.population)

    def to_dict(self) -> dict:
        return {
            "version": DESIGN_VERSION, "design": self.kind,
            "method": "simple random sample of whole queries, without replacement",
            "population": self.population, "seed": self.seed, "n": len(self.seed), "N": len(self.population),
            "inclusion_probability": {q: self.inclusion_probability for q in self.population},
            "random_seed": self.random_seed, "note": self.note,
        }


def design_path_for(seed_path: str | Path) -> Path:
    """Where the design of a seed lives: beside it, named by its stem (`seed.tsv`, the pairs
    to label, and `seed.qrels`, their labels, share `seed.design.json`)."""
    seed_path = Path(seed_path)
    return seed_path.with_name(seed_path.stem + ".design.json") if seed_path.suffix else \
        seed_path.with_name(seed_path.name + ".design.json")


def write_design(path: str | Path, design: Design) -> None:
    atomic_write_text(path, json.dumps(design.to_dict(), indent=1) + "\n")


def read_design(path: str | Path) -> Design:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(path, None, "a design file", "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, None, "a readable design file", str(exc)) from None
    except json.JSONDecodeError as exc:
        raise InputError(path, exc.lineno, "a JSON design file", exc.msg) from None
    if not isinstance(data, dict) or "design" not in data:
        raise InputError(path, None, "a JSON object with a 'design' key")
    kind = data["design"]
    if kind == "pairs-poisson":
        return _read_pair_design(path, data)
    if kind != "queries":
        raise InputError(path, None, "design 'queries' (whole queries drawn at random, `pool --sample-queries`) or "
                         "'pairs-poisson' (`pool --sample-pairs`): `estimate` needs whole queries or pairs drawn "
                         "independently with known probabilities", str(kind))
    pop, seed = data.get("population"), data.get("seed")
    if not (isinstance(pop, list) and isinstance(seed, list) and all(isinstance(q, str) for q in pop + seed)):
        raise InputError(path, None, "'population' and 'seed' lists of query ids")
    outside = sorted(set(seed) - set(pop))
    if outside:
        raise InputError(path, None, "seed queries drawn from the population", ", ".join(outside[:5]))
    return Design(kind, pop, seed, data.get("random_seed"), data.get("note", ""))


def draw_query_design(population: Sequence[str], n: int, random_seed: int) -> Design:
    """A simple random sample without replacement of `n` whole queries (numpy's generator)."""
    pop = list(population)
    if not 1 <= n <= len(pop):
        raise ArgumentError("n", f"a number of queries between 1 and the {len(pop)} pooled queries", n)
    rng = np.random.default_rng(random_seed)
    chosen = set(rng.choice(len(pop), size=n, replace=False).tolist())
    return Design("queries", pop, [q for i, q in enumerate(pop) if i in chosen], random_seed)


def write_pair_design(path: str | Path, pairs: Sequence, drawn: Sequence,
                      bands: Sequence[tuple[int, int]], seed: int) -> None:
    """The design of a stratified pair sample: each (query, rank band) stratum's size and draw.

    Given how many pairs each stratum got (the quotas, which spread() fixes before any label
    is seen), the pairs of a stratum are a simple random sample without replacement, so a
    pair's inclusion probability is drawn / size of its stratum.
    """
    strata: dict[tuple[str, str], list[int]] = {}
    chosen = {(p.qid, p.docid) for p in drawn}
    band_of = {}
    for p in pairs:
        band = next(f"{lo}-{hi}" for lo, hi in bands if lo <= p.best_rank <= hi)
        band_of[(p.qid, p.docid)] = band
        counts = strata.setdefault((p.qid, band), [0, 0])
        counts[0] += 1
        counts[1] += (p.qid, p.docid) in chosen
    design = {
        "version": 1, "design": "pairs-stratified",
        "method": "pairs stratified by query and best rank band; within a stratum a simple random sample "
                  "without replacement of a fixed number of pairs",
        "random_seed": seed, "bands": [f"{lo}-{hi}" for lo, hi in bands],
        "strata": [{"query": q, "band": b, "size": n, "drawn": k, "inclusion_probability": k / n}
                   for (q, b), (n, k) in strata.items()],
        "seed": [{"query": p.qid, "docid": p.docid, "band": band_of[(p.qid, p.docid)]} for p in drawn],
        "note": "query-level `estimate` cannot use this design (it needs whole queries: pool --sample-queries)",
    }
    atomic_write_text(path, json.dumps(design, indent=1) + "\n")


@dataclass
class PairDesign:
    """Poisson sampling of pooled pairs: pair i drawn independently with probability pi[i]."""

    kind: str
    queries: list[str]  # the population of queries
    pairs: list[tuple[str, str]]  # every pooled pair (the eligible units)
    pi: np.ndarray
    seed: list[tuple[str, str]]
    depth: int
    weights: str
    random_seed: int | None = None

    def to_dict(self) -> dict:
        return {
            "version": DESIGN_VERSION, "design": self.kind,
            "method": "Poisson sampling: every pooled pair drawn independently with its inclusion probability",
            "depth": self.depth, "weights": self.weights, "random_seed": self.random_seed,
            "queries": self.queries, "expected_pairs": float(self.pi.sum()),
            "pairs": [{"query": q, "docid": d, "inclusion_probability": float(p)}
                      for (q, d), p in zip(self.pairs, self.pi)],
            "seed": [{"query": q, "docid": d} for q, d in self.seed],
        }


def inclusion_probabilities(size: np.ndarray, budget: float) -> np.ndarray:
    """pi proportional to `size` (>= 0), summing to `budget` expected draws, none above 1
    (units that would exceed 1 are taken for sure and the rest rescaled)."""
    size = np.asarray(size, dtype=float)
    if not 0 < budget <= len(size):
        raise JudgeblenderError(f"the expected sample must be between 0 and the {len(size)} pairs, got {budget}")
    size = np.where(size > 0, size, size[size > 0].min() * 1e-3 if np.any(size > 0) else 1.0)
    pi = np.zeros_like(size)
    certain = np.zeros(len(size), dtype=bool)
    for _ in range(len(size)):
        left = budget - certain.sum()
        pi[~certain] = size[~certain] * left / size[~certain].sum()
        pi[certain] = 1.0
        over = (pi > 1) & ~certain
        if not over.any():
            break
        certain |= over
    return np.minimum(pi, 1.0)


def draw_pair_design(pooled: Sequence, budget: float, depth: int, weights: str, random_seed: int) -> PairDesign:
    """Poisson sample of the pooled pairs (PoolPair: qid, docid, runs), `budget` pairs expected.

    weights "runs": pi proportional to sqrt(number of runs with the pair in their top `depth`),
    the pair's weight over runs in P@depth (sqrt(sum_r W[r, p]^2)); "uniform": equal.
    """
    if weights not in ("runs", "uniform"):
        raise ArgumentError("weights", "'runs' or 'uniform'", weights)
    pairs = [(p.qid, p.docid) for p in pooled]
    size = np.sqrt([len(set(p.runs)) for p in pooled]) if weights == "runs" else np.ones(len(pairs))
    pi = inclusion_probabilities(size, budget)
    drawn = np.random.default_rng(random_seed).random(len(pairs)) < pi
    queries = list(dict.fromkeys(q for q, _ in pairs))
    return PairDesign("pairs-poisson", queries, pairs, pi, [pr for pr, x in zip(pairs, drawn) if x], depth, weights,
                      random_seed)


def _read_pair_design(path: Path, data: dict) -> PairDesign:
    try:
        pairs = [(str(p["query"]), str(p["docid"])) for p in data["pairs"]]
        pi = np.array([float(p["inclusion_probability"]) for p in data["pairs"]])
        seed = [(str(p["query"]), str(p["docid"])) for p in data["seed"]]
        depth = int(data["depth"])
        queries = [str(q) for q in data["queries"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(path, None, "a pairs-poisson design with queries, depth, pairs (query, docid, "
                         "inclusion_probability) and seed (query, docid)", f"{type(exc).__name__}: {exc}") from None
    if np.any((pi <= 0) | (pi > 1)):
        raise InputError(path, None, "inclusion probabilities in (0, 1]")
    unknown = set(seed) - set(pairs)
    if unknown:
        q, d = sorted(unknown)[0]
        raise InputError(path, None, "seed pairs among the design's pairs", f"{q} {d}")
    return PairDesign("pairs-poisson", queries, pairs, pi, seed, depth, str(data.get("weights", "")),
                      data.get("random_seed"))


# How errors name the draw's settings: the Python arguments. `pool` passes its own parameters'
# names (sample_queries, ...), which the command line tells as its flags (cli/usage.py `told`).
SEED_ARGUMENTS = {"queries": "queries", "pairs": "pairs", "weights": "weights"}


def draw_seed(holes: Sequence, depth: int, *, queries: int | None = None, pairs: float | None = None,
              weights: str = "runs", random_seed: int = 0, pairs_file: str | Path = "the seed's pairs file",
              names: dict[str, str] = SEED_ARGUMENTS) -> tuple[list, Design | PairDesign]:
    """A human seed drawn from the pooled pairs `holes` (PoolPair) with a design `estimate` can use,
    as `pool --sample-queries` / `--sample-pairs` and `jb.sample_seed` draw it: `queries` whole
    queries at random without replacement (every pooled pair of each), or every pair independently
    with known probabilities, `pairs` expected (`weights` "runs" or "uniform"). Returns the drawn
    pairs, in pool order, and the design to write beside them. `names` says how errors call the
    settings: the Python arguments, or the command's parameters."""
    from .pool import qid_key

    if queries is None and pairs is None:
        raise ArgumentError(names["queries"], f"a number of whole queries to draw (or {names['pairs']}=, pairs with "
                            "known probabilities)", described="none")
    if queries is not None and pairs is not None:
        raise ArgumentError(names["pairs"], f"none with {names['queries']}= (whole queries or pairs: one design)", pairs)
    if queries is not None:
        population = sorted({p.qid for p in holes}, key=qid_key)
        if isinstance(queries, bool) or not isinstance(queries, int) or not 1 <= queries <= len(population):
            raise ArgumentError(names["queries"], f"a number of queries between 1 and the {len(population)} pooled "
                                "queries", queries)
        design: Design | PairDesign = draw_query_design(population, queries, random_seed)
        chosen = set(design.seed)
        design.note = (f"every pooled pair (depth {depth}) of each seed query is in {pairs_file}: label them all, "
                       "then `estimate --human SEED.qrels` finds this file beside it")
        return [p for p in holes if p.qid in chosen], design
    if weights not in ("runs", "uniform"):
        raise ArgumentError(names["weights"], "'runs' or 'uniform'", weights)
    if isinstance(pairs, bool) or not isinstance(pairs, (int, float)) or not 0 < pairs <= len(holes):
        raise ArgumentError(names["pairs"], f"an expected number of pairs above 0 and at most the {len(holes)} "
                            "pooled pairs", pairs)
    design = draw_pair_design(holes, pairs, depth, weights, random_seed)
    chosen_pairs = set(design.seed)
    return [p for p in holes if (p.qid, p.docid) in chosen_pairs], design
