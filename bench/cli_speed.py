"""The user's path against the engine alone: `judgeblender judge` with an instant scripted judge.

    PYTHONPATH=src python bench/cli_speed.py --pairs 10000 100000 --repeats 3 --out bench/results/cli_speed.json

For each size, bench/stream.py's inputs are written once (10 pairs a query, one distinct 60-word
passage a pair), then two fresh processes run in turn, --repeats times (A B A B ...), each with a
fresh store and fresh outputs:

  engine  `bench/stream.py case` (what `bench/stream.py memory` runs): PairsFile, open_corpus,
          check_stream, judge_stream into RunFiles, with a store, the instant judge of
          bench/driver.py;
  cli     exactly the user's command, `python -m judgeblender judge -q Q -c C -p P -o OUT
          -j scripted:MODEL --store S`, the model file `{"default": "##final score: 2",
          "record": false}`, stderr a pipe (no terminal: the bar is printed once at the end), with
          qrels and details (OUT.details.jsonl) written.

Recorded per run: the process's wall time and CPU time (user + system, its own and its
children's), pairs a second by each, and the load average; per size, the medians and the
ratios cli/engine of the medians (the target: at least 0.9, and at least 4,500 pairs/s, on a
quiet 2-core machine), and the ratio of each A B couple. Both processes pay an interpreter's
start and their imports; the engine process also reports its judging phase on its own (the
figure `bench/stream.py memory` prints). On a loaded machine the CPU figures hold better than
the wall ones: they do not count the time spent waiting for a core.

Both processes run with compiled bytecode, as an installed package has it: PYTHONDONTWRITEBYTECODE
is dropped for them and their caches go to a folder of their own (PYTHONPYCACHEPREFIX), filled by
one untimed run of each first. Without it (--no-bytecode-cache) every process compiles every
module it imports from source, which costs the CLI, importing more, a few tenths of a second more.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from stream import ANSWER, write_inputs  # noqa: E402

OUTPUTS = ("calls.sqlite", "calls.sqlite-wal", "calls.sqlite-shm", "out.qrels", "out.qrels.details.jsonl")


def s_workload(folder: Path, n: int) -> None:
    """The S workload's files in `folder`: bench/stream.py's inputs for n pairs, and the instant
    scripted model's file that `cli_run` judges them with."""
    write_inputs(folder, n)
    (folder / "model.json").write_text(json.dumps({"default": ANSWER, "record": False}))


def child_env(src: Path, bytecode_cache: Path | None) -> dict[str, str]:
    """The environment a measured process runs in: `src`'s judgeblender, no terminal width, and
    its bytecode cached under `bytecode_cache` (None: compiled from source in every process)."""
    env = {**os.environ, "PYTHONPATH": str(src.resolve())}
    env.pop("COLUMNS", None)
    if bytecode_cache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(bytecode_cache)
    return env


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def clean(folder: Path) -> None:
    """A fresh store and fresh outputs: every run makes all its calls."""
    for name in OUTPUTS:
        (folder / name).unlink(missing_ok=True)


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess, float]:
    load = os.getloadavg()[0]
    c0, t0 = child_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=6 * 3600)
    wall, cpu = time.perf_counter() - t0, child_cpu() - c0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return wall, cpu, proc, load


def engine_run(folder: Path, n: int, window: int, env: dict[str, str]) -> dict[str, Any]:
    clean(folder)
    spec = {"kind": "stream", "pairs": n, "window": window, "folder": str(folder), "store": True}
    wall, cpu, proc, load = timed([sys.executable, str(ROOT / "bench" / "stream.py"), "case", json.dumps(spec)], env)
    inner = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"case": "engine", "pairs": n, "wall_s": wall, "cpu_s": cpu, "pairs_per_s": n / wall,
            "pairs_per_cpu_s": n / cpu, "judging_pairs_per_s": inner["pairs_per_s"],
            "judging_cpu_ms_per_pair": inner["cpu_ms_per_pair"], "load": load}


def cli_run(folder: Path, n: int, window: int, env: dict[str, str]) -> dict[str, Any]:
    clean(folder)
    cmd = [sys.executable, "-m", "judgeblender", "judge", "-q", str(folder / "queries.tsv"),
           "-c", str(folder / "corpus.jsonl"), "-p", str(folder / "pairs.tsv"), "-o", str(folder / "out.qrels"),
           "-j", f"scripted:{folder / 'model.json'}", "--store", str(folder / "calls.sqlite")]
    if window != 10_000:
        cmd += ["--window", str(window)]
    wall, cpu, proc, load = timed(cmd, env)
    lines = sum(1 for _ in open(folder / "out.qrels"))
    details = sum(1 for _ in open(folder / "out.qrels.details.jsonl"))
    if lines != n or details != n:
        raise RuntimeError(f"cli: {lines} qrels lines and {details} details lines for {n} pairs")
    return {"case": "cli", "pairs": n, "wall_s": wall, "cpu_s": cpu, "pairs_per_s": n / wall,
            "pairs_per_cpu_s": n / cpu, "load": load}


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    med = {case: {k: statistics.median(r[k] for r in rows if r["case"] == case)
                  for k in ("wall_s", "cpu_s", "pairs_per_s", "pairs_per_cpu_s")} for case in ("engine", "cli")}
    med["engine"]["judging_pairs_per_s"] = statistics.median(r["judging_pairs_per_s"] for r in rows
                                                             if r["case"] == "engine")
    couples = [(a, b) for a, b in zip(rows[::2], rows[1::2])]
    return {"median": med,
            "ratio_wall": med["cli"]["pairs_per_s"] / med["engine"]["pairs_per_s"],
            "ratio_cpu": med["cli"]["pairs_per_cpu_s"] / med["engine"]["pairs_per_cpu_s"],
            "couple_ratios_wall": [b["pairs_per_s"] / a["pairs_per_s"] for a, b in couples],
            "couple_ratios_cpu": [b["pairs_per_cpu_s"] / a["pairs_per_cpu_s"] for a, b in couples],
            "load": [r["load"] for r in rows]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--window", type=int, default=10_000)
    ap.add_argument("--src", type=Path, default=ROOT / "src",
                    help="the judgeblender source both processes run (another checkout's src: its figures)")
    ap.add_argument("--no-bytecode-cache", action="store_true",
                    help="compile every module from source in every process (PYTHONDONTWRITEBYTECODE=1)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="jb-pycache-"))
    env = child_env(args.src, None if args.no_bytecode_cache else cache)
    res: dict[str, Any] = {"command": " ".join(["python", "bench/cli_speed.py", *sys.argv[1:]]),
                           "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cpus": os.cpu_count(),
                           "python": sys.version.split()[0], "src": str(args.src.resolve()),
                           "bytecode_cache": not args.no_bytecode_cache, "load_before": os.getloadavg(), "sizes": {}}
    warm = Path(tempfile.mkdtemp(prefix="jb-cli-speed-warm-"))
    try:  # one untimed run of each: the bytecode caches filled
        s_workload(warm, 10)
        engine_run(warm, 10, args.window, env)
        cli_run(warm, 10, args.window, env)
    finally:
        shutil.rmtree(warm, ignore_errors=True)
    for n in args.pairs:
        folder = Path(tempfile.mkdtemp(prefix="jb-cli-speed-"))
        try:
            s_workload(folder, n)
            rows = []
            for _ in range(args.repeats):
                for run in (engine_run, cli_run):
                    rows.append(run(folder, n, args.window, env))
                    r = rows[-1]
                    print(f"{n:>7} {r['case']:>6}: {r['pairs_per_s']:7.0f} pairs/s wall, {r['pairs_per_cpu_s']:7.0f} "
                          f"pairs/CPU-s (load {r['load']:.2f})", flush=True)
            res["sizes"][str(n)] = {"runs": rows, **summary(rows)}
            s = res["sizes"][str(n)]
            print(f"{n:>7} cli/engine: {s['ratio_wall']:.3f} wall, {s['ratio_cpu']:.3f} CPU; cli median "
                  f"{s['median']['cli']['pairs_per_s']:.0f} pairs/s", flush=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    res["load_after"] = os.getloadavg()
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
