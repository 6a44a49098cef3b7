"""A rich progress bar per wave of calls: rate, ETA and invalid answers so far."""

from __future__ import annotations

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from .console import err_console


class RichReporter:
    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
            TextColumn("invalid: {task.fields[invalid]}"),
            console=err_console,
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
