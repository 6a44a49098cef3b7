"""`judgeblender experiment`: the table of jb.experiment from files (runs, topics, qrels, labels)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table
from rich.text import Text

from ..errors import JudgeblenderError
from ..evaluate.scope import DEFAULT_SCOPE, SCOPE_HELP, check_scope, describe_scope
from ..evaluate.experiment import CORRECTIONS, DEFAULT_CORRECTION
from ..holes import experiment
from ..pairs.runs import read_runs_dir
from .console import console
from .estimate import fmt_number
from ..evaluate.intervals import CONFIDENCE


def register(app: typer.Typer) -> None:
    @app.command("experiment")
    def experiment_command(
        runs_dir: Path = typer.Option(..., "--runs", help="Directory of TREC run files (plain or gzip): the systems."),
        topics: Path = typer.Option(..., "--topics", help="Queries TSV (id<TAB>text) or irds:ID: the topics scored."),
        qrels: Optional[Path] = typer.Option(None, "--qrels", help="Human qrels, with holes [default: none, the LLM labels all]."),
        llm: Optional[Path] = typer.Option(None, "--llm", help="LLM qrels already made, for the holes (or --judge)."),
        judge_models: list[str] = typer.Option(None, "--judge", help="A judge model for the holes, repeatable (or --llm)."),
        corpus: Optional[Path] = typer.Option(None, "--corpus", help="Passages JSONL or irds:ID, for --judge."),
        prompt: str = typer.Option("umbrela", "--prompt", help="Prompt of the --judge models."),
        mode: str = typer.Option("generate", "--mode", help="Scoring mode of the --judge models."),
        store_path: Optional[Path] = typer.Option(None, "--store", help="SQLite call store for --judge: a re-run makes no call."),
        measures: list[str] = typer.Option(None, "--measure", "-m", help="ir_measures measure, repeatable [default: nDCG@10]."),
        depth: int = typer.Option(10, "--depth", "-k", help="Pool each run's top k."),
        scope: str = typer.Option(DEFAULT_SCOPE, "--scope", help=SCOPE_HELP),
        seed: Optional[Path] = typer.Option(None, "--seed", help="Human qrels of a seed drawn at random from the pool (pool --sample-queries/--sample-pairs): adds PPI++ intervals."),
        design: Optional[Path] = typer.Option(None, "--design", help="Design file of --seed [default: SEED.design.json]."),
        baseline: Optional[str] = typer.Option(None, "--baseline", help="A run's name: paired t-tests against it."),
        correction: str = typer.Option(DEFAULT_CORRECTION, "--correction", help=f"Multiple-comparison correction: {', '.join(CORRECTIONS)}."),
        confidence: float = typer.Option(CONFIDENCE, "--confidence", help="Coverage of the intervals and 1 - the tests' level, in (0, 1)."),
        as_json: bool = typer.Option(False, "--json", help="One JSON object per line: per system and measure, then a summary."),
    ) -> None:
        """Compare runs with LLM labels where people did not judge: scores under human, filled and LLM labels."""
        check_scope(scope, "--scope")
        if correction not in CORRECTIONS:
            raise JudgeblenderError(f"--correction must be one of {', '.join(CORRECTIONS)}, got {correction!r}")
        if (llm is None) == (not judge_models):
            raise JudgeblenderError("give --llm (labels already made) or --judge (models to judge the holes), one of them")
        runs = {r.name: r for r in read_runs_dir(runs_dir)}
        table = experiment({name: r.path for name, r in runs.items()}, topics, qrels=qrels, corpus=corpus,
                           judges=list(judge_models) if judge_models else None, llm_labels=llm, prompt=prompt,
                           mode=mode, store=store_path, measures=measures or ["nDCG@10"], k=depth, seed=seed,
                           design=design, baseline=baseline, correction=correction, confidence=confidence,
                           scope=scope)
        summary = dict(table.attrs)
        if as_json:
            for row in table.to_dict(orient="records"):
                typer.echo(json.dumps({"kind": "system", **{k: (None if isinstance(v, float) and math.isnan(v) else v)
                                                            for k, v in row.items()}}))
            typer.echo(json.dumps({"kind": "summary", **summary}))
            return
        _print(table, summary, depth)


def _print(table, s: dict, k: int) -> None:
    for measure, rows in table.groupby("measure", sort=False):
        t = Table(title=Text(f"{measure} over {s['queries']} queries (top {k} pooled; "
                             f"{describe_scope(s['scope'], k)})"),
                  caption=Text("Over the scope's pairs: human: the human labels alone (a hole counts as not "
                               "relevant); filled: human labels, LLM labels in the holes; llm: the LLM labels alone; "
                               "judged: Judged@k under the human labels; by LLM: top-k pairs the LLM labelled"
                               + (f"; p: paired t-test against {s['baseline']} on the filled labels, {s['correction']}"
                                  f"-corrected" if s["baseline"] else "")
                               + (f"; PPI++: {s['confidence']:.0%} interval from the seed" if "ppi" in rows else "")))
        t.add_column("system", overflow="fold", min_width=10)
        cols = ["human", "filled", "llm", f"judged@{k}", "filled_pairs"] + (["delta", "p_adjusted"] if s["baseline"] else [])
        for col in cols:
            t.add_column({"filled_pairs": "by LLM", "p_adjusted": "p", f"judged@{k}": "judged"}.get(col, col), justify="right")
        if "ppi" in rows:
            t.add_column("PPI++", justify="right")
        for r in rows.to_dict(orient="records"):
            cells = [str(r[c]) if c == "filled_pairs" else fmt_number(r[c]) for c in cols]
            if "ppi" in rows:
                cells.append(f"{fmt_number(r['ppi'])} ± {fmt_number((r['ppi_high'] - r['ppi_low']) / 2)}")
            t.add_row(Text(r["system"]), *cells)
        console.print(t)
    console.print(f"{s['holes']} holes in the pool, {s['invalid']} pooled pairs without a valid LLM label; "
                  f"{s['filled']} pairs of the scope filled by the LLM", markup=False)
    for note in s["notes"]:
        console.print(f"note: {note}", markup=False)
