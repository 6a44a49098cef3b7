"""Notes, the `note: ...` lines judgeblender logs (logger `judgeblender.*`, level WARNING), each
shown once per process for the same message.

Why: a notebook calls `jb.estimate` or `jb.experiment` in a loop (25 seeds, say), and every call
found the same things worth saying; logged each time, the two notes of one call became 50 lines
that buried the output. A note is about the inputs, not the call, so the first showing is enough;
every call still returns its notes (`attrs["notes"]` of the tables), where a program collects
them. A repeat is logged at DEBUG, so nothing is lost to a logger that asks for it.

Silence them all with `logging.getLogger("judgeblender").setLevel(logging.ERROR)`.
"""

from __future__ import annotations

import logging

_shown: set[tuple[str, str]] = set()


def note(log: logging.Logger, message: str) -> None:
    """Log `note: message` on `log` at WARNING the first time this process says it there, at DEBUG after."""
    key = (log.name, message)
    level = logging.DEBUG if key in _shown else logging.WARNING
    _shown.add(key)
    log.log(level, "note: %s", message)


def forget() -> None:
    """Show every note again at its next call (a test, or a notebook that wants them back)."""
    _shown.clear()
