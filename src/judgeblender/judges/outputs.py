"""Write a judging run: TREC qrels of the judged pairs, and a JSONL of per-pair details."""

from __future__ import annotations

import json
from pathlib import Path

from ..fileio import atomic_write_text
from ..pairs import Pair
from ..pairs.qrels import format_qrels
from .engine import JudgeRun


def final_labels(run: JudgeRun, judge_id: str | None = None) -> dict[Pair, int | None]:
    """One judge's labels (the only judge when None). Blends come from the blend stage."""
    if judge_id is None:
        if len(run.judgments) != 1:
            raise ValueError("several judges: name one, or blend them")
        judge_id = next(iter(run.judgments))
    return {p: j.label for p, j in run.judgments[judge_id].items()}


def write_qrels_file(path: str | Path, run: JudgeRun, labels: dict[Pair, int | None]) -> int:
    """Qrels for the pairs that have a label; unjudged pairs are left out (and reported)."""
    rows = [(p.qid, p.docid, labels[p]) for p in run.pairs if labels.get(p) is not None]
    atomic_write_text(path, format_qrels(rows))
    return len(rows)


def write_details(path: str | Path, run: JudgeRun, labels: dict[Pair, int | None],
                  blend: dict | None = None, extra: dict[Pair, dict] | None = None) -> None:
    lines = []
    for p in run.pairs:
        judges = {jid: run.judgments[jid][p].record() for jid in run.judgments}
        rec = {"qid": p.qid, "docid": p.docid, "label": labels.get(p)}
        if len(judges) == 1:
            only = next(iter(judges.values()))
            rec.update(expected=only["expected"], probs=only["probs"], invalid_reason=only["invalid_reason"])
        if blend:
            rec["blend"] = blend
        if extra and p in extra:
            rec.update(extra[p])
        rec["judges"] = judges
        lines.append(json.dumps(rec, ensure_ascii=False) + "\n")
    for p, reason in run.skipped:
        lines.append(json.dumps({"qid": p.qid, "docid": p.docid, "label": None, "skipped": reason}) + "\n")
    atomic_write_text(path, "".join(lines))
