"""Scale-out benchmark (issue 13): judging through Ray workers against the latency-injected test server.

    PYTHONPATH=src python bench/scale_out.py --out bench/results/scale_out.json

Parts (each case runs in its own subprocess, so its peak memory is its own):
- served: pairs/s of the local engine and of --ray with 1, 2, 4 workers at the same total
  concurrency, against tests/openai_server.py in its own process answering after 200 ms; the
  fraction of ideal (concurrency / delay); the driver's CPU per call (process time of the
  driver, Ray's threads in it included);
- server: the test server's own ceiling (requests/s at delay 0 from a raw HTTP client);
- ceiling: pairs/s through 4 Ray workers at concurrency 64 against the server at delay 0: the
  most one driver gets through on this machine (a lower bound: workers and server share its cores);
- commit: the most answers per second one driver can commit to the store (CallStore.put_many,
  one transaction per answer and per group of 16: the engine groups the answers that arrive
  in the same turn of its event loop);
- memory: the driver's peak RSS judging 10^4 pairs through Ray, and 10^5 pairs answered from a
  store filled beforehand (all from the store: the driver's own cost per pair, no model).
A Ray runtime (2 CPUs, 256 MB object store, no dashboard) is started once by the parent and
joined by every Ray case.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DELAY_S = 0.2

SERVER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from openai_server import OpenAITestServer
cfg = json.loads(sys.argv[2])
srv = OpenAITestServer(answers="##final score: 2", delay_s=cfg["delay"], max_requests=10**7, max_lifetime_s=3600)
srv.start()
print(srv.port, flush=True)
for line in sys.stdin:
    if line.strip() == "stats":
        print(json.dumps({"requests": srv.request_count, "max_in_flight": srv.max_in_flight}), flush=True)
        srv.reset_counters()
    else:
        break
srv.stop()
"""


class Server:
    """tests/openai_server.py in its own process."""

    def __init__(self, delay: float):
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER, str(ROOT / "tests"), json.dumps({"delay": delay})],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}/v1"

    def stats(self) -> dict:
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


def dataset(n: int, passages: int = 1000):
    """n distinct pairs, 10 per query, over `passages` 60-word passages (pass n for one passage per
    pair, a corpus that grows with the job as a real one does: 13 and a power of ten are coprime)."""
    from judgeblender.pairs import Pair

    per_query = 10
    queries = {f"q{i}": f"question {i} about topic {i % 97}" for i in range(n // per_query + 1)}
    corpus = {f"d{k}": f"passage {k}: " + " ".join(f"w{(k * 7 + j) % 1000}" for j in range(60))
              for k in range(passages)}
    pairs = [Pair(f"q{i // per_query}", f"d{(i * 13) % passages}") for i in range(n)]
    return queries, corpus, pairs


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------------------------------------- cases
def thread_cpu_s() -> dict[str, float]:
    """CPU seconds (user + system) of each of this process's threads now, summed by thread name
    (Ray's threads have their own names: worker.io, client.poll0, ...; Python's main thread is
    the program's name)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path("/proc/self/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def served_case(spec: dict[str, Any]) -> dict[str, Any]:
    """`pairs` calls against the server, through Ray workers or locally; with a store unless
    spec["store"] is false. The driver's CPU per call, in all and by thread (a thread that ends
    during the run is not counted in the breakdown)."""
    from judgeblender.judges import Judge, JudgeSpec, judge_pairs
    from judgeblender.store import CallStore

    n, conc, workers = spec["pairs"], spec["concurrency"], spec.get("workers")
    queries, corpus, pairs = dataset(n)
    opts = {"base_url": spec["url"], "concurrency": conc, "timeout_s": 30}
    jspec = JudgeSpec(model="openai:test-model", options=opts)
    if workers:
        import ray

        from judgeblender.backends.ray_executor import connect
        from judgeblender.judges.ray_judges import ray_judge

        connect(spec["ray"])
        judge = ray_judge(jspec, workers)
    else:
        judge = Judge(jspec)
    judge_pairs([judge], pairs[:conc * 2], queries, corpus)  # warm: connections, imports (in the workers)
    store = CallStore(Path(tempfile.mkdtemp()) / "calls.sqlite") if spec.get("store", True) else None
    traffic_before = judge.backend.traffic() if workers and hasattr(judge.backend, "traffic") else None
    threads_before = thread_cpu_s()
    c0, t0 = time.process_time(), time.perf_counter()
    run = judge_pairs([judge], pairs, queries, corpus, store=store)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    threads = {k: (v - threads_before.get(k, 0.0)) / n * 1000 for k, v in thread_cpu_s().items()}
    assert run.stats[judge.id].judged == n, run.stats[judge.id]
    out = {"pairs_per_s": n / elapsed, "seconds": elapsed, "driver_cpu_ms_per_call": cpu / n * 1000,
           "peak_rss_mb": peak_rss_mb(), "store": store is not None,
           "thread_cpu_ms_per_call": {k: round(v, 4) for k, v in sorted(threads.items(), key=lambda kv: -kv[1])
                                      if v > 0}}
    if traffic_before is not None:  # messages the driver sent its workers, and calls per message
        after = judge.backend.traffic()
        messages = sum(t["messages"] for t in after) - sum(t["messages"] for t in traffic_before)
        out.update(worker_messages=messages, calls_per_message=n / max(1, messages),
                   largest_batch=max(t["largest_batch"] for t in after))
    judge.close()
    if workers:
        ray.shutdown()
    return out


def memory_case(spec: dict[str, Any]) -> dict[str, Any]:
    """The driver's peak RSS over n pairs, every answer from a store filled by a local run."""
    from judgeblender.judges import Judge, JudgeSpec, judge_pairs
    from judgeblender.backends.ray_executor import connect
    from judgeblender.judges.ray_judges import ray_judge
    from judgeblender.store import CallStore

    n = spec["pairs"]
    queries, corpus, pairs = dataset(n)
    model = Path(spec["store"]).with_suffix(".json")
    model.write_text(json.dumps({"name": "bench", "default": "##final score: 2"}))
    jspec = JudgeSpec(model=f"scripted:{model}")
    if spec["fill"]:  # the store, by a local run (not measured)
        with CallStore(spec["store"]) as store:
            judge_pairs([Judge(jspec)], pairs, queries, corpus, store=store)
        return {}
    rss0 = peak_rss_mb()
    connect(spec["ray"])
    judge = ray_judge(jspec, 2)
    t0 = time.perf_counter()
    with CallStore(spec["store"]) as store:
        run = judge_pairs([judge], pairs, queries, corpus, store=store)
    stats = run.stats[judge.id]
    assert stats.cache_hits == n and stats.calls_made == 0
    judge.close()
    return {"pairs": n, "seconds": time.perf_counter() - t0, "peak_rss_mb": peak_rss_mb(), "rss_before_mb": rss0}


def commit_case(spec: dict[str, Any]) -> dict[str, Any]:
    """Answers per second one driver commits: one transaction per answer, and per group of 16."""
    from judgeblender.calls import CallRequest, CallResult, Message, call_key
    from judgeblender.store import CallStore

    identity = {"backend": "openai", "model": "m", "endpoint": "http://x"}
    out = {}
    for group in (1, 16):
        store = CallStore(Path(tempfile.mkdtemp()) / "calls.sqlite")
        rows = []
        for i in range(spec["rows"]):
            req = CallRequest((Message("system", "You are a relevance judge. " * 20),
                               Message("user", f"Query: q{i}\nPassage: " + "lorem ipsum " * 80)), seed=0)
            rows.append((call_key(identity, req), "openai", identity, req, CallResult("##final score: 2", tokens_in=300),
                         {"value": 2, "invalid_reason": None}))
        t0 = time.perf_counter()
        for k in range(0, len(rows), group):
            store.put_many(rows[k:k + group])
        out[f"group_{group}_per_s"] = len(rows) / (time.perf_counter() - t0)
        store.close()
    return out


def server_case(spec: dict[str, Any]) -> dict[str, Any]:
    """The test server's own ceiling: raw HTTP requests/s at delay 0 from 16 client threads."""
    import http.client
    import threading
    from urllib.parse import urlparse

    url = urlparse(spec["url"])
    body = json.dumps({"model": "test-model", "messages": [{"role": "user", "content": "x " * 300}],
                       "max_tokens": 8})
    stop = time.perf_counter() + spec["seconds"]
    counts = []

    def client() -> None:
        conn, n = http.client.HTTPConnection(url.hostname, url.port), 0
        while time.perf_counter() < stop:
            conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            conn.getresponse().read()
            n += 1
        counts.append(n)

    threads = [threading.Thread(target=client) for _ in range(16)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"requests_per_s": sum(counts) / (time.perf_counter() - t0)}


CASES = {"served": served_case, "memory": memory_case, "commit": commit_case, "server": server_case}


def run_case(spec: dict[str, Any], script: str = __file__) -> dict[str, Any]:
    """One case in a fresh interpreter (`script case SPEC`), so its peak memory is its own."""
    proc = subprocess.run([sys.executable, script, "case", json.dumps(spec)], capture_output=True, text=True,
                          timeout=7200)
    if proc.returncode != 0:
        raise RuntimeError(f"{spec}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def start_ray():
    """A local Ray runtime (2 CPUs, 256 MB object store, no dashboard) for the cases to join: (ray, address)."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray

    ray.init(address="local", num_cpus=2, object_store_memory=256 * 1024**2, include_dashboard=False,
             _node_ip_address="127.0.0.1", log_to_driver=False)
    return ray, ray.get_runtime_context().gcs_address


def case_cli(out: Path) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """`SCRIPT case SPEC` (one case, run by run_case) and `SCRIPT all --out FILE`: (parser, all's parser)."""
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("case").add_argument("spec")
    full = sub.add_parser("all")
    full.add_argument("--out", type=Path, default=out)
    return ap, full


def ran_case(args: argparse.Namespace, cases: dict[str, Any]) -> bool:
    """For `case SPEC`: run it and print its result as the last JSON line (what run_case reads)."""
    if args.cmd != "case":
        return False
    spec = json.loads(args.spec)
    print(json.dumps(cases[spec["kind"]](spec)))
    return True


def main() -> None:
    ap, full = case_cli(ROOT / "bench" / "results" / "scale_out.json")
    full.add_argument("--concurrency", type=int, default=16)
    full.add_argument("--pairs", type=int, default=640)
    full.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    full.add_argument("--ceiling-pairs", type=int, default=4000)
    full.add_argument("--memory-pairs", type=int, nargs="+", default=[10_000, 100_000])
    args = ap.parse_args()
    if ran_case(args, CASES):
        return

    ray, address = start_ray()
    res: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                       "ray": ray.__version__, "load_before": os.getloadavg()},
                           "delay_s": DELAY_S, "concurrency": args.concurrency, "pairs": args.pairs, "served": []}
    try:
        server = Server(0.0)
        res["server"] = run_case({"kind": "server", "url": server.url, "seconds": 5})
        server.close()
        print("server", res["server"], flush=True)
        server = Server(DELAY_S)
        for workers in [None, *args.workers]:
            spec = {"kind": "served", "url": server.url, "pairs": args.pairs, "concurrency": args.concurrency,
                    "workers": workers, "ray": address}
            r = run_case(spec)
            r.update(workers=workers, ideal=args.concurrency / DELAY_S,
                     fraction_of_ideal=r["pairs_per_s"] / (args.concurrency / DELAY_S),
                     server=server.stats())
            res["served"].append(r)
            print("served", r, flush=True)
        server.close()
        server = Server(0.0)  # the driver's ceiling through Ray: no model time at all
        r = run_case({"kind": "served", "url": server.url, "pairs": args.ceiling_pairs, "concurrency": 64,
                      "workers": 4, "ray": address})
        r.update(server=server.stats())
        res["ceiling"] = r
        print("ceiling", r, flush=True)
        server.close()
        res["commit"] = run_case({"kind": "commit", "rows": 5000})
        print("commit", res["commit"], flush=True)
        res["memory"] = []
        for n in args.memory_pairs:
            store = str(Path(tempfile.mkdtemp()) / "calls.sqlite")
            run_case({"kind": "memory", "pairs": n, "store": store, "fill": True, "ray": address})
            r = run_case({"kind": "memory", "pairs": n, "store": store, "fill": False, "ray": address})
            r["store_mb"] = Path(store).stat().st_size / 1024**2
            res["memory"].append(r)
            print("memory", r, flush=True)
    finally:
        ray.shutdown()
    res["machine"]["load_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
