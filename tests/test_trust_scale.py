"""Answers on another scale are invalid (issue 20, part 1).

The scale is the step's own: 0-3 for the relevance prompts, 1-3 for the second step of
sun-two-step. An answer that states its score on another scale, or not as one integer of the
step's scale, is invalid with a reason, never its numerator or first digit. Explicit cases per
class (including ones that hold), then properties over answers built by construction: a stated
score plus distractors from these classes, in several wrappers, parse to that score or to
invalid, never to another number. Derandomised under CI (tests/conftest.py).
"""

from __future__ import annotations

import pytest

from openai_server import OpenAITestServer

from judgeblender.calls import CallRequest, CallResult, Message
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.judges.engine import interpret
from judgeblender.pairs import Pair, read_corpus, read_queries
from judgeblender.parse import parse_grade
from judgeblender.prompts import get_template

hypothesis = pytest.importorskip("hypothesis", reason="needs the hypothesis package ([dev] extra)")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

RELEVANCE = (0, 1, 2, 3)
SUN_GRADE = (1, 2, 3)


def invalid(text: str, scale=RELEVANCE) -> str:
    result = parse_grade(text, scale)
    assert result.label is None, f"{text!r} read as {result.label}"
    return result.invalid_reason


# ---------------------------------------------------------------------------------------------
# fractions and "N out of M"
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,label", [
    ("2/3", 2), ("2 out of 3", 2), ("Final score: 3/3", 3), ("Score: 0 / 3", 0), ("Relevance: 1 (out of 3)", 1),
    ("The passage is partly relevant: 2/3", 2),
])
def test_a_fraction_of_the_scales_top_reads_as_its_numerator(text, label):
    assert parse_grade(text).label == label


@pytest.mark.parametrize("text,denominator", [
    ("2/4", "4"), ("3 out of 5", "5"), ("1/10", "10"), ("Final score: 2 (out of 4)", "4"), ("Score: 1/2", "2"),
    ("Score: 3 points out of 10", "10"), ("I'd give it 2 out of a possible 5.", "5"), ("Relevance: **2**/5", "5"),
])
def test_a_fraction_of_another_denominator_is_invalid_not_its_numerator(text, denominator):
    assert f"out of {denominator}" in invalid(text)


def test_a_score_out_of_the_zero_to_three_top_is_read_on_the_one_to_three_step_too():
    assert parse_grade("Grade: 2/3", SUN_GRADE).label == 2
    assert "out of 4" in invalid("Grade: 2/4", SUN_GRADE)


# ---------------------------------------------------------------------------------------------
# ranges, choices, decimals
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "Final score: 2-3", "Final score: 2 to 3", "Score: 1–2", "Relevance: 2 or 3", "##final score: **2**-3",
    "O: 1 - 2",
])
def test_a_range_or_a_choice_as_the_answer_is_invalid(text):
    assert "range or a choice" in invalid(text)


@pytest.mark.parametrize("text", ["2-3", "I would say 2 to 3", "Somewhere in 1-2."])
def test_a_bare_range_is_never_read_as_one_of_its_ends(text):
    invalid(text)


@pytest.mark.parametrize("text", ["2,5", "Score: 2,5", "Final score: 1,0", "The relevance is 2,5 overall"])
def test_a_decimal_comma_is_invalid_never_its_first_digit(text):
    assert "decimal comma" in invalid(text)


@pytest.mark.parametrize("text,label", [
    ("Final score: 2 - the passage answers part of it", 2),
    ("Score: 2, because it answers the question", 2),
    ("Final score: 3.", 3),
    ("Score: 2.0", 2),
])
def test_a_score_followed_by_punctuation_or_prose_still_reads(text, label):
    assert parse_grade(text).label == label


@pytest.mark.parametrize("text", ["2.5", "Final score: 2.5", "5", "Score: 2%", "Score: 75 percent"])
def test_a_decimal_an_out_of_scale_number_or_a_percentage_is_invalid(text):
    invalid(text)


# ---------------------------------------------------------------------------------------------
# a number qualified by another scale
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "1 (on a 1-5 scale)", "2 on a scale of 1-10", "Score (1-5): 2", "Relevance on a scale of 1 to 5: 2",
    "I would rate this 2 on a 5-point scale", "Score out of 5: 3", "Final score: 2 (on a scale of 10)",
    '{"score": 2, "scale": "1-5"}', "Final score: 1 (scale 1-4)",
])
def test_a_number_qualified_by_another_scale_is_invalid(text):
    assert "another scale" in invalid(text) or "out of" in invalid(text)


@pytest.mark.parametrize("text,label", [
    ("2 (on a 0-3 scale)", 2), ("Score (0-3): 2", 2), ("Final score: 3 (scale 0-3)", 3),
    ("On a scale of 0 to 3, this passage is a 1 here", 1), ("Final score: 2/3 (on a 0-3 scale)", 2),
    ("Score: 2. On a 1-5 scale it would be a 3.", 2),  # another scale in another sentence
    ("I rate it 2 on a 4-point scale", 2),
])
def test_a_number_qualified_by_the_steps_own_scale_stays_valid(text, label):
    assert parse_grade(text).label == label


def test_the_zero_to_three_scale_is_another_scale_for_the_one_to_three_step():
    assert "another scale" in invalid("Grade: 2 (on a 0-3 scale)", SUN_GRADE)
    assert parse_grade("Grade: 2 (on a 1-3 scale)", SUN_GRADE).label == 2
    assert "not a label" in invalid("Grade: 0", SUN_GRADE)


# ---------------------------------------------------------------------------------------------
# what held before holds
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,label", [
    ("٢", 2), ("Final score: ३", 3), ("Score: ２", 2), ("٣/٣", 3), ("##final score: ১", 1),
])
def test_digits_of_other_scripts_read_as_their_value(text, label):
    assert parse_grade(text).label == label


def test_digits_of_other_scripts_on_another_scale_are_invalid_too():
    assert "out of 5" in invalid("٣/٥")


@pytest.mark.parametrize("text,label", [
    ("Score: 1\nScore: 2", 2),
    ("Score: 2/4\nOn reflection, score: 2", 2),  # the last keyed answer is on the scale
    ("Provide each score in the format of: ##final score: 0\n##final score: 2", 2),
])
def test_the_last_match_still_wins(text, label):
    assert parse_grade(text).label == label


def test_a_last_answer_on_another_scale_is_invalid_even_after_a_valid_one():
    assert "out of 4" in invalid("Score: 2\nActually, score: 2/4")


UMBRELA_RESTATED = (
    "Given a query and a passage, you must provide a score on an integer scale of 0 to 3 with the "
    "following meanings:\n0 = represent that the passage has nothing to do with the query,\n"
    "1 = represents that the passage seems related to the query but does not answer it,\n"
    "2 = represents that the passage has some answer for the query,\n"
    "3 = represents that the passage is dedicated to the query and contains the exact answer.\n")
SUN_RESTATED = ("3 = it contains the exact, clear answer and is mainly about the query.\n"
                "2 = it contains part of the answer, or the answer is mixed with other information.\n"
                "1 = it is on the topic of the query but gives no direct answer.\n")


@pytest.mark.parametrize("text,scale,label", [
    (UMBRELA_RESTATED + "##final score: 1", RELEVANCE, 1),
    (UMBRELA_RESTATED + "\n2", RELEVANCE, 2),
    (UMBRELA_RESTATED + "I think this one is a 2 here", RELEVANCE, 2),
    (SUN_RESTATED + "Grade: 3", SUN_GRADE, 3),
    (SUN_RESTATED + "It gives part of the answer, so 2 here", SUN_GRADE, 2),
    ("Scale: 0, 1, 2 or 3. My answer: 0", RELEVANCE, 0),
])
def test_scale_descriptions_in_restated_instructions_are_not_read_as_answers(text, scale, label):
    assert parse_grade(text, scale).label == label


# ---------------------------------------------------------------------------------------------
# every caller passes the step's scale
# ---------------------------------------------------------------------------------------------
def _generated(text: str) -> tuple[CallRequest, CallResult]:
    request = CallRequest((Message("user", "q"),), mode="generate", max_tokens=20)
    return request, CallResult(text=text, extra={"finish_reason": "stop"})


def test_the_engine_reads_sun_two_steps_grade_on_its_own_one_to_three_scale():
    template = get_template("sun-two-step")
    grade = template.steps[1]
    outcome = interpret(grade, template.scale, *_generated("Grade: 2 (on a 0-3 scale)"))
    assert outcome.value is None and "not the scale 1-3" in outcome.invalid_reason
    assert interpret(grade, template.scale, *_generated("Grade: 3/3")).value == 3


PAIRS = [Pair("q1", "d1"), Pair("q1", "d2"), Pair("q2", "d3"), Pair("q2", "d4")]


def test_a_served_model_that_answers_on_another_scale_gives_invalid_labels_not_numerators(tiny):
    answers = {"flakes": "Final score: 3 out of 5", "freshwater": "Relevance: 2/3",
               "330 metres": "I'd rate it 1 (on a 1-5 scale)", "capital": "##final score: 2,5"}
    with OpenAITestServer(answers, default_answer="?") as server:
        opts = {"base_url": server.base_url, "timeout_s": 5.0, "backoff_base_s": 0.01, "concurrency": 2}
        judge = Judge(JudgeSpec(model="openai:test-model", mode="generate", invalid_policy="no-retry",
                                options=opts))
        run = judge_pairs([judge], PAIRS, read_queries(tiny / "queries.tsv"), read_corpus(tiny / "corpus.jsonl"))
    judged = run.judgments[judge.id]
    assert [judged[p].label for p in PAIRS] == [None, 2, None, None]
    assert "out of 5" in judged[PAIRS[0]].invalid_reason
    assert "another scale" in judged[PAIRS[2]].invalid_reason
    assert "decimal comma" in judged[PAIRS[3]].invalid_reason


# ---------------------------------------------------------------------------------------------
# properties: a stated score plus distractors, in wrappers
# ---------------------------------------------------------------------------------------------
SCRIPTS = ["0123456789", "٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "０１２３４５６７８９", "০১২৩৪৫৬৭৮৯"]
scales = st.sampled_from([RELEVANCE, SUN_GRADE])
WRAPPERS = [
    "Final score: {s}", "##final score: {s}", "**Final score:** {s}", "**Final score**: {s}", "## Final score (O): {s}",
    'final_score = {s}', "O: {s}", "Score: {s}", "Score: **{s}**", "Relevance: [{s}]", "Grade: {s}",
    '{{"score": {s}}}', '```json\n{{"reason": "see above", "score": {s}}}\n```', '{{"relevance": "{s}"}}',
    "{s}", "**{s}**", "{s}/{top}", "{s} out of {top}", "Final score: {s}/{top}", "Score: {s} (on a {lo}-{hi} scale)",
    "I give it a {s} here",
]


@st.composite
def distractors(draw, scale):
    """A text stating some number on another scale, or not as one integer of `scale`."""
    lo, top = min(scale), max(scale)
    a = draw(st.integers(0, 12))
    b = draw(st.integers(0, 12))
    other_top = draw(st.integers(2, 12).filter(lambda d: d != top))
    other = draw(st.tuples(st.integers(0, 2), st.integers(4, 12)).filter(lambda r: r != (lo, top)))
    kind = draw(st.sampled_from([
        "{a}/{d}", "{a} out of {d}", "{a}-{b}", "{a} to {b}", "{a},{b}", "{a} (on a {l}-{h} scale)",
        "{a} on a scale of {l}-{h}", "{a}.5", "Score: {a}/{d}", "Relevance: {a}-{b}", "Score: {a},{b}",
        "Rating: {a} (on a {l}-{h} scale)", "It would be {a} on a {p}-point scale", "scale of {l} to {h}",
        "on a scale of {lo} to {top}", "{lo} = irrelevant, {top} = perfectly relevant",
    ]))
    points = draw(st.integers(2, 12).filter(lambda p: p != len(scale)))
    return kind.format(a=a, b=b, d=other_top, l=other[0], h=other[1], p=points, lo=lo, top=top)


def in_script(text: str, digits: str) -> str:
    return text.translate(str.maketrans("0123456789", digits))


@st.composite
def answers(draw):
    scale = draw(scales)
    stated = draw(st.sampled_from(scale))
    wrapper = draw(st.sampled_from(WRAPPERS))
    core = wrapper.format(s=stated, top=max(scale), lo=min(scale), hi=max(scale))
    if draw(st.booleans()):
        core = in_script(core, draw(st.sampled_from(SCRIPTS)))
    before = draw(st.lists(distractors(scale), max_size=3))
    after = draw(st.lists(distractors(scale), max_size=2))
    glue = draw(st.sampled_from(["\n", "\n\n", ". ", " ", "; "]))
    prose = draw(st.sampled_from(["", "The passage mentions the topic. ", "Considering M and T, "]))
    text = glue.join([*before, prose + core, *after])
    return scale, stated, text


@settings(max_examples=150)
@given(answers())
def test_an_answer_built_from_a_stated_score_and_distractors_reads_as_that_score_or_invalid(case):
    scale, stated, text = case
    result = parse_grade(text, scale)
    assert result.label in (stated, None), f"{text!r} read as {result.label}, stated {stated}"
    assert (result.label is None) == (result.invalid_reason is not None)


@settings(max_examples=80)
@given(scales.flatmap(lambda scale: st.tuples(st.just(scale), st.lists(distractors(scale), min_size=1, max_size=4),
                                              st.sampled_from(["\n", ". ", " ", "; "]))))
def test_distractors_alone_never_become_a_label(case):
    scale, parts, glue = case
    text = glue.join(parts)
    result = parse_grade(text, scale)
    assert result.label is None, f"{text!r} read as {result.label}"
    assert result.invalid_reason


@settings(max_examples=80)
@given(scales.flatmap(lambda scale: st.tuples(st.just(scale), st.sampled_from(scale), st.sampled_from(WRAPPERS),
                                              st.sampled_from(SCRIPTS))))
def test_a_stated_score_alone_in_any_wrapper_and_script_reads_as_itself(case):
    scale, stated, wrapper, digits = case
    text = in_script(wrapper.format(s=stated, top=max(scale), lo=min(scale), hi=max(scale)), digits)
    assert parse_grade(text, scale).label == stated, text


@pytest.mark.parametrize("text", ["Final score: " + "9" * 400, "9" * 400, "Score: 1" + "0" * 400 + "/3",
                                  "The passage rates " + "7" * 320 + " out of 3"])
def test_a_number_too_large_for_a_float_is_invalid_not_a_traceback(text):
    result = parse_grade(text)
    assert result.label is None and "is not a label" in result.invalid_reason


def test_every_label_pattern_that_begins_with_a_number_begins_where_a_digit_run_begins():
    """Tried at every digit of a 300-digit run, a pattern that begins with a number scans the
    rest of the run each time (quadratic: a 40 KB answer of such runs took 3 s on the event
    loop). Each such pattern must refuse to start inside a run."""
    import re as _re

    from judgeblender.parse import labels

    patterns = [v for v in vars(labels).values() if isinstance(v, _re.Pattern)]
    patterns += [p for v in vars(labels).values() if isinstance(v, list) for p in v if isinstance(p, _re.Pattern)]
    patterns += [p for v in vars(labels).values() if isinstance(v, list) for item in v if isinstance(item, tuple)
                 for p in item if isinstance(p, _re.Pattern)]
    numeric = [p.pattern for p in patterns if _re.match(r"\(?-?\\d|\(\?<!\\d\)", p.pattern)]
    assert len(numeric) >= 5
    assert all(p.startswith((labels._AT_RUN_START, "(?<![\\w.])")) for p in numeric), numeric
    assert parse_grade(("1" * 300 + " ") * 130 + "x").label is None


# -- found by a second adversarial pass over the merged fixes ------------------------------------
@pytest.mark.parametrize("text", [
    "Relevance score: 3 on a five-point scale.", "Score: 3 of 5", "Score: 3 out of five", "Rating: 3 (Likert 1-5)",
    "Score: 2 [1-5]", "Final score: 2 (scale 1..5)", "Score: 3 (max 5)", "2 on a 5-level scale",
    "3 (according to our 1-5 rubric)", "Final score: 1 → 2 (after re-reading)", "Score: 3 -> 2", "Score: 1½",
])
def test_scales_named_in_words_brackets_or_arrows_are_invalid(text):
    assert parse_grade(text).label is None, parse_grade(text)


@pytest.mark.parametrize("text,label", [
    ("Score: 3\nConfidence score: 1", 3), ("Score: 2\nCertainty score: 0", 2), ("Score: 2 of 3", 2),
    ("Score: 2 out of three", 2), ("I rate it 2 on a 4-point scale", 2), ("Score (max 3): 1", 1),
])
def test_a_confidence_score_is_not_the_answer_and_the_scales_own_words_still_read(text, label):
    assert parse_grade(text).label == label
