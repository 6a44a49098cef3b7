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


# The table's columns as the command prints them: (column, heading); a column the table lacks
# (no baseline, no seed) is left out. The same columns as jb.experiment's: each PPI++ interval is
# folded into its estimate's cell, the raw p into the adjusted one (--json has both), and
# ppi_significant into the verdict that says why.
_SHOWN = (("human", "human"), ("filled", "filled"), ("llm", "llm"), ("judged@{k}", "judged"),
          ("filled_pairs", "by LLM"), ("unlabelled", "no label"), ("delta", "delta"), ("p_adjusted", "p"), ("significant", "sig"),
          ("human_pool", "human (pool)"), ("ppi", "PPI++ [CI]"), ("ppi_delta", "PPI++ delta [CI]"),
          ("ppi_p_holm", "PPI++ p"), ("ppi_verdict", "PPI++ verdict"))


def _cell(r: dict, col: str) -> str:
    value = r.get(col)
    if col in ("ppi", "ppi_delta"):
        return "" if _missing(value) else f"{fmt_number(value)} [{fmt_number(r[col + '_low'])}, " \
                                          f"{fmt_number(r[col + '_high'])}]"
    if col == "significant":
        return "yes" if value else "no"
    if col in ("filled_pairs", "unlabelled", "ppi_verdict"):
        return "" if _missing(value) else str(value)
    return fmt_number(value)


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _print(table, s: dict, k: int) -> None:
    """One table per measure, the systems in the order of the first measure's filled score (best
    first), with the columns jb.experiment returns; the caption says each column's pairs
    (attrs["columns"], the one wording of them)."""
    first = table[table["measure"] == table["measure"].iloc[0]]
    order = {name: i for i, name in enumerate(first.sort_values("filled", ascending=False, kind="stable")["system"])}
    shown = [(c.format(k=k), h) for c, h in _SHOWN if c.format(k=k) in table.columns]
    words = s.get("columns", {})
    for measure, rows in table.groupby("measure", sort=False):
        rows = rows.sort_values("system", key=lambda names: names.map(order), kind="stable")
        t = Table(title=Text(f"{measure} over {s['queries']} queries (top {k} pooled; "
                             f"{describe_scope(s['scope'], k)}), best {table['measure'].iloc[0]} filled first"))
        t.add_column("system", overflow="fold", min_width=10)
        for _, heading in shown:
            t.add_column(heading, justify="right")
        for r in rows.to_dict(orient="records"):
            t.add_row(Text(r["system"]), *(_cell(r, c) for c, _ in shown))
        console.print(t)
    for col, heading in shown:  # the tables' caption, once: what each column is and over which pairs
        if col in words:
            console.print(f"{heading}: {words[col]}", markup=False)
    console.print(f"{s['holes']} holes in the {s['pooled']} pooled pairs, {s['invalid']} pooled pairs without a "
                  f"valid LLM label; {s['filled']} pairs of the scope filled by the LLM, {s['filled_holes']} of them "
                  "holes", markup=False)
    for note in s["notes"]:
        console.print(f"note: {note}", markup=False)
