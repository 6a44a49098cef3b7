"""asyncio.run for coroutines whose results are large (runs of thousands of judgments), and
for callers that already run an event loop (a Jupyter kernel runs one in its main thread, where
asyncio.run refuses to start another: `jb.judge` in a notebook cell failed with "asyncio.run()
cannot be called from a running event loop")."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
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
        interrupt = _HeldInterrupt(signal.getsignal(signal.SIGINT))

        async def main() -> None:
            interrupt.install()
            try:
                out.append(await work)
            finally:
                interrupt.uninstall()

        try:
            with _frozen_heap():
                asyncio.run(main())
        except asyncio.CancelledError:
            if interrupt.seen:  # cancelled again by the hold: it was Ctrl+C all the same
                raise KeyboardInterrupt from None
            raise
        if interrupt.seen:  # the work ran to its end all the same: it was still interrupted
            raise KeyboardInterrupt
        return out[0]
    return _in_own_thread(work)


class _HeldInterrupt:
    """Ctrl+C (and SIGTERM, which the CLI hands to the SIGINT handler) held until the run stops.

    asyncio.run's handler cancels the main task once. A library that takes that cancellation for
    its own (a timeout scope of the HTTP client ending at the same moment, which then uncancels
    the task) swallows it, and the run went on to its last pair and exited 0: seen once in the
    suite under load, 80 of 80 pairs judged after SIGINT. This wraps the runner's handler: it
    remembers the signal, cancels the task again whenever no cancellation is pending while the task
    runs, and a run that received one ends in KeyboardInterrupt however its task ended (`run`)."""

    HOLD_EVERY_S = 0.05

    def __init__(self, before: Any):
        self.before = before  # the handler before asyncio.run: the runner installs its own only over Python's
        self.seen = 0
        self.inner: Any = None
        self.task: asyncio.Task | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    def install(self) -> None:
        """In the running main task, on the main thread, over the handler asyncio.run put there;
        nothing where the runner put none (a handler of the caller's own, such as a server's, is
        left to do what it does)."""
        inner = signal.getsignal(signal.SIGINT)
        if (threading.current_thread() is not threading.main_thread() or not callable(inner)
                or inner is self.before):
            return
        self.inner, self.task, self.loop = inner, asyncio.current_task(), asyncio.get_running_loop()
        signal.signal(signal.SIGINT, self._on_sigint)

    def uninstall(self) -> None:
        """The runner's handler back, so asyncio.run restores Python's own on its way out."""
        if self.inner is not None and signal.getsignal(signal.SIGINT) == self._on_sigint:
            signal.signal(signal.SIGINT, self.inner)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        self.seen += 1
        if self.seen == 1 and self.loop is not None:
            self.loop.call_soon_threadsafe(self._hold)
        self.inner(signum, frame)  # the runner's: cancels the task the first time, raises after

    def _hold(self) -> None:
        task, loop = self.task, self.loop
        if task is None or loop is None or task.done():
            return
        if task.cancelling() == 0:  # the runner's cancellation was taken back: ask again
            task.cancel()
        loop.call_later(self.HOLD_EVERY_S, self._hold)


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
