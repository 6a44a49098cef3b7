"""What grading items with a jury reads and reports, as plain data (the library side of `grade`).

The items file is JSONL, one object per line with the fields the rubrics declare as inputs
(and an optional "id"); `read_items` checks it before any model loads. Per item, the output
is the pooled score and verdict plus every member's score, reason or, for an invalid verdict,
the reason it is invalid (`item_record`). `jury_summary` counts items, pooled scores, invalid
verdicts per member, and how well the members agree (`jury_agreement`: Krippendorff's alpha,
interval level, over the items two or more members scored). The CLI only prints these.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError
from .jury import ItemResult, JuryRun


def read_items(path: Path, needed: Sequence[str]) -> list[dict[str, Any]]:
    """Items JSONL: one JSON object per line (blank lines skipped), each with the `needed` fields.

    Errors name the file and line: not JSON, not an object, a missing field, a repeated id."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(path, None, "an items JSONL file", "no such file") from None
    except UnicodeDecodeError as exc:
        raise InputError(path, None, "UTF-8 text", f"undecodable byte at offset {exc.start}") from None
    items, ids = [], {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(path, number, "a JSON object per line", f"{exc.msg}: {line.strip()}") from None
        if not isinstance(item, dict):
            raise InputError(path, number, "a JSON object per line", line.strip())
        missing = [f for f in needed if f not in item or item[f] is None]
        if missing:
            raise InputError(path, number, f"the fields {', '.join(needed)}", f"no {', '.join(missing)}")
        item_id = str(item.get("id", len(items) + 1))
        if item_id in ids:
            raise InputError(path, number, "a unique id per item", f"{item_id} (also on line {ids[item_id]})")
        ids[item_id] = number
        items.append({**item, "id": item_id})
    if not items:
        raise InputError(path, None, "at least one item", "an empty file")
    return items


def jury_agreement(results: Sequence[ItemResult]) -> dict[str, Any]:
    """Krippendorff's alpha (interval) between jury members over their valid scores.

    Abstentions are missing values, not zeros. Alpha is undefined (None, with a note) for
    fewer than two members, fewer than two items scored by at least two members, or when
    every score is the same."""
    members = sorted({jid for r in results for jid in r.judges})
    scored = [[r.judges[m].score if m in r.judges else None for m in members] for r in results]
    pairable = sum(1 for row in scored if sum(s is not None for s in row) >= 2)
    out: dict[str, Any] = {"method": "krippendorff-alpha-interval", "alpha": None, "members": len(members),
                           "pairable_items": pairable, "note": None}
    if len(members) < 2:
        out["note"] = "one jury member: nothing to agree with"
    elif pairable < 2:
        out["note"] = f"{pairable} items scored by two or more members; alpha needs at least 2"
    elif len({s for row in scored for s in row if s is not None}) < 2:
        out["note"] = "every valid score is the same; alpha is undefined"
    else:
        import krippendorff
        import numpy as np

        data = np.array([[math.nan if s is None else s for s in row] for row in scored], dtype=float).T
        out["alpha"] = float(krippendorff.alpha(reliability_data=data, level_of_measurement="interval"))
    return out


def item_record(result: ItemResult) -> dict[str, Any]:
    """One output line of `grade`: the pooled result and every member's score or invalid reason."""
    judges = {}
    for jid, v in result.judges.items():
        entry: dict[str, Any] = {"score": v.score, "reason": v.reason, "invalid_reason": v.invalid_reason}
        if v.invalid_reason is not None:
            entry["raw_output"] = v.raw_output  # what the judge said, to see why it was invalid
        judges[jid] = entry
    return {"id": result.item_id, "score": result.score, "verdict": result.verdict, "reason": result.reason,
            "abstained": result.abstained, "judges": judges}


def jury_summary(run: JuryRun, pooling: str) -> dict[str, Any]:
    """Items, pooled scores, verdicts, each member's valid/invalid counts and costs, and agreement."""
    results = run.results
    members = []
    for jid, stats in run.stats.items():
        scores = [r.judges[jid].score for r in results if r.judges[jid].score is not None]
        reasons: dict[str, int] = {}
        for r in results:
            if r.judges[jid].invalid_reason:
                reasons[r.judges[jid].invalid_reason] = reasons.get(r.judges[jid].invalid_reason, 0) + 1
        members.append({"judge": jid, "valid": len(scores), "invalid": len(results) - len(scores),
                        "mean_score": statistics.fmean(scores) if scores else None,
                        "calls_made": stats.calls_made, "cache_hits": stats.cache_hits, "retries": stats.retries,
                        "seconds": round(stats.seconds, 2), "invalid_reasons": reasons})
    pooled = [r.score for r in results if r.score is not None]
    verdicts = [r.verdict for r in results if r.verdict is not None]
    return {
        "items": len(results), "pooling": pooling, "pooled": len(pooled), "unpooled": len(results) - len(pooled),
        "mean_pooled_score": statistics.fmean(pooled) if pooled else None,
        "passed": sum(verdicts), "failed": len(verdicts) - sum(verdicts),
        "judges": members, "agreement": jury_agreement(results),
    }
