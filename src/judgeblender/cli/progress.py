"""The judging progress bar (judges/progress.py) on the CLI's stderr console."""

from __future__ import annotations

from ..judges.progress import RichReporter as _LibraryReporter
from .console import err_console


class RichReporter(_LibraryReporter):
    def __init__(self, enabled: bool = True):
        super().__init__(enabled, console=err_console)
