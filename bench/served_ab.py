"""The served path before and after a change, run alternately (issue 23, part 4).

bench/driver.py's `served` part compares the engine with the openai SDK alone; this compares two
source trees of judgeblender on the same cases, in the same alternation, so a change's effect is
read from runs that met the same load. Each run is its own process (benchmark.py's served or
served_sdk case: DL19 pairs, logprobs mode, the server answering after 200 ms, concurrency 64, a
warm-up pass and one measured pass) and reports, besides pairs/s:

- loop CPU per call: time.thread_time() of the thread running the event loop (the engine's and
  the SDK's work alike run there; it is what the loop has left for the next answer);
- process CPU per call: time.process_time(), every thread;
- the garbage collector's passes and their time in the measured pass, per generation.

    git archive 5bce8aa src | tar -x -C /tmp/base          # the "before" sources
    PYTHONPATH=src python bench/served_ab.py --base-src /tmp/base/src --repeats 5 \\
        --out bench/results/served_ab.json sdk store base:store no_store base:no_store

A variant is `sdk`, `store` or `no_store`, prefixed `base:` to run it on --base-src.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import gc, json, sys, time
sys.path.insert(0, sys.argv[1])
import benchmark
kind, n = sys.argv[2], int(sys.argv[3])
marks, passes, started, measured = [], {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}, [0.0], {}
def collected(phase, info):
    if phase == "start":
        started[0] = time.perf_counter()
    else:
        passes[info["generation"]][0] += 1
        passes[info["generation"]][1] += time.perf_counter() - started[0]
gc.callbacks.append(collected)
class Clock:  # the case times its pass with time.process_time(): read the loop thread's instead
    def __getattr__(self, name):
        return getattr(time, name)
    def process_time(self):  # called at the start and at the end of each pass
        if len(marks) % 2 == 0:
            for p in passes.values():
                p[:] = [0, 0.0]
        else:
            measured.update({g: [c, round(t * 1000, 1)] for g, (c, t) in passes.items()})
        marks.append(time.process_time())
        return time.thread_time()
benchmark.time = Clock()
spec = {"kind": "served_sdk" if kind == "sdk" else "served", "store": kind == "store", "concurrency": 64,
        "pairs": n, "repeats": 1}
r = (benchmark.served_sdk_case if kind == "sdk" else benchmark.served_case)(spec)
print(json.dumps({"pairs_per_s": r["pairs_per_s"], "loop_cpu_ms_per_call": r["client_cpu_ms_per_call"],
                  "process_cpu_ms_per_call": (marks[-1] - marks[-2]) / n * 1000,
                  "gc_passes_measured": measured}))
"""


def run(variant: str, calls: int, base_src: Path | None) -> dict:
    base, _, kind = variant.rpartition(":")
    src = base_src if base else ROOT / "src"
    if src is None:
        raise SystemExit(f"error: {variant} needs --base-src")
    env = dict(os.environ, PYTHONPATH=str(src))
    load = os.getloadavg()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ROOT / "bench"), kind, str(calls)], capture_output=True,
                          text=True, env=env, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{variant}: {(proc.stderr.strip().splitlines() or ['failed'])[-1]}")
    return {**json.loads(lines[-1]), "load_before": load, "load_after": os.getloadavg()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--base-src", type=Path)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "served_ab.json")
    args = ap.parse_args()
    runs: dict[str, list[dict]] = {v: [] for v in args.variants}
    for rep in range(args.repeats):
        for v in args.variants:
            r = run(v, args.calls, args.base_src)
            runs[v].append(r)
            print(f"{rep} {v:14s} {r['pairs_per_s']:6.1f}/s  loop CPU {r['loop_cpu_ms_per_call']:.3f} ms  "
                  f"process CPU {r['process_cpu_ms_per_call']:.3f} ms  gc {r['gc_passes_measured']}  "
                  f"load {r['load_before'][0]:.1f}", flush=True)
    med, first = statistics.median, args.variants[0]
    summary = {v: {"pairs_per_s": med(r["pairs_per_s"] for r in rows),
                   f"of_{first}": med(a["pairs_per_s"] / b["pairs_per_s"] for a, b in zip(rows, runs[first])),
                   "loop_cpu_ms_per_call": med(r["loop_cpu_ms_per_call"] for r in rows),
                   "process_cpu_ms_per_call": med(r["process_cpu_ms_per_call"] for r in rows),
                   "gc_full_passes": med(r["gc_passes_measured"]["2"][0] for r in rows),
                   "gc_ms": med(sum(t for _, t in r["gc_passes_measured"].values()) for r in rows)}
               for v, rows in runs.items()}
    for v, s in summary.items():
        print(f"{v:14s} " + "  ".join(f"{k} {x:.3f}" for k, x in s.items()))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"command": " ".join(sys.argv), "calls": args.calls, "repeats": args.repeats,
                                    "base_src": str(args.base_src), "median": summary, "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
