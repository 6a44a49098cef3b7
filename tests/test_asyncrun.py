"""asyncrun.run: asyncio.run without formatting the (large) result on the way out."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from judgeblender import asyncrun


class CostlyRepr:
    reprs = 0

    def __repr__(self) -> str:
        CostlyRepr.reprs += 1
        return "CostlyRepr()"


def test_the_result_is_returned_and_never_formatted():
    async def work() -> CostlyRepr:
        await asyncio.sleep(0)
        return CostlyRepr()

    CostlyRepr.reprs = 0
    assert isinstance(asyncrun.run(work()), CostlyRepr)
    assert CostlyRepr.reprs == 0  # plain asyncio.run formats it: its SIGINT handler's repr holds the task


def test_errors_propagate():
    async def work() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        asyncrun.run(work())


def _ctrl_c_in(seconds: float) -> None:
    asyncio.get_running_loop().call_later(seconds, os.kill, os.getpid(), signal.SIGINT)


def test_ctrl_c_that_a_library_takes_back_still_stops_the_run_at_once():
    """A timeout scope that takes the runner's cancellation for its own uncancels the task: the run
    went on to its end and returned (seen once in the suite: a CLI run judged 80 of 80 pairs after
    SIGINT and exited 0). The held interrupt cancels it again."""
    steps: list[int] = []

    async def work() -> str:
        _ctrl_c_in(0.05)
        taken_back = False
        for i in range(300):  # 3 s if nothing stops it
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                if taken_back:
                    raise
                taken_back = True
                asyncio.current_task().uncancel()  # what the scope does with a cancellation it thinks its own
            steps.append(i)
        return "finished"

    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        asyncrun.run(work())
    assert len(steps) < 150  # stopped well before the end (the hold asks again every 50 ms)
    assert signal.getsignal(signal.SIGINT) is before  # the handler in place before the run is back


def test_a_run_that_finishes_after_ctrl_c_is_still_interrupted():
    """Work that ignores its cancellation altogether and finishes: the run still ends in
    KeyboardInterrupt (the CLI's exit 130), never in a normal return (exit 0)."""

    async def work() -> str:
        _ctrl_c_in(0.02)
        for _ in range(10):
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                pass
        return "finished"

    with pytest.raises(KeyboardInterrupt):
        asyncrun.run(work())
    assert asyncrun.run(asyncio.sleep(0, result="again")) == "again"  # the next run is not interrupted


def test_a_sigint_handler_of_the_callers_own_is_left_to_do_what_it_does():
    """Where the caller put its own handler (a server's graceful stop), asyncio.run installs none
    and neither does the hold: the signal reaches that handler, and the run is not cancelled."""
    calls: list[int] = []

    async def work() -> str:
        _ctrl_c_in(0.01)
        await asyncio.sleep(0.05)
        return "finished"

    previous = signal.signal(signal.SIGINT, lambda signum, frame: calls.append(signum))
    try:
        assert asyncrun.run(work()) == "finished"
    finally:
        signal.signal(signal.SIGINT, previous)
    assert calls == [signal.SIGINT]
