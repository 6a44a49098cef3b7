"""How long `jb.experiment` takes on TREC DL 2019 with holes (docs/pyterrier.md's example).

    PYTHONPATH=src python bench/experiment_dl19.py --data ../shared/data --hide 0.3 --repeat 3

Builds a PISA index over the DL19 passages, hides a seeded share of NIST's labels, and times
jb.experiment for BM25 and QLD (PISA) beside two official runs, the holes filled from the
published Llama-3-70B labels; prints one JSON object: the index time, each jb.experiment time
(the first includes running the PISA retrievers), the holes, and the table.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

import pandas as pd
from pyterrier_pisa import PisaIndex

import judgeblender as jb
from judgeblender.pairs import read_qrels, read_queries


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--hide", type=float, default=0.3)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    dl19 = args.data / "trec-dl-2019"
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        index = PisaIndex(str(Path(tmp) / "dl19.pisa"), text_field="text", threads=1)
        index.index({"docno": p["docid"], "text": p["text"]}
                    for p in map(json.loads, open(dl19 / "passages.jsonl", encoding="utf-8")))
        indexed = time.perf_counter() - started
        queries = read_queries(dl19 / "queries.tsv")
        topics = pd.DataFrame({"qid": list(queries), "query": list(queries.values())})
        rng = random.Random(0)
        human = {q: {d: v for d, v in docs.items() if rng.random() >= args.hide}
                 for q, docs in read_qrels(dl19 / "qrels.txt").items()}
        systems = {"BM25 (PISA)": index.bm25(num_results=10, threads=1), "QLD (PISA)": index.qld(num_results=10, threads=1),
                   "p_bert": dl19 / "runs" / "p_bert.run.gz", "bm25base_p": dl19 / "runs" / "bm25base_p.run.gz"}
        llm = args.data / "llm-labels" / "trec-dl-2019" / "fourprompts-llama3-70b.qrels"
        seconds = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            table = jb.experiment(systems, topics, qrels=human, llm_labels=llm, baseline="BM25 (PISA)")
            seconds.append(round(time.perf_counter() - started, 3))
    print(json.dumps({"index_seconds": round(indexed, 3), "experiment_seconds": seconds,
                      "holes": table.attrs["holes"], "filled": table.attrs["filled"],
                      "queries": table.attrs["queries"],
                      "table": json.loads(table.round(4).to_json(orient="records"))}, indent=1))


if __name__ == "__main__":
    main()
