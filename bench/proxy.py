"""The proxy's added latency per call (issue 33 part 5): cached and passed through, p50 and p99.

    PYTHONPATH=src python bench/proxy.py --calls 2000 --out bench/results/proxy.json

The canned upstream is tests/openai_server.py in a process of its own on 127.0.0.1, answering at
once; `judgeblender proxy` runs in front of it as the command does (uvicorn, a fresh store). One
client (http.client, one keep-alive connection, one request at a time, so each figure is one
call's latency and not a queue's) sends `--calls` chat requests, each with a seed of its own
(deterministic, so cacheable), three times:

- straight to the upstream (the baseline);
- through the proxy, each for the first time: passed through (an upstream call, then its answer
  committed to the store before it is returned);
- through the proxy again, the same requests: answered from the store, no upstream call.

The added latency is the proxy's percentile less the baseline's. Every call is checked: a 200
with the right answer, the cache header saying how it was answered, and the upstream's request
count proving the cached calls never reached it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UPSTREAM = """
import sys, threading
sys.path.insert(0, {tests!r})
from openai_server import OpenAITestServer
server = OpenAITestServer(answers=lambda body: str(body.get("seed")), max_requests=10**9, max_lifetime_s=3600).start()
print(server.base_url, flush=True)
sys.stdin.read()  # until the benchmark closes it
print(server.request_count, flush=True)
server.stop()
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(address: str, bodies: list[bytes], expect: str | None) -> list[float]:
    """Each call's seconds, one request at a time on one keep-alive connection."""
    conn = http.client.HTTPConnection(address, timeout=60)
    seconds = []
    try:
        for body in bodies:
            seed = json.loads(body)["seed"]
            start = time.perf_counter()
            conn.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
            response = conn.getresponse()
            data = response.read()
            seconds.append(time.perf_counter() - start)
            if response.status != 200 or json.loads(data)["choices"][0]["message"]["content"] != str(seed):
                raise SystemExit(f"call {seed}: {response.status} {data[:200]!r}")
            if expect is not None and response.getheader("x-judgeblender-cache") != expect:
                raise SystemExit(f"call {seed}: answered {response.getheader('x-judgeblender-cache')}, not {expect}")
    finally:
        conn.close()
    return seconds


def summary(seconds: list[float]) -> dict:
    return {"calls": len(seconds), "p50_ms": round(1000 * statistics.median(seconds), 3),
            "p99_ms": round(1000 * percentile(seconds, 0.99), 3), "mean_ms": round(1000 * statistics.fmean(seconds), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "proxy.json")
    args = parser.parse_args()

    upstream = subprocess.Popen([sys.executable, "-c", UPSTREAM.format(tests=str(ROOT / "tests"))],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    base_url = upstream.stdout.readline().strip()
    store = Path(tempfile.mkdtemp()) / "proxy.sqlite"
    proxy = subprocess.Popen([sys.executable, "-m", "judgeblender", "proxy", "--upstream", base_url, "--store",
                              str(store), "--port", "0"], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"),
                                                                               os.environ.get("PYTHONPATH", "")])})
    try:
        proxy_url = proxy.stdout.readline().split(" at ")[1].split()[0]
        direct, through = base_url.split("//")[1].split("/")[0], proxy_url.split("//")[1].split("/")[0]

        def bodies(first: int, n: int) -> list[bytes]:
            return [json.dumps({"model": "test-model", "temperature": 0, "seed": first + i, "messages": [
                {"role": "user", "content": f"Is passage {first + i} relevant to the query? Answer 0, 1, 2 or 3."}]}
            ).encode() for i in range(n)]

        warm = bodies(10**6, args.warmup)
        timed(direct, warm, None)
        timed(through, warm, "miss")
        timed(through, warm, "hit")
        calls = bodies(0, args.calls)
        baseline = timed(direct, calls, None)
        asked = timed(through, bodies(args.calls, args.calls), "miss")  # requests of their own: not cached yet
        cached = timed(through, bodies(args.calls, args.calls), "hit")
    finally:
        proxy.terminate()
        proxy_code = proxy.wait(timeout=60)
        upstream.stdin.close()
        upstream_requests = int(upstream.stdout.readline())
        upstream.wait(timeout=60)
    expected = args.warmup * 2 + args.calls * 2  # direct and passed through; cached calls never reach it
    if upstream_requests != expected or proxy_code != 0:
        raise SystemExit(f"the upstream was asked {upstream_requests} times, not {expected}; proxy exit {proxy_code}")
    base, miss, hit = summary(baseline), summary(asked), summary(cached)
    result = {
        "what": "judgeblender proxy's latency per call, one client, one request at a time, against the canned upstream "
                "(tests/openai_server.py, its own process, answering at once) called directly",
        "command": f"PYTHONPATH=src python bench/proxy.py --calls {args.calls} --warmup {args.warmup}",
        "load_average": os.getloadavg(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "direct": base, "passed_through": miss, "cached": hit,
        "added_ms": {"passed_through": {"p50": round(miss["p50_ms"] - base["p50_ms"], 3),
                                        "p99": round(miss["p99_ms"] - base["p99_ms"], 3)},
                     "cached": {"p50": round(hit["p50_ms"] - base["p50_ms"], 3),
                                "p99": round(hit["p99_ms"] - base["p99_ms"], 3)}},
        "upstream_requests": upstream_requests,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
