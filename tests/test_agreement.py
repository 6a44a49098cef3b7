"""Label agreement: each statistic matches an independent computation on the shared pairs."""

from __future__ import annotations

import json
import math

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from judgeblender.errors import InputError
from judgeblender.evaluate import agreement
from judgeblender.pairs import read_qrels

# Gold labels 11 pairs over two queries; the prediction misses q1/d5 and q2/d6 and adds
# q2/d9, which gold never labelled: only the 9 pairs in both may count.
GOLD = """\
q1 0 d1 0
q1 0 d2 1
q1 0 d3 2
q1 0 d4 3
q1 0 d5 0
q2 0 d1 0
q2 0 d2 0
q2 0 d3 1
q2 0 d4 2
q2 0 d5 3
q2 0 d6 1
"""
PRED = """\
q1 0 d1 0
q1 0 d2 2
q1 0 d3 2
q1 0 d4 2
q2 0 d1 1
q2 0 d2 0
q2 0 d3 1
q2 0 d4 3
q2 0 d5 3
q2 0 d9 3
"""
# The 9 shared pairs, in gold order: (gold, pred)
SHARED = [(0, 0), (1, 2), (2, 2), (3, 2), (0, 1), (0, 0), (1, 1), (2, 3), (3, 3)]


@pytest.fixture
def files(tmp_path):
    gold, pred = tmp_path / "gold.qrels", tmp_path / "pred.qrels"
    gold.write_text(GOLD)
    pred.write_text(PRED)
    return gold, pred


@pytest.fixture
def report(files):
    gold, pred = files
    return agreement(read_qrels(gold), read_qrels(pred), name="pred", invalid=2)


def test_only_pairs_in_both_count(report):
    assert report.n == 9
    assert report.n_gold == 11 and report.n_pred == 10
    assert report.coverage == pytest.approx(9 / 11)
    assert report.invalid == 2  # passed through from the caller


def test_kappas_match_sklearn_on_shared_pairs(report):
    g, p = map(np.array, zip(*SHARED))
    assert report.kappa == pytest.approx(cohen_kappa_score(g, p, labels=[0, 1, 2, 3]))
    assert report.weighted_kappa_linear == pytest.approx(cohen_kappa_score(g, p, labels=[0, 1, 2, 3], weights="linear"))
    assert report.weighted_kappa_quadratic == pytest.approx(
        cohen_kappa_score(g, p, labels=[0, 1, 2, 3], weights="quadratic"))
    assert report.kappa_binary == pytest.approx(cohen_kappa_score(g >= 2, p >= 2))
    # the three kappas differ here: the errors are all off by one level
    assert report.kappa < report.weighted_kappa_linear < report.weighted_kappa_quadratic


def test_binary_kappa_by_hand(report):
    # binary (gold, pred): (0,0) (0,1) (1,1) (1,1) (0,0) (0,0) (0,0) (1,1) (1,1)
    # observed agreement 8/9; gold relevant 4/9, pred relevant 5/9
    po = 8 / 9
    pe = (4 / 9) * (5 / 9) + (5 / 9) * (4 / 9)
    assert report.kappa_binary == pytest.approx((po - pe) / (1 - pe))


def test_alpha_matches_krippendorff_ordinal(report):
    g, p = zip(*SHARED)
    expected = krippendorff.alpha(reliability_data=[g, p], level_of_measurement="ordinal", value_domain=[0, 1, 2, 3])
    assert report.alpha_ordinal == pytest.approx(expected)


def test_confusion_matrix_rows_gold_columns_pred(report):
    assert report.confusion == [
        [2, 1, 0, 0],  # gold 0: predicted 0, 1, 0
        [0, 1, 1, 0],  # gold 1: predicted 2, 1
        [0, 0, 1, 1],  # gold 2: predicted 2, 3
        [0, 0, 1, 1],  # gold 3: predicted 2, 3
    ]
    assert report.accuracy == pytest.approx(5 / 9)
    assert report.per_level_accuracy == pytest.approx([2 / 3, 1 / 2, 1 / 2, 1 / 2])


def test_no_shared_pair_gives_nan_and_a_note():
    r = agreement({"q1": {"d1": 2}}, {"q2": {"d1": 2}}, name="disjoint")
    assert r.n == 0 and r.coverage == 0.0
    assert all(math.isnan(v) for v in (r.kappa, r.kappa_binary, r.alpha_ordinal, r.accuracy))
    assert r.confusion == [[0] * 4] * 4
    assert any("no pair" in note for note in r.notes)


def test_constant_rater_gives_nan_not_a_crash():
    gold = {"q": {"a": 0, "b": 1, "c": 3}}
    pred = {"q": {"a": 2, "b": 2, "c": 2}}  # a judge that always says 2
    r = agreement(gold, pred, name="always2")
    assert r.n == 3 and r.kappa == pytest.approx(0.0)  # chance agreement exactly
    both_constant = agreement({"q": {"a": 1, "b": 1}}, {"q": {"a": 1, "b": 1}}, name="same")
    assert math.isnan(both_constant.kappa) and math.isnan(both_constant.alpha_ordinal)
    assert both_constant.accuracy == 1.0
    assert any("undefined" in note for note in both_constant.notes)


def test_missing_gold_level_has_nan_per_level_accuracy():
    r = agreement({"q": {"a": 0, "b": 3}}, {"q": {"a": 0, "b": 3}}, name="p")
    assert r.per_level_accuracy[0] == 1.0 and r.per_level_accuracy[3] == 1.0
    assert math.isnan(r.per_level_accuracy[1]) and math.isnan(r.per_level_accuracy[2])


def test_prediction_label_outside_0_to_3_is_an_error():
    with pytest.raises(InputError, match="label 7 for query q document a"):
        agreement({"q": {"a": 1}}, {"q": {"a": 7}}, name="pred")


def test_out_of_range_label_in_file_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.qrels"
    bad.write_text("q 0 a 1\nq 0 b 4\n")
    with pytest.raises(InputError, match=r"bad\.qrels:2"):
        read_qrels(bad, allowed=range(4))


def test_report_serialises_to_json_with_null_for_nan():
    r = agreement({"q": {"a": 1, "b": 1}}, {"q": {"a": 1, "b": 1}}, name="same")
    d = json.loads(json.dumps(r.to_dict()))
    assert d["kappa"] is None and d["accuracy"] == 1.0 and d["name"] == "same"


# --- bootstrap intervals over queries -------------------------------------------------------------

def _noisy(n_queries: int, per_query: int = 30, seed: int = 0, flip: float = 0.3):
    """Gold labels 0-3 for n_queries x per_query pairs, and a prediction that moves a label by one
    level with probability `flip`: agreement well above chance, well below perfect."""
    rng = np.random.default_rng(seed)
    gold, pred = {}, {}
    for q in range(n_queries):
        g = rng.integers(0, 4, per_query)
        p = np.clip(g + rng.choice([-1, 0, 1], per_query, p=[flip / 2, 1 - flip, flip / 2]), 0, 3)
        gold[f"q{q}"] = {f"d{i}": int(x) for i, x in enumerate(g)}
        pred[f"q{q}"] = {f"d{i}": int(x) for i, x in enumerate(p)}
    return gold, pred


STATS = ("kappa", "kappa_binary", "weighted_kappa_linear", "weighted_kappa_quadratic", "alpha_ordinal")


def test_bootstrap_intervals_cover_the_point_estimate_and_are_seeded():
    gold, pred = _noisy(40)
    a = agreement(gold, pred, "p", bootstrap=500, seed=7, confidence=0.9)
    b = agreement(gold, pred, "p", bootstrap=500, seed=7, confidence=0.9)
    c = agreement(gold, pred, "p", bootstrap=500, seed=8, confidence=0.9)
    for s in STATS:
        lo, hi = getattr(a, s + "_ci")
        assert lo < getattr(a, s) < hi, s
        assert getattr(b, s + "_ci") == (lo, hi)  # same seed, same interval
        assert getattr(c, s + "_ci") != (lo, hi)
    assert (a.bootstrap, a.confidence, a.seed) == (500, 0.9, 7)
    wider = agreement(gold, pred, "p", bootstrap=500, seed=7, confidence=0.99)
    assert wider.kappa_ci[0] <= a.kappa_ci[0] and wider.kappa_ci[1] >= a.kappa_ci[1]


def test_bootstrap_intervals_shrink_with_more_queries():
    few = agreement(*_noisy(20, seed=1), "p", bootstrap=500)
    many = agreement(*_noisy(320, seed=1), "p", bootstrap=500)
    for s in STATS:  # 16 times the queries: about a quarter of the width
        w_few, w_many = (np.diff(getattr(r, s + "_ci"))[0] for r in (few, many))
        assert 0.15 < w_many / w_few < 0.4, s


def test_perfect_agreement_on_every_query_gives_a_degenerate_interval_at_one():
    gold, _ = _noisy(10)
    for docs in gold.values():  # every query has every level: no replicate is undefined
        docs.update({"x0": 0, "x1": 1, "x2": 2, "x3": 3})
    r = agreement(gold, gold, "same", bootstrap=200)
    for s in STATS:
        assert getattr(r, s) == pytest.approx(1.0) and getattr(r, s + "_ci") == pytest.approx((1.0, 1.0)), s


def test_one_query_gives_the_point_estimate_as_its_interval():
    # every replicate draws the only query: all replicates are the sample itself
    r = agreement(read_qrels_text(GOLD, keep="q1"), read_qrels_text(PRED, keep="q1"), "p", bootstrap=50)
    for s in STATS:
        assert getattr(r, s + "_ci") == pytest.approx((getattr(r, s),) * 2), s


def test_bootstrap_draws_whole_queries_from_gold_and_skips_undefined_replicates():
    # q1 labelled 3 by both, q2 labelled 0 by both: a replicate with one query only has no
    # chance-corrected statistic (NaN) and is left out; mixed replicates have kappa 1
    gold = {"q1": {"a": 3, "b": 3}, "q2": {"a": 0, "b": 0}}
    r = agreement(gold, gold, "p", bootstrap=100)
    assert r.kappa == 1.0 and r.kappa_ci == (1.0, 1.0)


def test_no_bootstrap_gives_nan_intervals_and_null_in_json():
    gold, pred = _noisy(5)
    d = agreement(gold, pred, "p").to_dict()  # the library default is 0: no intervals
    assert d["kappa_ci"] == [None, None] and d["bootstrap"] == 0
    d = agreement(gold, pred, "p", bootstrap=20).to_dict()
    assert all(isinstance(x, float) for x in d["alpha_ordinal_ci"])
    json.dumps(d)


def test_bootstrap_and_confidence_are_checked():
    gold, pred = _noisy(3)
    with pytest.raises(Exception, match="bootstrap"):
        agreement(gold, pred, "p", bootstrap=-1)
    with pytest.raises(Exception, match="confidence"):
        agreement(gold, pred, "p", bootstrap=10, confidence=1.0)


def test_vectorised_alpha_matches_krippendorff_on_a_stack():
    from judgeblender.evaluate.agreement import alpha_ordinal_from_confusion
    from judgeblender.kappa import confusion_matrix

    rng = np.random.default_rng(3)
    pairs = [(rng.integers(0, 4, 25), rng.integers(0, 4, 25)) for _ in range(20)]
    stack = np.stack([confusion_matrix(a, b, (0, 1, 2, 3)) for a, b in pairs])
    expected = [krippendorff.alpha(reliability_data=np.vstack([a, b]).astype(float), level_of_measurement="ordinal",
                                   value_domain=[0, 1, 2, 3]) for a, b in pairs]
    assert alpha_ordinal_from_confusion(stack) == pytest.approx(expected)


def read_qrels_text(text: str, keep: str) -> dict:
    out: dict = {}
    for line in text.splitlines():
        q, _, d, label = line.split()
        if q == keep:
            out.setdefault(q, {})[d] = int(label)
    return out
