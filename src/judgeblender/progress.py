"""A rich progress bar per wave of calls: rate, ETA and invalid answers so far.

It lives in the library, not the CLI, because `judgeblender judge` and the notebook's
`jb.judge` show the same bar: a long judging run is never silent. It sits beside the judging
engine, not inside judges/: the CLI's consoles import it, and `prompts list` must not pay for
the engine. rich renders it in a
terminal; in a notebook kernel an ipywidgets bar takes its place (progress_widget.py);
`default_enabled` says where a
bar is wanted when the caller did not choose (a terminal or a notebook, not a log file).
"""

from __future__ import annotations

import os
import shutil
import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn


FLOOR = 80
WIDE = 160


def output_width(stream=None) -> int:
    """The width rich lays lines out to (cli/console.py says why): $COLUMNS when set, a wide
    one for a pipe or a file (nothing is cut), the terminal's own but never under FLOOR."""
    stream = stream or sys.stdout
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit():
        return max(FLOOR, int(columns))
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty:
        return WIDE
    return max(FLOOR, shutil.get_terminal_size((FLOOR, 24)).columns)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True, width=output_width(sys.stderr))


def default_enabled(console: Console | None = None) -> bool:
    """True when stderr is a terminal or the code runs in a Jupyter notebook."""
    console = console or stderr_console()
    return bool(console.is_terminal or console.is_jupyter)


class RichReporter:
    def __new__(cls, enabled: bool = True, console: Console | None = None):
        # The one place the display is chosen: in a notebook kernel a widget (progress_widget.py)
        if cls is RichReporter and enabled and console is None:
            from .progress_widget import widget_reporter

            widget = widget_reporter()
            if widget is not None:
                return widget
        return super().__new__(cls)

    def __init__(self, enabled: bool = True, console: Console | None = None):
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
            TextColumn("invalid: {task.fields[invalid]}"),
            console=console or stderr_console(),
            transient=False,
            disable=not enabled,
        )
        self.task = None
        self.invalid = 0

    def __enter__(self) -> "RichReporter":
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def wave(self, label: str, total: int) -> None:
        self.invalid = 0
        self.task = self.progress.add_task(label, total=total, invalid=0, rate="")

    def advance(self, invalid: bool) -> None:
        if self.task is None:
            return
        self.invalid += invalid
        task = self.progress.tasks[-1]
        speed = task.speed
        rate = f"{speed:.2f}/s" if speed else ""
        self.progress.update(self.task, advance=1, invalid=self.invalid, rate=rate)

    def answered_from_store(self) -> None:
        if self.task is not None:
            self.progress.update(self.task, total=max(0, (self.progress.tasks[-1].total or 0) - 1))

    def end_wave(self) -> None:
        self.task = None
