"""`judgeblender blend`: several judges' qrels (or a details file) -> one blended qrels file."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..blend import METHODS, TIE_RULES, Blender, load_ballots
from ..blend.weighted import check_weights
from ..errors import ArgumentError, shown
from ..pairs import read_pairs
from ..pairs.qrels import write_qrels
from .console import console, err_console
from .usage import flags_of, option_error


def parse_weights(text: str) -> dict[str, float]:
    """`a=2,b=0.5` -> {"a": 2.0, "b": 0.5}; a name given twice is an error, not an override."""
    weights: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, sep, value = item.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            number = float(value)
        except ValueError:
            raise typer.BadParameter(f"expected NAME=NUMBER, got {item!r}", param_hint="--weights") from None
        if name in weights:
            raise typer.BadParameter(f"weight given twice for {name}", param_hint="--weights")
        weights[name] = number
    return weights


def parse_thresholds(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(s) for s in text.split(","))
    except ValueError:
        raise typer.BadParameter(f"expected numbers separated by commas, got {text!r}", param_hint="--thresholds") from None


def method_lines() -> list[str]:
    width = max(map(len, [*METHODS, *TIE_RULES]))
    lines = ["methods (--method):"]
    for m in METHODS.values():
        notes = [n for n, on in (("needs --weights", m.needs_weights), ("uses --tie", m.uses_tie),
                                  ("uses probabilities", m.uses_probs), ("uses --thresholds", m.uses_thresholds),
                                  (f"needs the [{m.extra}] extra", bool(m.extra))) if on]
        lines.append(f"  {m.name:<{width}}  {m.rule}" + (f" ({'; '.join(notes)})" if notes else ""))
    lines.append("tie rules (--tie):")
    lines.extend(f"  {name:<{width}}  {rule}" for name, rule in TIE_RULES.items())
    return lines


def register(app: typer.Typer) -> None:
    @app.command("blend")
    def blend_command(
        judges: list[str] = typer.Argument(
            None, help="One qrels file per judge; the judge id is the file name (e.g. sun.qrels -> sun), "
                       "or NAME in NAME=PATH. A pair missing from a file: that judge abstained."),
        method: str = typer.Option(None, "--method", "-m", help="Aggregator; see --list. [default: mv]"),
        tie: str = typer.Option(None, "--tie", help="Tie rule for methods that can tie: " + ", ".join(TIE_RULES) + " [default: avg]"),
        seed: int = typer.Option(0, "--seed", help="Seed of the random tie rule (each pair's pick is seeded by it and the pair's ids)."),
        weights: str = typer.Option(None, "--weights", help="NAME=W,... one weight per judge (method weighted)."),
        thresholds: str = typer.Option(
            None, "--thresholds", help="T1,T2,T3 cut points (method prob-expected); default 0.5,1.5,2.5."),
        details: list[Path] = typer.Option(
            None, "--details", help="JSONL file with per-judge labels and probabilities; repeatable."),
        invalid_labels: str = typer.Option(
            "error", "--invalid-labels",
            help="A qrels label outside 0..3: 'error' stops, 'abstain' counts the judge as abstaining."),
        out: Path = typer.Option(None, "--out", "-o", help="Blended qrels to write (atomically)."),
        panel: Path = typer.Option(
            None, "--panel", help="A panel file (e.g. from calibrate): its members (by judge id), method, tie, seed, "
                                  "weights and thresholds; instead of --method/--tie/--weights/--thresholds."),
        tiebreaker: str = typer.Option(
            None, "--tiebreaker", help="PATH or NAME=PATH: qrels of a judge that decides the pairs where the panel "
                                       "ties or its members' labels spread by --spread or more (or --margin); "
                                       "with --panel: the labels of the panel file's [tiebreaker]."),
        spread: Optional[int] = typer.Option(
            None, "--spread", help="With a tie-breaker: consult where the panel ties or highest minus lowest member "
                                   "label >= this (4: ties only). [default: 2, or the panel file's]"),
        margin: Optional[float] = typer.Option(
            None, "--margin", help="With a tie-breaker, instead of --spread: consult where the panel ties or the "
                                   "blend's margin <= this (0..1): top minus runner-up label's pooled probability "
                                   "(probability methods) or votes / voters (others)."),
        pairs: Optional[Path] = typer.Option(
            None, "--pairs", "-p", help="Blend and write only these pairs (e.g. the pool): qrels, run or 'qid docid' "
                                        "TSV; its pairs that no input labels are counted, not written."),
        list_methods: bool = typer.Option(
            False, "--list", "--methods", help="List the methods and tie rules, and exit."),
    ) -> None:
        """Blend several judges' labels into one label per pair."""
        if list_methods:
            for line in method_lines():
                console.print(line, markup=False, soft_wrap=True)
            return
        if not judges and not details:
            raise typer.BadParameter("give qrels files or --details", param_hint="JUDGES")
        if out is None:
            raise typer.BadParameter("expected a path to write the blended qrels to; this option is required "
                                     "and was not given", param_hint="--out")
        if invalid_labels not in ("error", "abstain"):
            raise typer.BadParameter(f"expected 'error' or 'abstain', got {shown(invalid_labels)}",
                                     param_hint="--invalid-labels")
        if panel is not None and (method or tie or weights is not None or thresholds is not None):
            raise typer.BadParameter("the panel file sets the method, tie, weights and thresholds", param_hint="--panel")
        method, tie = method or "mv", tie or "avg"
        try:
            blender = Blender(
                method, tie=tie, seed=seed,
                weights=parse_weights(weights) if weights is not None else None,
                **({"thresholds": parse_thresholds(thresholds)} if thresholds is not None else {}),
            )
        except ArgumentError as exc:
            raise option_error(exc, flags_of(blend_command)) from None
        from .blend_panel import blend_tiebreaker

        judges, tb_args, tb_notes = blend_tiebreaker(panel, list(judges or []), tiebreaker, spread, margin)
        table = load_ballots(judges, details or [], invalid_labels=invalid_labels)
        notes: list[str] = []
        if panel is not None:
            from .blend_panel import panel_blender

            blender, table, notes = panel_blender(panel, table)
        if pairs is not None:
            wanted = set(read_pairs(pairs))
            table, unlabelled = table.only_pairs(wanted)
            notes.append(f"--pairs {pairs}: {table.n_pairs} of its {len(wanted)} pairs have labels in the inputs; "
                         f"{unlabelled} have none in any input and are not written")
        if blender.method.needs_weights:
            try:  # only now is the jury known, so only now can the weights be matched to it
                check_weights(blender.weights, table.judges)
            except ArgumentError as exc:
                raise option_error(exc, flags_of(blend_command)) from None
        result = blender.blend(table)
        qrels = result.qrels()
        if tb_args is not None:
            from ..blend.tiebreak import apply_tiebreaker

            name, answers, spread, margin = tb_args
            tb = apply_tiebreaker(result, answers, name, spread, margin)
            qrels = tb.qrels()
            notes += [*tb_notes, *tb.summary_lines()]
        write_qrels(out, qrels)
        for line in [*notes, *result.summary_lines()]:
            err_console.print(line, markup=False, soft_wrap=True)
        err_console.print(f"wrote {out} ({sum(map(len, qrels.values()))} pairs)", markup=False, soft_wrap=True)
