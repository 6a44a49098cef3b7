"""A jury as an Opik metric, offline: no Opik server, no tracking, no analytics.

Opik (with litellm) needs openai<3, which the main environment does not have, so these tests
run in their own environment (`.venv-opik`, see docs/jury.md) and are skipped elsewhere.
"""

from __future__ import annotations

import asyncio
import json
import math
import os

import pytest

# Before opik is imported: nothing may leave this machine.
for _key, _value in {"OPIK_TRACK_DISABLE": "true", "OPIK_ANALYTICS_ENABLE": "false", "OPIK_SENTRY_ENABLE": "false",
                     "OPIK_URL_OVERRIDE": "http://127.0.0.1:9/api/"}.items():
    os.environ.setdefault(_key, _value)

opik = pytest.importorskip(
    "opik", reason="the Opik adapter needs the [opik] extra, kept in its own venv: run `make test-opik`")

from judgeblender.backends.scripted import ScriptedBackend  # noqa: E402
from judgeblender.judges import Judge, JudgeSpec  # noqa: E402
from judgeblender.jury import Jury  # noqa: E402
from judgeblender.jury.opik_metric import JuryMetric  # noqa: E402
from opik.evaluation.metrics import BaseMetric  # noqa: E402
from opik.evaluation.metrics.score_result import ScoreResult  # noqa: E402

QUESTION = {"input": "Who wrote Hamlet?", "output": "Charles Dickens wrote Hamlet.", "reference": "William Shakespeare"}


def verdict(score, reason):
    return json.dumps({"score": score, "reason": reason})


def member(name: str, **rules) -> Judge:
    backend = ScriptedBackend(rules=[{"contains": k, "output": v} for k, v in rules.items()],
                              default=verdict(0.5, "unsure"))
    return Judge(JudgeSpec(f"scripted:{name}", prompt="factual-accuracy", invalid_policy="no-retry"), backend=backend)


def jury(**kw) -> Jury:
    return Jury([member("strict", Hamlet=verdict(0.0, "Shakespeare wrote Hamlet, not Dickens")),
                 member("lenient", Hamlet=verdict(0.2, "wrong author")),
                 member("broken", Hamlet='{"score": 0.9, "reason": "looks fine"')], **kw)


def test_jury_metric_is_an_opik_metric_and_pools_the_valid_verdicts():
    metric = JuryMetric(jury(pooling="mean"), name="factual_jury", track=False)
    assert isinstance(metric, BaseMetric)
    result = metric.score(**QUESTION)
    assert isinstance(result, ScoreResult)
    assert result.name == "factual_jury" and not result.scoring_failed
    assert result.value == pytest.approx(0.1)  # (0.0 + 0.2) / 2: the broken judge abstains, it is not a 0.9

    judges = result.metadata["judges"]
    assert set(judges) == {"scripted:strict/factual-accuracy/generate", "scripted:lenient/factual-accuracy/generate",
                           "scripted:broken/factual-accuracy/generate"}
    assert judges["scripted:strict/factual-accuracy/generate"] == {
        "score": 0.0, "reason": "Shakespeare wrote Hamlet, not Dickens", "invalid_reason": None}
    broken = judges["scripted:broken/factual-accuracy/generate"]
    assert broken["score"] is None and broken["invalid_reason"].startswith("verdict: broken JSON")
    assert result.metadata["abstained"] == ["scripted:broken/factual-accuracy/generate"]
    assert result.metadata["pooling"] == {"method": "mean", "threshold": 0.5, "trim": 0.1, "tie": "undecided",
                                          "min_votes": 1}
    assert result.reason.startswith("mean of 2/3 judges: 0.100")
    assert "Shakespeare wrote Hamlet, not Dickens" in result.reason and "invalid (verdict: broken JSON" in result.reason


def test_no_valid_verdict_is_a_failed_score_never_a_zero():
    metric = JuryMetric(jury(pooling="mean", min_votes=3), name="factual_jury", track=False)
    result = metric.score(**QUESTION)
    assert result.scoring_failed is True
    assert math.isnan(result.value)
    assert result.reason.startswith("no pooled score: 2 valid verdicts, 3 needed")


def test_opik_fields_other_than_the_rubric_inputs_are_ignored_and_lists_are_joined():
    strict = member("strict", **{"Shakespeare\nthe Bard": verdict(0.0, "wrong")})
    metric = JuryMetric(Jury([strict]), track=False)
    result = metric.score(input="Who wrote Hamlet?", output="Dickens.", reference=["Shakespeare", "the Bard"],
                          expected_output="unused", dataset_item_id="abc", context=["not a rubric input here"])
    assert result.value == 0.0 and result.metadata["judges"]["scripted:strict/factual-accuracy/generate"]["reason"] == "wrong"
    assert "context" not in strict.backend.calls[0].messages[-1].content


def test_each_item_keeps_its_own_judgment_and_a_store_saves_repeat_calls(tmp_path):
    from judgeblender.store import CallStore

    strict = member("strict", Hamlet=verdict(0.0, "wrong author"), France=verdict(1.0, "right"))
    with CallStore(tmp_path / "calls.sqlite") as store:
        metric = JuryMetric(Jury([strict], store=store), track=False)
        metric.score(**QUESTION)
        metric.score(input="What is the capital of France?", output="Paris.", reference="Paris")
        again = metric.score(**QUESTION)
        kept = store.judgments()
    assert len(strict.backend.calls) == 2 and again.value == 0.0
    assert len({j["qid"] for j in kept}) == 2 and all(j["qid"].startswith("opik-") for j in kept)


def test_voting_verdict_travels_in_the_metadata():
    metric = JuryMetric(jury(pooling="hard-vote", threshold=0.1), track=False)
    result = metric.score(**QUESTION)
    # strict 0.0 fails, lenient 0.2 passes, broken abstains: a tie, left undecided
    assert result.value == 0.5 and result.metadata["verdict"] is None and "(tie)" in result.reason


def test_ascore_gives_the_same_result_from_an_event_loop():
    metric = JuryMetric(jury(pooling="median"), track=False)
    result = asyncio.run(metric.ascore(**QUESTION))
    assert result.value == pytest.approx(0.1) and result.metadata == metric.score(**QUESTION).metadata


@pytest.fixture
def no_network(monkeypatch):
    """Record (and refuse) every outgoing connection: these tests must need no server."""
    import socket

    attempts = []

    def refuse(sock, address):
        attempts.append(address)
        raise ConnectionRefusedError(f"test_opik_metric: no network ({address})")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    return attempts


def test_opik_scoring_and_statistics_count_a_failed_jury_as_failed_not_as_zero(no_network):
    """Opik's own pieces of `evaluate()`: its argument mapping calls the metric with the dataset
    item plus the task output, and its statistics leave failed scores out. (evaluate() itself
    also logs feedback scores to a server, so it is not used here.)"""
    from opik.evaluation import score_statistics, test_case, test_result
    from opik.evaluation.engine.metrics_evaluator import MetricsEvaluator
    from opik.evaluation.types import ErrorTolerance

    items = [{"input": "Who wrote Hamlet?", "reference": "William Shakespeare", "expected_output": "Shakespeare"},
             {"input": "What is the capital of France?", "reference": "Paris"}]
    outputs = [{"output": "Charles Dickens wrote Hamlet."}, {"output": "Paris."}]
    strict = member("strict", Hamlet=verdict(0.0, "wrong author"), France='{"score": "high", "reason": "right"}')
    metric = JuryMetric(Jury([strict], pooling="mean"), name="factual_jury", track=False)
    evaluator = MetricsEvaluator([metric], scoring_key_mapping=None, skipped_evaluator_scores=[],
                                 error_tolerance=ErrorTolerance.METRIC_ERRORS)
    results = []
    for n, (item, output) in enumerate(zip(items, outputs)):
        scores, _ = evaluator.compute_regular_scores(dataset_item_content=item, task_output=output)
        case = test_case.TestCase(trace_id=f"t{n}", dataset_item_id=f"i{n}", task_output=output,
                                  dataset_item_content=item)
        results.append(test_result.TestResult(test_case=case, score_results=scores, trial_id=0))

    hamlet, paris = (r.score_results[0] for r in results)
    assert (hamlet.value, hamlet.scoring_failed) == (0.0, False)
    assert paris.scoring_failed and "invalid (verdict: does not match the schema" in paris.reason
    stats = score_statistics.calculate_aggregated_statistics(results)["factual_jury"]
    assert stats.values == [0.0] and stats.failed_count == 1  # the invalid verdict is not averaged in as 0
    assert no_network == []


def test_without_opik_the_error_names_the_extra(monkeypatch):
    import sys

    from judgeblender.errors import MissingExtraError
    from judgeblender.jury import opik_metric

    monkeypatch.setattr(opik_metric, "_CLASS", None)
    monkeypatch.setitem(sys.modules, "opik", None)  # `import opik` now fails as if it were not installed
    with pytest.raises(MissingExtraError, match=r"needs the Python package 'opik'.*pip install 'judgeblender\[opik\]'"):
        opik_metric.JuryMetric  # noqa: B018
