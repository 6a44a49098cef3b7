"""`judgeblender judge --panel ...`: judge with every member of a panel, then blend."""

from __future__ import annotations

import json
from pathlib import Path

from rich.markup import escape

from ..backends.batch import use_batch_files
from ..judges import build_judge, judge_pairs, summary_rows
from ..judges.injection import describe, flag_pairs
from ..judges.outputs import write_details, write_qrels_file
from ..judges.panel import blend_run, get_panel
from ..pairs import Pair
from ..store import CallStore
from .console import console, err_console
from .judge import print_summary, write_batch_requests
from .progress import RichReporter


def run_panel(panel_name: str, panel_models: list[str] | None, pairs: list[Pair], queries: dict[str, str],
              corpus: dict[str, str], out: Path, details: Path | None, store_path: Path, options: dict, mode: str,
              seed: int, allow_fallback: bool, invalid_policy: str, skip_missing: bool, redact: bool,
              progress: bool, json_summary: bool, batch: tuple[Path | None, Path | None] = (None, None)) -> None:
    panel = get_panel(panel_name, panel_models, mode, options, seed=seed, allow_fallback=allow_fallback,
                      invalid_policy=invalid_policy)
    judges = [build_judge(spec) for spec in panel.judges]
    batch_queue = use_batch_files(judges, *batch)
    with CallStore(store_path, redact_passages=redact) as store, RichReporter(progress) as reporter:
        run = judge_pairs(judges, pairs, queries, corpus, store, reporter, skip_missing)
    for judge in judges:
        getattr(judge, "close", lambda: None)()
    write_batch_requests(batch_queue)
    result = blend_run(run, panel)
    labels = {Pair(q, d): dec.label for (q, d), dec in zip(result.table.pairs, result.decisions)}
    blend_info = {"panel": panel.name, "method": panel.method, "tie": panel.tie, "seed": panel.seed}
    extra = {Pair(q, d): {"blend_reason": dec.reason, "tied": list(dec.tied) if dec.tied else None}
             for (q, d), dec in zip(result.table.pairs, result.decisions)}
    tiebreak = _tiebreak(panel, result, queries, corpus, store_path, options, mode, seed, redact, progress)
    if tiebreak is not None:  # the tie-breaker's word on the pairs it was asked about (only those were called)
        labels = {Pair(q, d): lab for (q, d), lab in zip(result.table.pairs, tiebreak.labels)}
        for (q, d), outcome in zip(result.table.pairs, tiebreak.outcomes):
            extra[Pair(q, d)]["tiebreaker"] = outcome
        blend_info["tiebreaker"] = {"judge": tiebreak.tiebreaker, "spread": tiebreak.spread, **tiebreak.counts()}
    flagged = flag_pairs(run.pairs, queries, corpus)  # reported only: labels stay as judged
    for p, found in flagged.items():
        extra[p]["injection"] = [str(f) for f in found]
    n = write_qrels_file(out, run, labels)
    details_path = details or out.with_name(out.name + ".details.jsonl")
    write_details(details_path, run, labels, blend=blend_info, extra=extra)
    print_summary(run)
    if flagged:
        err_console.print(f"[yellow]possible prompt injection[/] {escape(describe(flagged))}", highlight=False)
    for line in [*result.summary_lines(), *(tiebreak.summary_lines() if tiebreak is not None else [])]:
        err_console.print(line, markup=False)
    err_console.print(f"wrote {n} blended judgments to {out} and every judge's label to {details_path}")
    if json_summary:
        console.print_json(json.dumps({"qrels": str(out), "details": str(details_path), "panel": blend_info,
                                       "judged": n, "unjudged": dict(result.unjudged()),
                                       "judges": summary_rows(run), "skipped": len(run.skipped),
                                       "injection_flagged": len(flagged)}))


def _tiebreak(panel, result, queries, corpus, store_path, options, mode, seed, redact, progress):
    """The panel file's [tiebreaker], called on the consulted pairs only (judges/tiebreak_run.py)."""
    from ..judges.panel_file import load_tiebreaker
    from ..judges.tiebreak_run import run_tiebreaker

    if not str(panel.source).endswith(".toml"):
        return None
    found = load_tiebreaker(panel.source, mode, options, seed=seed)
    if found is None:
        return None
    spec, spread = found
    judge = build_judge(spec)
    with CallStore(store_path, redact_passages=redact) as store, RichReporter(progress) as reporter:
        tb, _ = run_tiebreaker(result, judge, queries, corpus, store, spread, reporter)
    getattr(judge, "close", lambda: None)()
    return tb
