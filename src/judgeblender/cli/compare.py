"""`judgeblender compare`: retrieval methods side by side under one qrels, holes in view."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table
from rich.text import Text

from ..errors import JudgeblenderError
from ..evaluate.agreement import LEVELS
from ..pairs import read_qrels, read_runs_dir
from ..report.methods import JUDGED, METHOD_MEASURES, method_table
from .console import console


def register(app: typer.Typer) -> None:
    @app.command("compare")
    def compare_command(
        qrels: Path = typer.Option(..., "--qrels", help="The labels to score with (LLM, human or merged qrels)."),
        runs_dir: Path = typer.Option(..., "--runs", help="Directory of TREC run files, one per method."),
        measures: Optional[list[str]] = typer.Option(None, "--measure", "-m", help=f"ir_measures measure, repeatable [default: {', '.join(METHOD_MEASURES)}]; the first sorts."),
        min_judged: float = typer.Option(0.9, "--min-judged", help="Mark methods whose Judged@10 is below this share."),
        as_json: bool = typer.Option(False, "--json", help="One JSON object per method per line."),
    ) -> None:
        """nDCG@10, Judged@10 and Recall@10 per method: a low Judged@10 means the score rests on holes."""
        wanted = list(measures or METHOD_MEASURES)
        if JUDGED not in wanted:
            wanted.append(JUDGED)  # the point of the table: never show a score without its coverage
        mt = method_table(read_runs_dir(runs_dir), read_qrels(qrels, allowed=LEVELS), wanted)
        holes = set(mt.holes(min_judged))
        if as_json:
            for run in mt.runs:
                typer.echo(json.dumps({"run": run, **mt.scores[run], "holes": run in holes}))
            return
        table = Table(title=Text(f"Methods under {qrels} ({mt.n_queries} queries, {len(mt.runs)} runs)"),
                      caption=Text(f"Means over the qrels' queries, best first. Judged@10: share of the top 10 that "
                                   f"has a label; ! marks less than {min_judged:.0%}: judge those holes before "
                                   "trusting the score. R@10: ir_measures' recall, label >= 1 relevant."))
        table.add_column("method", overflow="fold")
        for m in mt.measures:
            table.add_column(m, justify="right")
        table.add_column("", justify="left")
        for run in mt.runs:
            s = mt.scores[run]
            table.add_row(Text(run), *(f"{s[m]:.1%}" if m == JUDGED else f"{s[m]:.4f}" for m in mt.measures),
                          "!" if run in holes else "")
        console.print(table)
        if holes:
            console.print(f"{len(holes)} of {len(mt.runs)} methods have Judged@10 below {min_judged:.0%}",
                          markup=False)
