"""How many standard errors a procedure must beat the baseline by (DECISION_Z), measured on the
small-seed draws of bench/selection_dev.py (issue 37): for each draw, the default's comparison is
run once (each procedure's gain over the baseline and its standard error), and each procedure's
panel chosen on the whole seed labels the remaining queries; then the default's choice at each z
is read off, so every z is scored on the same draws and the same panels.

    PYTHONPATH=src python bench/selection_z.py --jobs 2      # bench/results/selection_z.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from selection import DATA, collection  # noqa: E402
from selection_dev import COLLECTIONS, SIZES, kappa_on, split  # noqa: E402

from judgeblender.blend.select import (  # noqa: E402
    EXHAUSTIVE_MAX, PROCEDURES, apply_choice, fit_choice, gold_array, select, procedure_settings)

ZS = (0.0, 0.5, 1.0, 1.645, 2.0)
_WORK: dict = {}


def one(job):
    name, d, seed_q = job
    table, gold = _WORK[name]
    train, train_gold, test, test_gold = split(table, gold, set(seed_q))
    y = gold_array(test, test_gold)
    sel = select(train, train_gold, seed=d)
    decision = sel.decision
    settings = procedure_settings(train.judges, "paired-bound", EXHAUSTIVE_MAX)
    kappas = {}
    for p in PROCEDURES:
        chosen = select(train, train_gold, seed=d, **settings[p]).chosen
        kappas[p] = kappa_on(y, apply_choice(fit_choice(chosen, train, train_gold, d), test, d))
    seed_best = kappas["single"]
    return {"baseline": decision.baseline, "gains": {p: list(g) for p, g in decision.gains.items()},
            "kappas": kappas, "seed_best": seed_best}


def chosen_at(row: dict, z: float) -> str:
    bounds = {row["baseline"]: 0.0, **{p: g - z * sd for p, (g, sd) in row["gains"].items()}}
    top = max(bounds.values())
    return row["baseline"] if top <= 1e-12 else next(p for p in PROCEDURES if bounds[p] >= top - 1e-12)


def markdown(results: dict) -> str:
    """The docs table: the default's mean held-out kappa at each z, per collection and seed size."""
    lines = ["| collection / seed | " + " | ".join(f"z = {z:g}" for z in ZS) + " | best seed judge |",
             "|---|" + "---:|" * (len(ZS) + 1)]
    for key, cell in results.items():
        lines.append(f"| {key} | " + " | ".join(f"{cell[f'z={z:g}']['mean_kappa']:.4f}" for z in ZS)
                     + f" | {cell['best seed judge']:.4f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "selection_z.json")
    ap.add_argument("--markdown", action="store_true", help="print the docs table from --out and stop")
    args = ap.parse_args()
    if args.markdown:
        print(markdown(json.loads(args.out.read_text())))
        return
    out = {}
    for name in COLLECTIONS:
        table, gold = collection(name, DATA)
        _WORK[name] = (table, gold)
        y = gold_array(table, gold)
        queries = sorted({q for (q, _), g in zip(table.pairs, y) if g >= 0})
        for size in SIZES:
            rng = np.random.default_rng(1000 + size)  # bench/selection_dev.py's draws
            work = [(name, d, sorted(rng.choice(queries, size=size, replace=False).tolist()))
                    for d in range(args.draws)]
            started = time.perf_counter()
            with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
                rows = pool.map(one, work, chunksize=1)
            cell = {"draws": len(rows)}
            for z in ZS:
                picks = [chosen_at(r, z) for r in rows]
                k = np.array([r["kappas"][p] for r, p in zip(rows, picks)])
                cell[f"z={z:g}"] = {"mean_kappa": round(float(k.mean()), 4),
                                    "seats_more_than_one_procedure_share": round(float(np.mean(
                                        [p != "single" for p in picks])), 3)}
            cell["best seed judge"] = round(float(np.mean([r["seed_best"] for r in rows])), 4)
            cell["rows"] = rows
            out[f"{name} / {size} queries"] = cell
            print(f"{name} / {size}: {time.perf_counter() - started:.0f} s  " + "  ".join(
                f"z={z:g} {cell[f'z={z:g}']['mean_kappa']:.4f}" for z in ZS) + f"  seed-best {cell['best seed judge']:.4f}",
                file=sys.stderr, flush=True)
            args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
