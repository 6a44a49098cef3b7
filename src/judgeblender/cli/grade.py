"""`judgeblender grade`: grade items (question, answer, reference ...) with a jury of rubric judges.

Every --judge model is paired with every --prompt rubric; each pair is one jury member with
its own id (MODEL/PROMPT/generate), so no two members can overwrite each other. The items
file is JSONL, one object per line with the fields the rubrics declare as inputs (and an
optional "id"). The output is JSONL, one line per item: the pooled score and verdict, and
every member's score, reason or, for an invalid verdict, the reason it is invalid. A summary
goes to stderr: items, pooled scores, invalid verdicts per member, and how well the members
agree (Krippendorff's alpha, interval level, over the items each pair of members both scored).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from .. import asyncrun
from ..errors import InputError, JudgeblenderError
from ..judges import JudgeSpec
from ..jury import ItemResult, Jury, JuryRun
from ..jury.pooling import POOLING_METHODS, TIE_RULES
from ..prompts import get_template
from ..store import CallStore
from .console import console, err_console
from .options import ApiKeyEnv, BaseUrl, Concurrency, Progress, Threads, Timeout, backend_options
from .progress import RichReporter


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
    judges = {}
    for jid, v in result.judges.items():
        entry: dict[str, Any] = {"score": v.score, "reason": v.reason, "invalid_reason": v.invalid_reason}
        if v.invalid_reason is not None:
            entry["raw_output"] = v.raw_output  # what the judge said, to see why it was invalid
        judges[jid] = entry
    return {"id": result.item_id, "score": result.score, "verdict": result.verdict, "reason": result.reason,
            "abstained": result.abstained, "judges": judges}


def summary(run: JuryRun, pooling: str) -> dict[str, Any]:
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


def print_summary(s: dict[str, Any]) -> None:
    table = Table(title="jury summary", title_justify="left")
    for col in ("judge", "valid", "invalid", "mean score", "calls made", "cached", "seconds"):
        table.add_column(col, justify="left" if col == "judge" else "right")
    for m in s["judges"]:
        mean = "-" if m["mean_score"] is None else f"{m['mean_score']:.3f}"
        table.add_row(m["judge"], str(m["valid"]), str(m["invalid"]), mean, str(m["calls_made"]),
                      str(m["cache_hits"]), f"{m['seconds']:.1f}")
    err_console.print(table)
    mean = "" if s["mean_pooled_score"] is None else f", mean {s['mean_pooled_score']:.3f}"
    err_console.print(f"items: {s['items']}; pooled ({s['pooling']}): {s['pooled']}{mean}; "
                      f"no pooled score: {s['unpooled']}", markup=False, soft_wrap=True)
    if s["passed"] or s["failed"]:
        err_console.print(f"verdicts: {s['passed']} pass, {s['failed']} fail", markup=False, soft_wrap=True)
    for m in s["judges"]:
        for reason, n in sorted(m["invalid_reasons"].items(), key=lambda kv: -kv[1]):
            err_console.print(f"invalid {m['judge']}: {n} items: {reason}", markup=False, soft_wrap=True)
    a = s["agreement"]
    shown = f"{a['alpha']:.3f}" if a["alpha"] is not None else f"undefined ({a['note']})"
    err_console.print(f"agreement between {a['members']} members: Krippendorff's alpha (interval) = {shown}"
                      f" over {a['pairable_items']} items", markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    @app.command()
    def grade(
        items_path: Path = typer.Option(..., "--items", "-i", help="Items JSONL: one object per line with the rubric's input fields (and an optional id)."),
        models: list[str] = typer.Option(..., "--judge", "-j", help="Model string; repeat for a panel (e.g. llamacpp:default, openai:MODEL)."),
        prompts: list[str] = typer.Option(["factual-accuracy"], "--prompt", help="Rubric template name or .toml path; repeat: every judge uses every prompt."),
        out: Path = typer.Option(..., "--out", "-o", help="Results JSONL: one line per item."),
        pooling: str = typer.Option("mean", "--pooling", help=f"One of: {', '.join(POOLING_METHODS)}."),
        threshold: float = typer.Option(0.5, "--threshold", help="Pass threshold for votes, max/min and soft-vote (a score >= it passes)."),
        trim: float = typer.Option(0.1, "--trim", help="trimmed-mean: share of scores cut at each end."),
        tie: str = typer.Option("undecided", "--tie", help=f"hard-vote ties: {', '.join(TIE_RULES)}."),
        min_votes: int = typer.Option(1, "--min-votes", help="Fewer valid verdicts than this: no pooled score."),
        store_path: Path = typer.Option(Path("judgments.sqlite"), "--store", help="SQLite store of every call (re-runs reuse it)."),
        invalid_policy: str = typer.Option("retry-once", "--invalid", help="retry-once (then invalid) or no-retry."),
        seed: int = typer.Option(0, "--seed"),
        threads: Threads = None,
        base_url: BaseUrl = None,
        api_key_env: ApiKeyEnv = None,
        concurrency: Concurrency = None,
        timeout: Timeout = None,
        progress: Progress = True,
        as_json: bool = typer.Option(False, "--json", help="Also print the summary as one JSON object on stdout."),
    ) -> None:
        """Grade items (e.g. LLM answers) with a jury: every --judge x every --prompt, pooled."""
        if pooling not in POOLING_METHODS:
            raise JudgeblenderError(f"unknown pooling {pooling!r}; use one of {', '.join(POOLING_METHODS)}")
        if tie not in TIE_RULES:
            raise JudgeblenderError(f"unknown tie rule {tie!r}; use one of {', '.join(TIE_RULES)}")
        templates = [get_template(p) for p in prompts]
        for t in templates:
            if not any(s.output == "json" for s in t.steps):
                raise JudgeblenderError(f"prompt {t.name!r} is not a rubric (it has no json step); "
                                        "`judgeblender prompts list` shows the rubrics")
        scales = {(tuple(t.score_range) if t.score_range else None, tuple(t.scale)) for t in templates}
        if len(scales) > 1:
            shown = ", ".join(f"{t.name}: {t.score_range or t.scale}" for t in templates)
            raise JudgeblenderError(f"the prompts score on different scales ({shown}); pool only rubrics on one scale")
        needed = list(dict.fromkeys(f for t in templates for f in t.inputs))
        items = read_items(items_path, needed)  # before any model loads: bad input fails fast
        opts = backend_options(threads, base_url, api_key_env, concurrency, timeout, None)
        specs = [JudgeSpec(model=m, prompt=p, options=opts, invalid_policy=invalid_policy, seed=seed)
                 for m in models for p in prompts]
        with CallStore(store_path) as store:
            jury = Jury(specs, pooling=pooling, threshold=threshold, trim=trim, tie=tie, min_votes=min_votes,
                        store=store)
            with RichReporter(progress) as reporter:
                run = asyncrun.run(jury.arun(items, reporter))
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", encoding="utf-8") as f:
            for result in run.results:
                f.write(json.dumps(item_record(result), ensure_ascii=False) + "\n")
        s = summary(run, pooling)
        print_summary(s)
        err_console.print(f"wrote {len(run.results)} graded items to {out}", markup=False, soft_wrap=True)
        if as_json:
            console.print_json(json.dumps({"out": str(out), **s}))
