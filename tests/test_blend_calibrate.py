"""Learning a blend on labelled queries and judging it on queries it has not seen."""

from __future__ import annotations

import numpy as np
import pytest

from judgeblender.blend import BallotTable
from judgeblender.blend.calibrate import (
    cross_validate, evaluate_split, fit_blend, learn_thresholds, split_by_queries,
)

PAIRS = [(f"q{q}", f"d{q}-{d}") for q in range(20) for d in range(30)]


def noisy(truth, accuracy, rng):
    """The true label with probability `accuracy`, else one of the other three at random."""
    out = truth.copy()
    wrong = rng.random(len(truth)) > accuracy
    out[wrong] = (truth[wrong] + rng.integers(1, 4, wrong.sum())) % 4
    return out


def jury(columns: dict[str, np.ndarray]) -> BallotTable:
    return BallotTable.from_votes([(p, {j: int(c[i]) for j, c in columns.items()}) for i, p in enumerate(PAIRS)])


@pytest.fixture(scope="module")
def truth():
    return np.random.default_rng(0).integers(0, 4, len(PAIRS))


@pytest.fixture(scope="module")
def gold(truth):
    out: dict[str, dict[str, int]] = {}
    for (q, d), t in zip(PAIRS, truth):
        out.setdefault(q, {})[d] = int(t)
    return out


@pytest.fixture(scope="module")
def oracle_and_two_coins(truth):
    """One judge right 90% of the time and two that answer at random."""
    rng = np.random.default_rng(1)
    return jury({"oracle": noisy(truth, 0.9, rng), "coin1": rng.integers(0, 4, len(PAIRS)),
                 "coin2": rng.integers(0, 4, len(PAIRS))})


@pytest.fixture(scope="module")
def three_lenient_judges(truth):
    """Three judges that each grade one level too high (capped at 3), with independent noise."""
    rng = np.random.default_rng(2)
    return jury({f"lenient{k}": np.minimum(noisy(truth, 0.6, rng) + 1, 3) for k in range(3)})


def test_folds_never_split_a_query(oracle_and_two_coins, gold):
    report = cross_validate(oracle_and_two_coins, gold, "thresholds", folds=4, seed=0)
    everything = {f"q{q}" for q in range(20)}
    held_out = [set(f.test_queries) for f in report.folds]
    assert len(report.folds) == 4
    for fold in report.folds:
        assert not set(fold.train_queries) & set(fold.test_queries)
        assert set(fold.train_queries) | set(fold.test_queries) == everything
    # the held-out sets partition the queries: each query is tested exactly once
    assert sorted(q for s in held_out for q in s) == sorted(everything)
    assert sum(f.test_pairs for f in report.folds) == len(PAIRS)


def test_a_blend_worse_than_its_best_member_is_reported(oracle_and_two_coins, gold):
    # Averaging the oracle with two coins drowns it: thresholds on the mean cannot recover.
    report = cross_validate(oracle_and_two_coins, gold, "thresholds", folds=4, seed=0)
    assert report.worse_than_best_member
    assert report.overall.best_member[0] == "oracle"
    assert report.overall.blend_kappa < report.overall.member_kappa["oracle"] - 0.3
    assert any("use oracle alone" in w for w in report.warnings)
    lines = report.lines()
    assert [line.split(":")[0] for line in lines[1:6]] == ["fold 1", "fold 2", "fold 3", "fold 4", "overall"]
    assert "WORSE than best member" in lines[5]
    assert lines[-1].startswith("WARNING: overall, the learned blend (thresholds")


def test_calibrated_thresholds_correct_judges_that_share_a_bias(three_lenient_judges, gold):
    report = cross_validate(three_lenient_judges, gold, "thresholds", folds=4, seed=0)
    overall = report.overall
    assert overall.blend_kappa > overall.best_member[1] + 0.2
    assert overall.blend_kappa > overall.mv_kappa + 0.2
    assert not report.worse_than_best_member
    assert not any(w.startswith("overall") for w in report.warnings)


def test_weights_follow_each_judges_kappa_and_ignore_worse_than_chance(truth, gold):
    table = jury({"same": truth, "reversed": 3 - truth})
    learned = fit_blend(table, gold, "weights")
    assert learned.weights["same"] == pytest.approx(1.0)  # identical to gold: kappa 1
    assert learned.weights["reversed"] == 0.0             # kappa < 0: no say
    assert learned.predict(table) == truth.tolist()


def test_weights_make_the_oracle_outvote_the_coins(oracle_and_two_coins, gold):
    report = cross_validate(oracle_and_two_coins, gold, "weights", folds=4, seed=0)
    assert not report.worse_than_best_member


def test_logistic_learns_that_a_reversed_scale_is_informative(truth, gold):
    rng = np.random.default_rng(3)
    table = jury({"reversed": 3 - truth, "coin": rng.integers(0, 4, len(PAIRS))})
    train, test = split_by_queries(table, [f"q{q}" for q in range(15, 20)])
    report, predicted = evaluate_split(train, test, gold, "logistic")
    assert report.blend_kappa == pytest.approx(1.0)
    assert predicted == [gold[q][d] for q, d in test.pairs]


def test_learned_thresholds_move_into_the_gaps_between_grades():
    # the judges' scores run 0.4 too high: default cuts 0.5/1.5/2.5 misplace four pairs
    scores = np.array([0.6, 0.8, 1.4, 1.6, 2.4, 2.6, 3.2, 3.3])
    gold = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    cuts = learn_thresholds(scores, gold)
    assert 0.8 < cuts[0] < 1.4 and 1.6 < cuts[1] < 2.4 and 2.6 < cuts[2] < 3.2
    assert np.searchsorted(cuts, scores, side="right").tolist() == gold.tolist()


def test_learned_thresholds_stay_put_when_the_defaults_are_already_best():
    scores = np.array([0.2, 0.4, 1.0, 1.2, 2.0, 2.2, 2.8, 2.9])
    assert learn_thresholds(scores, np.array([0, 0, 1, 1, 2, 2, 3, 3])) == (0.5, 1.5, 2.5)


def test_a_split_that_shares_a_query_is_refused(oracle_and_two_coins, gold):
    table = oracle_and_two_coins
    with pytest.raises(ValueError, match="share queries.*q0"):
        evaluate_split(table.select([0, 1, 30]), table.select([2, 31]), gold)


def test_split_by_queries_keeps_whole_queries_together(oracle_and_two_coins):
    train, test = split_by_queries(oracle_and_two_coins, ["q3", "q7"])
    assert set(test.query_ids()) == {"q3", "q7"} and test.n_pairs == 60
    assert not {"q3", "q7"} & set(train.query_ids()) and train.n_pairs == 540


def test_bad_requests_are_refused(oracle_and_two_coins, gold):
    with pytest.raises(ValueError, match="unknown learner"):
        fit_blend(oracle_and_two_coins, gold, "forest")
    with pytest.raises(ValueError, match="at least 30 queries"):
        cross_validate(oracle_and_two_coins, gold, folds=30)
    with pytest.raises(ValueError, match="no pair has both a gold label"):
        fit_blend(oracle_and_two_coins, {"zz": {"d": 1}})
