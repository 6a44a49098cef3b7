"""Small HTML building blocks: every text goes through escape(), numbers through num()."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from html import escape

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1d1f23;
       margin: 0 auto; padding: 16px 28px 48px; max-width: 1240px; line-height: 1.45; }
h1 { font-size: 26px; margin: 8px 0 4px; }
h2 { font-size: 20px; margin: 36px 0 8px; padding-top: 8px; border-top: 2px solid #e3e6ea; }
h3 { font-size: 16px; margin: 22px 0 6px; }
p.lead { color: #454b55; margin-top: 0; }
table { border-collapse: collapse; margin: 8px 0 6px; font-size: 13px; }
th, td { padding: 4px 9px; border-bottom: 1px solid #e3e6ea; text-align: right; white-space: nowrap; }
th { background: #f3f5f7; font-weight: 600; }
th.l, td.l { text-align: left; }
tr.sep td { border-top: 2px solid #b0bec5; }
caption { caption-side: bottom; text-align: left; color: #5f6672; font-size: 12px; padding-top: 6px;
          white-space: normal; max-width: 1000px; }
.note { background: #fff8e1; border-left: 4px solid #ffb300; padding: 6px 10px; margin: 6px 0; font-size: 13px; }
.warn { color: #b71c1c; font-weight: 600; }
.plots { display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start; }
.plots svg, svg.wide { max-width: 100%; height: auto; }
.bar { display: inline-block; vertical-align: middle; width: 80px; height: 9px; background: #eceff1;
       margin-left: 6px; }
.bar span { display: block; height: 100%; background: #43a047; }
.bar span.low { background: #e53935; }
nav ol { columns: 2; font-size: 14px; }
code { background: #f3f5f7; padding: 0 3px; border-radius: 3px; }
p.basis { background: #eef4fb; border-left: 4px solid #1565c0; padding: 6px 10px; margin: 6px 0 10px; font-size: 13px; }
p.basis.warn { background: #fdecea; border-left-color: #b71c1c; }
table.matrix { font-size: 12px; }
table.matrix th, table.matrix td { padding: 1px 4px; text-align: center; }
table.matrix th.l { text-align: left; }
table.matrix td.self { background: #eceff1; }
.up { color: #2e7d32; } .down { color: #c62828; } .none { color: #9aa0a6; } .untested { color: #b26a00; }
p.legend { font-size: 12px; color: #454b55; max-width: 1000px; }
"""


def num(value: float | None, digits: int = 3, pct: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{max(digits - 2, 0)}%}" if pct else f"{value:.{digits}f}"


def ci(value: float, interval: tuple[float, float], bounds: tuple[float, float] | None = None) -> str:
    """A value and its interval; `bounds` the measure's range, kept on the element (data-min, data-max)
    so that a reader's tools (and the tests) can check the interval lies within it."""
    if math.isnan(interval[0]):
        return num(value)
    rng = f' data-min="{bounds[0]}" data-max="{bounds[1]}"' if bounds else ""
    return (f'{num(value)} <small class="ci" data-lo="{float(interval[0])!r}" data-hi="{float(interval[1])!r}"{rng}>'
            f"[{num(interval[0], 2)}, {num(interval[1], 2)}]</small>")


def basis(text: str, warn: bool = False) -> str:
    """The sentence that says what a section is computed on."""
    cls = "basis warn" if warn else "basis"
    return f'<p class="{cls}">{escape(text)}</p>'


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], caption: str = "", left: int = 1,
          raw_cells: bool = False, head_html: str = "") -> str:
    """A table; the first `left` columns are left-aligned. Cells are escaped unless `raw_cells`."""
    out = ["<table>"]
    if caption:
        out.append(f"<caption>{escape(caption)}</caption>")
    out.append(head_html or "<thead><tr>" + "".join(
        f'<th class="{"l" if k < left else ""}">{escape(h)}</th>' for k, h in enumerate(headers)) + "</tr></thead>")
    out.append("<tbody>")
    for row in rows:
        cells = (c if raw_cells else escape(c) for c in row)
        out.append("<tr>" + "".join(f'<td class="{"l" if k < left else ""}">{c}</td>' for k, c in enumerate(cells))
                   + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def notes(lines: Iterable[str]) -> str:
    return "".join(f'<p class="note">{escape(line)}</p>' for line in lines)


def bar(share: float, low: float) -> str:
    """A small horizontal bar for a share in [0, 1]; red below `low`."""
    width = 0 if math.isnan(share) else max(0.0, min(1.0, share)) * 100
    cls = ' class="low"' if share < low else ""
    return f'<span class="bar"><span{cls} style="width:{width:.1f}%"></span></span>'


def page(title: str, body: str) -> str:
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style></head>'
            f"<body>{body}</body></html>\n")
