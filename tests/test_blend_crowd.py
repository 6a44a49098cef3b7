"""Dawid-Skene and GLAD through crowd-kit: they learn each judge's reliability from all pairs."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from judgeblender.blend import BallotTable, blend
from judgeblender.blend.tie_rules import NO_VOTES
from judgeblender.errors import MissingExtraError

needs_crowdkit = pytest.mark.skipif(
    importlib.util.find_spec("crowdkit") is None,
    reason="crowd-kit is not installed: pip install 'judgeblender[crowd]'",
)
# crowd-kit 1.4 still passes inplace= and copy= to pandas, which pandas 3 deprecates: not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:crowdkit")


def noisy(truth: np.ndarray, accuracy: float, rng: np.random.Generator) -> np.ndarray:
    """The true label with probability `accuracy`, else one of the other three at random."""
    out = truth.copy()
    wrong = rng.random(len(truth)) > accuracy
    out[wrong] = (truth[wrong] + rng.integers(1, 4, wrong.sum())) % 4
    return out


def accuracy(labels, truth) -> float:
    judged = [(lab, t) for lab, t in zip(labels, truth) if lab is not None]
    return float(np.mean([lab == t for lab, t in judged]))


def table_of(columns: dict[str, np.ndarray], abstain: dict[str, set[int]], nobody: set[int]) -> BallotTable:
    n = len(next(iter(columns.values())))
    rows = []
    for i in range(n):
        votes = {j: (None if i in abstain.get(j, ()) or i in nobody else int(col[i])) for j, col in columns.items()}
        rows.append(((f"q{i % 10}", f"d{i}"), votes))
    return BallotTable.from_votes(rows)


def test_without_crowd_kit_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "crowdkit.aggregation", None)
    table = BallotTable.from_votes([(("q", "d"), {"a": 1, "b": 2})])
    with pytest.raises(MissingExtraError, match=r"judgeblender\[crowd\]"):
        blend(table, "dawid-skene")


@needs_crowdkit
def test_dawid_skene_sees_through_an_adversarial_judge():
    # Two honest judges right 60% of the time, and one adversary who reverses the scale
    # (says 3 - truth). Majority vote is often captured by the adversary agreeing with an
    # honest judge's mistake; Dawid-Skene learns the adversary's confusion matrix (a
    # permutation, hence very informative) and recovers the truth.
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 4, 300)
    columns = {"honest1": noisy(truth, 0.6, rng), "honest2": noisy(truth, 0.6, rng), "adversary": 3 - truth}
    # the adversary abstains on every tenth pair; nobody votes on the first five
    table = table_of(columns, {"adversary": set(range(0, 300, 10))}, nobody=set(range(5)))

    mv = blend(table, "mv", tie="random", seed=0)
    ds = blend(table, "dawid-skene", tie="random", seed=0)

    assert accuracy(ds.labels, truth) > 0.9
    assert accuracy(ds.labels, truth) > accuracy(mv.labels, truth) + 0.3
    # abstentions are missing responses: pairs with any vote are judged, the rest are not
    assert ds.unjudged() == {NO_VOTES: 5}
    assert [lab is None for lab in ds.labels] == [i < 5 for i in range(300)]


@needs_crowdkit
def test_glad_weighs_reliable_judges_and_leaves_unvoted_pairs_unjudged():
    rng = np.random.default_rng(1)
    truth = rng.integers(0, 4, 60)
    columns = {"a": noisy(truth, 0.85, rng), "b": noisy(truth, 0.85, rng), "c": noisy(truth, 0.25, rng)}
    table = table_of(columns, {"b": set(range(0, 60, 7))}, nobody={0, 1, 2})

    result = blend(table, "glad", tie="min")

    assert result.unjudged() == {NO_VOTES: 3}
    assert accuracy(result.labels, truth) >= 0.8


@needs_crowdkit
def test_crowd_models_never_produce_a_label_nobody_used():
    table = BallotTable.from_votes([((f"q{i}", "d"), {"a": i % 2, "b": i % 2, "c": 1}) for i in range(20)])
    labels = blend(table, "dawid-skene").labels
    assert set(labels) <= {0, 1}
