"""Grade question-answer pairs with a jury: the two embedded models x two rubric prompts, offline.

    .venv/bin/python docs/examples/jury_example.py            # a fresh store each run
    .venv/bin/python docs/examples/jury_example.py --store out/jury.sqlite   # re-runs reuse the calls

Four jury members (llamacpp:default and llamacpp:gemma-270m, each with the factual-accuracy
and answer-correctness rubrics) grade six answers, three right and three wrong. Their
verdicts are pooled by the median; a member whose verdict is invalid abstains with its
reason. The output shows each member's score (or why it is invalid), the pooled score,
Krippendorff's alpha between the members, and the time each member took. Nothing here
reaches the network: both models ship with judgeblender's [models] extra.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from judgeblender.jury.grading import jury_agreement
from judgeblender.judges import JudgeSpec
from judgeblender.jury import Jury

# Questions with a reference answer, and an answer to grade: `right` is what a careful human says.
ITEMS = [
    {"id": "paris", "right": True, "input": "What is the capital of France?",
     "output": "The capital of France is Paris.", "reference": "Paris"},
    {"id": "hamlet", "right": False, "input": "Who wrote the play Hamlet?",
     "output": "Hamlet was written by Charles Dickens.", "reference": "William Shakespeare"},
    {"id": "spider", "right": True, "input": "How many legs does a spider have?",
     "output": "Spiders have eight legs.", "reference": "Eight"},
    {"id": "boiling", "right": False, "input": "At what temperature does water boil at sea level, in Celsius?",
     "output": "Water boils at 50 degrees Celsius at sea level.", "reference": "100 degrees Celsius"},
    {"id": "planet", "right": True, "input": "Which planet is the largest in the solar system?",
     "output": "Jupiter is the largest planet.", "reference": "Jupiter"},
    {"id": "moon", "right": False, "input": "In which year did humans first land on the Moon?",
     "output": "The first crewed Moon landing was in 1975.", "reference": "1969"},
]
MODELS = ["llamacpp:default", "llamacpp:gemma-270m"]
PROMPTS = ["factual-accuracy", "answer-correctness"]


def short(member: str) -> str:
    model, prompt, _ = member.split("/")
    return f"{model.split(':')[1]}/{'FA' if prompt == 'factual-accuracy' else 'AC'}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, help="SQLite store of the calls (default: a fresh temporary one)")
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: up to 8 cores)")
    ap.add_argument("--items", type=int, default=len(ITEMS), help="grade only the first N items")
    args = ap.parse_args()

    options = {"n_threads": args.threads} if args.threads else {}
    specs = [JudgeSpec(model, prompt=prompt, options=options, invalid_policy="no-retry")
             for model in MODELS for prompt in PROMPTS]
    items = [{k: v for k, v in it.items() if k != "right"} for it in ITEMS[:args.items]]
    with tempfile.TemporaryDirectory() as tmp:
        jury = Jury(specs, pooling="median", store=args.store or Path(tmp) / "jury.sqlite")
        started = time.perf_counter()
        run = asyncio.run(jury.arun(items))
        seconds = time.perf_counter() - started
        jury.store.close()

    members = list(run.stats)
    print(f"{'item':8} {'right?':6} " + " ".join(f"{short(m):>11}" for m in members) + f" {'median':>7}")
    for it, result in zip(ITEMS, run.results):
        cells = [f"{v.score:11.2f}" if v.score is not None else f"{'invalid':>11}"
                 for v in (result.judges[m] for m in members)]
        pooled = f"{result.score:7.2f}" if result.score is not None else f"{'-':>7}"
        print(f"{result.item_id:8} {'yes' if it['right'] else 'no':6} " + " ".join(cells) + f" {pooled}")

    print("\nreasons and invalid verdicts:")
    for result in run.results:
        for m in members:
            v = result.judges[m]
            text = v.reason if v.score is not None else f"INVALID: {v.invalid_reason}; raw: {v.raw_output!r}"
            print(f"  {result.item_id:8} {short(m):11} {text[:150]}")

    a = jury_agreement(run.results)
    shown = f"{a['alpha']:.3f}" if a["alpha"] is not None else f"undefined ({a['note']})"
    print(f"\nKrippendorff's alpha (interval) between the {a['members']} members: {shown} "
          f"over {a['pairable_items']} items")
    right = [r.score for it, r in zip(ITEMS, run.results) if it["right"] and r.score is not None]
    wrong = [r.score for it, r in zip(ITEMS, run.results) if not it["right"] and r.score is not None]
    if right and wrong:
        print(f"mean pooled score: right answers {sum(right) / len(right):.2f}, wrong answers {sum(wrong) / len(wrong):.2f}")
    for m, stats in run.stats.items():
        print(f"  {short(m):11} valid {stats.judged}/{stats.pairs}, {stats.calls_made} calls, {stats.seconds:.1f} s")
    print(f"total {seconds:.1f} s")


if __name__ == "__main__":
    main()
