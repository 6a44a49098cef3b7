"""How long the label parser takes on degenerate answers, against the answer's length (issue 20, part 3).

    python bench/parse_linear.py                 # table on stdout
    python bench/parse_linear.py --sizes 10000 20000 40000 80000

A served answer can be as large as its response bound allows (about 42 KB for a 100-token
step), and the parser runs on the event loop that carries every other call in flight: its
time must grow linearly with the answer, or one degenerate answer stalls the run and makes
the other calls time out. Each family below made some rule's regex polynomial before the fix
(whitespace between "score" and its value, comma lists, line breaks, digit runs, stars). Each
figure is the best of `--repeats` runs (the machine is shared); the last column is the time
per KB at the largest size over that at the smallest, about 1 when the time is linear.
"""

from __future__ import annotations

import argparse
import time

from judgeblender.parse import parse_grade

FAMILIES = {
    "score + spaces": lambda n: "score" + " " * n + "x",
    "final score + breaks": lambda n: "final score" + "\n" * n + "x",
    "comma list": lambda n: "1, " * (n // 3),
    "300-digit runs": lambda n: ("1" * 300 + " ") * (n // 301) + "x",
    "score + stars": lambda n: "score" + "*" * n + "x",
    "repeated final score": lambda n: "final score " * (n // 12),
    "2 2 2 ... /": lambda n: "2 " * (n // 2) + "/",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 20_000, 40_000, 80_000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print("| family | " + " | ".join(f"{n // 1000} KB (ms)" for n in args.sizes) + " | growth per KB |")
    print("|---" * (len(args.sizes) + 2) + "|")
    for name, make in FAMILIES.items():
        times = []
        for n in args.sizes:
            text = make(n)
            best = float("inf")
            for _ in range(args.repeats):
                start = time.perf_counter()
                parse_grade(text)
                best = min(best, time.perf_counter() - start)
            times.append(best)
        growth = (times[-1] / args.sizes[-1]) / (times[0] / args.sizes[0]) if times[0] > 0 else float("nan")
        print(f"| {name} | " + " | ".join(f"{t * 1000:.1f}" for t in times) + f" | {growth:.2f} |")


if __name__ == "__main__":
    main()
