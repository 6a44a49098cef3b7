"""How fast `judgeblender store merge` merges per-shard stores (docs/scale-out.md).

    PYTHONPATH=src python bench/store_merge.py --shards 2 --rows 50000 --overlap 0.1

Builds SHARDS stores of ROWS calls each (the same ~1.5 KB prompts as bench/scale_out.py's commit
case), consecutive shards sharing OVERLAP of their calls, merges them with merge_stores, and
prints one JSON object: seconds to build and to merge, calls merged per second, file sizes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from judgeblender.calls import CallRequest, CallResult, Message, call_key
from judgeblender.store import CallStore, merge_stores


def build(path: Path, first: int, rows: int) -> None:
    identity = {"backend": "openai", "model": "m", "endpoint": "http://x"}
    batch = []
    with CallStore(path) as store:
        for i in range(first, first + rows):
            req = CallRequest((Message("system", "You are a relevance judge. " * 20),
                               Message("user", f"Query: q{i}\nPassage: " + "lorem ipsum " * 80)), seed=0)
            batch.append((call_key(identity, req), "openai", identity, req,
                          CallResult(f"##final score: {i % 4}", tokens_in=300), {"value": i % 4, "invalid_reason": None}))
            if len(batch) == 1000:
                store.put_many(batch)
                batch = []
        if batch:
            store.put_many(batch)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--overlap", type=float, default=0.1)
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="merge-bench-"))
    step = int(args.rows * (1 - args.overlap))
    t0 = time.perf_counter()
    shards = [d / f"shard{k}.sqlite" for k in range(args.shards)]
    for k, path in enumerate(shards):
        build(path, k * step, args.rows)
    built = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = merge_stores(d / "merged.sqlite", shards)
    merged = time.perf_counter() - t0
    read = report.read["calls"]
    print(json.dumps({"shards": args.shards, "rows_per_shard": args.rows, "overlap": args.overlap,
                      "build_s": round(built, 2), "merge_s": round(merged, 2), "calls_read": read,
                      "calls_merged": report.rows["calls"], "duplicates": report.duplicates["calls"],
                      "calls_read_per_s": round(read / merged), "shard_mb": round(shards[0].stat().st_size / 1e6, 1),
                      "merged_mb": round((d / "merged.sqlite").stat().st_size / 1e6, 1)}))
    shutil.rmtree(d)


if __name__ == "__main__":
    main()
