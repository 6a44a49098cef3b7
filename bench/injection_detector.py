"""The injection tripwire without a model: recall on written wordings, false positives on real passages.

    PYTHONPATH=src python bench/injection_detector.py [--set held_out] [--out bench/results/injection_detector.json]

Recall: each wording of tests/data/injection/<set>.jsonl is appended to a real DL19 passage
(NIST label 0, the first passage of each query in turn) and scanned with its query; a wording
counts as caught when the scan flags the attacked passage. `held_out` was committed before
the detector was changed and never used to tune it; `dev` is the set it was tuned on.
False positives: every judged DL19 pair (9,260: /work/shared/data/trec-dl-2019) scanned as
published, overall and by kind of finding.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from judgeblender.judges.injection import scan
from judgeblender.pairs import read_corpus, read_qrels, read_queries

DATA = Path("/work/shared/data/trec-dl-2019")
SETS = Path(__file__).resolve().parents[1] / "tests" / "data" / "injection"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", action="append", choices=["held_out", "dev"], help="wording sets (default: both)")
    ap.add_argument("--data", type=Path, default=DATA, help="a collection folder: queries.tsv, qrels.txt, passages.jsonl")
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = ap.parse_args()
    queries = read_queries(args.data / "queries.tsv")
    qrels = read_qrels(args.data / "qrels.txt")
    corpus = read_corpus(args.data / "passages.jsonl")
    result: dict = {"command": " ".join(["python", *sys.argv]), "data": str(args.data)}

    hosts = [(q, next(d for d, lab in sorted(docs.items()) if lab == 0)) for q, docs in sorted(qrels.items())
             if any(lab == 0 for lab in docs.values())]
    for name in args.set or ["held_out", "dev"]:
        wordings = [json.loads(line) for line in (SETS / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
        missed = []
        for i, w in enumerate(wordings):
            qid, docid = hosts[i % len(hosts)]
            if not scan(f"{corpus[docid]} {w['text']}", queries[qid]):
                missed.append(w["id"])
        by_lang = Counter(w["lang"] for w in wordings)
        caught_lang = Counter(w["lang"] for w in wordings if w["id"] not in missed)
        result[name] = {"wordings": len(wordings), "caught": len(wordings) - len(missed),
                        "recall": round((len(wordings) - len(missed)) / len(wordings), 3),
                        "by_language": {k: f"{caught_lang[k]}/{n}" for k, n in sorted(by_lang.items())},
                        "missed": missed}
        print(f"{name}: caught {len(wordings) - len(missed)} of {len(wordings)} "
              f"({result[name]['recall']:.1%}); missed: {', '.join(missed) or 'none'}")

    started = time.perf_counter()
    kinds: Counter = Counter()
    flagged = []
    pairs = [(q, d) for q, docs in qrels.items() for d in docs]
    for q, d in pairs:
        found = scan(corpus[d], queries[q])
        if found:
            flagged.append((q, d, [str(f) for f in found]))
            kinds.update({f.kind for f in found})
    n_passages = len({d for _, d in pairs})
    flagged_passages = {d for _, d, _ in flagged}
    result["false_positives"] = {
        "pairs": len(pairs), "flagged": len(flagged), "rate": round(len(flagged) / len(pairs), 5),
        "passages": n_passages, "flagged_passages": len(flagged_passages), "by_kind": dict(kinds.most_common()),
        "seconds": round(time.perf_counter() - started, 1),
        "examples": flagged[:20]}
    print(f"false positives on {args.data.name}: {len(flagged)} of {len(pairs)} pairs "
          f"({len(flagged) / len(pairs):.2%}), {len(flagged_passages)} of {n_passages} passages; by kind: {dict(kinds)}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
