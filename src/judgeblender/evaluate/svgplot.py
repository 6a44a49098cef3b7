"""A small SVG scatter-plot writer: self-contained files that an HTML report can inline.

Written by hand to keep plotting free of a matplotlib dependency. Only what the
leaderboard plots need: points coloured by group, a y = x diagonal, axes, a legend.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

# Okabe-Ito colours: distinguishable with the common forms of colour blindness.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")

PANEL_W, PANEL_H = 560, 400
PLOT_LEFT, PLOT_TOP, PLOT_SIZE = 64, 44, 300  # a square plot keeps y = x at 45 degrees
LEGEND_X = PLOT_LEFT + PLOT_SIZE + 20


@dataclass
class Point:
    x: float
    y: float
    group: str = ""
    label: str = ""  # shown as a tooltip


@dataclass
class Scatter:
    points: list[Point]
    title: str = ""
    x_label: str = ""
    y_label: str = ""
    diagonal: bool = True


def scatter_svg(scatter: Scatter) -> str:
    """One scatter plot as a complete SVG document (a string)."""
    colours = group_colours([scatter])
    return svg_document(PANEL_W, PANEL_H, _panel(scatter, colours))


def grid_svg(scatters: Sequence[Scatter], columns: int = 2) -> str:
    """Several scatter plots in a grid, one SVG document, colours shared across panels."""
    if not scatters:
        raise ValueError("grid_svg needs at least one scatter plot")
    columns = max(1, min(columns, len(scatters)))
    rows = math.ceil(len(scatters) / columns)
    colours = group_colours(scatters)
    parts = []
    for k, sc in enumerate(scatters):
        dx, dy = (k % columns) * PANEL_W, (k // columns) * PANEL_H
        parts.append(f'<g transform="translate({dx},{dy})">{_panel(sc, colours)}</g>')
    return svg_document(columns * PANEL_W, rows * PANEL_H, "".join(parts))


def group_colours(scatters: Sequence[Scatter]) -> dict[str, str]:
    """Groups in sorted order take the palette in turn; past eight, colours repeat."""
    groups = sorted({p.group for sc in scatters for p in sc.points})
    return {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(groups)}


def nice_ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    """Round tick values (steps of 1, 2, 2.5 or 5 times a power of ten) covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / target
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    k = 0
    while first + k * step <= hi + step * 1e-9:
        ticks.append(round(first + k * step, 12))
        k += 1
    return ticks


def svg_document(width: int, height: int, body: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="12">'
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>{body}</svg>\n'
    )


def _panel(sc: Scatter, colours: Mapping[str, str]) -> str:
    finite = [p for p in sc.points if math.isfinite(p.x) and math.isfinite(p.y)]
    values = [p.x for p in finite] + [p.y for p in finite]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    if hi - lo < 1e-12:  # all points equal: open a small window around them
        lo, hi = lo - 0.5, hi + 0.5
    pad = (hi - lo) * 0.05
    lo, hi = lo - pad, hi + pad  # the same range on both axes, so y = x is the diagonal

    def px(v: float) -> float:
        return PLOT_LEFT + (v - lo) / (hi - lo) * PLOT_SIZE

    def py(v: float) -> float:
        return PLOT_TOP + PLOT_SIZE - (v - lo) / (hi - lo) * PLOT_SIZE

    out = []
    bottom, right = PLOT_TOP + PLOT_SIZE, PLOT_LEFT + PLOT_SIZE
    if sc.title:
        out.append(svg_text(PLOT_LEFT + PLOT_SIZE / 2, 24, sc.title, anchor="middle", weight="bold"))
    ticks = nice_ticks(lo, hi)
    decimals = _decimals(ticks)
    for t in ticks:
        x, y = px(t), py(t)
        out.append(f'<line x1="{x:.1f}" y1="{PLOT_TOP}" x2="{x:.1f}" y2="{bottom}" stroke="#eeeeee"/>')
        out.append(f'<line x1="{PLOT_LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#eeeeee"/>')
        out.append(svg_text(x, bottom + 16, f"{t:.{decimals}f}", anchor="middle", size=10))
        out.append(svg_text(PLOT_LEFT - 6, y + 3, f"{t:.{decimals}f}", anchor="end", size=10))
    out.append(f'<rect x="{PLOT_LEFT}" y="{PLOT_TOP}" width="{PLOT_SIZE}" height="{PLOT_SIZE}" '
               f'fill="none" stroke="#444444"/>')
    if sc.diagonal:
        out.append(f'<line x1="{px(lo):.1f}" y1="{py(lo):.1f}" x2="{px(hi):.1f}" y2="{py(hi):.1f}" '
                   f'stroke="#999999" stroke-dasharray="4 3"><title>y = x</title></line>')
    for p in finite:
        tip = f"{p.label}: ({p.x:.4f}, {p.y:.4f})" if p.label else f"({p.x:.4f}, {p.y:.4f})"
        out.append(f'<circle cx="{px(p.x):.1f}" cy="{py(p.y):.1f}" r="4" fill={quoteattr(colours[p.group])} '
                   f'fill-opacity="0.85" stroke="#ffffff" stroke-width="0.5"><title>{escape(tip)}</title></circle>')
    if sc.x_label:
        out.append(svg_text(PLOT_LEFT + PLOT_SIZE / 2, bottom + 36, sc.x_label, anchor="middle"))
    if sc.y_label:
        cx, cy = 18, PLOT_TOP + PLOT_SIZE / 2
        out.append(f'<text x="{cx}" y="{cy}" text-anchor="middle" transform="rotate(-90 {cx} {cy})">'
                   f"{escape(sc.y_label)}</text>")
    groups = sorted({p.group for p in sc.points})
    if groups != [""]:
        for k, g in enumerate(groups):
            y = PLOT_TOP + 8 + k * 18
            out.append(f'<circle cx="{LEGEND_X + 5}" cy="{y}" r="5" fill={quoteattr(colours[g])}/>')
            out.append(svg_text(LEGEND_X + 16, y + 4, g or "(no group)"))
    if sc.diagonal:
        out.append(f'<line x1="{LEGEND_X}" y1="{bottom - 10}" x2="{LEGEND_X + 14}" y2="{bottom - 10}" '
                   f'stroke="#999999" stroke-dasharray="4 3"/>')
        out.append(svg_text(LEGEND_X + 20, bottom - 6, "y = x"))
    return "".join(out)


def svg_text(x: float, y: float, s: str, anchor: str = "start", size: int | None = None,
          weight: str | None = None) -> str:
    extra = f' font-size="{size}"' if size else ""
    extra += f' font-weight="{weight}"' if weight else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(s)}</text>'


def _decimals(ticks: list[float]) -> int:
    """Fewest decimals that still tell the ticks apart."""
    for d in range(0, 6):
        if len({f"{t:.{d}f}" for t in ticks}) == len(ticks):
            return d
    return 6
