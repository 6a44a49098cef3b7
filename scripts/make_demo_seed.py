"""Build the demo's bundled seed set: LLMJudge dev pairs and the demo jury's stored answers.

    python scripts/make_demo_seed.py [--data /work/shared/data] [--store seed.sqlite]

Samples one pair per (query, human label) of 16 queries of the LLMJudge dev split (TREC DL 2023
passages; never the test split), passages under 700 characters, seeded. Judges them with the
demo jury (the embedded Qwen and Gemma in logprobs mode) through a call
store, and writes src/judgeblender/data/demo-seed.json: the seed's human labels and each
member's stored judgments (label, label distribution, score), under the member's fingerprint
(model file hash, call settings, prompt), so `judgeblender demo` calibrates without a model
call and notices when its models or call settings are not the ones that made the answers.
Run it again whenever the embedded models or the llama.cpp call scheme change.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from judgeblender.panels.demo import DEMO_JURY, SEED_FILE, judge_fingerprint  # noqa: E402
from judgeblender.fileio import atomic_write_text  # noqa: E402
from judgeblender.judges import build_judge, judge_pairs  # noqa: E402
from judgeblender.pairs import Pair, read_corpus, read_qrels, read_queries  # noqa: E402
from judgeblender.store import CallStore  # noqa: E402

PER_LABEL = 1
QUERIES = 16  # the first 16 query ids: the embedded Qwen judges under 1 pair/s on 2 cores
MAX_CHARS = 700


def sample(data: Path, seed: int = 0) -> tuple[list[Pair], dict[str, dict[str, int]]]:
    qrels = read_qrels(data / "qrels.txt", allowed=range(4))
    corpus = read_corpus(data / "passages.jsonl")
    rng = random.Random(seed)
    pairs = []
    for qid in sorted(qrels)[:QUERIES]:
        for label in range(4):
            docs = sorted(d for d, l in qrels[qid].items() if l == label and len(corpus.get(d, "x" * 9999)) < MAX_CHARS)
            pairs += [Pair(qid, d) for d in rng.sample(docs, min(PER_LABEL, len(docs)))]
    gold = {}
    for p in pairs:
        gold.setdefault(p.qid, {})[p.docid] = qrels[p.qid][p.docid]
    return pairs, gold


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("/work/shared/data"))
    ap.add_argument("--store", type=Path, default=Path("demo-seed.sqlite"))
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    data = args.data / "llmjudge-dev"
    pairs, gold = sample(data)
    queries = read_queries(data / "queries.tsv")
    corpus = read_corpus(data / "passages.jsonl", wanted={p.docid for p in pairs})
    judges = [build_judge(spec) for spec in DEMO_JURY(args.threads)]
    with CallStore(args.store) as store:
        run = judge_pairs(judges, pairs, queries, corpus, store)
        members = {}
        for judge in judges:
            rows = []
            for p in run.pairs:
                j = run.judgments[judge.id][p]
                probs = [round(j.probs[str(k)], 6) for k in range(4)] if j.probs and j.label is not None else None
                score = None if j.score is None else round(float(j.score), 6)
                rows.append([p.qid, p.docid, j.label, probs, score])
            members[judge.id] = {"fingerprint": judge_fingerprint(judge, store), "judgments": rows}
    doc = {"about": "LLMJudge dev (TREC DL 2023 passages, human labels): the demo's calibration seed; "
                    "made by scripts/make_demo_seed.py",
           "gold": [[p.qid, p.docid, gold[p.qid][p.docid]] for p in pairs], "members": members}
    atomic_write_text(SEED_FILE(), json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"{len(pairs)} seed pairs over {len(gold)} queries; wrote {SEED_FILE()}")


if __name__ == "__main__":
    main()
