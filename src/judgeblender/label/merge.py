"""Fill the holes of human qrels with LLM labels: a human label always wins.

Every merged pair keeps its source, so qrels used for evaluation can say which labels
came from people and which from a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..pairs.pairs import Pair
from ..pairs.qrels import Qrels
from ..fileio import atomic_write_text

HUMAN, LLM = "human", "llm"


@dataclass
class Merged:
    rows: list[tuple[str, str, int, str]]  # (qid, docid, label, source)
    both: int = 0  # pairs labelled by a person and by the LLM (the person's label kept)
    disagree: int = 0  # of those, pairs where the two labels differ
    unlabelled: list[Pair] = field(default_factory=list)  # pairs of --pairs with no label from either

    def qrels(self) -> Qrels:
        out: Qrels = {}
        for qid, docid, label, _ in self.rows:
            out.setdefault(qid, {})[docid] = label
        return out

    def count(self, source: str) -> int:
        return sum(r[3] == source for r in self.rows)


def merge_labels(human: Qrels, llm: Qrels, pairs: Sequence[Pair] | None = None) -> Merged:
    """Human labels, then LLM labels for the pairs people did not label.

    Queries keep their first appearance (human file first); within a query, human-labelled
    documents come first. With `pairs`, the pool's pairs that neither file labels are listed.
    """
    merged = Merged(rows=[])
    for qid, docs in human.items():
        for docid, label in docs.items():
            merged.rows.append((qid, docid, label, HUMAN))
            other = llm.get(qid, {}).get(docid)
            if other is not None:
                merged.both += 1
                merged.disagree += other != label
    for qid, docs in llm.items():
        for docid, label in docs.items():
            if docid not in human.get(qid, {}):
                merged.rows.append((qid, docid, label, LLM))
    order = {q: k for k, q in enumerate(dict.fromkeys([*human, *llm]))}
    merged.rows.sort(key=lambda r: order[r[0]])  # stable: keeps human-first within a query
    if pairs is not None:
        merged.unlabelled = [p for p in dict.fromkeys(pairs)
                             if p.docid not in human.get(p.qid, {}) and p.docid not in llm.get(p.qid, {})]
    return merged


def write_provenance(path: str | Path, merged: Merged) -> None:
    """TSV with a header: qid, docid, label, source (human or llm)."""
    atomic_write_text(path, "qid\tdocid\tlabel\tsource\n"
                      + "".join(f"{q}\t{d}\t{lab}\t{src}\n" for q, d, lab, src in merged.rows))
