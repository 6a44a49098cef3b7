"""`judgeblender agree`: label agreement of predicted qrels with gold qrels."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from ..errors import shown
from ..evaluate.agreement import LEVELS, AgreementReport, agreement
from ..evaluate.intervals import CONFIDENCE
from ..pairs.qrels import read_prediction, read_qrels
from .console import console


def fmt(value: float, digits: int = 3) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def with_ci(value: float, ci: tuple[float, float]) -> Text:
    """The value, and under it its interval (when there is one): two short lines keep tables narrow."""
    if math.isnan(ci[0]):
        return Text(fmt(value))
    return Text(f"{fmt(value)}\n[{fmt(ci[0], 2)}, {fmt(ci[1], 2)}]")


BOOTSTRAP_HELP = ("Bootstrap samples over the gold queries for the intervals of kappa, binary kappa, weighted "
                  "kappas and alpha; 0 disables.")


INVALID_LABELS_HELP = ("A predicted label that is not an integer 0..3 (e.g. '1.'): 'error' stops naming "
                       "file:line, 'abstain' leaves the pair unlabelled and counts it as invalid.")


def check_invalid_labels(invalid_labels: str) -> None:
    if invalid_labels not in ("error", "abstain"):
        raise typer.BadParameter(f"expected 'error' or 'abstain', got {shown(invalid_labels)}",
                                 param_hint="--invalid-labels")


def agreement_table(reports: list[AgreementReport], gold: Path, n_gold: int) -> Table:
    # Text(), not strings: rich would read brackets in file names as markup.
    # no vertical rules and one space between columns: nine figures and a name fit 80 columns
    table = Table(
        title=Text(f"Agreement with {gold} ({n_gold} pairs)"), box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1),
        caption="Only pairs labelled in both files count. pairs: labelled in both; inv: unreadable "
                "predicted labels (--invalid-labels abstain); cover: pairs / gold pairs; "
                "acc: exact accuracy; kappa: Cohen's on 0-3; k bin: on 0-1 vs 2-3; wk lin, wk quad: "
                "linearly and quadratically weighted kappa; alpha: Krippendorff's, ordinal.",
    )
    table.add_column("prediction", min_width=12, overflow="fold")
    for col in ("pairs", "inv", "cover", "acc", "kappa", "k bin", "wk lin", "wk quad", "alpha"):
        table.add_column(col, justify="right", no_wrap=True)
    for r in reports:
        coverage = "n/a" if math.isnan(r.coverage) else f"{r.coverage:.1%}"
        table.add_row(
            Text(r.name), str(r.n), str(r.invalid), coverage, fmt(r.accuracy), fmt(r.kappa),
            fmt(r.kappa_binary), fmt(r.weighted_kappa_linear), fmt(r.weighted_kappa_quadratic),
            fmt(r.alpha_ordinal),
        )
    return table


def interval_table(reports: list[AgreementReport], n_queries: int) -> Table:
    """kappa, binary kappa and alpha with their bootstrap intervals (the weighted kappas' are in --json)."""
    first = reports[0]
    table = Table(
        title=Text(f"{first.confidence:.0%} intervals, bootstrap over the {n_queries} gold queries"),
        caption=Text(f"[lo, hi]: percentile interval, {first.bootstrap} samples of whole queries drawn with "
                     f"replacement, seed {first.seed}. k bin: 0-1 vs 2-3. --json has the weighted kappas' too."),
    )
    table.add_column("prediction", min_width=12, overflow="fold")
    for col in ("kappa", "k bin", "alpha"):
        table.add_column(col, justify="right")
    for r in reports:
        table.add_row(Text(r.name), with_ci(r.kappa, r.kappa_ci), with_ci(r.kappa_binary, r.kappa_binary_ci),
                      with_ci(r.alpha_ordinal, r.alpha_ordinal_ci))
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
        invalid_labels: str = typer.Option("error", "--invalid-labels", help=INVALID_LABELS_HELP),
        binary_threshold: int = typer.Option(None, "--binary-threshold", help="Also report binary relevance (label >= T): confusion matrix, per-level binary accuracy (the paper's Table 4)."),
        alpha_level: str = typer.Option(None, "--alpha-level", help="Also report Krippendorff's alpha at this level: nominal, ordinal, interval or ratio."),
        bootstrap: int = typer.Option(1000, "--bootstrap", help=BOOTSTRAP_HELP),
        seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap's random generator."),
        confidence: float = typer.Option(CONFIDENCE, "--confidence", help="Coverage of the bootstrap intervals, in (0, 1)."),
    ) -> None:
        """How well predicted labels agree with gold labels, on the pairs both label."""
        check_invalid_labels(invalid_labels)
        gold_qrels = read_qrels(gold, allowed=LEVELS)
        reports = []
        for path in predictions:
            pred, invalid = read_prediction(path, invalid_labels, allowed=LEVELS)
            reports.append(agreement(gold_qrels, pred, name=path.stem, invalid=invalid, bootstrap=bootstrap,
                                     seed=seed, confidence=confidence))
        from .agree_binary import extra_lines, extras  # binary table and alpha level (evaluate/binary.py)

        more = extras(gold_qrels, [read_prediction(p, invalid_labels, allowed=LEVELS)[0] for p in predictions],
                      binary_threshold, alpha_level) if binary_threshold is not None or alpha_level is not None else None
        if as_json:
            for i, r in enumerate(reports):
                typer.echo(json.dumps({**r.to_dict(), **(more[i] if more else {})}))
            return
        console.print(agreement_table(reports, gold, sum(len(d) for d in gold_qrels.values())))
        if bootstrap:
            console.print(interval_table(reports, len(gold_qrels)))
        for r in reports:
            for note in r.notes:
                console.print(f"note ({r.name}): {note}", markup=False)
        if show_confusion:
            for r in reports:
                console.print(confusion_table(r))
        if more:
            for r, m in zip(reports, more):
                for line in extra_lines(r.name, m):
                    console.print(line, markup=False, soft_wrap=True)
