"""Seeds that overlap: human labels used to judge the LLM labels that were fitted to them.

A panel calibrated on a seed of human labels (`calibrate --gold`) has seen those pairs: on
them its labels agree with people better than anywhere else, so an estimate corrected by
the same pairs (PPI++ assumes the LLM labels were not fitted to the seed) or an agreement
measured on them is optimistic. `estimate` and `report` take the calibration seed
(`--calibration-seed`, a pairs file or qrels) and warn, with counts, when the human labels
they evaluate with share queries or pairs with it; the output is still produced.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..pairs.pairs import read_pairs


@dataclass
class SeedOverlap:
    what: str  # what the checked labels are for, e.g. "estimation"
    path: str  # the calibration seed
    queries: int  # checked queries that have at least one calibration pair
    total_queries: int
    pairs: int  # checked pairs that are calibration pairs
    total_pairs: int
    consequence: str

    @property
    def overlaps(self) -> bool:
        return self.queries > 0

    def warning(self) -> str | None:
        """One `warning:` line with the counts, or None when the seeds share nothing."""
        if not self.overlaps:
            return None
        return (f"warning: {self.queries} of {self.total_queries} {self.what} queries and {self.pairs} of "
                f"{self.total_pairs} pairs are in the calibration seed {self.path}: the panel has seen them; "
                f"{self.consequence}")


ESTIMATION = ("estimation", "PPI++ assumes the LLM labels were not fitted to the seed, so the intervals may be too "
              "optimistic; estimate with a seed the panel never saw (pool --sample-queries, then label it)")
AGREEMENT = ("gold", "agreement on those pairs is optimistic for the panel (it was fitted to them); measure it on "
             "labels the panel never saw")


def seed_overlap(labels: Mapping[str, Iterable[str]], calibration: str | Path,
                 kind: tuple[str, str] = ESTIMATION) -> SeedOverlap:
    """How many of `labels`' queries and (query, doc) pairs are in the calibration seed file
    (a `qid docid` pairs TSV, qrels or a run, read as `judge -p` reads pairs). `kind` is one
    of ESTIMATION, AGREEMENT: what the labels are for and what the overlap costs."""
    cal = set(read_pairs(calibration))
    cal_queries = {q for q, _ in cal}
    checked = {(q, d) for q, docs in labels.items() for d in docs}
    queries = {q for q, _ in checked}
    return SeedOverlap(kind[0], str(calibration), len(queries & cal_queries), len(queries), len(checked & cal),
                       len(checked), kind[1])
