"""Issue 40 part 2: this checkout against another (110be00 by default), side by side in one run.

    PYTHONPATH=src python bench/store_cost.py --out bench/results/store_cost.json
    PYTHONPATH=src python bench/store_cost.py --base /work/base --pairs 100000 --repeats 3 \\
        --ray-calls 20000 --ray-repeats 2 --memory-repeats 2
    PYTHONPATH=src python bench/store_cost.py markdown bench/results/store_cost.json   # docs' table

Without --base, the base commit (--base-commit) is checked out into a temporary worktree
(`git worktree add --detach`), removed at the end. Every measured process runs one tree's src
(PYTHONPATH), with bytecode cached as an installed package has it (one untimed run of each tree
first fills the caches); the trees alternate run by run (base, head, base, head, ...), so a
change in the machine's load falls on both. Three figures, each a ratio head / base of medians:

- cli: CPU (user + system) a pair of `judgeblender judge` on the S workload, exactly the user's
  command of bench/cli_speed.py (`cli_run`: an instant scripted judge, a store, qrels and details
  written), --pairs pairs. After every run the qrels, the details file and `judgeblender store
  export` of the run's store (made by the same tree) are hashed; the export with each call's
  creation time masked (the only thing two runs may write differently) and its lines sorted
  (two runs may commit their calls in other groups, so calls of equal time sort by key in
  another order). Byte equality of the three between the trees, over every run, is recorded.
- ray: the Ray driver's CPU (its process's user + system, Ray's threads included) a call, with
  a store: bench/driver.py's ray_cpu case (2 workers x 64 in flight, tests/openai_server.py
  answering at once), --ray-calls calls, in a Ray runtime started for each run by a process
  running that tree, so the workers import the same tree as the driver.
- memory: the driver's peak RSS growth a pair from 10^4 to 10^5 pairs (bench/stream.py memory:
  judge_stream into RunFiles with a store, the S workload), an absolute figure for each tree.

The load average before each run is recorded with it: on the shared 2-core machine the wall
times mean little, the CPU times hold better, and a loaded machine still inflates them both.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
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

from cli_speed import child_env, cli_run, s_workload  # noqa: E402

BASE_COMMIT = "110be00"
CREATED = re.compile(rb'"created_at":"[^"]*"')


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def outputs(folder: Path, env: dict[str, str]) -> dict[str, str]:
    """The hashes of a run's qrels, details and store export (creation times masked, lines sorted)."""
    export = folder / "export.jsonl"
    proc = subprocess.run([sys.executable, "-m", "judgeblender", "store", "export", "--store",
                           str(folder / "calls.sqlite"), "--out", str(export)],
                          capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"store export: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    with open(export, "rb") as fh:  # a digest a line, sorted: this process stays small (see memory_part)
        lines = sorted(hashlib.sha256(CREATED.sub(b'"created_at":"*"', line)).digest() for line in fh)
    export.unlink()
    return {"qrels": file_digest(folder / "out.qrels"), "details": file_digest(folder / "out.qrels.details.jsonl"),
            "export": digest(b"".join(lines))}


def file_digest(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def cli_part(trees: dict[str, dict[str, str]], n: int, repeats: int) -> dict[str, Any]:
    # one folder for both trees: the judge's id holds the model file's path, so it is the same
    folder = Path(tempfile.mkdtemp(prefix="jb-store-cost-"))
    try:
        s_workload(folder, n)
        runs = []
        for _ in range(repeats):
            for name, env in trees.items():
                row = cli_run(folder, n, 10_000, env)  # a fresh store and fresh outputs
                row.update(tree=name, cpu_ms_per_pair=row["cpu_s"] / n * 1000, outputs=outputs(folder, env))
                runs.append(row)
                print(f"cli {name:>4}: {row['cpu_ms_per_pair']:.4f} CPU ms a pair, {row['wall_s']:.1f} s wall "
                      f"(load {row['load']:.2f})", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    med = {name: statistics.median(r["cpu_ms_per_pair"] for r in runs if r["tree"] == name) for name in trees}
    hashes = {kind: {r["outputs"][kind] for r in runs} for kind in ("qrels", "details", "export")}
    return {"pairs": n, "runs": runs, "median_cpu_ms_per_pair": med, "ratio": med["head"] / med["base"],
            "couple_ratios": [b["cpu_ms_per_pair"] / a["cpu_ms_per_pair"] for a, b in zip(runs[::2], runs[1::2])],
            "same_bytes": {kind: len(found) == 1 for kind, found in hashes.items()}}


def ray_part(trees: dict[str, dict[str, str]], calls: int, repeats: int) -> dict[str, Any]:
    runs = []
    for _ in range(repeats):
        for name, env in trees.items():
            load = os.getloadavg()[0]
            proc = subprocess.run([sys.executable, __file__, "ray-run", str(calls)], capture_output=True, text=True,
                                  env=env, timeout=3600)
            if proc.returncode != 0:
                raise RuntimeError(f"ray run ({name}): exit {proc.returncode}\n{proc.stderr[-3000:]}")
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            row.update(tree=name, load=load)
            runs.append(row)
            print(f"ray {name:>4}: {row['driver_cpu_ms_per_call']:.4f} driver CPU ms a call (load {load:.2f})",
                  flush=True)
    med = {name: statistics.median(r["driver_cpu_ms_per_call"] for r in runs if r["tree"] == name) for name in trees}
    return {"calls": calls, "runs": runs, "median_driver_cpu_ms_per_call": med, "ratio": med["head"] / med["base"]}


def ray_run(calls: int) -> None:
    """In a process running one tree (PYTHONPATH): its own Ray runtime, the ray_cpu case with a store."""
    import driver

    (row,) = driver.ray_cpu_part(calls, concurrency=64, workers=2, store_only=True)
    print(json.dumps(row))


def memory_part(trees: dict[str, dict[str, str]], repeats: int) -> dict[str, Any]:
    """Each measurement from a fresh, small process (`memory-run`) running the tree: Linux gives
    a process started from a large one that one's resident size as its first peak (ru_maxrss is
    kept across exec), so the cases are never started from this process."""
    runs = []
    for _ in range(repeats):
        for name, env in trees.items():
            proc = subprocess.run([sys.executable, __file__, "memory-run"], capture_output=True, text=True, env=env,
                                  timeout=3600)
            if proc.returncode != 0:
                raise RuntimeError(f"memory run ({name}): exit {proc.returncode}\n{proc.stderr[-3000:]}")
            found = json.loads(proc.stdout.strip().splitlines()[-1])
            slope = found["peak_kb_per_pair"]["10000-100000"]
            runs.append({"tree": name, "peak_kb_per_pair": slope,
                         "peak_rss_mb": {r["pairs"]: r["peak_rss_mb"] for r in found["rows"]},
                         "load": [r["load_before"][0] for r in found["rows"]]})
            print(f"memory {name:>4}: {slope:.3f} KB a pair from 10^4 to 10^5", flush=True)
    med = {name: statistics.median(r["peak_kb_per_pair"] for r in runs if r["tree"] == name) for name in trees}
    return {"runs": runs, "median_peak_kb_per_pair": med}


def memory_run() -> None:
    """In a small process running one tree (PYTHONPATH, inherited by bench/stream.py's cases)."""
    import stream

    print(json.dumps(stream.memory_part(100_000, 10_000, sizes=[10_000, 100_000], store=True)))


def markdown(res: dict[str, Any]) -> str:
    """docs/benchmarks.md's table of a run (tests/test_docs_store_cost.py checks it is this)."""
    rows = ["| figure | base | head | head / base | target | met |", "|---|---:|---:|---:|---|---|"]
    notes: list[str] = []
    if "cli" in res:
        cli = res["cli"]
        med, same = cli["median_cpu_ms_per_pair"], cli["same_bytes"]
        couples = ", ".join(f"{r:.3f}" for r in cli["couple_ratios"])
        rows.append(f"| `judgeblender judge`, CPU ms a pair ({cli['pairs']:,} pairs, median of "
                    f"{len(cli['runs']) // 2}; couples {couples}) | {med['base']:.4f} | {med['head']:.4f} | "
                    f"**{cli['ratio']:.3f}** | at most 0.67 | {'yes' if cli['ratio'] <= 0.67 else 'no'} |")
        rows.append(f"| same bytes: qrels, details, export (creation times masked) | | | "
                    f"{', '.join('yes' if same[k] else 'NO' for k in ('qrels', 'details', 'export'))} | all | "
                    f"{'yes' if all(same.values()) else 'no'} |")
    if "ray" in res:
        ray = res["ray"]
        med = ray["median_driver_cpu_ms_per_call"]
        rows.append(f"| Ray driver CPU ms a call, with store ({ray['calls']:,} calls, median of "
                    f"{len(ray['runs']) // 2}) | {med['base']:.4f} | {med['head']:.4f} | **{ray['ratio']:.3f}** | "
                    f"at most 0.8 | {'yes' if ray['ratio'] <= 0.8 else 'no'} |")
        if "commits" in ray:  # run on its own (--parts ray), after the rest
            loads = [r["load"] for r in ray["runs"]]
            notes.append(f"Ray runs on their own: load average (1 min) before them {min(loads):.2f}-{max(loads):.2f}; "
                         f"started {ray['started']}, base {ray['commits']['base'][:7]}, head {ray['commits']['head'][:7]}.")
    if "memory" in res:
        med = res["memory"]["median_peak_kb_per_pair"]
        rows.append(f"| driver peak RSS growth, KB a pair from 10^4 to 10^5 pairs (median of "
                    f"{len(res['memory']['runs']) // 2}) | {med['base']:.3f} | **{med['head']:.3f}** | "
                    f"{med['head'] / med['base']:.3f} | head at most 0.3 | {'yes' if med['head'] <= 0.3 else 'no'} |")
    loads = [r["load"] for r in res.get("cli", {}).get("runs", [])]
    if loads:
        rows.append("")
        rows.append(f"Load average (1 min) before the cli runs: {min(loads):.2f}-{max(loads):.2f}; "
                    f"started {res['started']}, base {res['commits']['base'][:7]}, head {res['commits']['head'][:7]}.")
    if notes:
        rows += ["", *notes]
    return "\n".join(rows) + "\n"


def base_tree(commit: str) -> tuple[Path, Path]:
    """A detached worktree of `commit` in a temporary folder: (its root, the folder to remove)."""
    tmp = Path(tempfile.mkdtemp(prefix="jb-base-"))
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tmp / "base"), commit], check=True,
                   capture_output=True)
    return tmp / "base", tmp


def main() -> None:
    if sys.argv[1:2] == ["ray-run"]:
        ray_run(int(sys.argv[2]))
        return
    if sys.argv[1:2] == ["memory-run"]:
        memory_run()
        return
    if sys.argv[1:2] == ["markdown"]:  # the table of a results file: `markdown [FILE]`
        path = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "bench" / "results" / "store_cost.json"
        print(markdown(json.loads(path.read_text())), end="")
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", type=Path, default=None, help="a checkout of the base (default: --base-commit, "
                    "checked out into a temporary worktree)")
    ap.add_argument("--base-commit", default=BASE_COMMIT)
    ap.add_argument("--head", type=Path, default=ROOT, help="the checkout measured against the base")
    ap.add_argument("--pairs", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3, help="cli runs of each tree")
    ap.add_argument("--ray-calls", type=int, default=20_000)
    ap.add_argument("--ray-repeats", type=int, default=2)
    ap.add_argument("--memory-repeats", type=int, default=2)
    ap.add_argument("--parts", nargs="+", default=["cli", "ray", "memory"], choices=["cli", "ray", "memory"])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "store_cost.json")
    ap.add_argument("--update", action="store_true", help="replace only the parts run in the existing --out file, "
                    "each with its own command, start time, commits and loads (the rest of the file is kept)")
    args = ap.parse_args()
    made = None
    base = args.base
    if base is None:
        base, made = base_tree(args.base_commit)
    cache = Path(tempfile.mkdtemp(prefix="jb-pycache-"))
    try:
        trees = {"base": child_env(base / "src", cache), "head": child_env(args.head / "src", cache)}
        commits = {name: subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True,
                                        text=True).stdout.strip() for name, path in (("base", base), ("head", args.head))}
        res: dict[str, Any] = {"command": " ".join(["python", "bench/store_cost.py", *sys.argv[1:]]),
                               "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cpus": os.cpu_count(),
                               "python": sys.version.split()[0], "commits": commits,
                               "head_changes": subprocess.run(["git", "-C", str(args.head), "status", "--short"],
                                                              capture_output=True, text=True).stdout.splitlines(),
                               "load_before": os.getloadavg()}
        warm = Path(tempfile.mkdtemp(prefix="jb-store-cost-warm-"))
        try:  # one untimed run of each tree: its bytecode cached
            s_workload(warm, 10)
            for env in trees.values():
                cli_run(warm, 10, 10_000, env)
        finally:
            shutil.rmtree(warm, ignore_errors=True)
        if "cli" in args.parts:
            res["cli"] = cli_part(trees, args.pairs, args.repeats)
            print(f"cli: head/base {res['cli']['ratio']:.3f}; same bytes {res['cli']['same_bytes']}", flush=True)
        if "ray" in args.parts:
            res["ray"] = ray_part(trees, args.ray_calls, args.ray_repeats)
            print(f"ray: head/base {res['ray']['ratio']:.3f}", flush=True)
        if "memory" in args.parts:
            res["memory"] = memory_part(trees, args.memory_repeats)
            print(f"memory: {res['memory']['median_peak_kb_per_pair']}", flush=True)
        res["load_after"] = os.getloadavg()
        if args.update:  # the parts run, each carrying what says how and when, into the file as it is
            run = {k: res[k] for k in ("command", "started", "commits", "head_changes", "load_before", "load_after")}
            res = {**json.loads(args.out.read_text()), **{p: {**res[p], **run} for p in args.parts}}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=1) + "\n")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        if made is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], capture_output=True)
            shutil.rmtree(made, ignore_errors=True)


if __name__ == "__main__":
    main()
