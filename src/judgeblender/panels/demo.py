"""The demo's jury and its bundled calibration seed (`judgeblender demo`, scripts/make_demo_seed.py).

The jury: the two embedded LLMs (Qwen2.5-Coder-0.5B and Gemma-3-270M, label distributions
from logprobs). It needs llama.cpp and the model packages only, so `make demo` installs no
torch (MiniLM, `embed:default`, comes with the [embed] extra: `make install`). The seed
(data/demo-seed.json) holds human labels of LLMJudge dev pairs and each member's answers on
them under the member's fingerprint, so the demo calibrates without a model call, and only
on answers its own models and call scheme would give.
"""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

from ..blend import BallotTable, Vote
from ..calls import call_key
from ..hashing import sha256_text
from ..pairs import Pair
from ..store import CallStore
from ..judges.engine import build_request
from ..judges.judge import Judge, JudgeSpec

# Demo pairs per human label. Judging is most of the first demo's time (prompt evaluation, about
# 170 new tokens a pair for each LLM), and the cold start must stay under 4 minutes on 2 cores
# (docs/setup.md): 3 per label, 12 pairs, is about 40 s of judging on 2 idle cores.
PER_LABEL = 3


def DEMO_JURY(threads: int | None = None) -> list[JudgeSpec]:
    """The demo's offline jury: the two embedded LLMs, label distributions from logprobs."""
    opts = {"n_threads": threads} if threads else {}
    return [JudgeSpec(model="llamacpp:default", prompt="umbrela", mode="logprobs", options=dict(opts)),
            JudgeSpec(model="llamacpp:gemma-270m", prompt="umbrela", mode="logprobs", options=dict(opts))]


def SEED_FILE() -> Path:
    return Path(str(files("judgeblender") / "data" / "demo-seed.json"))


def judge_fingerprint(judge, store: CallStore | None = None) -> str:
    """What makes a member's answers what they are, as one hash: for an LLM judge, the store key
    of a fixed probe call (model file hash, call scheme, prompt, decoding settings); for a
    scorer, its vector key (weights hash, maximum length). Stored seed answers are used only
    under the same fingerprint."""
    if isinstance(judge, Judge):
        probe = build_request(judge, judge.template.steps[0], {"query": "probe", "passage": "probe"}, 0)
        return call_key(judge.backend.identity(), probe)
    return sha256_text(judge.model_key(store))


def demo_files() -> dict[str, Path]:
    data = files("judgeblender") / "data"
    return {k: Path(str(data / f"demo-dl19-{k}")) for k in ("queries.tsv", "passages.jsonl", "qrels.txt")}


def demo_pairs(gold: dict[str, dict[str, int]], corpus: dict[str, str], per_label: int = PER_LABEL) -> list[Pair]:
    """The `per_label` bundled pairs of each human label with the shortest passages (the cheapest
    prompts: the instructions are shared, the passage is not), ties in file order; listed in
    file order."""
    order = [Pair(qid, docid) for qid, docs in gold.items() for docid in docs]
    chosen: set[Pair] = set()
    for label in range(4):
        of_label = [p for p in order if gold[p.qid][p.docid] == label]
        chosen.update(sorted(of_label, key=lambda p: len(corpus[p.docid]))[:per_label])
    return [p for p in order if p in chosen]


def load_seed(judges: list, store: CallStore) -> tuple[BallotTable | None, dict[str, dict[str, int]], list[str]]:
    """The seed's ballot table from the stored answers, its human labels, and notes: a member
    whose fingerprint differs from the stored one has no usable answers (table None)."""
    doc = json.loads(SEED_FILE().read_text())
    gold: dict[str, dict[str, int]] = {}
    for qid, docid, label in doc["gold"]:
        gold.setdefault(qid, {})[docid] = label
    notes = []
    for judge in judges:
        stored = doc["members"].get(judge.id)
        if stored is None:
            notes.append(f"no stored seed answers for {judge.id}")
        elif stored["fingerprint"] != judge_fingerprint(judge, store):
            notes.append(f"the stored seed answers of {judge.id} were made with another model or call "
                         "scheme; rebuild them with scripts/make_demo_seed.py")
    if notes:
        return None, gold, notes
    rows: dict[tuple[str, str], dict[str, Vote]] = {}
    for judge in judges:
        for qid, docid, label, probs, _score in doc["members"][judge.id]["judgments"]:
            rows.setdefault((qid, docid), {})[judge.id] = Vote(label, tuple(probs) if probs else None)
    return BallotTable.from_votes(list(rows.items()), [j.id for j in judges]), gold, []
