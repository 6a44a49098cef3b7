"""The prompt-injection scan: its findings frozen on real collections, and its cost per pair.

    PYTHONPATH=/work/main/src python bench/injection_scan.py freeze     # findings of the code on PYTHONPATH
    PYTHONPATH=src python bench/injection_scan.py time [--out bench/results/injection_scan.json]

freeze: every judged pair of TREC DL 2019, DL 2020 and LLMJudge dev (../shared/data, the qrels'
pairs in file order) is flagged as `judge` flags it (`flag_pairs`), every distinct passage is
scanned without its query, and every wording of tests/data/injection is scanned alone and
appended to a DL19 passage with its query (as bench/injection_detector.py does). What was found
is written to tests/data/injection/findings.json, which tests/test_injection_scan.py compares
with the code under test: the file was written by the code before the scan was restructured
(issue 30, part 8), so a faster scan that finds anything else fails there.

time: the microseconds a pair that `flag_pairs` takes over DL19's judged pairs (9,260 pairs,
9,139 passages), a fresh call each repeat (nothing cached from the one before), median of
--repeats, in wall and CPU time (the CPU time holds better on a loaded machine), with the load
average; and `scan` called pair by pair (the function every version has). Run it with the code
before the change (PYTHONPATH=/work/main/src) for the figures to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import judgeblender
from judgeblender.judges.injection import flag_pairs, scan
from judgeblender.pairs import Pair, read_corpus, read_qrels, read_queries

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
COLLECTIONS = ("trec-dl-2019", "trec-dl-2020", "llmjudge-dev")
WORDINGS = ROOT / "tests" / "data" / "injection"
FROZEN = WORDINGS / "findings.json"


def collection(name: str) -> tuple[dict[str, str], list[Pair], Any]:
    """A collection's queries, its judged pairs (qrels order, passage and query known) and passages."""
    folder = DATA / name
    queries = read_queries(folder / "queries.tsv")
    qrels = read_qrels(folder / "qrels.txt")
    corpus = read_corpus(folder / "passages.jsonl")
    pairs = [Pair(q, d) for q, docs in qrels.items() for d in docs if d in corpus and q in queries]
    return queries, pairs, corpus


def hosts() -> list[tuple[str, str]]:
    """bench/injection_detector.py's hosts: per query (sorted), its first passage judged 0."""
    qrels = read_qrels(DATA / "trec-dl-2019" / "qrels.txt")
    return [(q, next(d for d, lab in sorted(docs.items()) if lab == 0)) for q, docs in sorted(qrels.items())
            if any(lab == 0 for lab in docs.values())]


def shown(found: list) -> list[str]:
    return [str(f) for f in found]


def code_version() -> str:
    src = Path(judgeblender.__file__).resolve().parents[1]
    proc = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True)
    return f"{src} at {proc.stdout.strip() or 'an unknown commit'}"


def freeze(out: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"command": " ".join(["python", "bench/injection_scan.py", *sys.argv[1:]]),
                              "code": code_version(), "collections": {}, "wordings": {}}
    for name in COLLECTIONS:
        queries, pairs, corpus = collection(name)
        flagged = flag_pairs(pairs, queries, corpus)
        passages = {d: shown(scan(corpus[d])) for d in dict.fromkeys(p.docid for p in pairs)}
        result["collections"][name] = {
            "pairs": len(pairs), "passages": len(passages),
            "flagged": {f"{p.qid} {p.docid}": shown(found) for p, found in flagged.items()},
            "passages_flagged_without_query": {d: found for d, found in passages.items() if found}}
        print(f"{name}: {len(flagged)} of {len(pairs)} pairs flagged, "
              f"{len(result['collections'][name]['passages_flagged_without_query'])} passages without the query")
    queries, _, corpus = collection("trec-dl-2019")
    places = hosts()
    for set_name in ("dev", "held_out"):
        lines = (WORDINGS / f"{set_name}.jsonl").read_text(encoding="utf-8").splitlines()
        rows = {}
        for i, w in enumerate(json.loads(line) for line in lines):
            qid, docid = places[i % len(places)]
            rows[w["id"]] = {"alone": shown(scan(w["text"])),
                             "appended": shown(scan(f"{corpus[docid]} {w['text']}", queries[qid])),
                             "host": f"{qid} {docid}"}
        result["wordings"][set_name] = rows
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    return result


def timing(repeats: int) -> dict[str, Any]:
    queries, pairs, corpus = collection("trec-dl-2019")
    chars = sum(len(corpus[p.docid]) for p in pairs)
    runs: dict[str, list[float]] = {"flag_pairs_us": [], "flag_pairs_cpu_us": [], "scan_us": [], "scan_cpu_us": []}
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        flagged = flag_pairs(pairs, queries, corpus)
        runs["flag_pairs_us"].append((time.perf_counter() - t0) / len(pairs) * 1e6)
        runs["flag_pairs_cpu_us"].append((time.process_time() - c0) / len(pairs) * 1e6)
        c0, t0 = time.process_time(), time.perf_counter()
        for p in pairs:
            scan(corpus[p.docid], queries[p.qid])
        runs["scan_us"].append((time.perf_counter() - t0) / len(pairs) * 1e6)
        runs["scan_cpu_us"].append((time.process_time() - c0) / len(pairs) * 1e6)
    return {"collection": "trec-dl-2019", "pairs": len(pairs), "passages": len({p.docid for p in pairs}),
            "mean_chars": chars / len(pairs), "flagged": len(flagged), "repeats": repeats,
            **{f"{k}_per_pair": statistics.median(v) for k, v in runs.items()},
            **{f"{k}_runs": v for k, v in runs.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    fr = sub.add_parser("freeze", help="write the findings of the code on PYTHONPATH")
    fr.add_argument("--out", type=Path, default=FROZEN)
    ti = sub.add_parser("time", help="microseconds a pair over DL19's judged pairs")
    ti.add_argument("--repeats", type=int, default=5)
    ti.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.cmd == "freeze":
        freeze(args.out)
        return
    res = {"command": " ".join(["python", "bench/injection_scan.py", *sys.argv[1:]]), "code": code_version(),
           "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cpus": os.cpu_count(), "load_before": os.getloadavg()}
    res.update(timing(args.repeats))
    res["load_after"] = os.getloadavg()
    print(json.dumps({k: v for k, v in res.items() if not k.endswith("_runs")}, indent=1))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
