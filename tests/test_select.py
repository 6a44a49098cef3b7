"""Panel selection: the fast aggregators equal Blender's, the one-standard-error rule prefers the
cheaper panel, the frontier rises with cost, and the nested check never shares a query."""

import random

import numpy as np
import pytest

from judgeblender.blend import BallotTable, Blender
from judgeblender.blend.select import FAST_RULES, fast_labels, frontier, nested_select, select
from judgeblender.blend.votes import ABSTAIN

JUDGES = ["perfect", "noisy", "twos", "lenient"]


def seed_set(n_queries=10, per_query=12, seed=3):
    """perfect copies gold; noisy is right 60% of the time; twos always says 2; lenient says gold+1 (max 3)."""
    rng = random.Random(seed)
    gold, rows = {}, []
    for q in range(n_queries):
        for d in range(per_query):
            g = rng.randrange(4)
            gold.setdefault(f"q{q}", {})[f"d{d}"] = g
            noisy = g if rng.random() < 0.6 else rng.randrange(4)
            rows.append(((f"q{q}", f"d{d}"), {"perfect": g, "noisy": noisy, "twos": 2, "lenient": min(g + 1, 3)}))
    return BallotTable.from_votes(rows, JUDGES), gold


def test_every_fast_aggregator_gives_blenders_labels_on_random_votes_with_abstentions():
    rng = np.random.default_rng(0)
    labels = rng.integers(-1, 4, size=(400, 5))
    table = BallotTable(tuple((f"q{i // 10}", f"d{i}") for i in range(400)), tuple("abcde"), labels)
    weights = {"a": 0.5, "b": 1.0, "c": 0.25, "d": 0.0, "e": 2.0}
    for _, method, tie in FAST_RULES:
        extra = {"weights": weights} if method == "weighted" else {}
        want = [ABSTAIN if v is None else v for v in Blender(method, tie=tie, **extra).blend(table).labels]
        w = np.array([weights[j] for j in "abcde"]) if method == "weighted" else None
        assert fast_labels(labels, method, tie, w).tolist() == want, (method, tie)


def test_the_perfect_judge_alone_is_chosen_over_blends_that_tie_it_because_it_is_cheapest():
    table, gold = seed_set()
    sel = select(table, gold, folds=5, slow=False, family="subsets")
    assert sel.search == "exhaustive" and sel.subsets == 15
    assert sel.chosen.label == "member perfect"
    assert sel.chosen.mean == pytest.approx(1.0) and sel.chosen.cost == 1.0


def test_a_price_on_the_perfect_judge_moves_the_choice_to_a_cheaper_panel_when_within_one_se():
    table, gold = seed_set()
    sel = select(table, gold, folds=5, slow=False, costs={"perfect": 10.0}, family="subsets")
    # lenient alone (gold+1) is cheap but poor; the frontier starts cheap and rises in kappa and cost
    costs = [c.cost for c in sel.frontier]
    means = [c.mean for c in sel.frontier]
    assert costs == sorted(costs) and means == sorted(means)
    assert sel.frontier[-1].mean == pytest.approx(1.0)
    assert sel.frontier[0].cost == 1.0 and "perfect" not in sel.frontier[0].judges


def test_beyond_the_exhaustive_limit_the_search_is_greedy_and_still_finds_the_perfect_judge():
    table, gold = seed_set()
    sel = select(table, gold, folds=5, slow=False, exhaustive_max=3, family="subsets")
    assert sel.search == "greedy" and sel.subsets < 15
    assert sel.chosen.label == "member perfect"


def test_frontier_keeps_only_candidates_that_beat_every_cheaper_one():
    table, gold = seed_set()
    sel = select(table, gold, folds=5, slow=False, family="subsets")
    front = frontier(sel.candidates)
    assert [c.label for c in front] == ["member perfect"]


def test_nested_selection_scores_each_outer_fold_on_queries_it_was_not_chosen_on():
    table, gold = seed_set()
    rep = nested_select(table, gold, outer=5, inner=4, slow=False, family="subsets")
    assert len(rep.folds) == 5
    seen = [q for f in rep.folds for q in f.test_queries]
    assert sorted(seen) == sorted(gold) and len(seen) == len(set(seen))
    assert rep.pooled_chosen == pytest.approx(1.0)
    assert rep.best_member == ("perfect", pytest.approx(1.0))
    assert all(f.chosen == "member perfect" for f in rep.folds)


def test_all_fixed_rules_at_once_equal_each_rule_alone_with_abstentions():
    from judgeblender.blend.select import fixed_labels, _counts

    rng = np.random.default_rng(7)
    for n_judges in (1, 2, 5):
        labels = rng.integers(-1, 4, size=(300, n_judges))
        together = fixed_labels(labels, _counts(labels))
        for _, method, tie in FAST_RULES:
            if method != "weighted":
                assert together[(method, tie)].tolist() == fast_labels(labels, method, tie).tolist(), (method, tie)
