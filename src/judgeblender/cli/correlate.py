"""`judgeblender correlate`: do predicted qrels rank a set of runs as the gold qrels do?"""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer
from rich.table import Table
from rich.text import Text

from ..evaluate.agreement import LEVELS
from ..evaluate.bias import GroupBias, leaderboard_scatter, read_groups, report_bias
from ..evaluate.intervals import CONFIDENCE
from ..evaluate.leaderboard import DEFAULT_MEASURES, CorrelationReport, correlate
from ..evaluate.scope import DEFAULT_MIN_JUDGED
from ..evaluate.svgplot import grid_svg
from ..pairs.qrels import read_qrels
from ..pairs.runs import read_runs_dir
from ..fileio import atomic_write_text
from ..pairs.qrels import read_prediction
from .agree import INVALID_LABELS_HELP, check_invalid_labels, with_ci
from .console import console, err_console


def fmt(value: float, digits: int = 3, signed: bool = False) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def correlation_table(reports: list[CorrelationReport], bootstrap: int, seed: int) -> Table:
    first = reports[0]
    ci_note = (f"[lo, hi]: {first.confidence:.0%} bootstrap interval over queries ({bootstrap} samples, seed {seed})"
               if bootstrap else "no bootstrap intervals (--bootstrap 0)")
    # Text(), not strings: rich would read "[lo, hi]" and names with brackets as markup.
    table = Table(
        title=Text(f"Leaderboard correlation with the gold labels ({first.n_runs} runs, "
                   f"{first.n_queries} queries of the gold qrels)"),
        caption=Text(f"tau: Kendall's tau-b; rho: Spearman's; tau_AP: reference = gold leaderboard. {ci_note}. "
                     "unjudged@10: share of top-10 documents without a predicted label."),
    )
    table.add_column("prediction", min_width=12, overflow="fold")
    table.add_column("measure", min_width=7, overflow="fold")
    for col in ("tau", "rho", "tau_AP", "unjudged@10"):
        table.add_column(col, justify="right")
    for r in reports:
        table.add_row(Text(r.name), Text(r.measure), with_ci(r.kendall_tau, r.kendall_tau_ci),
                      with_ci(r.spearman_rho, r.spearman_rho_ci), with_ci(r.tau_ap, r.tau_ap_ci),
                      f"{r.unjudged_at_10:.1%}")
    return table


def bias_table(rows: list[tuple[CorrelationReport, list[GroupBias]]]) -> Table:
    table = Table(
        title="Bias by system family",
        caption="score diff: mean of (LLM score - gold score); rank shift: mean of (LLM rank - gold rank), "
                "rank 1 = best, so > 0 means the LLM labels rank the family lower.",
    )
    for col in ("prediction", "measure", "group", "runs", "score diff", "rank shift"):
        table.add_column(col, justify="left" if col in ("prediction", "measure", "group") else "right")
    for report, groups in rows:
        for g in groups:
            table.add_row(Text(report.name), Text(report.measure), Text(g.group), str(g.n_runs),
                          fmt(g.mean_score_diff, 4, signed=True), fmt(g.mean_rank_shift, 2, signed=True))
    return table


def register(app: typer.Typer) -> None:
    @app.command("correlate")
    def correlate_command(
        predictions: list[Path] = typer.Argument(..., help="Predicted qrels files; each is named by its file stem."),
        gold: Path = typer.Option(..., "--gold", help="Gold (human) qrels. Only its queries are evaluated."),
        runs_dir: Path = typer.Option(..., "--runs", help="Directory of TREC run files (plain or gzip)."),
        measures: list[str] = typer.Option(
            None, "--measure", "-m",
            help=f"ir_measures measure, repeatable; default: {' and '.join(DEFAULT_MEASURES)}."),
        as_json: bool = typer.Option(False, "--json", help="One JSON object per (prediction, measure) per line."),
        bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap samples over queries; 0 disables."),
        seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap's random generator."),
        confidence: float = typer.Option(CONFIDENCE, "--confidence", help="Coverage of the bootstrap intervals."),
        groups_file: Path = typer.Option(None, "--groups", help="TSV 'run<TAB>group': report bias by system family."),
        plot: Path = typer.Option(None, "--plot", help="Write an SVG scatter plot (gold vs predicted score per run)."),
        per_run: bool = typer.Option(False, "--per-run", help="With --json, include every run's two scores."),
        invalid_labels: str = typer.Option("error", "--invalid-labels", help=INVALID_LABELS_HELP),
        min_judged: float = typer.Option(DEFAULT_MIN_JUDGED, "--min-judged", help="A gold query counts when the gold "
                                         "labels judge at least this share of the runs' top 10 (as in report); 0 "
                                         "counts every labelled query."),
    ) -> None:
        """Correlation between the leaderboard of runs under gold labels and under each prediction."""
        check_invalid_labels(invalid_labels)
        gold_qrels = read_qrels(gold, allowed=LEVELS)
        preds = {}
        for path in predictions:
            if path.stem in preds:  # results are keyed by name: one would hide the other
                raise typer.BadParameter(f"two prediction files are named {path.stem!r}", param_hint="PREDICTIONS")
            preds[path.stem], invalid = read_prediction(path, invalid_labels, allowed=LEVELS)
            if invalid:
                err_console.print(f"{path}: {invalid} unreadable label(s) left unjudged", markup=False)
        runs = read_runs_dir(runs_dir)
        groups = read_groups(groups_file) if groups_file else None
        if groups:
            names = {r.name for r in runs}
            unknown = sorted(set(groups) - names)
            if unknown:
                err_console.print(f"warning: {len(unknown)} run(s) in {groups_file} are not in {runs_dir}: "
                                  + ", ".join(unknown[:5]) + (" ..." if len(unknown) > 5 else ""), markup=False)
        reports = correlate(gold_qrels, preds, runs, measures or DEFAULT_MEASURES,
                            bootstrap=bootstrap, seed=seed, confidence=confidence, min_judged=min_judged)
        biases = [(r, report_bias(r, groups)) for r in reports] if groups else []

        if plot:
            atomic_write_text(plot, grid_svg([leaderboard_scatter(r, groups) for r in reports],
                                             columns=len({r.measure for r in reports})))
            err_console.print(f"wrote {plot}", markup=False)

        if as_json:
            for k, r in enumerate(reports):
                d = r.to_dict(per_run=per_run)
                if groups:
                    d["bias"] = [vars(g) for g in biases[k][1]]
                typer.echo(json.dumps(d))
            return
        console.print(correlation_table(reports, bootstrap, seed))
        seen: set[tuple[str, str]] = set()
        for r in reports:
            for note in r.notes:
                if (r.name, note) not in seen:  # the same note repeats for every measure
                    seen.add((r.name, note))
                    console.print(f"note ({r.name}): {note}", markup=False)
        if biases:
            console.print(bias_table(biases))
