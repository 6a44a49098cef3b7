"""Single flight: concurrent asks for one key make one call, in one event loop.

The first to ask for a key leads: it does the work, and every other that asks for the key
meanwhile follows: it waits for the leader's outcome (its result, or its exception) instead of
asking again. Once the outcome has landed, the key is free: a later ask is a new flight (by
then the answer is in the store, where the caller looks first). A leader that is cancelled
(its client went away, the server stops) lands as cancelled: its followers are not; they ask
again, one of them first.

Used by `judgeblender proxy` (identical deterministic chat requests from any client) and by the
engine under `judgeblender serve` (one pair asked by concurrent requests: judges/callpool.py),
so both share one definition of who asks and who waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class SingleFlight:
    """The flights in the air, by key: each a future its followers wait on."""

    def __init__(self) -> None:
        self.flights: dict[Hashable, asyncio.Future] = {}

    async def follow(self, key: Hashable) -> tuple[bool, Any]:
        """(True, the outcome) of the flight for `key`, waited for (its exception raised here);
        (False, None) when none is in the air: the caller may `lead` it, with no await between."""
        while (waiting := self.flights.get(key)) is not None:
            try:
                # shielded: a follower cancelled (its own client gone) must not cancel the flight
                return True, await asyncio.shield(waiting)
            except asyncio.CancelledError:
                if not waiting.cancelled():
                    raise  # this follower was cancelled, not the flight it waited for
        return False, None

    def lead(self, key: Hashable) -> asyncio.Future:
        """Start the flight for `key` (none in the air: `follow` said so); settle it with `land`."""
        future = asyncio.get_running_loop().create_future()
        self.flights[key] = future
        return future

    def land(self, key: Hashable, flight: asyncio.Future, result: Any = None,
             error: BaseException | None = None) -> None:
        """The flight's outcome to its followers, and the key free again: `result`, or `error`
        (a CancelledError lands as cancelled: its followers ask again)."""
        if self.flights.get(key) is flight:
            del self.flights[key]
        if flight.done():
            return
        if isinstance(error, asyncio.CancelledError):
            flight.cancel()
        elif error is not None:
            flight.set_exception(error)
            flight.exception()  # retrieved: with no follower, no "never retrieved" warning
        else:
            flight.set_result(result)

    async def run(self, key: Hashable, work: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """`work()`'s outcome, made once for the callers that ask for `key` at the same time:
        (the outcome, whether it was another caller's)."""
        shared, outcome = await self.follow(key)
        if shared:
            return outcome, True
        flight = self.lead(key)
        try:
            outcome = await work()
        except BaseException as exc:
            self.land(key, flight, error=exc)
            raise
        self.land(key, flight, outcome)
        return outcome, False
