"""Build the report: collect the numbers, then render them into one HTML file."""

from __future__ import annotations

from pathlib import Path

from ..fileio import atomic_write_text
from .data import ReportData, ReportInputs, ReportLabels, collect
from .render import render


def build_report(inputs: ReportInputs, out: str | Path, labels: ReportLabels | None = None) -> ReportData:
    """Write the report to `out` (atomically) and return what it shows; `labels` are the inputs
    already read (the Python API's), else the files of `inputs` are read."""
    data = collect(inputs, labels)
    atomic_write_text(out, render(data))
    return data
