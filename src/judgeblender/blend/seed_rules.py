"""What a human seed set must hold before a panel is chosen on it, and the one finding that says
it taught nothing: declared once, for plain `calibrate` (panels/calibrate.py) and for panel
selection (blend/select.py, `calibrate --select`) alike, so the two commands cannot drift apart.

Below MIN_QUERIES queries or MIN_PAIRS labelled pairs nothing is chosen: with fewer, one standard
error of a held-out kappa spans the whole kappa range. A seed on which no candidate's held-out
kappa is more than one standard error above chance (0) teaches nothing about these judges (gold
labels that are all one value, judges that are coin flips): the panel is still written, marked,
so a pipeline does not break, and the finding is said.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

MIN_QUERIES = 4
MIN_PAIRS = 40
MIN_SEED_TEXT = f"at least {MIN_QUERIES} queries and {MIN_PAIRS} labelled pairs"
NO_CHANCE = "no judge beats chance on this seed"


def seed_shortfall(pairs) -> str | None:
    """Why these (qid, docid) pairs are too few for `calibrate` to choose a panel, or None.
    Checked before any model call: judging a seed that cannot be calibrated on wastes the calls."""
    pairs = {(p[0], p[1]) for p in pairs}
    n_queries = len({q for q, _ in pairs})
    if n_queries >= MIN_QUERIES and len(pairs) >= MIN_PAIRS:
        return None
    return f"{len(pairs)} pairs over {n_queries} queries: calibrate needs {MIN_SEED_TEXT} to choose a panel"


def too_small(n_queries: int, n_pairs: int) -> str | None:
    """The warning that replaces a choice on a seed below the minimums, or None."""
    if n_queries >= MIN_QUERIES and n_pairs >= MIN_PAIRS:
        return None
    return (f"the seed set is too small to choose: {n_queries} queries and {n_pairs} labelled pairs "
            f"(need {MIN_SEED_TEXT}); label more pairs")


def chance_alert(candidates: Iterable[tuple[str, float, float]], n_pairs: int) -> str | None:
    """The no-chance finding over (name, mean held-out kappa over folds, its standard error)
    candidates, or None when one of them is more than one standard error above 0."""
    scored = [(name, mean, se) for name, mean, se in candidates if math.isfinite(mean)]
    if not scored or any(mean - (se if math.isfinite(se) else 0.0) > 0 for _, mean, se in scored):
        return None
    name, mean, se = max(scored, key=lambda c: c[1])
    return (f"{NO_CHANCE}: no candidate's held-out kappa is more than one standard error above 0 "
            f"(best: {name} {mean:.3f} +- {se:.3f} on {n_pairs} pairs)")
