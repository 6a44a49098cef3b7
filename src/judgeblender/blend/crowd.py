"""Dawid-Skene and GLAD: latent-truth models fitted by EM over the whole table (crowd-kit).

Unlike the per-pair rules these learn how reliable each judge is from all pairs at once:
Dawid-Skene a full confusion matrix per judge, GLAD one ability per judge and one
difficulty per pair. An abstention is a missing response: the judge simply contributes
nothing to that pair's likelihood (it is not modelled as a fifth label). Pairs without any
valid vote are not given to the model and stay unjudged.
"""

from __future__ import annotations

import numpy as np

from ..errors import ArgumentError, require
from .tie_rules import NO_VOTES, Decision, TieBreaker, top_labels
from .votes import LABELS, BallotTable

N_ITER = 100  # crowd-kit's default number of EM iterations, and its tolerance below
TOL = 1e-5


def _posteriors(table: BallotTable, model: str):
    """Fit the model; the pairs x LABELS posterior as a pandas DataFrame indexed by pair row."""
    pd = require("pandas", "crowd", f"{model} aggregation")
    classification = require("crowdkit.aggregation", "crowd", f"{model} aggregation")
    rows, cols = table.voted.nonzero()
    data = pd.DataFrame({
        "task": rows,
        "worker": [table.judges[j] for j in cols],
        "label": table.labels[rows, cols].astype(int),
    })
    if model == "dawid-skene":
        fitted = classification.DawidSkene(n_iter=N_ITER, tol=TOL).fit(data)
    elif model == "glad":
        # GLAD's objective takes log of a prior density that underflows to 0 for extreme
        # parameters the optimiser tries; crowd-kit handles the -inf, the warning is noise.
        with np.errstate(divide="ignore"):
            fitted = classification.GLAD(n_iter=N_ITER, tol=TOL, silent=True).fit(data)
    else:
        raise ArgumentError("model", "dawid-skene or glad", described=f"unknown crowd model {model!r}")
    # A label nobody used gets no column from crowd-kit: its posterior is 0.
    return fitted.probas_.reindex(columns=list(LABELS), fill_value=0.0)


def crowd_blend(table: BallotTable, model: str, tie: TieBreaker) -> list[Decision]:
    """Each pair's most probable true label under the fitted model; equal posteriors go to the tie rule."""
    if not table.voted.any():
        return [Decision(None, reason=NO_VOTES)] * table.n_pairs
    post = _posteriors(table, model)
    values = post.to_numpy()
    where = {int(task): k for k, task in enumerate(post.index)}
    out = []
    for i in range(table.n_pairs):
        if i not in where:
            out.append(Decision(None, reason=NO_VOTES))
            continue
        row = values[where[i]]
        out.append(tie.at(table.pairs[i]).decide(top_labels({lab: float(row[k]) for k, lab in enumerate(LABELS)})))
    return out


def dawid_skene(table: BallotTable, tie: TieBreaker) -> list[Decision]:
    """Dawid & Skene (1979): per-judge confusion matrices and label priors by EM (MV start)."""
    return crowd_blend(table, "dawid-skene", tie)


def glad(table: BallotTable, tie: TieBreaker) -> list[Decision]:
    """Whitehill et al. (2009) GLAD: judge ability x pair difficulty, by EM."""
    return crowd_blend(table, "glad", tie)
