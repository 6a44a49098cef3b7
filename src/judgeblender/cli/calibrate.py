"""`judgeblender calibrate`: pick a panel's blend on a human seed set and write the panel file."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

from enum import Enum

import typer
from rich.table import Table

from ..blend import load_details, load_qrels_ballots
from ..blend.select import DEFAULT_FAMILY, DEFAULT_OPTIMISE, DEFAULT_OUTER, DEFAULT_RULE, FAMILIES, MIN_OUTER_QUERIES, RULES, STATISTICS
from ..errors import JudgeblenderError
from ..blend.seed_rules import MIN_SEED_TEXT, seed_shortfall
from ..panels.calibrate import Calibration, Candidate, blender_for, calibrate
from ..panels.panel_file import PanelChoice, panel_file_text, specs_for
from ..pairs import Pair, read_corpus, read_qrels, read_queries, read_runs_dir
from ..fileio import atomic_write_text
from .agree import check_invalid_labels
from .console import console, err_console


# --select's choices, as typer takes them (an Enum per option; the names are blend/select.py's)
Family = Enum("Family", {name: name for name in FAMILIES}, type=str)
Rule = Enum("Rule", {name.replace("-", "_"): name for name in RULES}, type=str)
Optimise = Enum("Optimise", {name: name for name in STATISTICS}, type=str)


def panel_toml(cal: Calibration, chosen: Candidate, source: str, specs=None) -> str:
    lines = [f"# Written by `judgeblender calibrate` from {source}.",
             f"# Seed set: {cal.n_pairs} labelled pairs over {cal.n_queries} queries, {cal.folds} query folds.",
             "# Held-out Cohen's kappa (mean +- standard error over folds) of every candidate:"]
    for c in sorted(cal.candidates, key=lambda c: -c.mean if math.isfinite(c.mean) else 1e9):
        mark = "  <- chosen" if c is chosen else ""
        tau = f", leaderboard tau {c.tau:.3f}" if c.tau is not None and math.isfinite(c.tau) else ""
        lines.append(f"#   {c.name}: {c.mean:.3f} +- {c.se:.3f}{tau}{mark}")
    comments = [line[2:] if line.startswith("# ") else line[1:] for line in lines]
    choice = PanelChoice(tuple(chosen.judges), chosen.method or "mv", chosen.tie, 0, chosen.weights, chosen.thresholds)
    return panel_file_text(choice, specs if specs is not None else specs_for(chosen.judges), comments,
                           warning=cal.no_chance)


def register(app: typer.Typer) -> None:
    @app.command("calibrate")
    def calibrate_cmd(
        gold: Path = typer.Option(..., "--gold", help=f"Human seed labels (qrels): {MIN_SEED_TEXT}, else no panel is chosen."),
        details: Optional[Path] = typer.Option(None, "--details", help="Per-judge labels: a `judge --panel` details JSONL."),
        labels: Optional[list[Path]] = typer.Option(None, "--labels", help="Or: one qrels file per judge (judge id = file name)."),
        panel: Optional[str] = typer.Option(None, "--panel", help="Or: a panel (preset or .toml) to judge the seed pairs with."),
        queries: Optional[Path] = typer.Option(None, "--queries", "-q"),
        corpus: Optional[Path] = typer.Option(None, "--corpus", "-c"),
        store_path: Path = typer.Option(Path("judgments.sqlite"), "--store"),
        mode: str = typer.Option("logprobs", "--mode"),
        runs: Optional[Path] = typer.Option(None, "--runs", help="Runs directory: also report leaderboard tau (nDCG@10) on the seed pairs."),
        folds: int = typer.Option(5, "--folds", help="Query folds for held-out scoring."),
        seed: int = typer.Option(0, "--seed"),
        out: Path = typer.Option(..., "--out", "-o", help="The chosen panel file (TOML)."),
        select_panel: bool = typer.Option(False, "--select", help="Also choose the members: a family of candidate panels x aggregators, scored on held-out query folds (see docs/aggregators.md)."),
        cost: Optional[list[str]] = typer.Option(None, "--cost", help="NAME=PRICE per call for --select (others cost 1); repeatable."),
        judge_model: Optional[list[str]] = typer.Option(None, "--judge-model", help="NAME=MODEL[/PROMPT[/MODE]]: the model a label-file judge stands for, written to the panel file; repeatable."),
        family: Family = typer.Option(Family(DEFAULT_FAMILY), "--family", help="--select: the candidates: 'auto' (the default: one judge, the 'order' family or the rich family, decided out of sample on --outer-folds; docs/aggregators.md), 'order' (median or majority vote of the top k judges by seed score), 'single' (one judge), 'subsets' (every subset up to --exhaustive-max judges x every aggregator, greedy beyond) or 'ranked' (the top k judges x every aggregator)."),
        rule: Rule = typer.Option(Rule(DEFAULT_RULE), "--rule", help="--select: how a family's candidate is chosen on the seed's folds (with --family auto: inside the rich family): 'paired-bound' (the default: a panel must beat the best single judge by more than one standard error of the paired difference), 'best' (highest pooled figure) or 'one-se' (the one-standard-error rule); docs/aggregators.md."),
        optimise: Optimise = typer.Option(Optimise(DEFAULT_OPTIMISE), "--optimise", help="--select: the held-out statistic the choice maximises: Cohen's kappa (0-3) or Krippendorff's ordinal alpha."),
        exhaustive_max: int = typer.Option(8, "--exhaustive-max", help="--select, subsets family: score every subset up to this many judges, else greedy ('auto' uses the ranked family beyond)."),
        time_limit: float = typer.Option(120.0, "--time-limit", help="--select, subsets family: seconds for one search."),
        outer_folds: Optional[int] = typer.Option(None, "--outer-folds", help=f"--select: outer query folds of the out-of-sample comparison (family 'auto': it decides what is seated; any other family: the honest figure is reported); 0: off (then 'auto' seats one judge, or with more than 8 judges the order family). Default: {DEFAULT_OUTER} when the seed has at least {MIN_OUTER_QUERIES} labelled queries, else off with a note."),
        cost_from_store: bool = typer.Option(False, "--cost-from-store", help="--select: each judge's cost = its mean calls per pair in --store (a --cost price wins)."),
        slow: bool = typer.Option(False, "--slow/--fast-only", help="--select, subsets family: also score dawid-skene (and the probability rules when the votes carry distributions) on the frontier subsets; seconds a fit, off by default (learned thresholds are always scored)."),
        invalid_labels: str = typer.Option("error", "--invalid-labels", help="A --labels label outside 0..3: 'error' stops naming file:line, 'abstain' counts the judge as abstaining on the pair."),
    ) -> None:
        """Score each judge and aggregator on a human seed set, choose, and write the panel file."""
        check_invalid_labels(invalid_labels)
        gold_qrels = read_qrels(gold, allowed=range(4))
        if details is not None:
            table, source = load_details(details), str(details)
        elif labels:
            table, source = load_qrels_ballots(labels, invalid_labels=invalid_labels), ", ".join(map(str, labels))
        elif panel and queries and corpus:
            from ..judges import build_judge, judge_pairs
            from ..panels.panel import ballots_from_run, get_panel
            from ..store import CallStore

            p = get_panel(panel, None, mode, {}, seed=seed)
            pairs = [Pair(qid, d) for qid, docs in gold_qrels.items() for d in docs]
            short = None if select_panel else seed_shortfall((x.qid, x.docid) for x in pairs)
            if short:  # fail before spending: no panel could be chosen from what this would judge
                raise JudgeblenderError(f"{gold}: {short}; no model call made")
            passages = read_corpus(corpus, wanted={x.docid for x in pairs})
            with CallStore(store_path) as store:
                run = judge_pairs([build_judge(s) for s in p.judges], pairs, read_queries(queries), passages, store,
                                  skip_missing=True)
            from .options import fail_if_calls_failed

            fail_if_calls_failed(run.stats.values(), "judgments (judge x pair) of the seed set")
            table, source = ballots_from_run(run), f"panel {panel} judged on {gold}"
        else:
            raise JudgeblenderError("give --details FILE, or --panel with --queries and --corpus")
        panel_specs = []
        if panel:  # the panel that judged: its members' models, prompts, modes and options go to the file
            from ..panels.panel import get_panel

            panel_specs = get_panel(panel, None, mode, {}, seed=seed).judges
        if select_panel:
            from .calibrate_select import run_select

            run_select(table, gold_qrels, source, out, folds=folds, seed=seed, costs=cost or [],
                       judge_models=judge_model or [], panel_specs=panel_specs, mode=mode,
                       exhaustive_max=exhaustive_max, time_limit=time_limit, outer_folds=outer_folds, slow=slow,
                       cost_store=store_path if cost_from_store else None, family=family.value, rule=rule.value,
                       optimise=optimise.value, gold_path=gold)
            return
        cal = calibrate(table, gold_qrels, folds=folds, seed=seed)
        if runs is not None:
            _leaderboard_taus(cal, table, gold_qrels, runs, seed)
        shown = Table(title=f"held-out kappa over {cal.folds} query folds ({cal.n_pairs} pairs, {cal.n_queries} queries)",
                      title_justify="left")
        for col in ("candidate", "kappa", "+- se", "tau nDCG@10"):
            shown.add_column(col, justify="left" if col == "candidate" else "right")
        for c in sorted(cal.candidates, key=lambda c: -c.mean if math.isfinite(c.mean) else 1e9):
            tau = "" if c.tau is None else f"{c.tau:.3f}"
            name = c.name + ("  <- chosen" if c is cal.chosen else "")
            shown.add_row(name, f"{c.mean:.3f}", f"{c.se:.3f}", tau)
        console.print(shown)
        for w in cal.warnings:
            err_console.print(f"[yellow]note[/] {w}")
        for alert in cal.alerts():
            marked = f"; {out} is written anyway, marked with a `warning` key" if alert == cal.no_chance else ""
            err_console.print(f"warning: {alert}{marked}", markup=False, soft_wrap=True)
        if cal.chosen is None:
            raise JudgeblenderError("no panel written: " + (cal.warnings[-1] if cal.warnings else "nothing to choose"))
        atomic_write_text(out, panel_toml(cal, cal.chosen, source, specs_for(table.judges, panel_specs,
                                                                                judge_model or [], mode)))
        err_console.print(f"chose {cal.chosen.name} (criterion: mean held-out Cohen's kappa, one-standard-error "
                          f"rule towards simpler candidates); wrote {out}")



def _leaderboard_taus(cal: Calibration, table, gold, runs_dir: Path, seed: int) -> None:
    """Tau of the run leaderboard under each candidate vs the human labels, on the seed pairs only."""
    from ..evaluate import correlate

    pairs = set(table.pairs)
    gold_sub = {q: {d: l for d, l in docs.items() if (q, d) in pairs} for q, docs in gold.items()}
    gold_sub = {q: docs for q, docs in gold_sub.items() if docs}
    preds = {}
    for c in cal.candidates:
        labels = blender_for(c, seed).blend(table.only_judges(list(c.judges))).labels
        qrels: dict[str, dict[str, int]] = {}
        for (q, d), label in zip(table.pairs, labels):
            if label is not None and q in gold_sub:
                qrels.setdefault(q, {})[d] = label
        preds[c.name] = qrels
    reports = correlate(gold_sub, preds, read_runs_dir(runs_dir), measures=("nDCG@10",), bootstrap=0)
    by_name = {r.name: r.kendall_tau for r in reports}
    for c in cal.candidates:
        c.tau = by_name.get(c.name)
