"""The driver's own costs (issue 23: one driver for ten million pairs), measured before and after
the engine is restructured, so the restructure is judged against figures taken the same way.

    PYTHONPATH=src python bench/driver.py all --out bench/results/driver.json
    PYTHONPATH=src python bench/driver.py all --max-pairs 10000000 --ray-calls 20000 --served-calls 2000 \\
        --served-repeats 5                                   # the full figures, on a quiet machine

Parts (every case in its own subprocess, so its peak RSS is its own; the load average before and
after each case is recorded next to it):
- memory: the driver's peak RSS judging n synthetic pairs (60-word passages, one distinct passage
  per pair, so the corpus grows with the job as a real one does) through `judge_pairs` with a
  store, answered by the `scripted:` backend at once ("##final score: 2"), for n = 10^3 ... 
  --max-pairs; with the breakdown the issue names: the inputs (queries, corpus dict, pairs) by
  RSS and the corpus dict alone by sys.getsizeof, the de-duplication and rendering values
  (`resolve_pairs` + the engine's items list, built once on their own), and what the `JudgeRun`
  still holds after the run (RSS freed when it is dropped). Plotted, log-log, into an SVG.
- throughput: the same runs' pairs/s and driver CPU (user + system) per pair, with the store, and
  one run without a store: the local engine's own cost per pair when the model costs nothing.
- ray_cpu: the driver process's CPU (time.process_time: user + system of every thread, Ray's
  included) per answered call through `ray_judge` with 2 workers, against tests/openai_server.py
  in its own process answering at once, with a store and without one, and the same calls
  locally without Ray (scale_out.py's `served` case); with the CPU per call of each of the
  driver's threads, and under Ray the calls per message the driver sent its workers.
- served: at concurrency 64 against the server answering after 200 ms, the engine with a store,
  the openai SDK alone (AsyncOpenAI, 64 concurrent chat.completions) and the engine without a
  store, run alternately (store, SDK, no store, store, ...: benchmark.py's served and served_sdk
  cases, each in its own process with its own server and a warm-up pass); medians over the
  repeats of the fraction of ideal (concurrency / delay) and of engine / SDK within a repeat;
  with the store, also the CPU per call of the store's writer process (its rows are made there).
The scripted backend records every request it answers (for tests' assertions); here that record
is a deque of length 0, so it holds nothing the engine would not.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import benchmark  # bench/: the served and SDK-alone cases of docs/benchmarks.md
import scale_out  # bench/: the synthetic pairs, the test server in its own process, the Ray cases

ROOT = Path(__file__).resolve().parents[1]
ANSWER = "##final score: 2"


def rss_mb() -> float:
    """This process's resident memory now (not its peak)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024**2


def canned_judge():
    """An instant judge: the scripted backend with one default answer, keeping no record of calls."""
    from collections import deque

    from judgeblender.backends.scripted import ScriptedBackend
    from judgeblender.judges import Judge, JudgeSpec

    backend = ScriptedBackend(default=ANSWER, name="bench")
    backend.calls = deque(maxlen=0)
    return Judge(JudgeSpec(model="scripted:bench"), backend=backend)


# ---------------------------------------------------------------------------------------------- cases
def local_case(spec: dict[str, Any]) -> dict[str, Any]:
    """n pairs, one distinct passage each, judged locally by the instant judge; memory and speed."""
    from judgeblender.judges import judge_pairs
    from judgeblender.judges.engine import resolve_pairs
    from judgeblender.store import CallStore

    n = spec["pairs"]
    judge = canned_judge()
    gc.collect()
    rss_start = rss_mb()
    queries, corpus, pairs = scale_out.dataset(n, passages=n)
    rss_inputs = rss_mb()
    corpus_mb = (sys.getsizeof(corpus) + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in corpus.items())) / 1024**2
    out: dict[str, Any] = {"pairs": n, "store": spec["store"], "rss_start_mb": rss_start,
                           "inputs_mb": rss_inputs - rss_start, "corpus_dict_mb": corpus_mb}
    if spec.get("breakdown"):  # what the engine builds before any call, on its own
        ok, _ = resolve_pairs(pairs, queries, corpus)
        items = [(p, {"query": queries[p.qid], "passage": corpus[p.docid]}) for p in ok]
        out["dedup_and_items_mb"] = rss_mb() - rss_inputs
        del ok, items
        gc.collect()
    folder = Path(tempfile.mkdtemp(prefix="jb-driver-"))
    store = CallStore(folder / "calls.sqlite") if spec["store"] else None
    rss_before_run = rss_mb()
    c0, t0 = time.process_time(), time.perf_counter()
    run = judge_pairs([judge], pairs, queries, corpus, store=store)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    stats = run.stats[judge.id]
    assert stats.judged == n and stats.calls_made == n, stats
    rss_with_run = rss_mb()
    del run
    gc.collect()
    out.update(seconds=elapsed, pairs_per_s=n / elapsed, cpu_ms_per_pair=cpu / n * 1000,
               peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               rss_before_run_mb=rss_before_run, rss_with_judgerun_mb=rss_with_run,
               judgerun_freed_mb=rss_with_run - rss_mb())
    if store is not None:
        store.close()
        out["store_mb"] = sum(f.stat().st_size for f in folder.iterdir()) / 1024**2
    for f in folder.iterdir():
        f.unlink()
    folder.rmdir()
    return out


CASES = {"local": local_case}


def timed_case(run, spec: dict[str, Any], *args: Any) -> dict[str, Any]:
    """A case in its own subprocess, with the load average (1, 5, 15 min) before and after it."""
    before = os.getloadavg()
    result = run(spec, *args)
    result.update(load_before=before, load_after=os.getloadavg())
    print(spec.get("kind"), {k: v for k, v in result.items() if k != "case"}, flush=True)
    return result


# ---------------------------------------------------------------------------------------------- parts
def memory_part(max_pairs: int) -> list[dict[str, Any]]:
    sizes = [10**k for k in range(3, 16) if 10**k <= max_pairs]
    return [timed_case(scale_out.run_case, {"kind": "local", "pairs": n, "store": True, "breakdown": True},
                       __file__) for n in sizes]


def per_pair(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """KB per pair of peak RSS, overall and between successive sizes (the slope the issue bounds)."""
    out = {}
    for a, b in zip(rows, rows[1:]):
        out[f"{a['pairs']}-{b['pairs']}"] = {
            "peak_kb_per_pair": (b["peak_rss_mb"] - a["peak_rss_mb"]) * 1024 / (b["pairs"] - a["pairs"]),
            "peak_less_inputs_kb_per_pair": ((b["peak_rss_mb"] - b["inputs_mb"]) - (a["peak_rss_mb"] - a["inputs_mb"]))
            * 1024 / (b["pairs"] - a["pairs"])}
    return out


def ray_cpu_part(calls: int, concurrency: int, workers: int, store_only: bool = False) -> list[dict[str, Any]]:
    """Under Ray with a store (the figure the issue bounds), under Ray without a store (what Ray
    and the engine cost without the store's part), then locally with a store; `store_only`: the
    first alone (bench/store_cost.py compares it between two checkouts)."""
    ray, address = scale_out.start_ray()
    rows = []
    try:
        server = scale_out.Server(0.0)
        cases = ((workers, True),) if store_only else ((workers, True), (workers, False), (None, True))
        for w, store in cases:
            spec = {"kind": "served", "url": server.url, "pairs": calls, "concurrency": concurrency, "workers": w,
                    "ray": address, "store": store}
            r = timed_case(scale_out.run_case, spec)
            r.update(workers=w, calls=calls, concurrency=concurrency, server=server.stats())
            rows.append(r)
        server.close()
    finally:
        ray.shutdown()
    return rows


def served_part(calls: int, concurrency: int, repeats: int) -> dict[str, Any]:
    kinds = {"store": {"kind": "served", "store": True}, "sdk": {"kind": "served_sdk"},
             "no_store": {"kind": "served", "store": False}}
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
    for _ in range(repeats):
        for name, kind in kinds.items():
            spec = {**kind, "concurrency": concurrency, "pairs": calls, "repeats": 1}
            r = timed_case(benchmark.run_case, spec)
            if "error" in r:
                raise RuntimeError(f"{name}: {r['error']}")
            runs[name].append(r)
    med = statistics.median
    summary = {name: {"fraction_of_ideal": med([r["fraction_of_ideal"] for r in rows]),
                      "pairs_per_s": med([r["pairs_per_s"] for r in rows]),
                      "client_cpu_ms_per_call": med([r["client_cpu_ms_per_call"] for r in rows])}
               for name, rows in runs.items()}
    summary["store"]["writer_cpu_ms_per_call"] = med([r["writer_cpu_ms_per_call"] for r in runs["store"]])
    for name in ("store", "no_store"):
        summary[name]["of_sdk"] = med([a["pairs_per_s"] / b["pairs_per_s"] for a, b in zip(runs[name], runs["sdk"])])
    return {"calls": calls, "concurrency": concurrency, "delay_s": benchmark.SERVED_DELAY_S, "repeats": repeats,
            "ideal": concurrency / benchmark.SERVED_DELAY_S, "median": summary, "runs": runs}


# ---------------------------------------------------------------------------------------------- plot
def loglog_svg(series: dict[str, list[tuple[float, float]]], title: str, x_label: str, y_label: str) -> str:
    """A log-log line chart, one line per series, decades as grid lines."""
    import math

    from judgeblender.evaluate.svgplot import PALETTE, svg_document, svg_text

    left, top, w, h = 70, 40, 420, 300
    xs = [x for pts in series.values() for x, _ in pts]
    ys = [y for pts in series.values() for _, y in pts if y > 0]
    x0, x1 = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    x1, y1 = max(x1, x0 + 1), max(y1, y0 + 1)

    def px(x: float) -> float:
        return left + (math.log10(x) - x0) / (x1 - x0) * w

    def py(y: float) -> float:
        return top + h - (math.log10(y) - y0) / (y1 - y0) * h

    out = [svg_text(left + w / 2, 22, title, anchor="middle", weight="bold")]
    for e in range(x0, x1 + 1):
        out.append(f'<line x1="{px(10**e):.1f}" y1="{top}" x2="{px(10**e):.1f}" y2="{top + h}" stroke="#eeeeee"/>')
        out.append(svg_text(px(10**e), top + h + 16, f"10^{e}", anchor="middle", size=10))
    for e in range(y0, y1 + 1):
        out.append(f'<line x1="{left}" y1="{py(10**e):.1f}" x2="{left + w}" y2="{py(10**e):.1f}" stroke="#eeeeee"/>')
        out.append(svg_text(left - 6, py(10**e) + 3, f"{10**e:g}", anchor="end", size=10))
    out.append(f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="none" stroke="#444444"/>')
    for k, (name, pts) in enumerate(series.items()):
        colour, pts = PALETTE[k % len(PALETTE)], [(x, y) for x, y in pts if y > 0]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{colour}"><title>{name}: {x:g} pairs, '
                f'{y:.1f} MB</title></circle>' for x, y in pts]
        out.append(f'<line x1="{left + w + 16}" y1="{top + 10 + 18 * k}" x2="{left + w + 34}" '
                   f'y2="{top + 10 + 18 * k}" stroke="{colour}" stroke-width="2"/>')
        out.append(svg_text(left + w + 40, top + 14 + 18 * k, name))
    out.append(svg_text(left + w / 2, top + h + 36, x_label, anchor="middle"))
    cx, cy = 16, top + h / 2
    out.append(f'<text x="{cx}" y="{cy}" text-anchor="middle" transform="rotate(-90 {cx} {cy})">{y_label}</text>')
    return svg_document(left + w + 290, top + h + 50, "".join(out))


def memory_plot(rows: list[dict[str, Any]]) -> str:
    series = {
        "driver peak RSS": [(r["pairs"], r["peak_rss_mb"]) for r in rows],
        "run's own (peak less RSS before it)": [(r["pairs"], r["peak_rss_mb"] - r["rss_before_run_mb"]) for r in rows],
        "inputs (queries, corpus, pairs)": [(r["pairs"], r["inputs_mb"]) for r in rows],
        "corpus dict alone": [(r["pairs"], r["corpus_dict_mb"]) for r in rows],
        "de-dup + items": [(r["pairs"], r["dedup_and_items_mb"]) for r in rows],
        "JudgeRun (freed at end)": [(r["pairs"], r["judgerun_freed_mb"]) for r in rows],
    }
    return loglog_svg(series, "Driver memory, local engine, instant scripted judge, with store",
                      "pairs", "MB")


# ---------------------------------------------------------------------------------------------- main
def main() -> None:
    ap, full = scale_out.case_cli(ROOT / "bench" / "results" / "driver.json")
    full.add_argument("--plot", type=Path, default=ROOT / "bench" / "results" / "driver_memory.svg")
    full.add_argument("--parts", nargs="+", default=["memory", "throughput", "ray_cpu", "served"],
                      choices=["memory", "throughput", "ray_cpu", "served"])
    full.add_argument("--max-pairs", type=int, default=100_000, help="memory: 10^3, 10^4, ... up to this")
    full.add_argument("--throughput-pairs", type=int, default=10_000, help="throughput: the run without a store")
    full.add_argument("--ray-calls", type=int, default=20_000)
    full.add_argument("--ray-concurrency", type=int, default=64)
    full.add_argument("--ray-workers", type=int, default=2)
    full.add_argument("--served-calls", type=int, default=2_000)
    full.add_argument("--served-concurrency", type=int, default=64)
    full.add_argument("--served-repeats", type=int, default=5)
    args = ap.parse_args()
    if scale_out.ran_case(args, CASES):
        return

    res: dict[str, Any] = {"machine": benchmark.machine(), "command": " ".join(sys.argv),
                           "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "load_before": os.getloadavg()}
    if "memory" in args.parts:
        res["memory"] = memory_part(args.max_pairs)
        res["memory_kb_per_pair"] = per_pair(res["memory"])
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        args.plot.write_text(memory_plot(res["memory"]))
    if "throughput" in args.parts:  # the memory runs are the with-store runs; one more without
        res["throughput_no_store"] = timed_case(scale_out.run_case, {"kind": "local", "pairs": args.throughput_pairs,
                                                                     "store": False}, __file__)
    if "ray_cpu" in args.parts:
        res["ray_cpu"] = ray_cpu_part(args.ray_calls, args.ray_concurrency, args.ray_workers)
    if "served" in args.parts:
        res["served"] = served_part(args.served_calls, args.served_concurrency, args.served_repeats)
    res["load_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
