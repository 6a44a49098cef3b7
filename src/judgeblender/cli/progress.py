"""The judging progress bar (judgeblender/progress.py) on the CLI's stderr console."""

from __future__ import annotations

from ..progress import RichReporter as _LibraryReporter
from .console import err_console


class RichReporter(_LibraryReporter):
    def __init__(self, enabled: bool = True):
        super().__init__(enabled, console=err_console)
