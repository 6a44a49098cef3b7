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
import time
from collections import deque

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


class Speed:
    """Answers a second over the last WINDOW_S seconds (at most SAMPLES answers), in O(1) an answer.

    rich's own estimate (`Task.speed`) sums its samples on every read: asked on every answer, that
    is up to 1,000 additions a pair, more than a fast judge's own cost. With one sample per
    answer the sum is the count of samples after the first, so a bounded queue of timestamps gives
    the same figure, `(n - 1) / (last - first)`, without a sum.
    """

    WINDOW_S = 30.0  # rich's speed_estimate_period
    SAMPLES = 1000  # rich's samples kept per task

    def __init__(self) -> None:
        self.times: deque[float] = deque(maxlen=self.SAMPLES)

    def add(self, now: float) -> None:
        times, oldest = self.times, now - self.WINDOW_S
        while times and times[0] < oldest:
            times.popleft()
        times.append(now)

    def per_second(self) -> float | None:
        times = self.times
        if len(times) < 2 or times[-1] == times[0]:
            return None
        return (len(times) - 1) / (times[-1] - times[0])

    def clear(self) -> None:
        self.times.clear()


class RichReporter:
    """The bar's counts, kept on rich's task whether or not it is shown; its speed only when drawn.

    Drawn as answers come (a terminal or a notebook), an answer adds one sample to `Speed` and
    updates the task; rich redraws on its own thread, ten times a second. Not drawn, an answer
    costs two attribute updates: no sample, no speed, no rich call, and no redrawing thread runs.
    That is `enabled=False` (--no-progress), and an enabled bar on a pipe or a log file, which rich
    prints once, when the run ends: each wave's line then shows the wave's mean rate, from its
    first answer to its end.
    """

    def __new__(cls, enabled: bool = True, console: Console | None = None):
        # The one place the display is chosen: in a notebook kernel a widget (progress_widget.py)
        if cls is RichReporter and enabled and console is None:
            from .progress_widget import widget_reporter

            widget = widget_reporter()
            if widget is not None:
                return widget
        return super().__new__(cls)

    def __init__(self, enabled: bool = True, console: Console | None = None):
        console = console or stderr_console()
        self.enabled = enabled
        self.live = enabled and default_enabled(console)
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
            TextColumn("invalid: {task.fields[invalid]}"),
            console=console,
            transient=False,
            disable=not enabled,
            # not drawn: no thread redrawing the table ten times a second, contending for the GIL
            # with the judging loop for a picture no one sees (rich prints it when the bar stops)
            auto_refresh=self.live,
        )
        self.task = None
        self._task = None  # rich's Task of the wave, whose counts a bar not drawn sets directly
        self.invalid = 0
        self.speed = Speed()
        self._first: float | None = None  # a bar not drawn: when the wave's first answer came

    def __enter__(self) -> "RichReporter":
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def wave(self, label: str, total: int) -> None:
        self.invalid = 0
        self.task = self.progress.add_task(label, total=total, invalid=0, rate="")
        self._task = self.progress.tasks[-1]
        self.speed.clear()
        self._first = None

    def advance(self, invalid: bool) -> None:
        if self.task is None:
            return
        self.invalid += invalid
        if not self.live:
            task = self._task
            if self._first is None and self.enabled:
                self._first = time.monotonic()
            task.completed += 1
            task.fields["invalid"] = self.invalid
            return
        speed = self.speed.per_second()  # up to the answer before this one, as rich's was read
        self.speed.add(time.monotonic())
        self.progress.update(self.task, advance=1, invalid=self.invalid, rate=f"{speed:.2f}/s" if speed else "")

    def answered_from_store(self) -> None:
        if self.task is not None:
            total = max(0, (self._task.total or 0) - 1)
            if not self.live:
                self._task.total = total
                return
            if total != self._task.total:
                self.speed.clear()  # rich starts its samples afresh when the total changes
            self.progress.update(self.task, total=total)

    def end_wave(self) -> None:
        if self.task is not None and self.enabled and not self.live:
            # the line rich prints at the end: one update sets the rate and marks the wave finished
            done, rate = self._task.completed, ""
            elapsed = time.monotonic() - self._first if self._first is not None else 0.0
            if done > 1 and elapsed > 0:
                rate = f"{(done - 1) / elapsed:.2f}/s"
            self.progress.update(self.task, completed=done, rate=rate)
        self.task = self._task = None
