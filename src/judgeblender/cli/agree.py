"""`judgeblender agree`: label agreement of predicted qrels with gold qrels."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer
from rich.table import Table
from rich.text import Text

from ..evaluate.agreement import LEVELS, AgreementReport, agreement
from ..pairs.qrels import read_qrels
from .console import console


def fmt(value: float, digits: int = 3) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def agreement_table(reports: list[AgreementReport], gold: Path, n_gold: int) -> Table:
    # Text(), not strings: rich would read brackets in file names as markup.
    table = Table(
        title=Text(f"Agreement with {gold} ({n_gold} pairs)"),
        caption="Only pairs labelled in both files count. kappa: Cohen's on 0-3; binary: 0-1 vs 2-3; "
                "weighted: linear / quadratic; alpha: Krippendorff's, ordinal.",
    )
    table.add_column("prediction")
    for col in ("shared pairs", "coverage", "accuracy", "kappa", "kappa binary",
                "w-kappa lin", "w-kappa quad", "alpha ord"):
        table.add_column(col, justify="right", no_wrap=True)
    for r in reports:
        table.add_row(
            Text(r.name), str(r.n), f"{r.coverage:.1%}" if not math.isnan(r.coverage) else "n/a", fmt(r.accuracy),
            fmt(r.kappa), fmt(r.kappa_binary), fmt(r.weighted_kappa_linear),
            fmt(r.weighted_kappa_quadratic), fmt(r.alpha_ordinal),
        )
    return table


def confusion_table(report: AgreementReport) -> Table:
    table = Table(title=Text(f"{report.name}: rows = gold label, columns = predicted label"))
    table.add_column("gold", justify="right")
    for level in LEVELS:
        table.add_column(f"pred {level}", justify="right")
    table.add_column("total", justify="right")
    table.add_column("per-level accuracy", justify="right")
    for level, row, acc in zip(LEVELS, report.confusion, report.per_level_accuracy):
        table.add_row(str(level), *map(str, row), str(sum(row)), fmt(acc))
    return table


def register(app: typer.Typer) -> None:
    @app.command("agree")
    def agree_command(
        predictions: list[Path] = typer.Argument(..., help="Predicted qrels files; each is named by its file stem."),
        gold: Path = typer.Option(..., "--gold", help="Gold (human) qrels, labels 0-3."),
        as_json: bool = typer.Option(False, "--json", help="One JSON object per prediction file per line."),
        show_confusion: bool = typer.Option(False, "--confusion", help="Also print each 4x4 confusion matrix."),
    ) -> None:
        """How well predicted labels agree with gold labels, on the pairs both label."""
        gold_qrels = read_qrels(gold, allowed=LEVELS)
        reports = [agreement(gold_qrels, read_qrels(p, allowed=LEVELS), name=p.stem) for p in predictions]
        if as_json:
            for r in reports:
                typer.echo(json.dumps(r.to_dict()))
            return
        console.print(agreement_table(reports, gold, sum(len(d) for d in gold_qrels.values())))
        for r in reports:
            for note in r.notes:
                console.print(f"note ({r.name}): {note}", markup=False)
        if show_confusion:
            for r in reports:
                console.print(confusion_table(r))
