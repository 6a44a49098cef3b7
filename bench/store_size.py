"""Store bytes per call (issue 23 part 3): the store file, WAL included, over the calls it holds.

    PYTHONPATH=src python bench/store_size.py --pairs 20000 --out bench/results/store_size.json

A served judge (tests/openai_server.py on 127.0.0.1, answering at once) judges synthetic pairs
with 60-word passages and the UMBRELA prompt, through the real engine and store, once in
logprobs mode (one call and one judgment per pair) and once in generate mode. Each run writes
a new store; the figure is (store + WAL) bytes / calls, measured while the store is still open
(the WAL at its largest) and again after it is closed (SQLite folds the WAL back in), with the
judgments table counted. `--schema` names the code under test in the output (run once with
`PYTHONPATH` pointing at another checkout to compare).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))


def dataset(n: int):
    """n pairs, one 60-word passage each (scale_out.py's data)."""
    from scale_out import dataset as synthetic

    return synthetic(n, passages=n)


def one(mode: str, n: int, url: str) -> dict:
    from judgeblender.judges import Judge, JudgeSpec, judge_pairs
    from judgeblender.store import CallStore

    queries, corpus, pairs = dataset(n)
    path = Path(tempfile.mkdtemp()) / "calls.sqlite"
    judge = Judge(JudgeSpec(model="openai:test-model", prompt="umbrela", mode=mode,
                            options={"base_url": url, "concurrency": 32, "timeout_s": 30}))
    store = CallStore(path)
    t0 = time.perf_counter()
    run = judge_pairs([judge], pairs, queries, corpus, store=store)
    seconds = time.perf_counter() - t0
    calls = store.count_calls()
    wal = Path(f"{path}-wal")
    open_bytes = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    store.close()
    judge.close()
    closed_bytes = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    assert run.stats[judge.id].judged == n, run.stats[judge.id]
    return {"mode": mode, "pairs": n, "judged": run.stats[judge.id].judged, "calls": calls,
            "bytes_per_call_open": round(open_bytes / calls, 1),
            "bytes_per_call_closed": round(closed_bytes / calls, 1), "seconds": round(seconds, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=20000)
    ap.add_argument("--schema", default="this checkout")
    ap.add_argument("--out")
    args = ap.parse_args()
    from openai_server import OpenAITestServer

    server = OpenAITestServer(answers="##final score: 2", max_requests=10**7, max_lifetime_s=3600,
                              top_logprobs=[("2", -0.2), ("3", -1.9), ("1", -3.1), ("0", -4.6), ("The", -6.0)])
    server.start()
    try:
        url = f"http://127.0.0.1:{server.port}/v1"
        rows = [one(mode, args.pairs, url) for mode in ("logprobs", "generate")]
    finally:
        server.stop()
    result = {"schema": args.schema, "load_average": os.getloadavg(), "rows": rows}
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
