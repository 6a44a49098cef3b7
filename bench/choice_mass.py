"""How much of the next-token probability mass falls on the label tokens, on real pairs.

    PYTHONPATH=src .venv/bin/python bench/choice_mass.py [--pairs 100] [--models llamacpp:default,llamacpp:gemma-270m]

In logprobs mode the judge reads the probability of each label token ("0".."3") after the
answer prefix; `choice_mass` is their share of the model's whole next-token distribution. A
model that wants to say something else ("Sorry", "The") puts little mass there, and the
argmax over the label tokens is then noise. This script measures the mass on real TREC DL 2019
pairs so that the default of `--min-choice-mass` can be chosen from it.

Pairs: `--pairs` drawn with `--seed` from the DL19 qrels, the same number per NIST label.
Each model judges them with the project's own command (`judgeblender judge --mode logprobs
--prompt PROMPT --min-choice-mass 0 --store ...`), so no answer is rejected here; the mass of
every first-attempt step is read from the details file. Output: quantiles per model and prompt,
and the share of answers under a few thresholds, in bench/results/choice_mass.json.
Calls are kept in a store (--store), so a re-run is free.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DATA = Path("/work/shared/data/trec-dl-2019")
QUANTILES = (0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
THRESHOLDS = (0.01, 0.05, 0.1, 0.2, 0.3, 0.5)


def sample_pairs(n: int, seed: int) -> list[tuple[str, str, int]]:
    by_label: dict[int, list[tuple[str, str, int]]] = {}
    for line in (DATA / "qrels.txt").read_text().splitlines():
        qid, _, docid, label = line.split()
        by_label.setdefault(int(label), []).append((qid, docid, int(label)))
    rng = random.Random(seed)
    per = n // len(by_label)
    out = []
    for label in sorted(by_label):
        out += rng.sample(by_label[label], min(per, len(by_label[label])))
    return out


def quantile(values: list[float], q: float) -> float:
    xs = sorted(values)
    if not xs:
        return float("nan")
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def masses(details: Path) -> list[float]:
    out = []
    for line in details.read_text().splitlines():
        rec = json.loads(line)
        for judgment in rec.get("judges", {}).values():
            for step in judgment["steps"]:
                if step["attempt"] == 0 and step.get("choice_mass") is not None:
                    out.append(float(step["choice_mass"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--models", default="llamacpp:default,llamacpp:gemma-270m")
    ap.add_argument("--prompts", default="umbrela")
    ap.add_argument("--store", type=Path, default=Path("bench/out/choice_mass.sqlite"))
    ap.add_argument("--out", type=Path, default=Path("bench/results/choice_mass.json"))
    ap.add_argument("--extra", default="", help="extra judge options, e.g. '--base-url URL' for a served model")
    args = ap.parse_args()
    args.store.parent.mkdir(parents=True, exist_ok=True)
    pairs = sample_pairs(args.pairs, args.seed)
    report: dict = {"pairs": len(pairs), "seed": args.seed, "data": str(DATA), "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        pairs_file = Path(tmp) / "pairs.qrels"
        pairs_file.write_text("".join(f"{q} 0 {d} {lab}\n" for q, d, lab in pairs))
        for model in args.models.split(","):
            for prompt in args.prompts.split(","):
                out = Path(tmp) / "out.qrels"
                details = Path(tmp) / "details.jsonl"
                cmd = [sys.executable, "-m", "judgeblender", "judge", "-q", str(DATA / "queries.tsv"),
                       "-c", str(DATA / "passages.jsonl"), "-p", str(pairs_file), "-o", str(out),
                       "--details", str(details), "-j", model, "--prompt", prompt, "--mode", "logprobs",
                       "--min-choice-mass", "0", "--store", str(args.store), "--no-progress",
                       *args.extra.split()]
                print(" ".join(cmd), file=sys.stderr, flush=True)
                proc = subprocess.run(cmd, env=os.environ.copy())
                if proc.returncode not in (0, 3):
                    sys.exit(f"judge exited {proc.returncode}")
                xs = masses(details)
                row = {
                    "answers": len(xs),
                    "quantiles": {f"q{int(q * 100):02d}": round(quantile(xs, q), 4) for q in QUANTILES},
                    "mean": round(statistics.fmean(xs), 4) if xs else None,
                    "share_below": {str(t): round(sum(x < t for x in xs) / len(xs), 4) for t in THRESHOLDS},
                }
                report["models"][f"{model} / {prompt}"] = row
                print(json.dumps({f"{model} / {prompt}": row}), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
