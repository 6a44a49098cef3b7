"""JSON verdicts take the model's last word (issue 20, part 4).

The candidates are the JSON objects in the answer that validate against the step's schema; an
object identical to the template's own example is dropped; the verdict is the last remaining
candidate; a key repeated in one object with different values is invalid with the reason.
Braces nested or inside strings do not confuse the scanner, and its work is bounded by a
constant times the answer's length (counted, not timed).
"""

from __future__ import annotations

import json

import pytest

from openai_server import OpenAITestServer

from judgeblender.judges import JudgeSpec
from judgeblender.judges.engine import step_examples
from judgeblender.jury import Jury
from judgeblender.parse import verdict as verdict_module
from judgeblender.parse.verdict import parse_verdict, template_examples
from judgeblender.prompts import get_template, list_templates

SCHEMA = {"type": "object", "properties": {"reason": {"type": "string"}, "score": {"type": "number"}},
          "required": ["reason", "score"]}
LEVELS = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
EXAMPLE = {"reason": "The answer names the same city as the key.", "score": 1}


def v(score, reason="r"):
    return json.dumps({"reason": reason, "score": score})


def read(text, **kw):
    kw.setdefault("score_range", [0, 1])
    return parse_verdict(text, SCHEMA, **kw)


# ---------------------------------------------------------------------------------------------
# the last candidate wins
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,score", [
    (f"First thought: {v(0.2, 'draft')}\nOn reflection: {v(0.9, 'final')}", 0.9),
    (f"{v(0.1)}\n{v(0.4)}\n```json\n{v(0.7)}\n```", 0.7),
    (f'{v(0.9)} {{"note": "that was my verdict"}}', 0.9),  # a later object off the schema is no candidate
    (f'{{"score": 0.3}} then {v(0.6)} and {{"reason": "no score"}}', 0.6),
    (f"{v(0.5)}", 0.5),
])
def test_the_verdict_is_the_last_object_that_matches_the_schema(text, score):
    assert read(text).score == score


def test_a_last_verdict_off_the_scale_is_invalid_not_replaced_by_an_earlier_one():
    result = read(f"{v(0.5)}\nActually: {v(7)}")
    assert result.score is None and "outside" in result.invalid_reason


def test_a_last_verdict_on_integer_levels_is_checked_against_the_levels():
    text = '{"score": 2} ... {"score": 5}'
    result = parse_verdict(text, LEVELS, reason_field=None, levels=[0, 1, 2, 3])
    assert result.score is None and "not a level" in result.invalid_reason
    assert parse_verdict('{"score": 5} ... {"score": 2}', LEVELS, reason_field=None, levels=[0, 1, 2, 3]).score == 2


def test_an_object_inside_a_verdict_is_part_of_it_not_a_later_verdict():
    text = '{"reason": "as the key says", "score": 0, "quoted": {"reason": "y", "score": 1}}'
    assert read(text).score == 0


def test_a_verdict_wrapped_in_another_object_does_not_match_the_schema():
    result = read('{"verdict": {"reason": "x", "score": 0.5}}')
    assert result.score is None and "does not match the schema" in result.invalid_reason


# ---------------------------------------------------------------------------------------------
# the template's own example is not a verdict
# ---------------------------------------------------------------------------------------------
def test_an_object_identical_to_the_templates_example_is_dropped():
    text = f"The format is {json.dumps(EXAMPLE)}. My verdict: {v(0, 'wrong city')}"
    assert read(text, examples=[EXAMPLE]).score == 0
    text = f"My verdict: {v(0, 'wrong city')} (format: {json.dumps(EXAMPLE)})"
    assert read(text, examples=[EXAMPLE]).score == 0  # dropped even as the last object


def test_an_answer_that_only_repeats_the_example_is_invalid():
    for text in (json.dumps(EXAMPLE), f"Sure: {json.dumps(EXAMPLE)}", json.dumps(EXAMPLE, indent=2)):
        result = read(text, examples=[EXAMPLE])
        assert result.score is None and "the template's own example" in result.invalid_reason


def test_an_object_that_differs_from_the_example_in_any_field_is_a_verdict():
    assert read(v(1, "The answer names the same city."), examples=[EXAMPLE]).score == 1
    assert read(v(0.5, EXAMPLE["reason"]), examples=[EXAMPLE]).score == 0.5


def test_the_example_is_read_from_the_steps_prompt_text_not_from_an_item():
    assert template_examples('Reply like this: {"reason": "The answer names the same city as the key.", '
                             '"score": 1}') == [EXAMPLE]
    for template in list_templates():  # built-in examples hold placeholders, not JSON
        for step in template.steps:
            assert step_examples(template, step) == []


TEMPLATE = '''name = "city-check"
inputs = ["input", "output", "reference"]
score_range = [0.0, 1.0]

[[steps]]
id = "verdict"
output = "json"
schema = { type = "object", properties = { reason = { type = "string" }, score = { type = "number" } }, required = ["reason", "score"] }
system = \'\'\'Grade the answer against the key. Reply with JSON like this example: {{"reason": "The answer names the same city as the key.", "score": 1}}\'\'\'
user = \'\'\'Question: {input}
Key: {reference}
Answer: {output}\'\'\'
'''


def test_a_jury_member_that_echoes_its_templates_example_abstains_and_one_that_goes_on_is_read(tmp_path):
    path = tmp_path / "city-check.toml"
    path.write_text(TEMPLATE, encoding="utf-8")
    echo = json.dumps(EXAMPLE)
    answers = {"Madrid": v(0.0, "wrong city"),  # the item's own JSON is no example: only the template's is
               "Lyon": echo,  # only the example: no verdict
               "Paris, the capital": f"Following {echo}, here is mine: {v(0.9, 'same city')}"}
    items = [{"id": "lyon", "input": "Capital of France?", "output": "Lyon", "reference": "Paris"},
             {"id": "paris", "input": "Capital of France?", "output": "Paris, the capital", "reference": "Paris"},
             {"id": "madrid", "input": "Capital of France?", "output": f"Madrid {v(0.0, 'wrong city')}",
              "reference": "Paris"}]
    with OpenAITestServer(answers=answers, default_answer="?") as srv:
        spec = JudgeSpec("openai:test-model", prompt=str(path), invalid_policy="no-retry",
                         options={"base_url": srv.base_url, "api_key_env": "TRUST_VERDICTS_KEY"})
        import os
        os.environ["TRUST_VERDICTS_KEY"] = "sk-test"
        try:
            results = Jury([spec]).score(items)
        finally:
            del os.environ["TRUST_VERDICTS_KEY"]
    member = "openai:test-model/city-check/generate"
    lyon, paris, madrid = results
    assert lyon.score is None and "the template's own example" in lyon.judges[member].invalid_reason
    assert paris.score == 0.9 and paris.judges[member].reason == "same city"
    assert madrid.score == 0.0


# ---------------------------------------------------------------------------------------------
# a key repeated with different values
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,key", [
    ('{"score": 1, "score": 3}', "score"),
    ('{"reason": "a", "reason": "b", "score": 0.5}', "reason"),
    ('{"reason": "a", "score": 0.5, "meta": {"n": 1, "n": 2}}', "n"),
    (f'{v(0.2)} and then {{"reason": "r", "score": 0.4, "score": 0.9}}', "score"),
    ('{"score": 1, "score": 1.0, "reason": "r"}', "score"),  # 1 and 1.0 are written differently
])
def test_a_key_repeated_with_different_values_is_invalid(text, key):
    result = parse_verdict(text, SCHEMA, score_range=[0, 3])
    assert result.score is None
    assert f"key {key!r} appears twice with different values" in result.invalid_reason


@pytest.mark.parametrize("text,score", [
    ('{"score": 1, "score": 1, "reason": "r"}', 1.0),
    ('{"reason": "same", "score": 0.5, "reason": "same"}', 0.5),
    (f'{{"reason": "draft", "score": 0.1, "score": 0.2}} Final: {v(0.8)}', 0.8),  # superseded
])
def test_an_identical_repeat_or_a_superseded_contradiction_is_fine(text, score):
    assert parse_verdict(text, SCHEMA, score_range=[0, 3]).score == score


# ---------------------------------------------------------------------------------------------
# braces in prose and in strings
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,score,reason", [
    ('I think {it is fine} so: {"reason": "uses {braces} and \\"quotes\\" }", "score": 0.5}', 0.5,
     'uses {braces} and "quotes" }'),
    ('{Thinking: the key says {"reason": "draft", "score": 0.1}} Final: {"reason": "final", "score": 0.8}', 0.8,
     "final"),
    ('Use {like this: {"reason": "ok", "score": 0.6}', 0.6, "ok"),  # an unclosed brace before
    ('{"reason": "a } closes nothing", "score": 0.3} trailing }}}', 0.3, "a } closes nothing"),
    ('Here: {"reason": "backslash \\\\", "score": 0.4}', 0.4, "backslash \\"),
    ('"stray quote then {"reason": "ok", "score": 0.2}', 0.2, "ok"),
])
def test_nested_braces_and_braces_inside_strings_do_not_confuse_the_scanner(text, score, reason):
    result = read(text)
    assert (result.score, result.reason) == (score, reason)


DEGENERATE = {
    "open braces": "{" * 40_000,
    "balanced deep": "{" * 20_000 + "}" * 20_000,
    "deep valid JSON": '{"a":' * 8_000 + "1" + "}" * 8_000,
    "empty objects": "{}" * 20_000,
    "prose in braces": "{x" * 20_000 + "}" * 20_000,
    "quotes and braces": '"{' * 20_000,
    "unclosed string": '{"reason": "' + "{" * 40_000,
}


@pytest.mark.parametrize("name", sorted(DEGENERATE))
def test_a_degenerate_forty_kilobyte_answer_is_invalid_after_linear_work(name, monkeypatch):
    text = DEGENERATE[name]
    parsed_chars = []
    real_loads, real_json_loads = verdict_module._loads, verdict_module.json.loads

    def counting(real):
        def loads(s, *args, **kwargs):
            parsed_chars.append(len(s))
            return real(s, *args, **kwargs)
        return loads

    monkeypatch.setattr(verdict_module, "_loads", counting(real_loads))
    monkeypatch.setattr(verdict_module.json, "loads", counting(real_json_loads))
    result = read(text)
    assert result.score is None and result.invalid_reason
    # each character is handed to json at most twice per level of braces opened, plus the whole
    # text and the error message: a constant times the length, never the length squared
    assert sum(parsed_chars) <= (2 * (verdict_module._MAX_DEPTH + 1) + 2) * len(text)


# -- found by a second adversarial pass over the merged fixes ------------------------------------
@pytest.mark.parametrize("text", [
    '{"reason": "wrong", "score": 1, "scale": "1-5"}',
    '{"reason": "wrong", "score": 1, "max": 5}',
    '{"reason": "wrong", "score": 1, "out_of": 10}',
    'Score on a 1-5 scale:\n{"reason": "wrong", "score": 1}',
])
def test_a_verdict_stated_on_another_scale_is_invalid(text):
    result = read(text)
    assert result.score is None and "another scale" in result.invalid_reason


@pytest.mark.parametrize("text", [
    '{"reason": "right", "score": 1, "scale": "0-1"}',
    '{"reason": "on a 1-5 scale it would be a 5", "score": 1}',
    'Scale 0 to 1.\n{"reason": "right", "score": 1}',
])
def test_a_verdict_on_the_steps_own_scale_still_reads(text):
    assert read(text).score == 1.0
