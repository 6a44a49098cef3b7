"""The progress bar's cost: nothing per answer when it is not drawn, O(1) when it is, the same figures.

rich's own speed estimate sums up to 1,000 samples each time it is read; read on every answer, it
cost about 23 us a pair, even with --no-progress (issue 30, part 8).
"""

from __future__ import annotations

import io
import random
import threading

import pytest
from rich.console import Console
from rich.progress import Progress, Task

from judgeblender.progress import RichReporter


def test_speed_is_richs_estimate_without_the_sum():
    """Fed the same timestamps, `Speed` gives what rich's Task.speed gives: over 30 s at most,
    1,000 samples at most, with gaps longer than the window and bursts at one instant."""
    from judgeblender.progress import Speed

    clock = [0.0]
    progress = Progress(get_time=lambda: clock[0], disable=True)
    task_id = progress.add_task("wave", total=None)
    task = progress.tasks[-1]
    speed = Speed()
    rnd = random.Random(3)
    compared = 0
    for _ in range(5000):
        clock[0] += rnd.choice([0.0, 0.001, 0.01, 0.2, 2.0, 31.0]) if rnd.random() < 0.2 else rnd.uniform(0, 0.05)
        progress.update(task_id, advance=1)
        speed.add(clock[0])
        ours, richs = speed.per_second(), task.speed
        assert (ours is None) == (richs is None)
        if ours is not None:
            assert ours == pytest.approx(richs, rel=1e-12)
            compared += 1
    assert compared > 4000


def counting_updates(reporter: RichReporter) -> list:
    calls: list = []
    original = reporter.progress.update

    def update(*args, **kwargs):
        calls.append(kwargs)
        return original(*args, **kwargs)

    reporter.progress.update = update  # type: ignore[method-assign]
    return calls


@pytest.mark.parametrize("enabled", [False, True])
def test_a_bar_not_drawn_makes_no_rich_call_and_keeps_no_speed_per_answer(enabled):
    """--no-progress, or a bar on a pipe or a log file (printed once, at the end): an answer sets
    the task's counts and nothing else. The bar on the pipe still ends with its counts, a rate
    and the time left, as before."""
    out = io.StringIO()
    reporter = RichReporter(enabled, console=Console(file=out, width=200))
    assert not reporter.live
    with reporter:
        reporter.wave("judge · grade", 1002)
        calls = counting_updates(reporter)
        reporter.answered_from_store()
        reporter.answered_from_store()
        for i in range(1000):
            reporter.advance(invalid=i % 100 == 0)
        task = reporter.progress.tasks[-1]
        assert calls == [] and len(reporter.speed.times) == 0
        assert (task.total, task.completed, task.fields["invalid"]) == (1000, 1000, 10)
        reporter.end_wave()
        assert len(calls) == (1 if enabled else 0)
    printed = out.getvalue()
    if enabled:
        assert "1000/1000" in printed and "100%" in printed and "invalid: 10" in printed
        assert "/s" in printed and "0:00:00" in printed
    else:
        assert printed == ""


def test_a_drawn_bar_shows_the_speed_without_reading_richs_estimate_per_answer(monkeypatch):
    """Drawn (a terminal), every answer updates the bar and its rate, in O(1): rich's own estimate,
    a sum over its samples, is never read on the judging thread (its refresh thread reads it ten
    times a second for the time left, as before)."""
    reads = []
    richs = Task.speed.fget

    def speed(task):
        if threading.current_thread() is threading.main_thread():
            reads.append(task)
        return richs(task)

    monkeypatch.setattr(Task, "speed", property(speed))
    out = io.StringIO()
    reporter = RichReporter(True, console=Console(file=out, width=200, force_terminal=True))
    assert reporter.live
    with reporter:
        reporter.wave("judge · grade", 3000)  # rich draws the new task once, here
        calls = counting_updates(reporter)
        reads.clear()
        for _ in range(3000):
            reporter.advance(invalid=False)
        assert reads == []
        assert len(calls) == 3000 and calls[-1]["rate"].endswith("/s")
        assert float(calls[-1]["rate"][:-2]) > 0 and len(reporter.speed.times) == 1000
        reporter.end_wave()
