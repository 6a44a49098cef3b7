"""Checks of the arguments of judgeblender's public functions, one `ArgumentError` each.

Why a module of its own: a degenerate argument (no systems, `k=10.0`, `k="10"`, `depth=-1`,
`folds=1`, an unknown method) used to reach the code below the API, which answered with an empty
table, a raw `TypeError` or `KeyError`, or a message naming a CLI flag the notebook user never
typed. Every public function of api.py, holes.py and pyterrier.py checks its arguments here first,
so each gets the same message (the argument's name, what was expected, what was given) before any
file is read or model called. The CLI may pass its option's name (`--depth`) as `name`.

Each check returns the value it accepted (an int for an int, the text for a choice), so a caller
writes `k = positive_int("k", k)` and goes on with what was checked.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Collection, Iterable, Mapping, Sized
from numbers import Integral, Real
from typing import Any, NamedTuple

from .errors import ArgumentError


class Bound(NamedTuple):
    """A number's range: `low` and `high` (None: unbounded), each end open or included, and
    whether only whole numbers count. Its first four fields are what the command line's table of
    numbers (cli/checks.py NUMBERS) and `validate.number` take."""

    low: float | None
    high: float | None
    low_open: bool = False
    high_open: bool = False
    whole: bool = False


# One declaration of each bound that the library and the command line both check, by argument
# name: the library's checks (`bounded`, `in_bounds`, `confidence`, a panel file's reader) read
# their numbers here, and cli/checks.py takes these entries into NUMBERS as they are. A bound used
# to be written two or three times (min_choice_mass in judges/judge.py, cli/checks.py and the
# option's own min and max; min_judged in four places), which is how two of them drifted apart.
SHARE = Bound(0, 1)
BOUNDS: dict[str, Bound] = {
    "confidence": Bound(0, 1, True, True), "min_judged": SHARE, "min_choice_mass": SHARE, "margin": SHARE,
    "spread": Bound(0, 4, whole=True), "folds": Bound(2, None, whole=True), "bootstrap": Bound(0, None, whole=True),
    "depth": Bound(1, None, whole=True), "sample": Bound(1, None, whole=True), "window": Bound(1, None, whole=True),
    "ray_workers": Bound(1, None, whole=True), "min_votes": Bound(1, None, whole=True),
    "port": Bound(0, 65535, whole=True), "target_width": Bound(0, None, True, False),
}


def in_bounds(name: str, value: Any) -> bool:
    """Whether `value` lies in the range declared for `name` (a whole number where one is
    declared): for readers of files, which name the file's line themselves."""
    return _fits(BOUNDS[name], value)


def _fits(bound: Bound, value: Any) -> bool:
    low, high, low_open, high_open, whole = bound
    if _is_bool(value) or not isinstance(value, Real) or math.isnan(value):
        return False
    if whole and not isinstance(value, Integral):
        return False
    above = low is None or (value > low if low_open else value >= low)
    below = high is None or (value < high if high_open else value <= high)
    return above and below


def _words(bound: Bound) -> str:
    low, high, low_open, high_open, whole = bound
    if whole:
        return f"an integer from {low:g} to {high:g}" if high is not None else f"an integer of at least {low:g}"
    if bound is SHARE:
        return "a share between 0 and 1"
    if high is None:
        return f"a number greater than {low:g}" if low_open else f"a number of at least {low:g}"
    if low_open and high_open:
        return f"a number between {low:g} and {high:g} (exclusive)"
    return f"a number from {low:g} to {high:g}"


def bounded(name: str, value: Any, argument: str | None = None) -> Any:
    """`value` when it lies in the range BOUNDS declares for `name` (an int where a whole number
    is declared, else a float); else an ArgumentError naming `argument` (the name by default)
    that says the range."""
    return _checked(argument or name, value, BOUNDS[name])


def _checked(argument: str, value: Any, bound: Bound) -> Any:
    if not _fits(bound, value):
        raise ArgumentError(argument, _words(bound), value)
    return operator.index(value) if bound.whole else float(value)


def _is_bool(value: Any) -> bool:
    """True and False (and numpy's bools) are ints to Python, but never a count or a seed."""
    return isinstance(value, bool) or type(value).__name__ == "bool_"


def integer(name: str, value: Any, minimum: int | None = None) -> int:
    """`value` as an int, at least `minimum`. A float (even 10.0), a string ("10") or a bool is
    refused: quietly truncating 2.5 or reading "10" would compute something nobody asked for.
    numpy's integers are ints here (they come out of DataFrames)."""
    want = "an integer" if minimum is None else f"an integer of at least {minimum}"
    if _is_bool(value):
        raise ArgumentError(name, want, value)
    try:
        as_int = operator.index(value)
    except TypeError:
        raise ArgumentError(name, want, value) from None
    if minimum is not None and as_int < minimum:
        raise ArgumentError(name, want, value)
    return as_int


def positive_int(name: str, value: Any) -> int:
    """A count that must be at least 1 (a pool depth, a number of documents)."""
    return integer(name, value, 1)


def non_negative_int(name: str, value: Any) -> int:
    """A count where 0 means none (bootstrap samples: 0 disables the intervals) or a seed."""
    return integer(name, value, 0)


def optional_seed(name: str, value: Any) -> int | None:
    """A seed of a random generator (numpy takes 0 or more), or None where a fresh one is meant."""
    return None if value is None else non_negative_int(name, value)


def number_between(name: str, value: Any, low: float, high: float) -> float:
    """A real number strictly between `low` and `high` (a timeout in (0, inf)): NaN, a string or a
    bool is refused."""
    return _checked(name, value, Bound(low, high, True, True))


def confidence(value: Any, name: str = "confidence") -> float:
    """The confidence level of an interval, strictly between 0 and 1: the one check of it, for
    every function that gives an interval (agreement, correlate, the estimates, the experiment,
    and every entry point of api, workflow and holes that takes one)."""
    return bounded("confidence", value, name)


def distinct_ids(name: str, ids: Iterable[str],
                 refuse: Callable[[int, str], Exception] | None = None) -> list[str]:
    """The ids of judges put together (a run, a panel, a jury, tables side by side), each once:
    two judges sharing an id would have their labels filed as one, the later overwriting the
    earlier. The one check of it, wherever judges meet; `refuse(index, id)` builds the error of a
    caller that can say more than the argument's name (a panel file names its line)."""
    ids = list(ids)
    seen: set[str] = set()
    for n, jid in enumerate(ids):
        if jid in seen:
            if refuse is not None:
                raise refuse(n, jid)
            raise ArgumentError(name, "judges with distinct ids", described=f"two that share the id {jid!r}",
                                hint="give each its own id")
        seen.add(jid)
    return ids


def flag(name: str, value: Any) -> bool:
    """True or False: a string such as "no" would be true."""
    if not _is_bool(value):
        raise ArgumentError(name, "True or False", value)
    return bool(value)


def one_of(name: str, value: Any, choices: Iterable[str], hint: str = "") -> str:
    """One of `choices` (a method, a learner, a correction): an unknown name says which exist."""
    options = list(choices)
    if not isinstance(value, str) or value not in options:
        raise ArgumentError(name, f"one of {', '.join(map(repr, options))}", value, hint=hint)
    return value


def text(name: str, value: Any) -> str:
    """A non-blank string (a name, a prompt)."""
    if not isinstance(value, str) or not value.strip():
        raise ArgumentError(name, "a non-blank string", value)
    return value


def non_empty(name: str, value: Any, what: str) -> Any:
    """`value` when it holds at least one item; `what` says what an item is ("one system").
    Only a sized value is measured, so a one-shot iterator is never consumed here: its reader
    says when it turns out empty."""
    if isinstance(value, Sized) and len(value) == 0:
        raise ArgumentError(name, f"at least {what}", value)
    return value


def sequence(name: str, value: Any, what: str) -> list:
    """A non-empty list of `what` (measures, names). A lone string is refused rather than read
    character by character, with a hint at the list it likely meant; the items themselves are
    the caller's to check (a measure may be a string or an ir_measures object)."""
    if isinstance(value, str):
        raise ArgumentError(name, f"a list of {what}", value, hint=f"write [{value!r}]")
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Collection):
        raise ArgumentError(name, f"a list of {what}", value)
    return list(non_empty(name, value, f"one of the {what}"))


def scale(name: str, value: Any) -> tuple[int, ...] | None:
    """A label scale: a non-empty collection of integers (`range(5)`, (0, 1, 2, 3)), or None
    for any integer label."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Collection) or not len(value):
        raise ArgumentError(name, "a non-empty collection of integer labels, e.g. (0, 1, 2, 3), or None", value)
    return tuple(integer(name, v) for v in value)


# -- one vocabulary: a library argument and the command line's flag for it -------------------

# The command line's flag for each argument of the public functions that a command takes under
# another spelling or as a flag: jb.write_report's `seed_qrels` is `report --seed-qrels`,
# jb.experiment's `k` is `experiment --depth`. One map for every surface: a report or message
# written from Python names the argument, from the command line the flag. An argument whose flag
# differs between commands (jb.estimate's `seed` is `estimate --human`, jb.experiment's is
# `experiment --seed`) is left out: there the caller names it. tests/test_notebook_frictions.py
# checks every entry against the commands' own declarations.
CLI_FLAGS: dict[str, str] = {
    "gold": "--gold", "predictions": "--pred", "systems": "--runs", "groups": "--groups", "store": "--store",
    "bootstrap": "--bootstrap", "min_judged": "--min-judged", "title": "--title", "seed_qrels": "--seed-qrels",
    "design": "--design", "confidence": "--confidence", "calibration_seed": "--calibration-seed",
    "scope": "--scope", "depth": "--depth", "k": "--depth", "topics": "--topics", "qrels": "--qrels",
    "llm_labels": "--llm", "judges": "--judge", "corpus": "--corpus", "prompt": "--prompt", "mode": "--mode",
    "measures": "--measure", "baseline": "--baseline", "correction": "--correction", "out": "--out",
    "overwrite": "--force",
}


def spoken(argument: str, cli: bool) -> str:
    """How a message names `argument` to its reader: the command line's flag (CLI_FLAGS) where the
    user typed flags, the Python argument (`seed_qrels=`) where they called a function."""
    if cli:
        return CLI_FLAGS.get(argument, "--" + argument.replace("_", "-"))
    return f"{argument}="
