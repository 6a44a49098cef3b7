"""The trust report: one self-contained HTML page on how far LLM labels can stand in for human ones."""

from .build import build_report
from .data import ReportData, ReportInputs, ReportLabels
from .families import derive_families
from .methods import MethodTable, method_table

__all__ = ["MethodTable", "ReportData", "ReportInputs", "ReportLabels", "build_report", "derive_families",
           "method_table"]
