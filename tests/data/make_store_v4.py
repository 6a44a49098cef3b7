"""Writes tests/data/store-v4.sql: a store as judgeblender's schema-4 release wrote it (commit e3b7a3e).

    git worktree add /tmp/v4 e3b7a3e
    PYTHONPATH=/tmp/v4/src python tests/data/make_store_v4.py

A scripted judge in both scoring modes on the tiny pairs (calls and judgments), one call written
with --redact, one served-model call, and one scorer vector; dumped as SQL so the test builds
the file afresh (no binary in the repository).
"""

import json
import sqlite3
import tempfile
from pathlib import Path

import numpy as np

from judgeblender.calls import CallRequest, CallResult, Message, call_key
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.pairs import Pair, read_corpus, read_queries
from judgeblender.store import CallStore
from judgeblender.store.embeddings import put_vectors

HERE = Path(__file__).parent
tmp = Path(tempfile.mkdtemp())
model = tmp / "model.json"
model.write_text(json.dumps({"name": "tiny-judge", "default": "##final score: 1", "rules": [
    {"contains": "flakes", "output": "##final score: 3", "probs": {"3": 0.9, "2": 0.1}},
    {"contains": "330 metres", "output": "I think it is 2/3\n##final score: 2"}]}))
tiny = HERE / "tiny"
queries, corpus = read_queries(tiny / "queries.tsv"), read_corpus(tiny / "corpus.jsonl")
pairs = [Pair(*line.split()[::2]) for line in (tiny / "qrels.txt").read_text().splitlines()]
path = tmp / "v4.sqlite"
with CallStore(path) as store:
    judge_pairs([Judge(JudgeSpec(model=f"scripted:{model}", mode="generate"))], pairs, queries, corpus, store=store)
    judge_pairs([Judge(JudgeSpec(model=f"scripted:{model}", mode="logprobs"))], pairs, queries, corpus, store=store)
    served = {"backend": "openai", "model": "gpt-x", "model_revision": "2025-01-01"}
    req = CallRequest((Message("system", "grade"), Message("user", "Passage: é ☃")), max_tokens=50)
    store.put(call_key(served, req), "openai", served, req,
              CallResult("Score: 3", tokens_in=12, tokens_out=2, latency_s=0.4, extra={"finish_reason": "stop"}), {"value": 3})
    put_vectors(store, "minilm", {"abc": np.arange(4, dtype=np.float32)})
with CallStore(path, redact_passages=True) as store:
    req = CallRequest((Message("user", "secret passage"),), max_tokens=5)
    store.put(call_key(served, req), "openai", served, req, CallResult("1"), {"value": 1})
db = sqlite3.connect(path)
version = db.execute("PRAGMA user_version").fetchone()[0]
assert version == 4, version
dump = "\n".join(line for line in db.iterdump() if not line.startswith(("BEGIN", "COMMIT")))
(HERE / "store-v4.sql").write_text("-- a schema-4 store written by judgeblender e3b7a3e (tests/data/make_store_v4.py)\n"
                                   "BEGIN;\n" + dump + f"\nPRAGMA user_version={version};\nCOMMIT;\n")
print(db.execute("SELECT COUNT(*) FROM calls").fetchone()[0], "calls",
      db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0], "judgments")
