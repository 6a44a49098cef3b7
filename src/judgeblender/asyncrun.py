"""asyncio.run for coroutines whose results are large (runs of thousands of judgments)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(work: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(work), with the result handed over outside the main task.

    On the main thread asyncio.run puts its SIGINT handler back on the way out, and CPython's
    signal module then formats the old handler: the main task, and so the task's result. For
    a run of a few thousand judgments that repr alone took 70 ms; for a large one, far more."""
    out: list[T] = []

    async def main() -> None:
        out.append(await work)

    asyncio.run(main())
    return out[0]
