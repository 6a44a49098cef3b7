"""How often ties in score decide a run's top k: the DL19 runs, counted under judgeblender's rule.

For every run and query this counts
- a tie that straddles the cut: the k-th and (k+1)-th documents tie in score, so which of the tied
  documents make the top k is decided by the tie-break (trec_eval's: docid descending), not by the run;
- any tie within the top k: two of the top k documents tie (their order, not their membership,
  is then the tie-break's: it moves nDCG@k, not Judged@k or the pool).

Scores are compared as judgeblender ranks them (pairs/runs.py, rank_scores: float32, as the
trec_eval inside pytrec_eval does) and, for comparison, as float64 (trec_eval 10).

    python bench/ties.py [--runs DIR] [--qrels FILE] [--depth 10]

Without --qrels every query a run ranks counts; with it, only the qrels' queries (as `pool
--queries-from` and the measures use them).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from judgeblender.pairs import read_qrels, read_runs_dir
from judgeblender.pairs.runs import rank_scores

HERE = Path(__file__).resolve().parent
DL19 = HERE.parents[1] / "shared" / "data" / "trec-dl-2019"


def tie_cells(scores: np.ndarray, k: int) -> tuple[bool, bool]:
    """(a tie straddles the cut at k, any two of the top k tie) for one ranking's scores, in order."""
    straddles = len(scores) > k and scores[k - 1] == scores[k]
    top = scores[:k]
    within = len(top) > 1 and bool(np.any(top[1:] == top[:-1]))
    return bool(straddles), within


def count(runs, queries: set[str] | None, k: int) -> dict:
    out: dict = {"runs": len(runs), "depth": k}
    for precision in ("float32", "float64"):
        straddle_runs, within_runs, straddle_cells, within_cells, cells = set(), set(), 0, 0, 0
        for run in runs:
            cols = run.columns()
            for i, q in enumerate(cols.qids):
                if queries is not None and q not in queries:
                    continue
                s = cols.scores[cols.offsets[i]:cols.offsets[i + 1]]
                s = rank_scores(s) if precision == "float32" else s
                cells += 1
                straddles, within = tie_cells(s, k)
                if straddles:
                    straddle_runs.add(run.name)
                    straddle_cells += 1
                if within:
                    within_runs.add(run.name)
                    within_cells += 1
        out[precision] = {"runs_with_a_tie_straddling_the_cut": len(straddle_runs),
                          "runs_with_a_tie_within_the_top_k": len(within_runs),
                          "cells_straddling": straddle_cells, "cells_with_a_tie_within": within_cells,
                          "cells": cells, "straddling_runs": sorted(straddle_runs)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, default=DL19 / "runs")
    ap.add_argument("--qrels", type=Path, default=None)
    ap.add_argument("--depth", type=int, default=10)
    args = ap.parse_args(argv)
    runs = read_runs_dir(args.runs)
    queries = set(read_qrels(args.qrels)) if args.qrels else None
    json.dump(count(runs, queries, args.depth), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
