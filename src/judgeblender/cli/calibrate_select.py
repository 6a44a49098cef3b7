"""`judgeblender calibrate --select`: choose the panel's members and aggregator, with cost, and
write a panel file that runs as written (see blend/select.py and panels/panel_file.py).

The choice is the library's (`blend.select.select`): this module only prints it and writes it.
With the default family (`auto`) that includes the decision between one judge, the order family
and the rich family, made out of sample; it prints (and the panel file records) each
procedure's nested figure next to the all-member vote's, with intervals over the queries, and
the decision's reason. With a named family it prints the honest figure of that procedure
(`nested_select`) when the seed has enough queries."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.table import Table

from ..blend.select import (BOOTSTRAP, DEFAULT_FAMILY, DEFAULT_OPTIMISE, DEFAULT_RULE, Choice, Decision,
                            NestedReport, Selection, fit_choice, nested_select, outer_folds_for, select)
from ..errors import ArgumentError, InputError, JudgeblenderError
from ..judges.judge import JudgeSpec
from ..panels.panel_file import PanelChoice, panel_file_text, specs_for
from ..fileio import atomic_write_text
from .console import console, err_console

RULE_TEXT = {
    "paired-bound": ("the paired bound: the highest pooled {s} minus the best single judge's, less one standard "
                     "error of that difference over query resamples (the best judge alone scores 0, so a panel must "
                     "beat it by more than its own noise)"),
    "best": "the highest {s} pooled over the folds' held-out pairs",
    "one-se": "the one-standard-error rule on the mean per-fold {s} (cheapest, then fewest members, then simplest)",
}
FAMILY_TEXT = {
    "ranked": "the judges ranked by seed {s}, the top k for every k x every aggregator, re-ranked inside each fold",
    "order": "the judges ranked by seed {s}, the median or majority vote of the top k for every k, re-ranked inside "
             "each fold",
    "single": "each judge alone",
    "subsets": "subsets of the judges x aggregators",
}


def parse_costs(items: Sequence[str], judges: Sequence[str]) -> dict[str, float]:
    """`NAME=PRICE` (price per call, any unit) for some judges; the others cost 1."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        try:
            price = float(value)
            if not sep or not name or not math.isfinite(price) or price < 0:
                raise ValueError
        except ValueError:
            raise JudgeblenderError(f"--cost: expected NAME=PRICE with a price >= 0, got {item!r}") from None
        if name not in judges:
            raise JudgeblenderError(f"--cost: no judge named {name} (judges: {', '.join(judges)})")
        if name in out:
            raise JudgeblenderError(f"--cost: {name} given twice")
        out[name] = price
    return out


def store_costs(path: Path, judges: Sequence[str]) -> dict[str, float]:
    """Measured cost per judge from a call store: the mean number of prompt steps (one model call
    each) recorded per judged pair, for the judges the store holds judgments of."""
    from ..store import CallStore

    if not Path(path).is_file():
        raise JudgeblenderError(f"{path}: no such store (--cost-from-store reads the store the judges ran with)")
    out: dict[str, float] = {}
    with CallStore(path, read_only=True) as store:  # a store on a read-only medium serves
        held = set(store.judge_ids())
        for judge in judges:
            if judge not in held:
                continue
            records = store.judgments(judge)
            calls = [len(r.get("steps") or []) for r in records]
            if calls:
                out[judge] = float(sum(calls) / len(calls))
    return out


def frontier_lines(sel: Selection, priced: bool) -> list[str]:
    unit = "price per pair" if priced else "calls per pair"
    out = [f"Cost-quality frontier ({unit}; held-out {sel.optimise} mean +- se over {sel.folds} query folds; "
           f"pooled kappa / alpha):"]
    for c in sel.frontier:
        mark = "  <- chosen" if c is sel.chosen else ""
        out.append(f"  cost {c.cost:g}: {c.label}: {c.mean:.3f} +- {c.se:.3f}; {c.pooled('kappa'):.3f} / "
                   f"{c.pooled('alpha'):.3f}{mark}")
    return out


def _ci(ci: tuple[float, float]) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def nested_lines(rep: NestedReport) -> list[str]:
    """The honest figure: three procedures on the same held-out pairs, with intervals over queries."""
    judge, best = rep.best_member
    pct = f"{100 * rep.confidence:g}%"
    out = [f"Nested estimate: the selection re-run inside each of {rep.outer} outer query folds, what it chose "
           f"scored on that fold's queries ({rep.n_pairs} pairs over {rep.n_queries} queries pooled; {pct} "
           f"intervals from {rep.bootstrap} resamples of the queries):"]
    width = 38
    for name, est in (("chosen procedure", rep.chosen), ("best member chosen the same way", rep.member),
                      ("majority vote of all members", rep.vote)):
        out.append(f"  {name:<{width}} kappa {est.kappa:.3f} {_ci(est.kappa_ci)}  alpha {est.alpha:.3f} "
                   f"{_ci(est.alpha_ci)}")
    for key, name in (("member", "best member"), ("vote", "all-member vote")):
        d = rep.differences.get(key)
        if d:
            out.append(f"  chosen - {name:<{width - 9}} kappa {d['kappa'][0]:+.3f} {_ci(d['kappa'][1])}  alpha "
                       f"{d['alpha'][0]:+.3f} {_ci(d['alpha'][1])}")
    for f in rep.folds:
        out.append(f"  outer fold {f.fold} ({len(f.test_queries)} queries): chose {f.chosen}: kappa "
                   f"{f.chosen_kappa:.3f}; member chosen inside {f.inner_best_member}: {f.inner_best_member_kappa:.3f}")
    out.append(f"  best member in hindsight (chosen on these very labels, not a procedure): {judge} {best:.3f}")
    return out


def decision_lines(d: Decision) -> list[str]:
    """The default's decision: each procedure's figure on queries it did not choose on, the vote's,
    the gains over the baseline and the reason."""
    if d.skipped:
        return [f"Decision: {d.reason}."]
    pct = f"{100 * d.confidence:g}%"
    out = [f"Decision, out of sample: each procedure re-run inside each of {d.outer} outer query folds and scored "
           f"on that fold's queries ({d.n_pairs} pairs over {d.n_queries} queries pooled, an unlabelled pair counted "
           f"as a disagreement; {pct} intervals from {d.bootstrap} resamples of the queries):"]
    names = {**{p: d.texts[p] for p in d.estimates if p != "vote"}, "vote": "majority vote of all members (no label)"}
    for key, est in d.estimates.items():
        mark = "  <- chosen" if key == d.procedure else "  (baseline)" if key == d.baseline else ""
        out.append(f"  {key:<7} kappa {est.kappa:.3f} {_ci(est.kappa_ci)}  alpha {est.alpha:.3f} {_ci(est.alpha_ci)}"
                   f"  {names[key]}{mark}")
    for key, diff in d.differences.items():
        out.append(f"  {d.procedure} - {key:<7} kappa {diff['kappa'][0]:+.3f} {_ci(diff['kappa'][1])}  alpha "
                   f"{diff['alpha'][0]:+.3f} {_ci(diff['alpha'][1])}")
    for n, fold in enumerate(d.folds, start=1):
        out.append(f"  outer fold {n}: " + "; ".join(f"{p} chose {label}" for p, label in fold.items()))
    out.append(f"  Chosen: {d.reason}.")
    return out


def selection_record(sel: Selection, chosen: Choice, nested: NestedReport | None, skipped: str | None,
                     family: str) -> dict:
    """The [selection] table of the panel file: how the panel was chosen and what it is worth."""
    record = {"family": sel.family, "family_option": family, "rule": sel.rule, "optimise": sel.optimise, "chosen": chosen.label,
              "seed_queries": sel.n_queries, "seed_pairs": sel.n_pairs, "folds": sel.folds,
              "inner_kappa": chosen.pooled("kappa"), "inner_alpha": chosen.pooled("alpha"),
              "coverage": sel.chosen.coverage}
    if sel.notes:
        record["notes"] = list(sel.notes)
    if sel.decision is not None:
        record["decision"] = sel.decision.figures()
        return record
    if nested is None:
        record["nested"] = {"skipped": skipped or "not run"}
    else:
        figures = nested.figures()
        record["nested"] = {k: v for k, v in figures.items() if k not in ("differences", "optimise")}
        record["nested"]["beats_both"] = nested.beats_both
        for key, name in (("member", "best_member"), ("vote", "all_member_vote")):
            for s, (value, ci) in nested.differences.get(key, {}).items():
                record["nested"][f"chosen_minus_{name}_{s}"] = value
                record["nested"][f"chosen_minus_{name}_{s}_ci"] = list(ci)
    return record


def run_select(table, gold: Mapping[str, Mapping[str, int]], source: str, out: Path, *, folds: int, seed: int,
               costs: Sequence[str], judge_models: Sequence[str], panel_specs: Sequence[JudgeSpec], mode: str,
               exhaustive_max: int, time_limit: float, outer_folds: int | None, slow: bool,
               cost_store: Path | None = None, family: str = DEFAULT_FAMILY, rule: str = DEFAULT_RULE,
               optimise: str = DEFAULT_OPTIMISE, gold_path: Path | None = None) -> Selection:
    specs = specs_for(table.judges, panel_specs, judge_models, mode)  # fail on a bad mapping before searching
    measured = store_costs(cost_store, table.judges) if cost_store is not None else {}
    prices = {**measured, **parse_costs(costs, table.judges)}  # a price given on the command line wins
    labelled = {q for q, d in table.pairs if d in gold.get(q, {})}
    if len(labelled) < 2:  # the library's own check names its argument; here the file is what to fix
        raise InputError(gold_path or "--gold", None, "human labels on pairs of at least 2 queries that the judges "
                         "labelled (--select scores candidates on held-out queries)",
                         f"{len(labelled)} such quer{'y' if len(labelled) == 1 else 'ies'}")
    try:
        outer, skipped = outer_folds_for(len(labelled), outer_folds)
    except ArgumentError as exc:
        raise ArgumentError("--outer-folds", exc.expected, exc.got) from None
    progress = (lambda m: err_console.print(m, markup=False, soft_wrap=True))  # noqa: E731
    sel = select(table, gold, folds=folds, costs=prices, family=family, rule=rule, optimise=optimise,
                 exhaustive_max=exhaustive_max, time_limit=time_limit, slow=slow, seed=seed, outer=outer_folds,
                 bootstrap=BOOTSTRAP, progress=progress)
    for note in sel.notes:
        err_console.print(f"note: {note}", markup=False, soft_wrap=True)
    shown = Table(title=f"panel selection ({sel.search}, {sel.subsets} subsets, {len(sel.candidates)} candidates, "
                        f"{sel.seconds:.0f} s): held-out figures over {sel.folds} query folds "
                        f"({sel.n_pairs} pairs, {sel.n_queries} queries; an unlabelled pair counts as a disagreement)",
                  title_justify="left")
    for col in ("candidate", "cost", "coverage", "kappa", "alpha", f"{sel.optimise} fold mean", "+- se"):
        shown.add_column(col, justify="left" if col == "candidate" else "right")
    figure = (lambda c: c.mean) if sel.rule == "one-se" else (lambda c: c.value)
    top = sorted((c for c in sel.candidates if math.isfinite(figure(c))), key=lambda c: -figure(c))[:10]
    reference = sel.best_member if sel.rule == "paired-bound" else None  # what the chosen panel had to beat
    for c in dict.fromkeys([*top, *sel.frontier, *(c for c in (sel.chosen, reference) if c is not None)]):
        mark = ("  <- chosen" if c is sel.chosen else "  (frontier)" if c in sel.frontier
                else "  (best single judge)" if c is reference else "")
        shown.add_row(c.label + mark, f"{c.cost:g}", f"{c.coverage:.1%}", f"{c.pooled('kappa'):.3f}",
                      f"{c.pooled('alpha'):.3f}", f"{c.mean:.3f}", f"{c.se:.3f}")
    console.print(shown)
    lines = frontier_lines(sel, bool(prices))
    for line in lines:
        console.print(line, markup=False, soft_wrap=True)
    nested = None
    if sel.decision is not None:
        for line in decision_lines(sel.decision):
            console.print(line, markup=False, soft_wrap=True)
    elif outer and sel.chosen is not None:
        nested = nested_select(table, gold, outer=outer, inner=folds, costs=prices, family=family, rule=rule,
                               optimise=optimise, exhaustive_max=exhaustive_max, time_limit=time_limit, slow=slow,
                               seed=seed, bootstrap=BOOTSTRAP, progress=progress)
        for line in nested_lines(nested):
            console.print(line, markup=False, soft_wrap=True)
    elif skipped:
        err_console.print(f"nested estimate skipped: {skipped}", markup=False, soft_wrap=True)
    for w in sel.warnings:
        err_console.print(f"[yellow]note[/] {w}")
    for alert in sel.alerts():
        marked = f"; {out} is written anyway, marked with a `warning` key" if alert == sel.no_chance else ""
        err_console.print(f"warning: {alert}{marked}", markup=False, soft_wrap=True)
    if sel.chosen is None:
        reason = sel.too_small or "no candidate has a finite held-out figure"
        raise JudgeblenderError(f"no panel written: {reason}")
    chosen: Choice = fit_choice(sel.chosen, table, gold, seed)
    how = RULE_TEXT[sel.rule].format(s=optimise)
    comments = [f"Written by `judgeblender calibrate --select` from {source}.",
                f"Seed set: {sel.n_pairs} labelled pairs over {sel.n_queries} queries, {sel.folds} query folds; "
                f"{sel.search} search over {sel.subsets} subsets, {len(sel.candidates)} candidates "
                f"({FAMILY_TEXT[sel.family].format(s=optimise)}).",
                f"Chosen by {how}: {chosen.label}, held-out kappa {chosen.pooled('kappa'):.3f}, alpha "
                f"{chosen.pooled('alpha'):.3f} on the seed folds (the figure it was chosen by, so optimistic); "
                f"it labels {sel.chosen.coverage:.1%} of the labelled seed pairs.",
                *(f"Note: {n}." for n in sel.notes), *lines]
    warning = nested.warning() if nested is not None else None
    if sel.decision is not None:
        comments += decision_lines(sel.decision)
    elif nested is not None:
        comments += nested_lines(nested)
    else:
        comments.append(f"Nested estimate skipped: {skipped}.")
    if measured:
        comments.append(f"Measured from the store {cost_store}: calls per pair " + ", ".join(
            f"{j}={c:.3g}" for j, c in measured.items()) + ".")
    if prices:
        comments.append("Cost per pair used: " + ", ".join(f"{j}={p:g}" for j, p in prices.items()) + " (others 1).")
    text = panel_file_text(PanelChoice(chosen.judges, chosen.method, chosen.tie, seed, chosen.weights,
                                       chosen.thresholds), specs, comments, warning=sel.no_chance,
                           tables={"selection": selection_record(sel, chosen, nested, skipped, family)})
    atomic_write_text(out, text)
    missing = [j for j in chosen.judges if specs[j] is None]
    err_console.print(f"chose {chosen.label} (held-out {optimise} {sel.chosen.value:.3f} on the seed folds); "
                      f"wrote {out}", markup=False, soft_wrap=True)
    if warning:
        err_console.print(f"warning: {warning}", markup=False, soft_wrap=True)
    if missing:
        err_console.print(f"note: {', '.join(missing)} came from label files: `blend --panel {out}` applies the panel "
                          f"to label files; `judge --panel` needs --judge-model NAME=MODEL[/PROMPT[/MODE]]",
                          markup=False, soft_wrap=True)
    return sel
