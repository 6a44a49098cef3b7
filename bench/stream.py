"""The streamed driver (issue 23, part 1): memory and speed against the number of pairs, a SIGKILL
in the middle of a large run and its resume, and the prefix reuse that windows keep.

    PYTHONPATH=src python bench/stream.py memory --max-pairs 1000000    # 10^3 ... 10^6, and the plot
    PYTHONPATH=src python bench/stream.py memory --sizes 10000000 --no-store \
        --out bench/results/stream_memory_1e7.json --plot /dev/null   # 10^7, no store: about 20 minutes
    PYTHONPATH=src python bench/stream.py plot                        # the plot, with the 10^7 point
    PYTHONPATH=src python bench/stream.py kill --pairs 1000000          # SIGKILL at half, resume
    PYTHONPATH=src python bench/stream.py prefix                        # DL19's pool, windows vs one sort

memory: for n = 10^3 ... --max-pairs, files of n pairs are written (10 pairs per query, one
distinct 60-word passage per pair, so the corpus grows with the job as a real one does), then a
fresh interpreter runs what `judgeblender judge` runs (PairsFile, open_corpus, check_stream,
judge_stream into RunFiles, with a store) with the instant canned judge of bench/driver.py. Its
peak RSS (ru_maxrss), the RSS before the run (imports, queries), the passage index's arrays,
the time and CPU of each phase and the store's bytes per call are recorded, with the load average.
The plot sets them against bench/results/driver.json's whole-run engine (taken before streaming).

kill: `judgeblender judge` as a user runs it (a subprocess, the scripted model answering at once,
--window 10000, --json) on n pairs; SIGKILL once the store holds half of them; the same command
again. Recorded: the calls in the store at the kill, the resumed run's calls made and answers
from the store (the resume must make exactly the missing calls), its qrels lines, and times.

prefix: the tokens an embedded model must evaluate (the nodes of the prompts' prefix tree: what
llama.cpp's prefix reuse leaves, docs/benchmarks.md) when the engine sorts each window's prompts
on its own, for DL19's judged pairs in qrels order (grouped by query, as pools are) and shuffled
(the worst case), against one sort over all pairs (before streaming). The time an embedded judge
takes follows these tokens (1.08x the limit they set, docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import random
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
ANSWER = "##final score: 2"
PER_QUERY = 10


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024**2


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_inputs(folder: Path, n: int) -> dict[str, Path]:
    """n pairs over n/10 queries, one distinct 60-word passage per pair, written as streamed."""
    files = {"queries": folder / "queries.tsv", "corpus": folder / "corpus.jsonl", "pairs": folder / "pairs.tsv"}
    with open(files["queries"], "w") as fh:
        for i in range((n + PER_QUERY - 1) // PER_QUERY):
            fh.write(f"q{i}\tquestion {i} about topic {i % 97}\n")
    with open(files["corpus"], "w") as fc, open(files["pairs"], "w") as fp:
        for k in range(n):
            text = f"passage {k}: " + " ".join(f"w{(k * 7 + j) % 1000}" for j in range(60))
            fc.write(json.dumps({"docid": f"d{k}", "text": text}) + "\n")
            fp.write(f"q{k // PER_QUERY}\td{k}\n")
    return files


# ---------------------------------------------------------------------------------------------- cases
def stream_case(spec: dict[str, Any]) -> dict[str, Any]:
    """What `judge` runs, in this fresh interpreter, on the files of spec["folder"]."""
    from driver import canned_judge

    from judgeblender.judges.engine import check_stream, judge_stream
    from judgeblender.judges.outputs import RunFiles, final_labels
    from judgeblender.pairs import read_queries
    from judgeblender.pairs.corpus import close_corpus, open_corpus
    from judgeblender.pairs.pairs import PairsFile
    from judgeblender.store import CallStore

    folder = Path(spec["folder"])
    n = spec["pairs"]
    judge = canned_judge()
    gc.collect()
    out: dict[str, Any] = {"pairs": n, "window": spec["window"], "rss_start_mb": rss_mb()}
    c0, t0 = time.process_time(), time.perf_counter()
    queries = read_queries(folder / "queries.tsv")
    corpus = open_corpus(folder / "corpus.jsonl")
    out.update(read_s=time.perf_counter() - t0, read_cpu_s=time.process_time() - c0, index_mb=corpus.nbytes() / 1024**2,
               rss_inputs_mb=rss_mb())
    source = PairsFile(folder / "pairs.tsv")
    c1, t1 = time.process_time(), time.perf_counter()
    check_stream(source, queries, corpus, window=spec["window"])
    out.update(check_s=time.perf_counter() - t1, check_cpu_s=time.process_time() - c1)
    store_path = folder / "calls.sqlite"
    window_rss: list[float] = []

    def write(run, texts) -> None:
        files.write(run, final_labels(run))
        window_rss.append(rss_mb())

    c2, t2 = time.process_time(), time.perf_counter()
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(CallStore(store_path)) if spec.get("store", True) else None
        files = stack.enter_context(RunFiles(folder / "out.qrels", folder / "out.qrels.details.jsonl"))
        totals = judge_stream([judge], source, queries, corpus, write, store, window=spec["window"])
        files.finish(totals.skipped)
    elapsed, cpu = time.perf_counter() - t2, time.process_time() - c2
    close_corpus(corpus)
    stats = totals.stats[judge.id]
    assert stats.judged == n and stats.calls_made == n, stats
    out["store"] = spec.get("store", True)
    store_bytes = sum(f.stat().st_size for f in folder.iterdir() if f.name.startswith("calls.sqlite"))
    out.update(seconds=elapsed, pairs_per_s=n / elapsed, cpu_ms_per_pair=cpu / n * 1000, peak_rss_mb=peak_mb(),
               rss_end_mb=rss_mb(), windows=totals.windows, window_rss_max_mb=max(window_rss),
               window_rss_first_mb=window_rss[0], store_bytes_per_call=store_bytes / n,
               qrels_lines=sum(1 for _ in open(folder / "out.qrels")))
    return out


def no_store_case(spec: dict[str, Any]) -> dict[str, Any]:
    """The engine's own cost per pair without a store: judge_stream over in-memory pairs."""
    from driver import canned_judge
    from scale_out import dataset

    from judgeblender.judges.engine import judge_stream

    n = spec["pairs"]
    queries, corpus, pairs = dataset(n, passages=n)
    judge = canned_judge()
    c0, t0 = time.process_time(), time.perf_counter()
    totals = judge_stream([judge], pairs, queries, corpus, lambda run, texts: None, None, window=spec["window"])
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert totals.stats[judge.id].judged == n
    return {"pairs": n, "window": spec["window"], "seconds": elapsed, "pairs_per_s": n / elapsed,
            "cpu_ms_per_pair": cpu / n * 1000}


CASES = {"stream": stream_case, "no_store": no_store_case}


def run_case(spec: dict[str, Any]) -> dict[str, Any]:
    before = os.getloadavg()
    proc = subprocess.run([sys.executable, __file__, "case", json.dumps(spec)], capture_output=True, text=True,
                          timeout=6 * 3600)
    if proc.returncode != 0:
        raise RuntimeError(f"{spec}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result.update(load_before=before, load_after=os.getloadavg())
    print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in result.items()}, flush=True)
    return result


# ---------------------------------------------------------------------------------------------- parts
def memory_part(max_pairs: int, window: int, sizes: list[int] | None = None, store: bool = True) -> dict[str, Any]:
    rows = []
    for n in sizes or [10**k for k in range(3, 9) if 10**k <= max_pairs]:
        folder = Path(tempfile.mkdtemp(prefix="jb-stream-"))
        try:
            t0 = time.perf_counter()
            write_inputs(folder, n)
            written = time.perf_counter() - t0
            row = run_case({"kind": "stream", "pairs": n, "window": window, "folder": str(folder), "store": store})
            row["inputs_written_s"] = written
            rows.append(row)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    slopes = {f"{a['pairs']}-{b['pairs']}": (b["peak_rss_mb"] - a["peak_rss_mb"]) * 1024 / (b["pairs"] - a["pairs"])
              for a, b in zip(rows, rows[1:])}
    no_store = [run_case({"kind": "no_store", "pairs": n, "window": window}) for n in (10_000, 100_000)
                if n <= max(max_pairs, 10_000) and not sizes]
    return {"rows": rows, "peak_kb_per_pair": slopes, "no_store": no_store}


def kill_part(n: int, window: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="jb-kill-"))
    try:
        files = write_inputs(folder, n)
        model = folder / "model.json"
        model.write_text(json.dumps({"default": ANSWER, "record": False}))
        store = folder / "calls.sqlite"
        cmd = [sys.executable, "-m", "judgeblender", "judge", "-q", str(files["queries"]), "-c", str(files["corpus"]),
               "-p", str(files["pairs"]), "-o", str(folder / "out.qrels"), "-j", f"scripted:{model}",
               "--store", str(store), "--no-progress", "--window", str(window), "--json"]

        def stored() -> int:
            try:
                with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
                    return db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]
            except sqlite3.Error:
                return 0

        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while proc.poll() is None and stored() < n // 2:
            time.sleep(1.0)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_after = time.perf_counter() - t0
        at_kill = stored()
        t1 = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True)
        resumed = time.perf_counter() - t1
        if res.returncode != 0:
            raise RuntimeError(res.stderr[-3000:])
        row = json.loads(res.stdout)["judges"][0]
        lines = sum(1 for _ in open(folder / "out.qrels"))
        result = {"pairs": n, "window": window, "killed_after_s": killed_after, "calls_in_store_at_kill": at_kill,
                  "resume_s": resumed, "resume_calls_made": row["calls_made"], "resume_from_store": row["cache_hits"],
                  "only_missing_calls": row["calls_made"] == n - at_kill and row["cache_hits"] == at_kill,
                  "qrels_lines": lines, "load_after": os.getloadavg()}
        print(result, flush=True)
        return result
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def prefix_part(windows: list[int], model: str) -> dict[str, Any]:
    """Prefix-tree tokens of DL19's judged pairs' prompts, per window, in qrels order and shuffled."""
    from benchmark import unique_tokens  # the nodes of the prompts' prefix tree

    from judgeblender.judges import JudgeSpec, build_judge
    from judgeblender.judges.engine import build_request
    from judgeblender.pairs import read_corpus, read_qrels, read_queries

    data = ROOT.parent / "shared" / "data" / "trec-dl-2019"
    queries = read_queries(data / "queries.tsv")
    qrels = read_qrels(data / "qrels.txt")
    pairs = [(q, d) for q, docs in qrels.items() for d in docs]
    corpus = read_corpus(data / "passages.jsonl", wanted={d for _, d in pairs})
    pairs = [p for p in pairs if p[1] in corpus and p[0] in queries]
    judge = build_judge(JudgeSpec(model=model, prompt="umbrela", mode="logprobs"))
    backend = judge.backend
    step = judge.template.steps[0]
    t0 = time.perf_counter()
    tokens = []
    for q, d in pairs:
        req = build_request(judge, step, {"query": queries[q], "passage": corpus[d]}, 0)
        tokens.append(backend._tokens(backend.format_prompt(req.messages) + req.answer_prefix))
    tokenized = time.perf_counter() - t0
    out: dict[str, Any] = {"model": model, "pairs": len(pairs), "prompt_tokens": sum(map(len, tokens)),
                           "tokenize_s": tokenized, "orders": {}}
    shuffled = list(range(len(tokens)))
    random.Random(0).shuffle(shuffled)
    for name, order in (("qrels order (grouped by query)", list(range(len(tokens)))), ("shuffled", shuffled)):
        seqs = [tokens[i] for i in order]
        whole = unique_tokens(seqs)
        rows = {"all (one sort, before streaming)": whole}
        for w in windows:
            rows[str(w)] = sum(unique_tokens(seqs[k:k + w]) for k in range(0, len(seqs), w))
        out["orders"][name] = {"tokens_to_evaluate": rows,
                               "vs_one_sort": {k: v / whole for k, v in rows.items()}}
    judge.close()
    print(json.dumps(out, indent=1), flush=True)
    return out


# ---------------------------------------------------------------------------------------------- plot
def memory_plot(rows: list[dict[str, Any]], before: list[dict[str, Any]], more: list[dict[str, Any]] = ()) -> str:
    from driver import loglog_svg

    series = {"streamed judge: peak RSS": [(r["pairs"], r["peak_rss_mb"]) for r in rows],
              "streamed: passage index": [(r["pairs"], r["index_mb"]) for r in rows]}
    if more:  # runs without a store (10^7): the driver's own memory, SQLite's page cache aside
        series["streamed, no store: peak RSS"] = [(r["pairs"], r["peak_rss_mb"]) for r in more]
    if before:
        series["before (whole run in memory): peak RSS"] = [(r["pairs"], r["peak_rss_mb"]) for r in before]
    return loglog_svg(series, "Driver memory, instant scripted judge, store and outputs (10^7: no store)", "pairs", "MB")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("case").add_argument("spec")
    mem = sub.add_parser("memory")
    mem.add_argument("--max-pairs", type=int, default=100_000)
    mem.add_argument("--window", type=int, default=10_000)
    mem.add_argument("--sizes", type=int, nargs="+", help="these pair counts instead of 10^3 ... --max-pairs")
    mem.add_argument("--no-store", action="store_true", help="judge without a store (the outputs are still written)")
    mem.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "stream_memory.json")
    mem.add_argument("--plot", type=Path, default=ROOT / "bench" / "results" / "stream_memory.svg")
    kill = sub.add_parser("kill")
    kill.add_argument("--pairs", type=int, default=1_000_000)
    kill.add_argument("--window", type=int, default=10_000)
    kill.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "stream_kill.json")
    plot = sub.add_parser("plot", help="redraw the memory plot from memory results, adding runs without a store")
    plot.add_argument("--memory", type=Path, default=ROOT / "bench" / "results" / "stream_memory.json")
    plot.add_argument("--more", type=Path, nargs="*", default=[ROOT / "bench" / "results" / "stream_memory_1e7.json"])
    plot.add_argument("--plot", type=Path, default=ROOT / "bench" / "results" / "stream_memory.svg")
    pre = sub.add_parser("prefix")
    pre.add_argument("--windows", type=int, nargs="+", default=[10_000, 1_000, 100])
    pre.add_argument("--model", default="llamacpp:default")
    pre.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "stream_prefix.json")
    args = ap.parse_args()
    if args.cmd == "case":
        spec = json.loads(args.spec)
        print(json.dumps(CASES[spec["kind"]](spec)))
        return
    if args.cmd == "plot":
        before_file = ROOT / "bench" / "results" / "driver.json"
        before = json.loads(before_file.read_text()).get("memory", []) if before_file.exists() else []
        more = [row for f in args.more if f.exists() for row in json.loads(f.read_text())["rows"]]
        args.plot.write_text(memory_plot(json.loads(args.memory.read_text())["rows"], before, more))
        return
    res: dict[str, Any] = {"command": " ".join(["bench/stream.py", *sys.argv[1:]]),
                           "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cpus": os.cpu_count(),
                           "load_before": os.getloadavg()}
    if args.cmd == "memory":
        res.update(memory_part(args.max_pairs, args.window, args.sizes, not args.no_store))
        before_file = ROOT / "bench" / "results" / "driver.json"
        before = json.loads(before_file.read_text()).get("memory", []) if before_file.exists() else []
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        args.plot.write_text(memory_plot(res["rows"], before))
    elif args.cmd == "kill":
        res.update(kill_part(args.pairs, args.window))
    else:
        res.update(prefix_part(args.windows, args.model))
    res["load_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
