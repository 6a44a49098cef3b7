"""`judgeblender serve` against the in-process engine, on the same canned model (issue 33, part 5).

    PYTHONPATH=src python bench/serve.py                          # 20,000 pairs at concurrency 256
    PYTHONPATH=src python bench/serve.py --pairs 2000 --delay 0.05  # the reduced run in docs/serve.md

The canned model is tests/openai_server.py in a process of its own (answers after --delay
seconds). The engine: `judge_pairs` over every pair in this process, one judge of
openai:test-model with --concurrency calls in flight, a fresh store. The service: `judgeblender
serve` as a user starts it (a subprocess, --concurrency the same, a fresh store), sent the same
pairs by --concurrency client threads, 1 pair per request and then 100 (each on a fresh store,
so every pair is a model call in all three runs). Recorded: seconds, pairs/s, the service's
throughput as a share of the engine's for each request size, the upstream calls of each run
(equal: nothing answered twice, nothing from a store), and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from serve_helpers import API_KEY, Served  # noqa: E402

UPSTREAM = """
import sys, time
sys.path.insert(0, {tests!r})
from openai_server import OpenAITestServer
srv = OpenAITestServer(answers="2", delay_s={delay}, max_requests=10**8, max_lifetime_s=10**6).start()
print(srv.base_url, flush=True)
for line in sys.stdin:
    if line.strip() == "count":
        print(srv.request_count, flush=True)
"""


class Upstream:
    """The canned model in its own process; `count()` asks it how many calls it answered."""

    def __init__(self, delay: float):
        self.proc = subprocess.Popen([sys.executable, "-c", UPSTREAM.format(tests=str(ROOT / "tests"), delay=delay)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.base_url = self.proc.stdout.readline().strip()  # type: ignore[union-attr]

    def count(self) -> int:
        self.proc.stdin.write("count\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return int(self.proc.stdout.readline())  # type: ignore[union-attr]

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(10)


def inputs(n: int) -> tuple[list[tuple[str, str]], dict[str, str], dict[str, str]]:
    pairs = [(f"q{i % 200}", f"d{i}") for i in range(n)]
    queries = {f"q{j}": f"question number {j} about a topic" for j in range(200)}
    passages = {f"d{i}": f"passage {i}: " + " ".join(f"w{(i * 7 + k) % 997}" for k in range(60)) for i in range(n)}
    return pairs, queries, passages


def engine(upstream: Upstream, pairs, queries, passages, concurrency: int, tmp: Path) -> dict:
    from judgeblender.judges import JudgeSpec
    from judgeblender.judges.engine import judge_pairs
    from judgeblender.store import CallStore

    os.environ["OPENAI_API_KEY"] = API_KEY
    spec = JudgeSpec(model="openai:test-model", options={"base_url": upstream.base_url, "concurrency": concurrency})
    before = upstream.count()
    with CallStore(tmp / "engine.sqlite") as store:
        started = time.perf_counter()
        run = judge_pairs([spec], pairs, queries, passages, store)
        took = time.perf_counter() - started
    labels = [j.label for j in next(iter(run.judgments.values())).values()]
    assert labels == [2] * len(pairs), "the engine's labels"
    return {"seconds": round(took, 3), "pairs_per_s": round(len(pairs) / took, 1), "calls": upstream.count() - before}


def service(upstream: Upstream, pairs, queries, passages, concurrency: int, per_request: int, tmp: Path) -> dict:
    store = tmp / f"serve-{per_request}.sqlite"
    bodies = [[{"qid": q, "docid": d, "query": queries[q], "passage": passages[d]} for q, d in pairs[k:k + per_request]]
              for k in range(0, len(pairs), per_request)]
    before = upstream.count()
    with Served(["-j", "openai:test-model", "--base-url", upstream.base_url, "--concurrency", str(concurrency),
                 "--store", str(store), "--max-queue", str(max(256, concurrency * 2))]) as served:
        started = time.perf_counter()
        answers = served.post_many(bodies, concurrency=concurrency)
        took = time.perf_counter() - started
        assert [a.status for a in answers] == [200] * len(bodies), "every request answered"
        assert [r["label"] for a in answers for r in a.json()["results"]] == [2] * len(pairs), "the service's labels"
        assert served.stop() == 0
    return {"pairs_per_request": per_request, "requests": len(bodies), "seconds": round(took, 3),
            "pairs_per_s": round(len(pairs) / took, 1), "calls": upstream.count() - before}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=20_000)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--delay", type=float, default=0.05, help="the canned model's seconds per answer")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "serve.json")
    args = ap.parse_args()
    pairs, queries, passages = inputs(args.pairs)
    upstream = Upstream(args.delay)
    try:
        with tempfile.TemporaryDirectory(prefix="jb-bench-serve-") as tmp:
            base = engine(upstream, pairs, queries, passages, args.concurrency, Path(tmp))
            print(f"engine: {base}", flush=True)
            runs = []
            for per_request in (100, 1):
                one = service(upstream, pairs, queries, passages, args.concurrency, per_request, Path(tmp))
                one["share_of_engine"] = round(one["pairs_per_s"] / base["pairs_per_s"], 3)
                print(f"service: {one}", flush=True)
                runs.append(one)
    finally:
        upstream.close()
    result = {"pairs": args.pairs, "concurrency": args.concurrency, "model_delay_s": args.delay,
              "engine": base, "service": runs, "loadavg": os.getloadavg(), "cpus": os.cpu_count(),
              "command": " ".join(["python", "bench/serve.py", *sys.argv[1:]])}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
