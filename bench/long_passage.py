"""A very long passage costs its cut: `judge` on 2 pairs of a 22 MB passage vs on their cut text.

    PYTHONPATH=src .venv/bin/python bench/long_passage.py [--mb 22] [--model llamacpp:default]
        [--threads N] [--repeats 1] [--out bench/results/long_passage.json]

Two corpora of two passages each: `long`, a --mb MB passage of real text (the TREC DL 2019
passages joined, bench/hostile_sizes.py `passage_of`) and the same less its first 1,000
characters; `cut`, exactly the text the long run sent for each (its details' `kept_chars`), so
both runs send the same prompts. Each is judged by the real command, `python -m judgeblender
judge`, in a subprocess with a fresh store (no answer reused), timed wall-clock and in CPU
seconds (the child's user + system time: on a shared machine the fairer figure): reading the
corpus, the validation pass, the cut, the injection scan, the model calls, the store and the
outputs. The model is loaded in both, so the difference is what the long passage costs beyond
its cut. The runs alternate (long, cut, long, cut, ...) so that both see the same machine load;
the medians and their ratio are written, with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_sizes import passage_of  # noqa: E402 - the bench folder is not a package

ROOT = Path(__file__).resolve().parents[1]
QUERY = "what is the effect of caffeine on sleep"


def judge(folder: Path, corpus: Path, store: Path, args) -> tuple[float, float, list[dict]]:
    """One real `judge` run: its wall-clock seconds, its CPU seconds and its details records."""
    out = folder / f"{store.stem}.qrels"
    cmd = [sys.executable, "-m", "judgeblender", "judge", "-q", str(folder / "q.tsv"), "-c", str(corpus),
           "-p", str(folder / "p.tsv"), "-j", args.model, "--store", str(store), "-o", str(out), "--no-progress"]
    cmd += ["--threads", str(args.threads)] if args.threads else []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=folder)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if proc.returncode != 0:
        raise SystemExit(f"judge failed ({proc.returncode}):\n{proc.stderr}")
    details = [json.loads(line) for line in out.with_name(out.name + ".details.jsonl").read_text().splitlines()]
    return seconds, cpu, details


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=22.0)
    parser.add_argument("--model", default="llamacpp:default")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "long_passage.json")
    args = parser.parse_args()

    passage = passage_of(args.mb)
    texts = {"d1": passage, "d2": passage[1000:]}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "q.tsv").write_text(f"q1\t{QUERY}\n")
        (folder / "p.tsv").write_text("q1 d1\nq1 d2\n")
        long_corpus, cut_corpus = folder / "long.jsonl", folder / "cut.jsonl"
        long_corpus.write_text("".join(json.dumps({"docid": d, "text": t}) + "\n" for d, t in texts.items()))
        long_s, cut_s, long_cpu, cut_cpu, kept = [], [], [], [], None
        for repeat in range(args.repeats):
            seconds, cpu, details = judge(folder, long_corpus, folder / f"long{repeat}.sqlite", args)
            long_s.append(seconds)
            long_cpu.append(cpu)
            if kept is None:
                cuts = {r["docid"]: next(iter(r["judges"].values()))["truncated"] for r in details}
                kept = {d: texts[d][: cuts[d]["kept_chars"]] for d in texts}
                cut_corpus.write_text("".join(json.dumps({"docid": d, "text": t}) + "\n" for d, t in kept.items()))
                long_labels = [r["label"] for r in details]
            seconds, cpu, details = judge(folder, cut_corpus, folder / f"cut{repeat}.sqlite", args)
            cut_s.append(seconds)
            cut_cpu.append(cpu)
            assert all(next(iter(r["judges"].values()))["truncated"] is None for r in details)  # sent as they are
            cut_labels = [r["label"] for r in details]
    result = {
        "command": " ".join(["bench/long_passage.py", *sys.argv[1:]]),
        "passage_chars": len(passage), "pairs": 2, "model": args.model, "threads": args.threads, "kept_chars": [len(t) for t in kept.values()], "cuts": cuts,
        "long_seconds": [round(s, 2) for s in long_s], "cut_seconds": [round(s, 2) for s in cut_s],
        "long_median_s": round(statistics.median(long_s), 2), "cut_median_s": round(statistics.median(cut_s), 2),
        "ratio": round(statistics.median(long_s) / statistics.median(cut_s), 3),
        "long_cpu_s": [round(s, 2) for s in long_cpu], "cut_cpu_s": [round(s, 2) for s in cut_cpu],
        "cpu_ratio": round(statistics.median(long_cpu) / statistics.median(cut_cpu), 3),
        "same_labels": long_labels == cut_labels,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)]},
    }
    print(json.dumps(result, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
