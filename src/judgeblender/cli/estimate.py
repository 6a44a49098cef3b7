"""`judgeblender estimate`: run scores and their differences with confidence intervals, from LLM
labels for every query and human labels for a random seed of whole queries (query-level PPI++)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table
from rich.text import Text

from .. import arguments
from ..errors import InputError, JudgeblenderError
from ..evaluate.estimate import TARGETS, PairDesign, estimate_with_seed, plan, scoped_seed, seed_design
from ..evaluate.scope import DEFAULT_DEPTH, DEFAULT_SCOPE, SCOPE_HELP, check_scope, describe_scope
from ..evaluate.agreement import LEVELS
from ..evaluate.intervals import CONFIDENCE
from ..evaluate.seed_overlap import seed_overlap
from ..pairs.qrels import read_qrels
from ..pairs.runs import read_runs_dir
from .console import console, err_console

DEFAULT_MEASURE = "nDCG@10"
SHOWN_PAIRS = 30


def fmt_number(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _interval(x: float, lo: float, hi: float) -> str:
    return f"{fmt_number(x)} [{fmt_number(lo)}, {fmt_number(hi)}]"


def register(app: typer.Typer) -> None:
    @app.command("estimate")
    def estimate_command(
        llm: Path = typer.Option(..., "--llm", help="LLM qrels: a label for every pooled pair of every query."),
        human: Path = typer.Option(..., "--human", help="Human qrels of the seed: whole queries drawn at random."),
        runs_dir: Path = typer.Option(..., "--runs", help="Directory of TREC run files (plain or gzip)."),
        measures: list[str] = typer.Option(None, "--measure", "-m",
                                           help=f"ir_measures measure, repeatable [default: {DEFAULT_MEASURE}]."),
        confidence: float = typer.Option(CONFIDENCE, "--confidence", help="Coverage of the intervals, in (0, 1)."),
        target: str = typer.Option("collection", "--target",
                                   help="What is estimated: 'collection' (mean over these queries, finite-population "
                                        "corrected) or 'superpopulation' (queries as an i.i.d. sample; ppi-python as is)."),
        design: Optional[Path] = typer.Option(None, "--design",
                                              help="Design file of the seed [default: SEED.design.json if it exists]."),
        no_pairs: bool = typer.Option(False, "--no-pairs", help="Skip the differences between runs."),
        do_plan: bool = typer.Option(False, "--plan", help="Treat the seed as a pilot: how many seed queries "
                                     "(and human labels) give intervals no wider than --target-width."),
        target_width: Optional[float] = typer.Option(None, "--target-width", help="With --plan: the interval width wanted."),
        as_json: bool = typer.Option(False, "--json",
                                     help="One JSON object per line: per run and measure, then per pair, then the method."),
        scope: str = typer.Option(DEFAULT_SCOPE, "--scope", help=SCOPE_HELP + " The LLM-only figures are then "
                                  "experiment's llm column in the same scope."),
        depth: int = typer.Option(DEFAULT_DEPTH, "--depth", "-k", help="The pool's depth: for --scope pool, and for "
                                  "restricting a published label file to the pool a seed was drawn from."),
        calibration_seed: Optional[Path] = typer.Option(
            None, "--calibration-seed", help="The seed the panel was calibrated on (pairs TSV or qrels): warns, with "
            "counts, when --human shares queries or pairs with it (the panel has seen them)."),
    ) -> None:
        """Scores of runs with confidence intervals from LLM labels plus a small human seed (PPI++)."""
        arguments.confidence(confidence, "--confidence")
        check_scope(scope, "--scope")
        if target not in TARGETS:
            raise JudgeblenderError(f"--target must be one of {', '.join(TARGETS)}, got {target!r}")
        for path, what in ((llm, "--llm"), (human, "--human")):
            if not path.is_file():
                raise InputError(path, None, f"a qrels file for {what}", "no such file")
        the_design, design_file = seed_design(human, design)
        if do_plan != (target_width is not None):
            raise JudgeblenderError("--plan and --target-width go together")
        if do_plan and target != "collection":
            raise JudgeblenderError("--plan works for --target collection only")
        llm_qrels = read_qrels(llm, allowed=LEVELS)  # labels off the 0-3 scale are refused, as in agree
        human_qrels = read_qrels(human, allowed=LEVELS)
        if calibration_seed is not None:
            warning = seed_overlap(human_qrels, calibration_seed).warning()
            if warning:
                err_console.print(warning, markup=False)
        runs = read_runs_dir(runs_dir)
        if do_plan:
            if isinstance(the_design, PairDesign):
                raise JudgeblenderError("a seed of pairs (pairs-poisson design) does not support --plan")
            llm_qrels, human_qrels, restricted = scoped_seed(llm_qrels, human_qrels, runs, scope, depth,
                                                             llm_name=str(llm))
            if restricted:
                err_console.print(f"note: {restricted}", markup=False)
            rows = plan(llm_qrels, human_qrels, runs, measures or [DEFAULT_MEASURE], target_width=target_width,
                        confidence=confidence, llm_path=llm, human_path=human, design=the_design,
                        design_path=design_file)
            _print_plan(rows, target_width, confidence, as_json)
            return
        result = estimate_with_seed(llm_qrels, human_qrels, runs, measures or None, confidence=confidence,
                                    target=target, llm_path=llm, human_path=human, design_path=design,
                                    pairs=not no_pairs, scope=scope, depth=depth)
        _output(result, result.method, as_json)


def _output(result, method: dict, as_json: bool) -> None:
    if as_json:
        for r in result.runs:
            typer.echo(json.dumps({"kind": "run", **r.to_dict()}))
        for p in result.pairs:
            typer.echo(json.dumps({"kind": "pair", **p.to_dict()}))
        typer.echo(json.dumps({"kind": "method", **method, "notes": result.notes}))
        return
    _print(result, method)


def _print(result, method: dict) -> None:
    conf = method["confidence"]
    for measure in dict.fromkeys(r.measure for r in result.runs):
        rows = sorted((r for r in result.runs if r.measure == measure), key=lambda r: -r.estimate)
        seed = (f"{method['seed_pairs']} human seed pairs over {method['seed_queries']} queries"
                if "seed_pairs" in method else f"{method['seed_queries']} human seed queries")
        table = Table(title=Text(f"{measure}: {conf:.0%} intervals, {seed} of {method['queries']} "
                                 f"(scope {method['scope']})"),
                      caption=Text(f"x [lo, hi]: the estimate and its {conf:.0%} interval, clipped to the measure's "
                                   "range. PPI++: LLM labels on every query, corrected by the human seed. human-only: "
                                   "the seed alone. LLM-only: no correction (biased when the judge is). lambda: weight "
                                   "of the LLM scores (0: ignored). *: fails Cochran's rule on the seed (skewed "
                                   "scores): the interval is less trustworthy."))
        table.add_column("run", overflow="fold", min_width=10)
        for col in (f"PPI++ [{conf:.0%} CI]", f"human-only [{conf:.0%} CI]", "LLM-only", "lambda"):
            table.add_column(col, justify="right")
        for r in rows:
            table.add_row(Text(r.run + ("" if r.normal_ok else " *")), _interval(r.estimate, r.ci_low, r.ci_high),
                          _interval(r.human_only, r.human_only_low, r.human_only_high), fmt_number(r.llm_only),
                          fmt_number(r.lam, 2))
        console.print(table)
        pairs = [p for p in result.pairs if p.measure == measure]
        if pairs:
            sig = sorted((p for p in pairs if p.significant), key=lambda p: p.p_holm)
            held = sum(1 for p in pairs if p.p_holm < 1 - conf and not p.normal_ok)
            console.print(f"{measure}: {len(sig)} of {len(pairs)} pairs of runs significantly ordered "
                          f"(Holm, family-wise error {1 - conf:.2g}"
                          + (f"; {held} more that Holm rejects fail Cochran's rule and are not declared" if held else "")
                          + ")", markup=False)
            for p in sig[:SHOWN_PAIRS]:
                if p.difference > 0:
                    hi, lo, c_lo, c_hi = p.run_a, p.run_b, p.ci_low_bonferroni, p.ci_high_bonferroni
                else:
                    hi, lo, c_lo, c_hi = p.run_b, p.run_a, -p.ci_high_bonferroni, -p.ci_low_bonferroni
                console.print(f"  {hi} > {lo}: by {abs(p.difference):.3f}, {conf:.0%} Bonferroni interval (all "
                              f"pairs at once) [{fmt_number(c_lo)}, {fmt_number(c_hi)}], Holm p {p.p_holm:.2g}", markup=False)
            if len(sig) > SHOWN_PAIRS:
                console.print(f"  ... and {len(sig) - SHOWN_PAIRS} more (--json lists every pair)", markup=False)
    console.print(f"estimated: {method['estimand']}", markup=False)
    console.print(f"method: {method['estimator']}", markup=False)
    console.print(f"pairs: {method['pairwise']}", markup=False)
    console.print(f"design: {method['design']}", markup=False)
    console.print(describe_scope(method["scope"], method["depth"])
                  + ("; the seed estimates read it on the pool the seed was drawn from (see the note)"
                     if method.get("restricted") else ""), markup=False)
    for a in method["assumptions"]:
        console.print(f"assumes: {a}", markup=False)
    for note in result.notes:
        console.print(f"note: {note}", markup=False)


def _print_plan(rows, target_width: float, confidence: float, as_json: bool) -> None:
    if as_json:
        for r in rows:
            typer.echo(json.dumps({"kind": "plan", "target_width": target_width, "confidence": confidence,
                                   **r.to_dict()}))
        return
    for measure in dict.fromkeys(r.measure for r in rows):
        sub = [r for r in rows if r.measure == measure]
        table = Table(title=Text(f"{measure}: seed queries for {confidence:.0%} intervals at most {target_width} wide"),
                      caption=Text("From the pilot seed's per-query variances (themselves uncertain with a small "
                                   "pilot). none: not reached before the whole collection. pairs: queries x mean "
                                   "LLM-labelled pairs per query."))
        table.add_column("run", overflow="fold", min_width=10)
        for col in ("pilot width", "queries PPI++", "pairs PPI++", "queries human-only"):
            table.add_column(col, justify="right")
        for r in sorted(sub, key=lambda r: -(r.queries_needed or 10**9)):
            table.add_row(Text(r.run), fmt_number(r.pilot_width), str(r.queries_needed or "none"),
                          str(r.pairs_needed or "none"), str(r.queries_needed_human_only or "none"))
        console.print(table)
        need = [r.queries_needed for r in sub]
        need_h = [r.queries_needed_human_only for r in sub]
        worst = "none below the whole collection" if None in need else max(need)
        worst_h = "none below the whole collection" if None in need_h else max(need_h)
        console.print(f"{measure}: every run's interval at most {target_width} wide needs {worst} seed queries with "
                      f"PPI++, {worst_h} with the human seed alone", markup=False)
