"""`agree --binary-threshold T` and `agree --alpha-level LEVEL` (see evaluate/binary.py)."""

from __future__ import annotations

import math

import typer

from ..errors import shown
from ..evaluate.binary import ALPHA_LEVELS, alpha, binary_report, shared


def extras(gold, preds, threshold: int | None, level: str | None) -> list[dict]:
    if threshold is not None and threshold not in (1, 2, 3):
        raise typer.BadParameter(f"expected 1, 2 or 3 (relevant: label >= T), got {threshold}",
                                 param_hint="--binary-threshold")
    if level is not None and level not in ALPHA_LEVELS:
        raise typer.BadParameter(f"expected one of {', '.join(ALPHA_LEVELS)}, got {shown(level)}",
                                 param_hint="--alpha-level")
    out = []
    for pred in preds:
        g, p = shared(gold, pred)
        item: dict = {}
        if threshold is not None:
            item["binary"] = binary_report(g, p, threshold).to_dict()
        if level is not None:
            a = alpha(g, p, level)
            item["alpha"] = {"level": level, "value": None if math.isnan(a) else a}
        out.append(item)
    return out


def extra_lines(name: str, item: dict) -> list[str]:
    f = lambda x: "n/a" if x is None else f"{x:.3f}"  # noqa: E731
    lines = []
    if "binary" in item:
        b = item["binary"]
        (tn, fp), (fn, tp) = b["confusion"]
        lines += [f"{name}: binary relevance at label >= {b['threshold']}: rows gold, columns predicted",
                  f"  gold not relevant: {tn} not relevant, {fp} relevant",
                  f"  gold relevant:     {fn} not relevant, {tp} relevant",
                  f"  accuracy {f(b['accuracy'])}, precision {f(b['precision'])}, recall {f(b['recall'])}, "
                  f"kappa {f(b['kappa'])}",
                  "  per-level binary accuracy (gold level: share on its side of the threshold, pairs): "
                  + ", ".join(f"{lvl}: {f(a)} ({n})" for lvl, (a, n) in
                              enumerate(zip(b["per_level_accuracy"], b["per_level_pairs"])))]
    if "alpha" in item:
        lines.append(f"{name}: Krippendorff's alpha ({item['alpha']['level']}) {f(item['alpha']['value'])}")
    return lines
