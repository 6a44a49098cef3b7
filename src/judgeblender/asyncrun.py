"""asyncio.run for coroutines whose results are large (runs of thousands of judgments), and
for callers that already run an event loop (a Jupyter kernel runs one in its main thread, where
asyncio.run refuses to start another: `jb.judge` in a notebook cell failed with "asyncio.run()
cannot be called from a running event loop")."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def run(work: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(work), with the result handed over outside the main task.

    On the main thread asyncio.run puts its SIGINT handler back on the way out, and CPython's
    signal module then formats the old handler: the main task, and so the task's result. For
    a run of a few thousand judgments that repr alone took 70 ms; for a large one, far more.
    Called where a loop already runs (a notebook cell), the work runs on its own loop in a
    second thread instead (`_in_own_thread`)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case: no loop in this thread (the CLI, a script)
        out: list[T] = []

        async def main() -> None:
            out.append(await work)

        with _frozen_heap():
            asyncio.run(main())
        return out[0]
    return _in_own_thread(work)


def _in_own_thread(work: Coroutine[Any, Any, T]) -> T:
    """`work` run to its end on a loop of its own in a second thread, this thread waiting for it:
    the caller's loop (a notebook's) is busy running the caller. Ctrl+C (a kernel's interrupt)
    reaches this thread only: it cancels the work there, as asyncio.run's own handler would, waits
    for the cancellation to finish (answers so far are committed by the work's own clean-up), and
    is raised here."""
    done: dict[str, Any] = {}
    started = threading.Event()

    async def main() -> None:
        done["loop"], done["task"] = asyncio.get_running_loop(), asyncio.current_task()
        started.set()
        done["result"] = await work

    def target() -> None:
        try:
            with _frozen_heap():
                asyncio.run(main())
        except BaseException as exc:  # handed to the caller's thread, raised there
            done["error"] = exc
        finally:
            started.set()

    thread = threading.Thread(target=target, name="judgeblender-asyncrun", daemon=True)
    thread.start()
    try:
        thread.join()
    except KeyboardInterrupt:
        started.wait()
        if "task" in done:
            done["loop"].call_soon_threadsafe(done["task"].cancel)
        thread.join()
        raise
    if "error" in done:
        raise done["error"]
    return done["result"]


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
