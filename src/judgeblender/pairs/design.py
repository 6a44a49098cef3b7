"""Seed designs: how the human seed was drawn, written beside it for `estimate`.

A design file (JSON) records who was eligible (the population), the inclusion
probabilities, the seed itself and the random seed of the draw. Two designs:

* "queries": a simple random sample without replacement of n whole queries from the N
  pooled queries (`pool --sample-queries`); every query's inclusion probability is n / N.
  Query-level PPI (`estimate`) needs this one.
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

from ..errors import InputError, JudgeblenderError
from .textfile import atomic_write_text

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
    if kind != "queries":
        raise InputError(path, None, "design 'queries' (whole queries drawn at random, `pool --sample-queries`): "
                         "query-level PPI needs whole queries, and pair-level designs need a design-based "
                         "estimator that `estimate` does not have yet", str(kind))
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
        raise JudgeblenderError(f"--sample-queries must be between 1 and the {len(pop)} pooled queries, got {n}")
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
