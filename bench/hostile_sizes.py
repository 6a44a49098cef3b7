"""Hostile sizes: what cutting a 20 MB passage to the model's context costs, before and after.

    .venv/bin/python bench/hostile_sizes.py [--mb 20] [--model llamacpp:default] [--ref main]
                                            [--out bench/results/hostile_sizes.json]

The passage is real text: the TREC DL 2019 passages (../shared/data) joined until it is --mb
megabytes (characters; they are ASCII-heavy). The budget is what the umbrela prompt leaves in
the model's context for that query (judges/truncate.passage_budget). Two cutters run on the
same backend and passage:
  before  judges/truncate.py as it is at git ref --ref (read with `git show`, run in this
          package): a binary search over prefixes, each counted by the tokenizer;
  after   this tree's judges/truncate.py.
For each: wall-clock seconds, tokenizer calls (llama.cpp's tokenize, counted by wrapping it)
and the kept text's size; both cuts must keep the same text. The 'before' is run once (about a
minute); 'after' is the median of 3 runs. Figures depend on the machine: the load average is
recorded next to them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DL19 = ROOT.parent / "shared" / "data" / "trec-dl-2019" / "passages.jsonl"


def passage_of(mb: float) -> str:
    texts, size = [], 0
    with DL19.open(encoding="utf-8") as fh:
        lines = fh.readlines()
    while size < mb * 1_000_000:
        for line in lines:
            text = json.loads(line)["text"]
            texts.append(text)
            size += len(text) + 1
            if size >= mb * 1_000_000:
                break
    return " ".join(texts)[: int(mb * 1_000_000)]


def old_truncate(ref: str):
    """The truncate module at git ref `ref`, loaded inside this package (its imports are relative)."""
    source = subprocess.run(["git", "show", f"{ref}:src/judgeblender/judges/truncate.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    module = types.ModuleType("judgeblender.judges._truncate_before")
    module.__package__ = "judgeblender.judges"
    exec(compile(source, f"{ref}:truncate.py", "exec"), module.__dict__)
    return module


def counted(backend):
    """Wrap the llama.cpp tokenizer so every call is counted."""
    llm = backend.llm
    original = llm.tokenize
    calls = {"n": 0}

    def tokenize(*args, **kwargs):
        calls["n"] += 1
        return original(*args, **kwargs)

    llm.tokenize = tokenize
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=20.0)
    parser.add_argument("--model", default="llamacpp:default")
    parser.add_argument("--ref", default="main")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "hostile_sizes.json")
    args = parser.parse_args()

    from judgeblender.backends.registry import create_backend
    from judgeblender.judges import truncate as after
    from judgeblender.prompts import get_template

    backend = create_backend(args.model)
    passage = passage_of(args.mb)
    budget = after.passage_budget(get_template("umbrela"), backend, {"query": "what do goldfish eat", "passage": ""})
    backend.max_token_chars()  # read once from the vocabulary, as a judge run does at its first long passage
    calls = counted(backend)
    before = old_truncate(args.ref)
    load_before = os.getloadavg()[0]

    def measure(cutter):
        calls["n"] = 0
        started = time.perf_counter()
        kept, record = cutter.truncate_passage(passage, budget, backend)
        return time.perf_counter() - started, calls["n"], kept, record

    b_s, b_calls, b_kept, b_record = measure(before)
    runs = [measure(after) for _ in range(args.repeats)]
    a_s = statistics.median(r[0] for r in runs)
    _, a_calls, a_kept, a_record = runs[0]
    result = {
        "passage_chars": len(passage), "budget_tokens": budget, "model": args.model,
        "before": {"ref": args.ref, "seconds": round(b_s, 3), "tokenizer_calls": b_calls, "record": b_record},
        "after": {"seconds": round(a_s, 4), "tokenizer_calls": a_calls, "record": a_record,
                  "seconds_each": [round(r[0], 4) for r in runs]},
        "same_kept_text": a_kept == b_kept, "speedup": round(b_s / a_s, 1),
        "max_token_chars": backend.max_token_chars(),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)]},
    }
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if a_kept != b_kept:
        print("note: the two cuts differ", file=sys.stderr)


if __name__ == "__main__":
    main()
