"""`judgeblender report`: one self-contained HTML page on how far the LLM labels can be trusted."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import typer

from ..evaluate.intervals import CONFIDENCE
from ..evaluate.scope import DEFAULT_DEPTH, DEFAULT_SCOPE, SCOPE_HELP, check_scope
from ..report import ReportInputs, build_report
from .console import console, err_console


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report_command(
        gold: Path = typer.Option(..., "--gold", help="Human qrels (labels 0-3); their queries are the ones scored."),
        preds: list[Path] = typer.Option(..., "--pred", help="LLM qrels, repeatable (one per judge or aggregator); named by file stem."),
        runs_dir: Path = typer.Option(..., "--runs", help="Directory of TREC run files (plain or gzip)."),
        out: Path = typer.Option(..., "--out", "-o", help="The HTML file to write."),
        groups: Optional[Path] = typer.Option(None, "--groups", help="TSV 'run<TAB>group' of system families [default: derived from run names]."),
        store: Optional[Path] = typer.Option(None, "--store", help="Call store: adds invalid-output rates, tokens and time per judge."),
        bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap samples over queries for the intervals; 0 disables."),
        seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
        min_judged: float = typer.Option(0.9, "--min-judged", help="Flag runs whose Judged@10 is below this share; a "
                                         "query counts in the human leaderboards when its human labels judge at "
                                         "least this share of the runs' top 10."),
        title: str = typer.Option("How far can the LLM labels be trusted?", "--title"),
        seed_qrels: Optional[Path] = typer.Option(
            None, "--seed-qrels", help="Human labels of a random seed (whole queries, or pairs with a design): adds "
            "each --pred's leaderboard with PPI++ intervals and the significantly ordered pairs of runs, as "
            "`estimate` computes them."),
        design: Optional[Path] = typer.Option(
            None, "--design", help="Design file of --seed-qrels [default: SEED.design.json beside it, if it exists]."),
        confidence: float = typer.Option(CONFIDENCE, "--confidence",
                                         help="Coverage of the bootstrap and the seed's intervals, in (0, 1)."),
        calibration_seed: Optional[Path] = typer.Option(
            None, "--calibration-seed", help="The seed the panel was calibrated on (pairs TSV or qrels): warns, with "
            "counts, when --gold or --seed-qrels share queries or pairs with it (the panel has seen them)."),
        scope: str = typer.Option(DEFAULT_SCOPE, "--scope", help=SCOPE_HELP),
        depth: int = typer.Option(DEFAULT_DEPTH, "--depth", "-k", help="The pool's depth: for --scope pool, and for "
                                  "reading a --pred file that covers more on the pool --seed-qrels was drawn from."),
    ) -> None:
        """Agreement, confusion matrices, leaderboards, bias by family, holes and cost, in one HTML file."""
        check_scope(scope, "--scope")
        data = build_report(ReportInputs(gold=gold, preds=list(preds), runs_dir=runs_dir, groups=groups, store=store,
                                         bootstrap=bootstrap, seed=seed, min_judged=min_judged, title=title,
                                         seed_qrels=seed_qrels, design=design, confidence=confidence,
                                         calibration_seed=calibration_seed, scope=scope, depth=depth), out)
        for warning in data.warnings:
            err_console.print(warning, markup=False)
        for note in data.scope_notes:
            err_console.print(f"note: {note}", markup=False)
        for a in data.agreements:
            kappa = "n/a" if math.isnan(a.kappa) else f"{a.kappa:.3f}"
            tau = next((f", {r.measure} tau {r.kendall_tau:.3f}" for r in data.correlations if r.name == a.name), "")
            console.print(f"{a.name}: {a.n:,} shared pairs, kappa {kappa}{tau}", markup=False)
        console.print(f"human leaderboards: {data.basis.statement}", markup=False)
        for name, result in data.estimates.items():
            if isinstance(result, str):
                err_console.print(f"{name}: no seed estimate: {result}", markup=False)
                continue
            pairs = result.pairs
            console.print(f"{name}: seed of {result.method['seed_queries']} queries, "
                          f"{sum(p.significant for p in pairs)} of {len(pairs)} pairs of runs significantly ordered "
                          f"({result.runs[0].measure}, Holm)", markup=False)
        err_console.print(f"wrote {out}", markup=False)
