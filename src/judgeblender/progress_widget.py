"""Progress as a notebook widget: one ipywidgets bar per wave of calls, in the cell that judges.

Why a widget of its own: in a Jupyter kernel rich's bar is a block of HTML redrawn into an
Output widget several times a second, which front ends that do not render rich's markup (and
every saved notebook) show as a stack of snapshots or as nothing; a native progress bar is
one small model whose value changes. progress.py picks it (`RichReporter` hands over to
`widget_reporter()` when it finds a kernel), so `jb.judge` and everything that judges through it
need no notebook code of their own; a terminal keeps rich's bar.

The widget shows what the terminal bar shows: done of total, the share, the rate, the time
left and the invalid answers so far. Rate and time left come from the wave's start and its
count (constant work per answer), and the widget's text is redrawn at most every
REDRAW_S seconds and once at the end of a wave: each redraw is a message to the front end.
"""

from __future__ import annotations

import logging
import sys
import time

from .notes import note

log = logging.getLogger("judgeblender.progress")

REDRAW_S = 0.1


def in_kernel() -> bool:
    """True inside a running IPython kernel (Jupyter, VS Code, nbclient), not a terminal IPython.
    IPython is looked up, never imported: a script that never loaded it is not in a kernel."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def widget_reporter() -> "WidgetReporter | None":
    """A WidgetReporter when the code runs in a kernel and ipywidgets is installed; None where
    the terminal bar is the right one. A kernel without ipywidgets keeps rich's bar, and a note
    says so once: the fallback is recorded, not silent."""
    if not in_kernel():
        return None
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        note(log, "progress in a notebook needs ipywidgets (pip install 'judgeblender[notebook]'); "
                  "showing the text bar")
        return None
    return WidgetReporter()


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class _Wave:
    """One wave's row: its name, a bar and a line of figures."""

    def __init__(self, label: str, total: int):
        import ipywidgets as widgets

        self.total, self.done, self.invalid = total, 0, 0
        self.started = time.perf_counter()
        self.drawn = 0.0
        self.bar = widgets.IntProgress(value=0, min=0, max=max(total, 1), description="",
                                       layout=widgets.Layout(width="40%"))
        self.figures = widgets.HTML()
        self.row = widgets.HBox([widgets.Label(label), self.bar, self.figures])
        self.draw(force=True)

    def draw(self, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self.drawn < REDRAW_S:
            return
        self.drawn = now
        elapsed = now - self.started
        rate = self.done / elapsed if self.done and elapsed > 0 else 0.0
        left = (self.total - self.done) / rate if rate else None
        share = self.done / self.total if self.total else 1.0
        self.bar.max = max(self.total, 1)
        self.bar.value = min(self.done, self.bar.max) if self.total else self.bar.max
        self.figures.value = " · ".join([
            f"{self.done}/{self.total}", f"{share:.0%}", f"{rate:.2f}/s" if rate else "",
            _duration(left) if left is not None else "-:--:--", f"invalid: {self.invalid}"])


class WidgetReporter:
    """The judging engine's Reporter (judges/engine.py) drawn as ipywidgets in the running cell."""

    def __init__(self) -> None:
        import ipywidgets as widgets

        self.box = widgets.VBox([])
        self.wave_now: _Wave | None = None

    def __enter__(self) -> "WidgetReporter":
        from IPython.display import display

        display(self.box)
        return self

    def __exit__(self, *exc) -> None:
        self.end_wave()

    def wave(self, label: str, total: int) -> None:
        self.wave_now = _Wave(label, total)
        self.box.children = (*self.box.children, self.wave_now.row)

    def advance(self, invalid: bool) -> None:
        w = self.wave_now
        if w is None:
            return
        w.done += 1
        w.invalid += invalid
        w.draw()

    def answered_from_store(self) -> None:
        w = self.wave_now
        if w is not None:
            w.total = max(0, w.total - 1)
            w.draw()

    def end_wave(self) -> None:
        if self.wave_now is not None:
            self.wave_now.draw(force=True)
            if self.wave_now.done < self.wave_now.total:
                self.wave_now.bar.bar_style = "warning"  # stopped before the end: the bar says so
        self.wave_now = None
