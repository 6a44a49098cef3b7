"""asyncio.run for coroutines whose results are large (runs of thousands of judgments)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Coroutine, Iterator
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

    with _frozen_heap():
        asyncio.run(main())
    return out[0]


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """The objects alive before a run (modules, the caller's inputs) left out of the garbage
    collector's full passes during it, then handed back (gc.freeze / gc.unfreeze).

    A served run allocates objects at hundreds of calls a second, so the collector's full pass
    comes every second or so, and each one walked the ~100,000 objects that imports alone leave
    (openai, pydantic, httpx): 5 full passes for 4,000 calls, 2 for the SDK alone, more than
    the time of the store's writes. A caller that froze objects itself is left as it is."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
