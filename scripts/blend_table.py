"""Measure every aggregator on real published LLM judgments against human labels.

    PYTHONPATH=src .venv/bin/python scripts/blend_table.py                      # LLMJudge dev, 3 prompts
    PYTHONPATH=src .venv/bin/python scripts/blend_table.py --collection trec-dl-2019 \\
        --judges fourprompts-flant5-large fourprompts-llama3-8b fourprompts-llama3-70b

Prints a Markdown table: each member alone, each blend, and learned blends (5-fold
cross-validation by query, held-out labels pooled). Kappa is Cohen's (scikit-learn,
unweighted, labels 0..3); alpha is Krippendorff's ordinal alpha (krippendorff, value domain
0..3) between the system and the human labels. All rows are scored on the same pairs: those
with a human label that every member judged (a blend labels every pair with a valid vote,
so no row gains from covering fewer pairs). Unreadable labels in the published files
(e.g. "1.") are counted as abstentions.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import krippendorff
import numpy as np

from judgeblender.blend import METHODS, TIE_RULES, blend, load_qrels_ballots
from judgeblender.blend.calibrate import LEARNERS, cross_validate, gold_vector
from judgeblender.kappa import cohen_kappa
from judgeblender.pairs.qrels import read_qrels

PROMPT_TRIO = ["sun-then-decomposed", "multicriteria-decomposed", "thomas-order3210"]


def alpha(gold: np.ndarray, pred: np.ndarray) -> float:
    return float(krippendorff.alpha(reliability_data=np.vstack([gold, pred]).astype(float),
                                     level_of_measurement="ordinal", value_domain=[0, 1, 2, 3]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/work/shared/data", help="the shared data folder")
    ap.add_argument("--collection", default="llmjudge-dev")
    ap.add_argument("--judges", nargs="+", default=PROMPT_TRIO, help="file stems under llm-labels/COLLECTION")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-glad", action="store_true", help="GLAD takes about half a minute per run")
    args = ap.parse_args()

    data = Path(args.data)
    paths = [data / "llm-labels" / args.collection / f"{j}.qrels" for j in args.judges]
    table = load_qrels_ballots(paths, invalid_labels="abstain")
    gold = read_qrels(data / args.collection / "qrels.txt", allowed=range(4))
    y = gold_vector(table, gold)
    rows = np.flatnonzero((y >= 0) & table.voted.all(axis=1))
    print(f"{args.collection}: {table.n_pairs} pairs judged by some member, {int((y >= 0).sum())} with a human label, "
          f"{len(rows)} scored (human label and every member's vote); abstentions {table.abstentions()}, "
          f"unreadable labels {dict(table.invalid)}", file=sys.stderr)

    out = ["| system | ties | kappa | alpha |", "|---|---|---|---|"]

    def row(name: str, labels, ties: str = "") -> None:
        pred = np.array([labels[i] for i in rows], dtype=int)
        out.append(f"| {name} | {ties} | {cohen_kappa(y[rows], pred):.4f} | {alpha(y[rows], pred):.4f} |")

    for j, judge in enumerate(table.judges):
        row(f"member: {judge}", table.labels[:, j].tolist())
    variants = [("mv", tie) for tie in TIE_RULES] + [("median", tie) for tie in ("min", "max", "avg")]
    variants += [(m, "avg") for m in METHODS if m not in ("mv", "median", "weighted")]
    for method, tie in variants:
        if method == "glad" and args.skip_glad:
            continue
        started = time.time()
        result = blend(table, method, tie=tie, seed=args.seed)
        name = f"{method} (tie {tie})" if METHODS[method].uses_tie else method
        row(name, result.labels, str(len(result.ties())) if METHODS[method].uses_tie else "")
        print(f"{name}: {time.time() - started:.1f}s", file=sys.stderr)
    for learner in LEARNERS:
        report = cross_validate(table, gold, learner, folds=5, seed=args.seed)
        index = {p: k for k, p in enumerate(report.pairs)}
        labels = [report.predictions[index[p]] if p in index else None for p in table.pairs]
        row(f"learned {learner} (5-fold CV by query)", labels)
        for line in report.lines():
            print(line, file=sys.stderr)
    print("\n".join(out))


if __name__ == "__main__":
    main()
