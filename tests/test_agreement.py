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
