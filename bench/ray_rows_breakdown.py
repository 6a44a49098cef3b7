"""Where the driver's main thread spends its CPU per call under Ray with a store (issue 23 part 2):
the same setup as bench/driver.py's ray_cpu case (2 Ray workers x 32, tests/openai_server.py in
its own process answering at once), each of the store's steps timed with time.thread_time
around it (about 1 us of overhead per wrapped call). Steps a checkout lacks are left out, so
the same script measures main and a branch:

    PYTHONPATH=src python bench/ray_rows_breakdown.py 10000
    PYTHONPATH=/path/to/main/src python bench/ray_rows_breakdown.py 10000

Steps (nested: `commit` / `submit` (store/sinks.py's RayRowsSink, or its ChildWriter since issue
40; `_write` before them) holds put_many's and
put_judgments' writes): `commit` / `_write` (a transaction: rows made and written), `encode_call` /
`encode_result` (a call's row), `put_judgments`,
`encode_judgment`, `key` (a call's store key), `get_many` (lookups), `_hint` (what a worker is
told to make a row), `parse_grade` (reading an answer's label).
"""

from __future__ import annotations

import functools
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_out  # noqa: E402  (bench/: the synthetic pairs and the test server in its own process)

spent: dict[str, float] = {}


def timed(owner, name: str) -> None:
    """Wrap owner.name (where it exists) so its main-thread CPU is added to spent[name]."""
    real = getattr(owner, name, None)
    if real is None:
        return

    @functools.wraps(real)
    def wrapper(*args, **kwargs):
        start = time.thread_time()
        try:
            return real(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.thread_time() - start

    setattr(owner, name, wrapper)


def module(name: str):
    """A module of judgeblender, or None where this checkout lacks it."""
    import importlib

    try:
        return importlib.import_module(f"judgeblender.{name}")
    except ImportError:
        return None


def main() -> None:
    from judgeblender import calls
    from judgeblender.judges import JudgeSpec, judge_pairs
    from judgeblender.backends.ray_executor import RayBackend, connect
    from judgeblender.judges.ray_judges import ray_judge
    from judgeblender.parse import labels
    from judgeblender.store import CallStore, compact
    from judgeblender.store import calls as store_calls

    sinks = module("store.sinks")
    # where the engine looks parse_grade and call_keys up: answers.py and callpool.py, or (before
    # the engine was split by job) engine.py
    reads = module("judges.answers") or module("judges.engine")
    keying = module("judges.callpool") or module("judges.engine")
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    if sinks is not None:  # the writer process's sink (RayRowsSink), or since issue 40 its writer (ChildWriter)
        owner = getattr(sinks, "ChildWriter", None) or sinks.RayRowsSink
        timed(owner, "submit" if owner.__name__ == "ChildWriter" else "commit")
    for owner, name in ((store_calls.CallStore, "_write"), (store_calls.CallStore, "put_judgments"),
                        (store_calls.CallStore, "get_many"), (compact.Texts, "encode_call"),
                        (compact.Texts, "encode_result"), (compact.Texts, "encode_judgment"), (RayBackend, "_hint"),
                        (labels, "parse_grade")):
        timed(owner, name)
    reads.parse_grade = labels.parse_grade
    keys = calls.call_keys

    def timed_keys(identity):
        key = keys(identity)

        def one(request):
            start = time.thread_time()
            try:
                return key(request)
            finally:
                spent["key"] = spent.get("key", 0.0) + time.thread_time() - start
        return one

    keying.call_keys = timed_keys
    server = scale_out.Server(0.0)
    connect("local")
    queries, corpus, pairs = scale_out.dataset(n)
    judge = ray_judge(JudgeSpec(model="openai:test-model", options={"base_url": server.url, "concurrency": 64,
                                                                   "timeout_s": 30}), 2)
    judge_pairs([judge], pairs[:128], queries, corpus)  # warm
    store = CallStore(Path(tempfile.mkdtemp()) / "calls.sqlite")
    spent.clear()
    process, thread = time.process_time(), time.thread_time()
    judge_pairs([judge], pairs, queries, corpus, store=store)
    print(f"driver CPU {(time.process_time() - process) / n * 1000:.3f} ms/call, "
          f"main thread {(time.thread_time() - thread) / n * 1000:.3f} ms/call")
    for name, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
        print(f"  {name:16s} {seconds / n * 1e6:6.1f} us/call")
    store.close()
    judge.close()
    server.close()


if __name__ == "__main__":
    main()
