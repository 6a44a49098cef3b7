"""What a degenerate answer costs the label and verdict parsers, this tree's against a base's.

    PYTHONPATH=src python bench/parse_cost.py [--base main] [--sizes 2500,5000,10000,40000]
                                              [--base-cap 10000] [--base-limit 20]

Each case is a text built by repeating a short piece to about the given size; the time is one
parse (perf_counter, median of 3; the base: one parse). The base's parsers (git show BASE:src/judgeblender/parse/
...) are timed only up to --base-cap characters, since some of their cases grow with the
square of the length or worse; once one base parse of a case takes over --base-limit seconds,
its larger sizes are not timed (each base parse runs in a forked process, stopped after
--base-limit seconds: ">N" in the table). Linear work shows as a time that doubles with the size.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reparse import load_base  # noqa: E402

from judgeblender.parse.labels import parse_grade  # noqa: E402
from judgeblender.parse.verdict import parse_verdict  # noqa: E402

RUBRIC = {"type": "object", "properties": {"reason": {"type": "string"}, "score": {"type": "number"}},
          "required": ["reason", "score"]}
LABEL_CASES = {"'1,' repeated": "1,", "'1 ' repeated": "1 ", "'score' + spaces": None, "'o:' + spaces": None,
               "'1, 2 or 3 '": "1, 2 or 3 ", "' \\n' repeated": " \n", "'(1-5) '": "(1-5) "}
VERDICT_CASES = {"'{' repeated": "{", "'{}' repeated": "{}", "'{x' then '}'": None, "deep '{\"a\":'": None}


def build(name: str, piece: str | None, size: int) -> str:
    if piece is not None:
        return piece * (size // len(piece))
    if name == "'score' + spaces":
        return "score" + " " * size
    if name == "'o:' + spaces":
        return "o:" + " " * size
    if name == "'{x' then '}'":
        return "{x" * (size // 3) + "}" * (size // 3)
    return '{"a":' * (size // 6) + "1" + "}" * (size // 6)


def timed(fn, text: str, repeats: int = 3) -> float:
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(text)
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def _run_once(fn, text: str, out) -> None:
    out.put(timed(fn, text, repeats=1))


def timed_apart(fn, text: str, limit: float) -> float | None:
    """One parse in a forked process, given up after `limit` seconds (None)."""
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    proc = ctx.Process(target=_run_once, args=(fn, text, out))
    proc.start()
    proc.join(limit)
    if proc.is_alive():
        proc.terminate()
        proc.join()
        return None
    return out.get()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="main")
    ap.add_argument("--sizes", default="2500,5000,10000,40000")
    ap.add_argument("--base-cap", type=int, default=10000, help="largest size the base is timed at")
    ap.add_argument("--base-limit", type=float, default=20.0, help="give up a base parse after this many seconds")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        old_labels, old_verdict = load_base(args.base, Path(tmp))
        parsers = {
            "label": (lambda t: parse_grade(t), lambda t: old_labels.parse_grade(t), LABEL_CASES),
            "verdict": (lambda t: parse_verdict(t, RUBRIC, score_range=[0, 1]),
                        lambda t: old_verdict.parse_verdict(t, RUBRIC, score_range=[0, 1]), VERDICT_CASES),
        }
        print(f"{'parser':8} {'case':22} " + " ".join(f"{s:>16}" for s in sizes))
        for kind, (new, old, cases) in parsers.items():
            for name, piece in cases.items():
                cells, base_slow = [], False
                for size in sizes:
                    text = build(name, piece, size)
                    now = timed(new, text)
                    was = "-"
                    if size <= args.base_cap and not base_slow:
                        seconds = timed_apart(old, text, args.base_limit)
                        was = f"{seconds:.3f}" if seconds is not None else f">{args.base_limit:g}"
                        base_slow = seconds is None
                    cells.append(f"{now:.3f}/{was:>7}")
                print(f"{kind:8} {name:22} " + " ".join(f"{c:>16}" for c in cells))
    print("seconds per parse: this tree (median of 3) / base (one parse; '-': not timed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
