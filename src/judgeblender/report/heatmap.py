"""Confusion-matrix heatmaps as inline SVG.

A cell's shade is its share of the row (the gold level), so a rare level's errors show as
clearly as a common one's; the count and the share are printed in the cell. The diagonal
share is that level's accuracy, repeated at the row's end.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from xml.sax.saxutils import escape

CELL = 64
LEFT, TOP = 108, 64
LEVEL_NAMES = ("0 irrelevant", "1 related", "2 highly", "3 perfectly")


def _shade(share: float) -> str:
    """White to a deep blue as the share goes 0 -> 1."""
    lo, hi = (255, 255, 255), (21, 101, 192)
    r, g, b = (round(a + (z - a) * share) for a, z in zip(lo, hi))
    return f"#{r:02x}{g:02x}{b:02x}"


def confusion_svg(confusion: Sequence[Sequence[int]], title: str, gold_name: str = "human",
                  pred_name: str = "LLM") -> str:
    n = len(confusion)
    width, height = LEFT + n * CELL + 96, TOP + n * CELL + 44
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="12" '
           f'role="img" aria-label="{escape(title, {chr(34): "&quot;"})}">',
           f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
           f'<text x="{LEFT + n * CELL / 2}" y="18" text-anchor="middle" font-weight="bold">{escape(title)}</text>',
           f'<text x="{LEFT + n * CELL / 2}" y="40" text-anchor="middle">{escape(pred_name)} label</text>',
           f'<text x="{LEFT + n * CELL + 48}" y="{TOP - 8}" text-anchor="middle" font-size="11">accuracy</text>']
    for j in range(n):
        out.append(f'<text x="{LEFT + j * CELL + CELL / 2}" y="{TOP - 8}" text-anchor="middle">{j}</text>')
    for i, row in enumerate(confusion):
        total = sum(row)
        y = TOP + i * CELL
        out.append(f'<text x="{LEFT - 8}" y="{y + CELL / 2 + 4}" text-anchor="end">{escape(LEVEL_NAMES[i])}</text>'
                   if i < len(LEVEL_NAMES) else f'<text x="{LEFT - 8}" y="{y + CELL / 2 + 4}" text-anchor="end">{i}</text>')
        for j, count in enumerate(row):
            share = count / total if total else 0.0
            x = LEFT + j * CELL
            ink = "#ffffff" if share > 0.55 else "#1d1f23"
            out.append(f'<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" fill="{_shade(share)}" '
                       f'stroke="#ffffff"><title>{escape(gold_name)} {i}, {escape(pred_name)} {j}: {count}</title></rect>')
            out.append(f'<text x="{x + CELL / 2}" y="{y + CELL / 2 - 2}" text-anchor="middle" fill="{ink}" '
                       f'font-weight="bold">{count}</text>')
            if total:
                out.append(f'<text x="{x + CELL / 2}" y="{y + CELL / 2 + 14}" text-anchor="middle" fill="{ink}" '
                           f'font-size="10">{share:.0%}</text>')
        acc = row[i] / total if total and i < len(row) else math.nan
        out.append(f'<text x="{LEFT + n * CELL + 48}" y="{y + CELL / 2 + 4}" text-anchor="middle">'
                   f'{"n/a" if math.isnan(acc) else f"{acc:.0%}"}</text>')
    cx, cy = 14, TOP + n * CELL / 2
    out.append(f'<text x="{cx}" y="{cy}" text-anchor="middle" transform="rotate(-90 {cx} {cy})">'
               f'{escape(gold_name)} label</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{n * CELL}" height="{n * CELL}" fill="none" stroke="#444444"/>')
    out.append("</svg>")
    return "".join(out)
