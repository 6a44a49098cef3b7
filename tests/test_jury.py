"""Juries of rubric judges: pooling rules, JSON verdicts, stores, served and embedded judges.

The rules these tests pin down: a judge without a valid verdict abstains (it is never a 0 and
never dropped silently: its reason is kept), jury members have unique ids, broken JSON is
reported as invalid with the reason, and structured output is asked of every backend that
can give it (OpenAI response_format json_schema, a llama.cpp grammar).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from judgeblender.backends.scripted import ScriptedBackend
from judgeblender.errors import InputError, JudgeblenderError
from judgeblender.judges import Judge, JudgeSpec
from judgeblender.jury import Jury, pool
from judgeblender.parse.verdict import parse_verdict
from judgeblender.prompts import get_template
from judgeblender.store import CallStore

SCHEMA = {"type": "object", "properties": {"score": {"type": "number"}, "reason": {"type": "string"}},
          "required": ["score", "reason"]}
ITEMS = [
    {"id": "paris", "input": "What is the capital of France?", "output": "Paris.", "reference": "Paris"},
    {"id": "hamlet", "input": "Who wrote Hamlet?", "output": "Charles Dickens.", "reference": "William Shakespeare"},
]


def verdict(score, reason="because"):
    return json.dumps({"score": score, "reason": reason})


def judge(backend: ScriptedBackend, name: str, prompt: str = "factual-accuracy", **kw) -> Judge:
    return Judge(JudgeSpec(model=f"scripted:{name}", prompt=prompt, **kw), backend=backend)


# ---------------------------------------------------------------------------------------------
# pooling, by hand
# ---------------------------------------------------------------------------------------------
def test_mean_leaves_abstentions_out_instead_of_counting_them_as_zero():
    assert pool([0.2, 0.4, None, 0.9], "mean").score == pytest.approx(0.5)


def test_median_of_an_even_count_is_the_mean_of_the_middle_two():
    assert pool([0.9, 0.1, 0.5, 0.3], "median").score == pytest.approx(0.4)
    assert pool([0.9, None, 0.1, 0.5], "median").score == pytest.approx(0.5)


def test_trimmed_mean_cuts_the_given_share_at_each_end():
    scores = [0.0, 0.3, 0.6, 0.9, 0.95]
    assert pool(scores, "mean").score == pytest.approx(0.55)
    assert pool(scores, "trimmed-mean", trim=0.2).score == pytest.approx(0.6)  # mean of 0.3, 0.6, 0.9
    assert pool(scores, "trimmed-mean", trim=0.0).score == pytest.approx(0.55)


def test_max_and_min_give_a_verdict_at_the_threshold():
    flagged = pool([0.1, 0.7, None], "max", threshold=0.5)
    assert (flagged.score, flagged.verdict) == (0.7, True)
    strict = pool([0.1, 0.7, None], "min", threshold=0.5)
    assert (strict.score, strict.verdict) == (0.1, False)


def test_hard_vote_score_is_the_share_of_pass_votes_and_the_threshold_itself_passes():
    p = pool([0.9, 0.5, 0.2], "hard-vote", threshold=0.5)
    assert p.score == pytest.approx(2 / 3) and p.verdict is True
    assert pool([0.49, 0.2, 0.8], "hard-vote", threshold=0.5).verdict is False


def test_hard_vote_abstentions_are_not_fail_votes():
    p = pool([0.9, None, None], "hard-vote", threshold=0.5)
    assert p.score == 1.0 and p.verdict is True


def test_hard_vote_tie_is_undecided_unless_a_tie_rule_breaks_it():
    tie = pool([0.9, None, 0.2], "hard-vote", threshold=0.5)
    assert tie.score == 0.5 and tie.verdict is None and tie.reason == "tie"
    assert pool([0.9, 0.2], "hard-vote", tie="pass").verdict is True
    broken = pool([0.9, 0.2], "hard-vote", tie="fail")
    assert broken.verdict is False and "tie" in broken.reason


def test_soft_vote_compares_the_mean_score_with_the_threshold():
    assert pool([0.6, 0.3], "soft-vote", threshold=0.5).verdict is False
    p = pool([0.6, 0.3], "soft-vote", threshold=0.4)
    assert p.score == pytest.approx(0.45) and p.verdict is True


def test_too_few_valid_verdicts_give_no_score_with_the_reason():
    p = pool([0.9, None, None], "mean", min_votes=2)
    assert p.score is None and p.verdict is None and p.reason == "1 valid verdicts, 2 needed"
    nobody = pool([None, None], "max")
    assert nobody.score is None and "0 valid verdicts" in nobody.reason


@pytest.mark.parametrize("kw", [{"method": "average"}, {"method": "mean", "tie": "coin"}])
def test_unknown_pooling_settings_are_refused(kw):
    with pytest.raises(ValueError, match="unknown"):
        pool([0.5], **kw)


# ---------------------------------------------------------------------------------------------
# JSON verdicts: safe repairs, everything else invalid with the reason
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    '```json\n{"score": 0.8, "reason": "ok"}\n```',
    'Here is my verdict: {"score": 0.8, "reason": "ok"} Hope it helps.',
    '{"score": 0.8, "reason": "ok",}',
])
def test_fenced_prose_wrapped_and_trailing_comma_verdicts_are_repaired(text):
    v = parse_verdict(text, SCHEMA, score_range=[0, 1])
    assert (v.score, v.reason, v.repaired, v.invalid_reason) == (0.8, "ok", True, None)


def test_a_raw_newline_inside_a_string_is_read_as_a_newline():
    # llama-cpp-python's JSON grammar lets a model put control characters inside strings
    v = parse_verdict('{"score": 0.5, "reason": "first line\nsecond\tline"}', SCHEMA, score_range=[0, 1])
    assert (v.score, v.reason, v.repaired) == (0.5, "first line\nsecond\tline", True)


def test_clean_json_is_not_marked_repaired():
    v = parse_verdict('{"score": 1, "reason": "ok"}', SCHEMA, score_range=[0, 1])
    assert v.score == 1.0 and not v.repaired


@pytest.mark.parametrize("text, reason", [
    ('{"score": "high", "reason": "ok"}', "score: Input should be a valid number"),
    ('{"score": "0.8", "reason": "ok"}', "score: Input should be a valid number"),  # a string is not a number
    ('{"score": true, "reason": "ok"}', "score: Input should be a valid number"),  # nor is a boolean
    ('{"score": 0.5, "reason": 3}', "reason: Input should be a valid string"),
    ('{"reason": "no score given"}', "score: Field required"),
    ('{"score": 1.5, "reason": "ok"}', "score 1.5 outside [0, 1]"),
    ('{"score": -0.1, "reason": "ok"}', "outside"),
    ('{"score": NaN, "reason": "ok"}', "not a number"),
    ('{"score": 0.7, "reason": "the answer agrees with the ref', "the object never closes"),
    ("{'score': 0.5, 'reason': 'single quotes'}", "broken JSON"),
    ("Score: 0.9 because it is right", "no JSON object found"),
    ("[0.9]", "expected a JSON object"),
    ("   ", "empty output"),
])
def test_broken_or_off_schema_verdicts_are_invalid_with_their_reason(text, reason):
    v = parse_verdict(text, SCHEMA, score_range=[0, 1])
    assert v.score is None and not v.valid
    assert reason in v.invalid_reason


def test_integer_levels_accept_an_integral_number_and_refuse_others():
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
    assert parse_verdict('{"score": 2.0}', schema, reason_field=None, levels=[0, 1, 2, 3]).score == 2.0
    assert parse_verdict('{"score": 2.5}', schema, reason_field=None, levels=[0, 1, 2, 3]).score is None
    assert "not a level" in parse_verdict('{"score": 7}', schema, reason_field=None, levels=[0, 1, 2, 3]).invalid_reason


# ---------------------------------------------------------------------------------------------
# the jury with scripted judges
# ---------------------------------------------------------------------------------------------
def test_a_judge_with_broken_json_abstains_with_its_reason_and_the_other_decides():
    good = ScriptedBackend(rules=[{"contains": "Paris", "output": verdict(0.9, "matches the reference")},
                                  {"contains": "Hamlet", "output": verdict(0.1, "Dickens did not write it")}])
    bad = ScriptedBackend(default='{"score": 0.4, "reason": "cut off')
    good_judge, bad_judge = judge(good, "good"), judge(bad, "bad")
    results = Jury([good_judge, bad_judge], pooling="mean").score(ITEMS)

    paris = results[0]
    assert paris.item_id == "paris" and paris.score == pytest.approx(0.9)
    assert paris.judges[good_judge.id].score == 0.9
    assert paris.judges[good_judge.id].reason == "matches the reference"
    broken = paris.judges[bad_judge.id]
    assert broken.score is None  # not 0.4, not 0
    assert broken.invalid_reason.startswith("verdict: broken JSON")
    assert broken.raw_output == '{"score": 0.4, "reason": "cut off'
    assert paris.abstained == [bad_judge.id]
    assert results[1].score == pytest.approx(0.1)
    assert len(bad.calls) == 4  # each item asked once more (retry-once) before giving up


def test_with_every_judge_invalid_the_item_has_no_score_and_says_why():
    jury = Jury([judge(ScriptedBackend(default="I think it is fine."), "a", invalid_policy="no-retry"),
                 judge(ScriptedBackend(default=verdict(3.0)), "b", invalid_policy="no-retry")])
    result = jury.score(ITEMS[:1])[0]
    assert result.score is None and result.reason == "0 valid verdicts, 1 needed"
    reasons = {jid: v.invalid_reason for jid, v in result.judges.items()}
    assert reasons == {"scripted:a/factual-accuracy/generate": "verdict: no JSON object found",
                       "scripted:b/factual-accuracy/generate": "verdict: score 3.0 outside [0.0, 1.0]"}


def test_min_votes_and_voting_through_the_jury():
    backends = [ScriptedBackend(default=verdict(s)) for s in (0.8, 0.6, 0.1)]
    jury = Jury([judge(b, f"j{i}") for i, b in enumerate(backends)], pooling="hard-vote", threshold=0.5,
                min_votes=3)
    result = jury.score(ITEMS[:1])[0]
    assert result.score == pytest.approx(2 / 3) and result.verdict is True


def test_two_judges_with_the_same_id_are_an_error_not_an_overwrite():
    a, b = ScriptedBackend(default=verdict(0.9)), ScriptedBackend(default=verdict(0.1))
    with pytest.raises(JudgeblenderError, match="share the id 'scripted:same/factual-accuracy/generate'"):
        Jury([judge(a, "same"), judge(b, "same")])
    jury = Jury([judge(a, "same", id="first"), judge(b, "same", id="second")])
    assert set(jury.score(ITEMS[:1])[0].judges) == {"first", "second"}


def test_the_same_model_with_two_prompts_gives_two_members():
    backend = ScriptedBackend(default=verdict(0.5))
    jury = Jury([judge(backend, "m", "factual-accuracy"), judge(backend, "m", "hallucination")])
    assert [j.id for j in jury.judges] == ["scripted:m/factual-accuracy/generate", "scripted:m/hallucination/generate"]


def test_an_item_missing_a_field_the_rubric_needs_names_the_item_number():
    items = [ITEMS[0], {"input": "Who wrote Hamlet?", "output": "Shakespeare."}]
    with pytest.raises(InputError, match=r"items:2: expected the fields \['input', 'output', 'reference'\]") as exc:
        Jury([judge(ScriptedBackend(default=verdict(1)), "a")]).score(items)
    assert exc.value.line == 2 and "missing reference" in str(exc.value)


def test_a_field_set_to_none_counts_as_missing_not_as_the_text_none():
    items = [{"input": "Who wrote Hamlet?", "output": "Shakespeare.", "reference": None}]
    with pytest.raises(InputError, match="missing reference"):
        Jury([judge(ScriptedBackend(default=verdict(1)), "a")]).score(items)


def test_a_logprobs_member_is_refused_because_a_json_verdict_must_be_generated():
    with pytest.raises(JudgeblenderError, match="JSON verdict, which must be generated"):
        Jury([judge(ScriptedBackend(default=verdict(1)), "a", mode="logprobs")])


def test_duplicate_item_ids_are_refused():
    with pytest.raises(InputError, match="a unique id per item"):
        Jury([judge(ScriptedBackend(default=verdict(1)), "a")]).score([ITEMS[0], ITEMS[0]])


def test_items_without_ids_are_numbered_from_one():
    items = [{k: v for k, v in it.items() if k != "id"} for it in ITEMS]
    results = Jury([judge(ScriptedBackend(default=verdict(1)), "a")]).score(items)
    assert [r.item_id for r in results] == ["1", "2"]


def test_the_prompt_carries_the_item_fields_and_asks_for_the_schema():
    backend = ScriptedBackend(default=verdict(1))
    Jury([judge(backend, "a")]).score(ITEMS[:1])
    request = backend.calls[0]
    assert "Reference answer: Paris" in request.messages[-1].content
    assert request.json_schema == get_template("factual-accuracy").steps[0].json_schema


def test_a_second_run_with_the_same_store_makes_no_calls(tmp_path):
    path = tmp_path / "jury.sqlite"
    backend = ScriptedBackend(rules=[{"contains": "Paris", "output": verdict(0.9)}], default="no verdict")
    with CallStore(path) as store:
        first = Jury([judge(backend, "a")], store=store).score(ITEMS)
    calls = len(backend.calls)
    assert calls == 3  # Paris once; Hamlet twice (invalid, retried once)
    with CallStore(path) as store:
        second = Jury([judge(backend, "a")], store=store).score(ITEMS)
    assert len(backend.calls) == calls
    assert [(r.score, r.judges["scripted:a/factual-accuracy/generate"].invalid_reason) for r in second] == \
           [(r.score, r.judges["scripted:a/factual-accuracy/generate"].invalid_reason) for r in first]
    assert second[1].score is None and "no JSON object found" in second[1].reason + \
        second[1].judges["scripted:a/factual-accuracy/generate"].invalid_reason


def test_ascore_runs_inside_an_event_loop_and_agrees_with_score():
    def make():
        return Jury([judge(ScriptedBackend(rules=[{"contains": "Paris", "output": verdict(1.0)}],
                                           default=verdict(0.0)), "a"),
                     judge(ScriptedBackend(default=verdict(0.5)), "b")], pooling="median")

    async def main():
        # two juries at once in one loop: score() could not be called here (asyncio.run nests)
        return await asyncio.gather(make().ascore(ITEMS), make().ascore(ITEMS))

    first, second = asyncio.run(main())
    expected = make().score(ITEMS)
    assert [r.score for r in first] == [r.score for r in second] == [r.score for r in expected] == [0.75, 0.25]


def test_arun_reports_per_judge_stats():
    run = asyncio.run(Jury([judge(ScriptedBackend(default="nonsense"), "a", invalid_policy="no-retry"),
                            judge(ScriptedBackend(default=verdict(0.2)), "b")]).arun(ITEMS))
    a, b = run.stats["scripted:a/factual-accuracy/generate"], run.stats["scripted:b/factual-accuracy/generate"]
    assert (a.judged, a.invalid_outputs, a.calls_made) == (0, 2, 2)
    assert (b.judged, b.invalid_outputs, b.calls_made) == (2, 0, 2)


# ---------------------------------------------------------------------------------------------
# a served judge: the schema travels as response_format
# ---------------------------------------------------------------------------------------------
def test_a_served_judge_is_sent_the_verdict_schema_as_response_format(monkeypatch):
    from openai_server import OpenAITestServer

    monkeypatch.setenv("JURY_TEST_KEY", "sk-test")
    answers = {"Paris": verdict(1.0, "same city"), "Hamlet": '{"score": 0.0, "reason": "wrong author",}'}
    with OpenAITestServer(answers=answers, default_answer="not JSON") as srv:
        spec = JudgeSpec("openai:test-model", prompt="factual-accuracy",
                         options={"base_url": srv.base_url, "api_key_env": "JURY_TEST_KEY"})
        results = Jury([spec]).score(ITEMS)
        bodies = [r.body for r in srv.requests if r.method == "POST"]
    assert [r.score for r in results] == [1.0, 0.0]  # the trailing comma was repaired
    assert results[1].judges["openai:test-model/factual-accuracy/generate"].reason == "wrong author"
    fmt = bodies[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"] == get_template("factual-accuracy").steps[0].json_schema
    assert fmt["json_schema"]["name"]
    assert len(bodies) == 2


# ---------------------------------------------------------------------------------------------
# the real embedded model: the grammar from the schema makes its output parse
# ---------------------------------------------------------------------------------------------
@pytest.mark.model
@pytest.mark.parametrize("prompt", ["answer-correctness", "factual-accuracy"])
def test_embedded_model_under_the_schema_grammar_gives_valid_verdicts(tmp_path, prompt):
    # one thread: on a small shared machine two llama.cpp threads wait on each other
    spec = JudgeSpec("llamacpp:default", prompt=prompt, invalid_policy="no-retry", options={"n_threads": 1})
    jury = Jury([spec], store=tmp_path / "calls.sqlite")
    results = jury.score(ITEMS[:1])
    v = results[0].judges[f"llamacpp:default/{prompt}/generate"]
    assert v.invalid_reason is None, v.raw_output
    parsed = json.loads(v.raw_output)  # plain JSON, no repair needed
    assert set(parsed) == {"score", "reason"} and isinstance(parsed["reason"], str)
    assert 0.0 <= v.score <= 1.0 and results[0].score == v.score


# ---------------------------------------------------------------------------------------------
# `judgeblender grade` and the agreement between jury members
# ---------------------------------------------------------------------------------------------
from judgeblender.jury.grading import jury_agreement  # noqa: E402
from judgeblender.jury import ItemResult, JudgeVerdict  # noqa: E402


def results_from(scores: dict[str, list[float | None]]) -> list[ItemResult]:
    n = len(next(iter(scores.values())))
    return [ItemResult(str(i), None, None, {j: JudgeVerdict(s[i], None, None, None) for j, s in scores.items()})
            for i in range(n)]


def test_agreement_is_krippendorffs_interval_alpha_worked_by_hand():
    # values 0,1,1 / 0,1,0: D_o = 2/6 (one disagreeing unit), D_e = 18/30; alpha = 1 - (1/3)/(3/5) = 4/9
    a = jury_agreement(results_from({"a": [0.0, 1.0, 1.0], "b": [0.0, 1.0, 0.0]}))
    assert a["alpha"] == pytest.approx(4 / 9) and a["pairable_items"] == 3


def test_agreement_treats_an_abstention_as_missing_not_as_zero():
    a = jury_agreement(results_from({"a": [0.0, 1.0, 1.0], "b": [0.0, 1.0, None]}))
    assert a["alpha"] == pytest.approx(1.0) and a["pairable_items"] == 2


@pytest.mark.parametrize("scores, note", [
    ({"a": [0.2, 0.9]}, "one jury member"),
    ({"a": [0.2, 0.9], "b": [None, 0.9]}, "1 items scored by two or more members"),
    ({"a": [0.5, 0.5], "b": [0.5, 0.5]}, "every valid score is the same"),
])
def test_agreement_undefined_cases_say_why(scores, note):
    a = jury_agreement(results_from(scores))
    assert a["alpha"] is None and note in a["note"]


@pytest.fixture
def cli(tmp_path):
    """A local typer app with only `grade`, and scripted models reachable as `jt:NAME`."""
    import typer
    from typer.testing import CliRunner

    from judgeblender.backends import registry
    from judgeblender.cli import grade

    app = typer.Typer()
    grade.register(app)

    @app.callback()
    def _root() -> None:  # keeps `grade` a subcommand
        pass

    backends = {
        "good": ScriptedBackend(rules=[{"contains": "Paris", "output": verdict(1.0, "same city")},
                                       {"contains": "Dickens", "output": verdict(0.0, "wrong author")}],
                                default=verdict(0.5, "partly")),
        "harsh": ScriptedBackend(rules=[{"contains": "Paris", "output": verdict(0.8, "right")},
                                        {"contains": "Dickens", "output": verdict(0.0, "wrong")}],
                                 default=verdict(0.0, "no")),
        "broken": ScriptedBackend(default='```json\n{"score": 0.7, "reason": "cut'),
    }
    registry.register("jt", lambda name, **_: backends[name])
    items = tmp_path / "items.jsonl"
    items.write_text("\n".join(json.dumps(it) for it in ITEMS + [
        {"id": "legs", "input": "How many legs has a spider?", "output": "Six or eight.", "reference": "Eight"}]) + "\n")

    def run(*args):
        return CliRunner().invoke(app, ["grade", *map(str, args)])

    yield run, backends, items, tmp_path
    registry.unregister("jt")


def test_grade_writes_pooled_scores_and_every_members_reason(cli):
    run, backends, items, tmp = cli
    out = tmp / "graded.jsonl"
    r = run("--items", items, "--judge", "jt:good", "--judge", "jt:harsh", "--judge", "jt:broken",
            "--pooling", "mean", "--out", out, "--store", tmp / "s.sqlite", "--no-progress", "--invalid", "no-retry")
    assert r.exit_code == 0, r.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(x["id"], x["score"]) for x in lines] == [("paris", 0.9), ("hamlet", 0.0), ("legs", 0.25)]
    paris = lines[0]
    assert paris["judges"]["jt:good/factual-accuracy/generate"] == {"score": 1.0, "reason": "same city",
                                                                    "invalid_reason": None}
    broken = paris["judges"]["jt:broken/factual-accuracy/generate"]
    assert broken["score"] is None and "the object never closes" in broken["invalid_reason"]
    assert broken["raw_output"].startswith("```json")
    assert paris["abstained"] == ["jt:broken/factual-accuracy/generate"]
    assert "items: 3; pooled (mean): 3" in r.output
    assert "invalid jt:broken/factual-accuracy/generate: 3 items: verdict: broken JSON" in r.output
    # good 1, 0, .5 against harsh .8, 0, 0; the broken member has no values
    expected = jury_agreement(results_from({"g": [1.0, 0.0, 0.5], "h": [0.8, 0.0, 0.0]}))["alpha"]
    assert f"Krippendorff's alpha (interval) = {expected:.3f} over 3 items" in r.output


def test_grade_pairs_every_judge_with_every_prompt_and_reuses_the_store(cli):
    run, backends, items, tmp = cli
    args = ["--items", items, "--judge", "jt:good", "--judge", "jt:harsh", "--prompt", "factual-accuracy",
            "--prompt", "answer-correctness", "--out", tmp / "o.jsonl", "--store", tmp / "s.sqlite",
            "--no-progress", "--json"]
    first = run(*args)
    assert first.exit_code == 0, first.output
    calls = sum(len(b.calls) for b in backends.values())
    assert calls == 12  # 2 models x 2 prompts x 3 items
    summary = json.loads(first.stdout[first.stdout.index("{"):])
    assert {m["judge"] for m in summary["judges"]} == {
        "jt:good/factual-accuracy/generate", "jt:good/answer-correctness/generate",
        "jt:harsh/factual-accuracy/generate", "jt:harsh/answer-correctness/generate"}
    assert summary["agreement"]["members"] == 4 and summary["agreement"]["alpha"] is not None
    second = run(*args)
    assert second.exit_code == 0 and sum(len(b.calls) for b in backends.values()) == calls
    again = json.loads(second.stdout[second.stdout.index("{"):])
    assert all(m["calls_made"] == 0 and m["cache_hits"] == 3 for m in again["judges"])


def test_grade_hard_vote_reports_verdicts(cli):
    run, _, items, tmp = cli
    r = run("--items", items, "--judge", "jt:good", "--judge", "jt:harsh", "--pooling", "hard-vote",
            "--threshold", "0.5", "--out", tmp / "o.jsonl", "--store", tmp / "s.sqlite", "--no-progress")
    assert r.exit_code == 0, r.output
    lines = [json.loads(line) for line in (tmp / "o.jsonl").read_text().splitlines()]
    assert [(x["score"], x["verdict"], x["reason"]) for x in lines] == [
        (1.0, True, None), (0.0, False, None), (0.5, None, "tie")]
    assert "verdicts: 1 pass, 1 fail" in r.output


@pytest.mark.parametrize("content, where, message", [
    ('{"input": "q", "output": "a", "reference": "r"}\n{"input": "q", "output": \n', "items.jsonl:2",
     "expected a JSON object per line"),
    ('{"input": "q", "output": "a", "reference": "r"}\n\n["q", "a"]\n', "items.jsonl:3", "expected a JSON object"),
    ('{"input": "q", "output": "a"}\n', "items.jsonl:1", "expected the fields input, output, reference, got 'no reference'"),
    ('{"id": 7, "input": "q", "output": "a", "reference": "r"}\n{"id": "7", "input": "q", "output": "b", "reference": "r"}\n',
     "items.jsonl:2", "a unique id per item, got '7 (also on line 1)'"),
    ("\n\n", "items.jsonl", "expected at least one item"),
])
def test_grade_names_the_file_and_line_of_a_bad_item_before_calling_any_model(cli, content, where, message):
    run, backends, items, tmp = cli
    items.write_text(content)
    r = run("--items", items, "--judge", "jt:good", "--out", tmp / "o.jsonl", "--store", tmp / "s.sqlite")
    assert isinstance(r.exception, InputError)
    assert str(r.exception).startswith(str(tmp / where)) and message in str(r.exception)
    assert backends["good"].calls == [] and not (tmp / "o.jsonl").exists()


def test_grade_refuses_a_repeated_judge_a_non_rubric_and_mixed_scales(cli):
    run, _, items, tmp = cli
    common = ["--items", items, "--out", tmp / "o.jsonl", "--store", tmp / "s.sqlite"]
    r = run(*common, "--judge", "jt:good", "--judge", "jt:good")
    assert isinstance(r.exception, JudgeblenderError) and "share the id" in str(r.exception)
    r = run(*common, "--judge", "jt:good", "--prompt", "umbrela")
    assert "not a rubric" in str(r.exception)
    five = tmp / "five.toml"
    five.write_text(Path(get_template("answer-correctness").path).read_text()
                    .replace('name = "answer-correctness"', 'name = "five"')
                    .replace("score_range = [0.0, 1.0]", "score_range = [1.0, 5.0]"))
    r = run(*common, "--judge", "jt:good", "--prompt", "factual-accuracy", "--prompt", five)
    assert "different scales" in str(r.exception)
    r = run(*common, "--judge", "jt:good", "--pooling", "average")
    assert "unknown pooling 'average'" in str(r.exception)
