"""How long `judgeblender calibrate --select` takes with its default settings, on the path users
run (the CLI, one process per run), for issue 32's two sizes: the 7 published judges of
LLMJudge dev, and a seeded synthetic jury of 33 judges on about 3,500 pairs.

    PYTHONPATH=src python bench/selection_cli.py            # both, bench/results/selection_cli.json
    PYTHONPATH=src python bench/selection_cli.py --repeat 3

The synthetic jury is bench/selection.py's (`synthetic_jury`, seed 0, 48% of each query's
pairs), written as one qrels file per judge, so the command reads files as a user's would. The
default settings include the nested estimate (5 outer folds: the seed has 25 labelled queries):
since issue 37 it is the comparison that decides, each outer fold running one judge, the order
family and the rich family. Wall time of the command, from start to exit, and its CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from selection import DATA, collection, synthetic_jury  # noqa: E402  (bench/selection.py)

from judgeblender.blend.votes import ABSTAIN  # noqa: E402


def write_jury(table, folder: Path) -> list[Path]:
    """One qrels file per judge of the ballot table (abstentions left out)."""
    files = []
    for j, judge in enumerate(table.judges):
        lines = [f"{q} 0 {d} {int(v)}\n" for (q, d), v in zip(table.pairs, table.labels[:, j]) if v != ABSTAIN]
        path = folder / f"{judge}.qrels"
        path.write_text("".join(lines))
        files.append(path)
    return files


def timed(args: list[str], cwd: Path) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system, the command's process and its children: the fair
    figure on a shared machine) and the output of one run of the command."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "judgeblender", *args], cwd=cwd, env=env, capture_output=True,
                          text=True)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"calibrate failed ({done.returncode}):\n{done.stderr}")
    return seconds, cpu, done.stdout + done.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "selection_cli.json")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        dev_files = sorted((args.data / "llm-labels" / "llmjudge-dev").glob("*.qrels"))
        gold = args.data / "llmjudge-dev" / "qrels.txt"
        table, gold_qrels = collection("llmjudge-dev", args.data)
        synthetic, _ = synthetic_jury(table, gold_qrels, 33, 0.48, seed=0)
        (tmp / "synthetic").mkdir()
        synthetic_files = write_jury(synthetic, tmp / "synthetic")
        cases = {
            "llmjudge-dev, 7 published judges": (dev_files, table.n_pairs),
            "synthetic, 33 judges": (synthetic_files, synthetic.n_pairs),
        }
        for name, (files, n_pairs) in cases.items():
            command = ["calibrate", "--select", "--gold", str(gold), "--invalid-labels", "abstain",
                       *(a for f in files for a in ("--labels", str(f))), "-o", str(tmp / "panel.toml")]
            runs, cpus = [], []
            for _ in range(args.repeat):
                seconds, cpu, output = timed(command, tmp)
                runs.append(round(seconds, 1))
                cpus.append(round(cpu, 1))
                print(f"{name}: {seconds:.1f} s ({cpu:.1f} CPU-s)", file=sys.stderr, flush=True)
            lines = output.splitlines()
            at = next((i for i, line in enumerate(lines) if line.startswith(("Nested estimate", "Decision"))),
                      len(lines))
            nested = [line.rstrip() for line in lines[at:at + 12] if line.strip()]
            results[name] = {"judges": len(files), "pairs_in_label_files": n_pairs, "seconds": runs,
                             "cpu_seconds": cpus, "nested_lines": nested,
                             "command": "judgeblender calibrate --select --gold GOLD --invalid-labels abstain "
                                        "--labels FILE ... -o panel.toml"}
    results["machine"] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    results["how"] = "PYTHONPATH=src python bench/selection_cli.py" + (f" --repeat {args.repeat}"
                                                                      if args.repeat > 1 else "")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
