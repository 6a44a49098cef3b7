"""One confidence level for every interval the project gives, and the ranges intervals are clipped to.

Every command and library function that gives an interval (`estimate`, `report`, `agree`,
`correlate`, jb.agreement, ...) defaults to CONFIDENCE, defined here once: the same inputs
then give the same intervals and the same "pairs of runs significantly ordered" wherever
they are asked for. 0.95 is the level IR papers report (a family-wise error of 0.05 for
Holm's orderings) and was already the default of three of the four commands.

A normal or Student t interval around an estimate can reach past what the measure can
take (an nDCG of -0.03, a difference of 1.025); such a bound says nothing the range does
not, so intervals are clipped to it where they are made, and docs/estimation.md says so.
"""

from __future__ import annotations

import numpy as np

CONFIDENCE = 0.95

# ir_measures measures whose per-query value is a share, a gain ratio or a precision: in [0, 1].
UNIT_MEASURES = frozenset({
    "nDCG", "AP", "P", "R", "RR", "Judged", "Rprec", "Bpref", "ERR", "SetP", "SetR", "SetF", "SetAP", "infAP",
    "Success", "IPrec", "AP_IA", "nERR_IA", "alpha_nDCG", "StRecall", "NERR8", "NERR9", "NERR10", "NERR11",
    "P_IA", "Compat", "INSQ", "INST", "RBP", "SDCG", "nDCG_IA", "Accuracy", "ERR_IA",
})


def measure_range(measure) -> tuple[float, float] | None:
    """The range a run's mean score can take under an ir_measures measure (a parsed measure or
    its name); None when the measure is not known to be bounded (no clipping then)."""
    name = getattr(measure, "NAME", None) or str(measure).split("@")[0].split("(")[0]
    return (0.0, 1.0) if name in UNIT_MEASURES else None


def difference_range(bounds: tuple[float, float] | None) -> tuple[float, float] | None:
    """The range of a difference of two scores that each lie in `bounds`."""
    return None if bounds is None else (bounds[0] - bounds[1], bounds[1] - bounds[0])


def clip(values, bounds: tuple[float, float] | None):
    """`values` (a number or an array) clipped to `bounds`; unchanged when bounds is None."""
    if bounds is None:
        return values
    out = np.clip(values, bounds[0], bounds[1])
    return float(out) if np.ndim(out) == 0 else out
