"""The notebook API (`import judgeblender as jb`): the issue's snippet with judges that differ,
labels in every shape ir_measures users hold them, and the first mistakes a new user makes.

Three scripted judges label six pairs in logprobs mode; judge C cannot answer one pair (its
label stays invalid, never 0). The values asserted are worked out by hand in the comments.
"""

from __future__ import annotations

import json
import math
import pkgutil
from importlib import import_module

import pandas as pd
import pytest
from ir_measures import Qrel, ScoredDoc

import judgeblender as jb
from judgeblender.errors import JudgeblenderError
from judgeblender.judges import JudgeSpec, judge_pairs

TEXTS = {"d1": "zebra crossing", "d2": "yellow kettle", "d3": "xenon lamp",
         "d4": "walnut tree", "d5": "violet sky", "d6": "umber paint"}
QID = {"d1": "q1", "d2": "q1", "d3": "q1", "d4": "q2", "d5": "q2", "d6": "q2"}
QUERIES = {"q1": "first query", "q2": "second query"}
GOLD = {"q1": {"d1": 3, "d2": 0, "d3": 2}, "q2": {"d4": 1, "d5": 3, "d6": 1}}
# What each judge says; "?" is an answer with no probability on any label (invalid).
SAYS = {"A": {"d1": 3, "d2": 0, "d3": 2, "d4": 1, "d5": 3, "d6": 0},
        "B": {"d1": 3, "d2": 1, "d3": 2, "d4": 1, "d5": 2, "d6": 0},
        "C": {"d1": 2, "d2": 0, "d3": "?", "d4": 1, "d5": 3, "d6": 0}}
# Majority per pair (C abstains on d3): d1 3, d2 0, d3 2, d4 1, d5 3, d6 0
BLEND = {"d1": 3, "d2": 0, "d3": 2, "d4": 1, "d5": 3, "d6": 0}
# gold vs blend differ on d6 only (1 vs 0). Cohen's kappa over labels 0..3:
# observed agreement 5/6; gold marginals {0:1, 1:2, 2:1, 3:2}, blend {0:2, 1:1, 2:1, 3:2};
# chance (1*2 + 2*1 + 1*1 + 2*2) / 36 = 9/36; kappa = (5/6 - 1/4) / (3/4) = 7/9
BLEND_KAPPA = 7 / 9


def scripted(tmp_path, name: str) -> str:
    rules = []
    for doc, label in SAYS[name].items():
        probs = {"0": 0.0} if label == "?" else {str(label): 0.9, "0" if label else "1": 0.1}
        rules.append({"contains": f"Passage: {TEXTS[doc]}", "probs": probs})
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"rules": rules, "name": name}), encoding="utf-8")
    return f"scripted:{path}"


@pytest.fixture
def df():
    return pd.DataFrame({"qid": [QID[d] for d in TEXTS], "docid": list(TEXTS),
                         "query": [QUERIES[QID[d]] for d in TEXTS], "passage": list(TEXTS.values())})


@pytest.fixture
def judges(tmp_path):
    return [{"model": scripted(tmp_path, n), "id": n} for n in "ABC"]


@pytest.fixture
def run(df, judges, tmp_path):
    return jb.judge(df, judges=judges, prompt="umbrela", mode="logprobs", store=tmp_path / "j.sqlite")


def gold_frame():
    return pd.DataFrame([(q, d, lab) for q, docs in GOLD.items() for d, lab in docs.items()],
                        columns=["qid", "docid", "label"])


def as_dict(frame, column="label"):
    return {d: (None if pd.isna(v) else v) for d, v in zip(frame["docno"], frame[column])}


# -- the snippet -------------------------------------------------------------------------------

def test_the_issue_snippet_runs_and_gives_the_worked_out_values(run):
    labels = run.labels
    assert list(labels.columns) == ["qid", "docno", "judge", "label", "expected", "score", "valid", "reason"]
    assert len(labels) == 18
    for name in "ABC":
        mine = labels[labels.judge == name]
        assert as_dict(mine) == {d: (None if v == "?" else v) for d, v in SAYS[name].items()}
    blended = run.blend("mv", tie="avg")
    assert list(blended.columns) == ["qid", "docno", "label"]
    assert as_dict(blended) == BLEND
    assert jb.agreement(GOLD, run.blend("mv")).kappa == pytest.approx(BLEND_KAPPA)


def test_an_invalid_answer_stays_invalid_with_its_reason_and_is_never_zero(run):
    row = run.labels.query("judge == 'C' and docno == 'd3'").iloc[0]
    assert pd.isna(row.label) and not row.valid
    assert "no probability on any answer token" in row.reason
    assert run.labels.valid.sum() == 17


def test_logprobs_labels_carry_their_expected_value(run):
    row = run.labels.query("judge == 'A' and docno == 'd1'").iloc[0]
    assert row.expected == pytest.approx(0.9 * 3 + 0.1 * 0)


def test_each_judge_agreement_with_gold_is_one_row(run):
    table = run.agreement(gold_frame()).set_index("name")
    assert table.loc["A", "accuracy"] == pytest.approx(5 / 6)  # misses d6 only
    assert table.loc["C", "n"] == 5 and table.loc["C", "invalid"] == 1


def test_a_second_run_on_the_same_store_makes_no_call(df, judges, tmp_path):
    jb.judge(df, judges=judges, mode="logprobs", store=tmp_path / "s.sqlite")
    again = jb.judge(df, judges=judges, mode="logprobs", store=tmp_path / "s.sqlite").summary()
    assert again.calls_made.sum() == 0 and again.cache_hits.sum() > 0


def test_kappa_is_nan_where_both_sides_give_one_label_and_zero_where_only_the_judge_does():
    constant = {"q1": {"d1": 2, "d2": 2}, "q2": {"d4": 2}}
    assert math.isnan(jb.agreement(constant, constant).kappa)  # chance agreement is already total
    report = jb.agreement(GOLD, constant)
    assert report.n == 3 and report.kappa == 0.0 and any("label 2 to every" in n for n in report.notes)


# -- inputs in every shape ---------------------------------------------------------------------

def test_pairs_with_queries_and_corpus_given_as_mappings_or_files(judges, tmp_path):
    pairs = pd.DataFrame({"qid": ["q1", "q2"], "docid": ["d1", "d5"]})
    run = jb.judge(pairs, judges=judges[:1], queries=QUERIES, corpus=TEXTS, mode="logprobs")
    assert as_dict(run.labels) == {"d1": 3, "d5": 3}
    (tmp_path / "q.tsv").write_text("q1\tfirst query\nq2\tsecond query\n", encoding="utf-8")
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"docid": d, "text": t}) + "\n" for d, t in TEXTS.items()),
                                      encoding="utf-8")
    run = jb.judge([("q1", "d2")], judges=judges[1:2], queries=tmp_path / "q.tsv", corpus=tmp_path / "c.jsonl",
                   mode="logprobs")
    assert as_dict(run.labels) == {"d2": 1}


def test_labels_are_read_from_frames_qrel_tuples_dicts_tuples_and_files(tmp_path):
    pred = {"q1": {"d1": 3, "d2": 0, "d3": 2}, "q2": {"d4": 1, "d5": 3, "d6": 0}}
    path = tmp_path / "gold.qrels"
    path.write_text("".join(f"{q} 0 {d} {lab}\n" for q, docs in GOLD.items() for d, lab in docs.items()))
    shapes = [GOLD, gold_frame(), gold_frame().rename(columns={"qid": "query_id", "docid": "doc_id",
                                                             "label": "relevance"}),
              [Qrel(q, d, lab) for q, docs in GOLD.items() for d, lab in docs.items()],
              [(q, d, lab) for q, docs in GOLD.items() for d, lab in docs.items()], path, str(path)]
    for gold in shapes:
        assert jb.agreement(gold, pred).kappa == pytest.approx(BLEND_KAPPA), type(gold)


def test_agreement_with_several_judges_labels_at_once_says_to_blend_first(run):
    with pytest.raises(JudgeblenderError, match="pass a blend"):
        jb.agreement(GOLD, run.labels)


def test_a_wrong_shape_of_labels_is_an_error_that_says_what_is_wanted():
    with pytest.raises(JudgeblenderError, match="needs the columns"):
        jb.agreement(pd.DataFrame({"q": ["q1"], "d": ["d1"]}), GOLD)
    with pytest.raises(JudgeblenderError, match="a label must be an integer"):
        jb.agreement([("q1", "d1", "high")], GOLD)


def test_labels_frame_and_qrels_convert_both_ways():
    frame = jb.labels_frame([Qrel("q1", "d1", 2), ("q1", "d2", None)])
    assert frame.label.tolist()[0] == 2 and pd.isna(frame.label.tolist()[1])
    assert jb.qrels(frame) == {"q1": {"d1": 2}}


# -- blending, calibrating, correlating --------------------------------------------------------

def test_blend_labels_takes_a_long_frame_or_a_dict_of_qrels(run):
    assert as_dict(jb.blend_labels(run.labels, "mv")) == BLEND
    per_judge = {n: {QID[d]: {} for d in TEXTS} for n in "AB"}
    for n in "AB":
        for d, lab in SAYS[n].items():
            per_judge[n][QID[d]][d] = lab
    # A and B tie on d2 (0, 1) and d5 (3, 2): "avg" rounds the mean half up
    assert as_dict(jb.blend_labels(per_judge, "mv", tie="avg")) == {**SAYS["A"], "d2": 1, "d5": 3}


def test_an_unknown_blend_method_is_an_error_naming_it(run):
    with pytest.raises(JudgeblenderError, match="blend nope"):
        run.blend("nope")


def test_calibrate_learns_a_blend_and_applies_it(run):
    calibrated = jb.calibrate(run, GOLD, "weights", folds=2)
    assert calibrated.report.gold_pairs == 6
    assert set(calibrated.learned.weights) == {"A", "B", "C"}
    assert len(calibrated.apply(run)) == 6


def test_correlate_gives_one_row_per_prediction_and_measure():
    runs = {"good": pd.DataFrame({"qid": ["q1", "q1", "q2", "q2"], "docid": ["d1", "d2", "d5", "d6"],
                                  "score": [2.0, 1.0, 2.0, 1.0]}),
            "bad": [ScoredDoc("q1", "d2", 2.0), ScoredDoc("q1", "d1", 1.0), ScoredDoc("q2", "d6", 2.0),
                    ScoredDoc("q2", "d5", 1.0)],
            "mid": {"q1": {"d3": 2.0, "d1": 1.0}, "q2": {"d4": 2.0, "d5": 1.0}}}
    table = jb.correlate(GOLD, {"same": GOLD}, runs, measures=["nDCG@10"], bootstrap=0)
    assert table[["name", "measure"]].values.tolist() == [["same", "nDCG@10"]]
    assert table.kendall_tau[0] == pytest.approx(1.0)


# -- panels, and the first mistakes ------------------------------------------------------------

def test_prompt_and_mode_are_defaults_for_llm_judges_only():
    panel = jb.panel(["embed:default", "llamacpp:default"], prompt="thomas", mode="logprobs")
    scorer, llm = panel.judges
    assert (llm.prompt, llm.mode) == ("thomas", "logprobs")
    assert scorer.id == "embed:default" and (scorer.prompt, scorer.mode) == ("umbrela", "generate")


def test_a_preset_name_is_a_panel():
    assert [s.prompt for s in jb.panel("promptblender").judges] == ["thomas", "multicriteria", "sun-two-step"]


def test_judge_pairs_takes_judge_specs_and_tuples(tmp_path):
    run = judge_pairs([JudgeSpec(scripted(tmp_path, "A"), mode="logprobs", id="A")], [("q1", "d1"), ("q2", "d6")],
                      QUERIES, TEXTS)
    assert {p.docid: j.label for p, j in run.judgments["A"].items()} == {"d1": 3, "d6": 0}


def test_judges_that_share_an_id_are_an_error(tmp_path):
    with pytest.raises(JudgeblenderError, match="share the id"):
        jb.panel([scripted(tmp_path, "A"), scripted(tmp_path, "A")])


def test_no_top_level_name_equals_a_sub_package_or_module_name():
    modules = {m.name for m in pkgutil.iter_modules(jb.__path__)}
    assert set(jb.__all__) & modules == set()
    for name in sorted(modules - {"__main__", "cli"}):
        import_module(f"judgeblender.{name}")
    assert callable(jb.judge) and callable(jb.agreement) and callable(jb.calibrate) and callable(jb.correlate)


def test_agreement_has_seeded_bootstrap_intervals_over_queries(run):
    gold = {f"q{i}": {"a": i % 4, "b": (i + 1) % 4, "c": (i + 2) % 4} for i in range(12)}
    pred = {q: {d: (l + (d == "c")) % 4 for d, l in docs.items()} for q, docs in gold.items()}
    one = jb.agreement(gold, pred, bootstrap=300, seed=1, confidence=0.9)
    assert one.kappa_ci[0] <= one.kappa <= one.kappa_ci[1]
    assert jb.agreement(gold, pred, bootstrap=300, seed=1, confidence=0.9).kappa_ci == one.kappa_ci
    assert math.isnan(jb.agreement(gold, pred, bootstrap=0).kappa_ci[0])
    table = run.agreement(gold_frame(), bootstrap=100)
    assert "kappa_ci" in table.columns
