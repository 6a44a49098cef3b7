"""Cut the small TREC DL 2019 slice that `tests/test_readme_workflow.py` runs the README on.

The judged queries whose top-10 pool of the three runs is smallest, as few as make a pool of
at least 220 pairs (the README draws a 200-pair seed and 10 whole queries), three official
runs cut to their top 10, the passages and human labels of the pooled pairs, three
published LLM label files of those pairs (as the README's j1/j2/j3.qrels), and judged.qrels,
the human labels of the first three queries (an earlier judged set). Run once:

    python scripts/make_dl19_slice.py ../shared/data tests/data/dl19_slice
"""

from __future__ import annotations

import gzip
import json
import sys
from collections import defaultdict
from pathlib import Path

RUNS = ("bm25base_p", "bm25tuned_p", "idst_bert_p1")
LABELS = {"j1": "fourprompts-llama3-70b", "j2": "sun-then-decomposed-flant5-large", "j3": "thomas-order3210"}
MIN_POOL = 220


def read_run(path: Path) -> dict[str, list[tuple[str, float]]]:
    out: dict[str, list[tuple[str, float]]] = defaultdict(list)
    with gzip.open(path, "rt") as fh:
        for line in fh:
            qid, _, docid, _, score, _ = line.split()
            out[qid].append((docid, float(score)))
    return {q: sorted(docs, key=lambda d: (-d[1], d[0]))[:10] for q, docs in out.items()}


def read_qrels(path: Path) -> dict[tuple[str, str], str]:
    out = {}
    for line in path.read_text().splitlines():
        qid, _, docid, label = line.split()
        out[(qid, docid)] = label
    return out


def main(data: Path, out: Path) -> None:
    dl19 = data / "trec-dl-2019"
    runs = {name: read_run(dl19 / "runs" / f"{name}.run.gz") for name in RUNS}
    qrels = read_qrels(dl19 / "qrels.txt")
    qids = sorted(set.intersection(*(set(r) for r in runs.values())), key=int)
    pools = {q: sorted({d for r in runs.values() for d, _ in r[q]}) for q in qids}
    chosen: list[str] = []
    for q in sorted(qids, key=lambda q: (len(pools[q]), int(q))):
        if sum(len(pools[c]) for c in chosen) >= MIN_POOL:
            break
        chosen.append(q)
    chosen.sort(key=int)
    pairs = [(q, d) for q in chosen for d in pools[q]]
    (out / "runs").mkdir(parents=True, exist_ok=True)
    for name, run in runs.items():
        (out / "runs" / f"{name}.run").write_text("".join(
            f"{q} Q0 {d} {rank} {score:.4f} {name}\n" for q in chosen for rank, (d, score) in enumerate(run[q], 1)))
    queries = dict(line.split("\t", 1) for line in (dl19 / "queries.tsv").read_text().splitlines())
    (out / "queries.tsv").write_text("".join(f"{q}\t{queries[q]}\n" for q in chosen))
    wanted = {d for _, d in pairs}
    with (dl19 / "passages.jsonl").open() as fh, (out / "passages.jsonl").open("w") as dst:
        for line in fh:
            if json.loads(line)["docid"] in wanted:
                dst.write(line)
    (out / "qrels.txt").write_text("".join(f"{q} 0 {d} {qrels[(q, d)]}\n" for q, d in pairs if (q, d) in qrels))
    (out / "judged.qrels").write_text("".join(f"{q} 0 {d} {qrels[(q, d)]}\n" for q, d in pairs
                                              if q in chosen[:3] and (q, d) in qrels))
    for short, name in LABELS.items():
        published = read_qrels(data / "llm-labels" / "trec-dl-2019" / f"{name}.qrels")
        (out / f"{short}.qrels").write_text("".join(f"{q} 0 {d} {published[(q, d)]}\n" for q, d in pairs
                                                    if (q, d) in published))
    print(f"{len(chosen)} queries, {len(pairs)} pooled pairs, {len(wanted)} passages")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
