"""`judgeblender store stats | export | judgments | merge | check`: look inside call stores, merge them,
check them for damage."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from ..errors import JudgeblenderError
from ..fileio import atomic_write_text
from ..store import CallStore, check_store, export_jsonl, merge_stores
from ..store.calls import damaged
from .console import console, err_console

store_app = typer.Typer(help="Inspect and export the SQLite store of calls and judgments.", no_args_is_help=True)
STORE = typer.Option(Path("judgments.sqlite"), "--store", help="The store file.")


def _open(path: Path) -> CallStore:
    if not path.exists():
        raise JudgeblenderError(f"{path}: no such store")
    return CallStore(path, read_only=True)  # read-only media serve: these commands only read


@store_app.command()
def stats(store: Path = STORE) -> None:
    """Calls, tokens and model seconds per model; judgments per judge."""
    with _open(store) as s:
        table = Table(show_edge=False)
        for col in ("model", "calls", "tokens in", "tokens out", "seconds"):
            table.add_column(col, justify="left" if col == "model" else "right")
        for name, row in s.call_stats().items():
            table.add_row(name, str(row["calls"]), str(row["tokens_in"]), str(row["tokens_out"]), f"{row['seconds']:.1f}")
        console.print(table)
        for judge_id in s.judge_ids():
            records = s.judgments(judge_id)
            judged = sum(r["label"] is not None for r in records)
            console.print(f"{judge_id}: {judged} judged, {len(records) - judged} unjudged")


@store_app.command()
def export(store: Path = STORE, out: Path = typer.Option(..., "--out", "-o", help="JSONL file of every call.")) -> None:
    """Export every call (request, raw output, parsed value, probabilities, timing) as JSONL."""
    with _open(store) as s:
        n = export_jsonl(s, out)
    err_console.print(f"wrote {n} calls to {out}")


@store_app.command()
def judgments(store: Path = STORE, out: Path = typer.Option(..., "--out", "-o"),
              judge: str = typer.Option(None, "--judge", help="Only this judge id.")) -> None:
    """Export stored per-pair judgments as details JSONL (the `blend` input format)."""
    with _open(store) as s:
        by_pair: dict[tuple[str, str], dict] = {}
        for rec in s.judgments(judge):
            entry = by_pair.setdefault((rec["qid"], rec["docid"]), {"qid": rec["qid"], "docid": rec["docid"], "judges": {}})
            entry["judges"][rec.pop("judge_id")] = {k: v for k, v in rec.items() if k not in ("qid", "docid")}
    atomic_write_text(out, "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in by_pair.values()))
    err_console.print(f"wrote {len(by_pair)} pairs to {out}")


@store_app.command()
def merge(inputs: list[Path] = typer.Argument(..., help="The stores to merge (e.g. one per shard), read-only."),
          out: Path = typer.Option(..., "--out", "-o", help="The merged store (a new file, written atomically)."),
          keep_first: bool = typer.Option(False, "--keep-first", help="Where two stores answer one key differently, keep the earlier input's answer (reported) instead of refusing."),
          force: bool = typer.Option(False, "--force", help="Replace OUT if it exists."),
          as_json: bool = typer.Option(False, "--json", help="Print the counts as JSON on stdout.")) -> None:
    """Merge stores into one: each call once (same key, same answer), atomically."""
    report = merge_stores(out, inputs, keep_first=keep_first, overwrite=force)
    for conflict in report.conflicts:
        err_console.print(f"kept the earlier answer: {conflict}", markup=False, soft_wrap=True)
    if report.conflicts_total > len(report.conflicts):
        err_console.print(f"... and {report.conflicts_total - len(report.conflicts)} more conflicts", markup=False)
    err_console.print(
        f"merged {len(report.inputs)} stores into {out}: {report.rows['calls']} calls ({report.read['calls']} read, "
        f"{report.duplicates['calls']} in more than one store), {report.rows['judgments']} judgments, "
        f"{report.rows['vectors']} vectors; {report.conflicts_total} conflicts", markup=False, soft_wrap=True)
    if as_json:
        console.print_json(json.dumps(report.summary()))


@store_app.command()
def check(store: Path = STORE,
          quick: bool = typer.Option(False, "--quick", help="SQLite's quick_check: skips comparing indexes with their tables (faster on large stores).")) -> None:
    """Read every page of the store and check it (SQLite's integrity check): exit 0 and 'ok', or exit 2 and what is damaged."""
    problems = check_store(store, quick=quick)
    if problems:
        raise damaged(store, "; ".join(problems))
    console.print(f"ok: {store} passed SQLite's {'quick' if quick else 'integrity'} check", markup=False)


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")
