"""asyncrun.run: asyncio.run without formatting the (large) result on the way out."""

from __future__ import annotations

import asyncio

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
