"""`judgeblender calibrate --select`: choose the panel's members and aggregator, with cost, and
write a panel file that runs as written (see blend/select.py and panels/panel_file.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.table import Table

from ..blend.select import Choice, Selection, fit_choice, nested_select, select
from ..errors import JudgeblenderError
from ..judges.judge import JudgeSpec
from ..panels.panel_file import PanelChoice, panel_file_text, specs_for
from ..fileio import atomic_write_text
from .console import console, err_console


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
    out = [f"Cost-quality frontier ({unit}; held-out kappa mean +- se over {sel.folds} query folds):"]
    for c in sel.frontier:
        mark = "  <- chosen" if c is sel.chosen else ""
        out.append(f"  cost {c.cost:g}: {c.label}: {c.mean:.3f} +- {c.se:.3f}{mark}")
    return out


def nested_lines(rep) -> list[str]:
    judge, best = rep.best_member
    out = [f"Nested check: selection re-run inside each of {len(rep.folds)} outer query folds, the chosen panel "
           f"scored on the outer fold's queries ({rep.n_pairs} pairs pooled):"]
    for f in rep.folds:
        out.append(f"  outer fold {f.fold} ({len(f.test_queries)} queries): chose {f.chosen}: {f.chosen_kappa:.3f}; "
                   f"member chosen inside {f.inner_best_member}: {f.inner_best_member_kappa:.3f}")
    out.append(f"  pooled: selected panels {rep.pooled_chosen:.3f}; member chosen inside each fold "
               f"{rep.pooled_inner_member:.3f}; best member in hindsight {judge} {best:.3f} "
               f"({rep.pooled_chosen - best:+.3f})")
    return out


def run_select(table, gold: Mapping[str, Mapping[str, int]], source: str, out: Path, *, folds: int, seed: int,
               costs: Sequence[str], judge_models: Sequence[str], panel_specs: Sequence[JudgeSpec], mode: str,
               exhaustive_max: int, time_limit: float, outer_folds: int, slow: bool,
               cost_store: Path | None = None) -> Selection:
    specs = specs_for(table.judges, panel_specs, judge_models, mode)  # fail on a bad mapping before searching
    measured = store_costs(cost_store, table.judges) if cost_store is not None else {}
    prices = {**measured, **parse_costs(costs, table.judges)}  # a price given on the command line wins
    sel = select(table, gold, folds=folds, costs=prices, exhaustive_max=exhaustive_max, time_limit=time_limit,
                 slow=slow, seed=seed)
    shown = Table(title=f"panel selection ({sel.search}, {sel.subsets} subsets, {len(sel.candidates)} candidates, "
                        f"{sel.seconds:.0f} s): held-out kappa over {sel.folds} query folds "
                        f"({sel.n_pairs} pairs, {sel.n_queries} queries)", title_justify="left")
    for col in ("candidate", "cost", "kappa", "+- se"):
        shown.add_column(col, justify="left" if col == "candidate" else "right")
    top = sorted((c for c in sel.candidates if math.isfinite(c.mean)), key=lambda c: -c.mean)[:10]
    for c in dict.fromkeys([*top, *sel.frontier]):
        mark = "  <- chosen" if c is sel.chosen else ("  (frontier)" if c in sel.frontier else "")
        shown.add_row(c.label + mark, f"{c.cost:g}", f"{c.mean:.3f}", f"{c.se:.3f}")
    console.print(shown)
    lines = frontier_lines(sel, bool(prices))
    for line in lines:
        console.print(line, markup=False, soft_wrap=True)
    nested = None
    if outer_folds >= 2:
        nested = nested_select(table, gold, outer=outer_folds, inner=folds, costs=prices, exhaustive_max=exhaustive_max,
                               time_limit=time_limit, slow=slow, seed=seed,
                               progress=lambda m: err_console.print(m, markup=False, soft_wrap=True))
        for line in nested_lines(nested):
            console.print(line, markup=False, soft_wrap=True)
    for w in sel.warnings:
        err_console.print(f"[yellow]note[/] {w}")
    if sel.chosen is None:
        raise JudgeblenderError("no panel written: no candidate has a finite held-out kappa")
    chosen: Choice = fit_choice(sel.chosen, table, gold, seed)
    comments = [f"Written by `judgeblender calibrate --select` from {source}.",
                f"Seed set: {sel.n_pairs} labelled pairs over {sel.n_queries} queries, {sel.folds} query folds; "
                f"{sel.search} search over {sel.subsets} subsets.",
                f"Chosen by the one-standard-error rule (cheapest, then fewest members, then simplest, within one "
                f"se of the best {sel.best.label}: {sel.best.mean:.3f} +- {sel.best.se:.3f}).",
                *lines]
    if nested is not None:
        comments += nested_lines(nested)
    if measured:
        comments.append(f"Measured from the store {cost_store}: calls per pair " + ", ".join(
            f"{j}={c:.3g}" for j, c in measured.items()) + ".")
    if prices:
        comments.append("Cost per pair used: " + ", ".join(f"{j}={p:g}" for j, p in prices.items()) + " (others 1).")
    text = panel_file_text(PanelChoice(chosen.judges, chosen.method, chosen.tie, seed, chosen.weights,
                                       chosen.thresholds), specs, comments)
    atomic_write_text(out, text)
    missing = [j for j in chosen.judges if specs[j] is None]
    err_console.print(f"chose {chosen.label} ({sel.chosen.mean:.3f} +- {sel.chosen.se:.3f}); wrote {out}",
                      markup=False, soft_wrap=True)
    if missing:
        err_console.print(f"note: {', '.join(missing)} came from label files: `blend --panel {out}` applies the panel "
                          f"to label files; `judge --panel` needs --judge-model NAME=MODEL[/PROMPT[/MODE]]",
                          markup=False, soft_wrap=True)
    return sel
