"""Build the report: collect the numbers, then render them into one HTML file."""

from __future__ import annotations

from pathlib import Path

from ..fileio import atomic_write_text
from .data import ReportData, ReportInputs, collect
from .render import render


def build_report(inputs: ReportInputs, out: str | Path) -> ReportData:
    """Write the report to `out` (atomically) and return what it shows."""
    data = collect(inputs)
    atomic_write_text(out, render(data))
    return data
