"""The label parser: real model outputs from the UMBRELA reproduction's appendix, and its traps."""

import pytest

from judgeblender.parse import parse_grade, parse_yesno

APPENDIX_CASES = [
    ("##final score: 2", 2),  # the requested format
    ("M: 3\nT: 3\nO: 3", 3),  # LLaMA-3-8B example 1
    ("Here are the scores:\nM: 3\nT: 3\nO: 3", 3),  # LLaMA-3-8B example 2
    ("1: 2", 2),  # LLaMA-3-8B example 3: a numbered answer, the value is 2
    ("0", 0),  # LLaMA-3-8B example 4: a bare label
    ("## Step 1: Measure how well the content matches a likely intent of the query (M): 3\n"
     "## Step 2: Measure how trustworthy the passage is (T): 3\n## Step 3: Final score (O): 3", 3),
    ("## Step 1: Consider the underlying intent of the search\nThe intent is to understand income.\n"
     "## Step 2: Measure how well the content matches a likely intent of the query (M)\nM: 2\n"
     "## Step 3: Measure how trustworthy the passage is (T)\nT: 2\n"
     "## Step 4: Consider the aspects above and the relative importance of each, and decide on a final "
     "score (O) O: 2\n##final score: 2", 2),
    ("## M: 3\n## T: 2\n## O: 3\n## final score: 3", 3),
    ("## Step 1: M = 3\n## Step 2: T = 3\n## Step 3: O = 3\n## final score: 3", 3),
    ("##M: 1\n##T: 1\n##O: 1", 1),  # DeepSeek V3 example 1
    ("##M: 0\n##T: 1\n##O: 0\n##final score: 0", 0),  # DeepSeek V3 example 2
    ("The passage explains what goldfish eat in detail.\n##final score: 3", 3),  # reasoning first
]


@pytest.mark.parametrize("text,label", APPENDIX_CASES)
def test_appendix_outputs_parse_to_their_label(text, label):
    assert parse_grade(text).label == label


def test_scale_description_before_the_answer_does_not_win():
    text = "On a scale from 0 to 3, where 0 means irrelevant and 3 perfect, this passage is related.\n\n1"
    assert parse_grade(text).label == 1


def test_final_score_beats_overall_component():
    assert parse_grade("M: 1\nT: 1\nO: 1\n##final score: 3").label == 3
    assert parse_grade("##final score: 3\nO: 1").label == 3


def test_last_final_score_wins_over_restated_instruction():
    text = "Provide each score in the format of: ##final score: 0\n##final score: 2"
    assert parse_grade(text).label == 2


@pytest.mark.parametrize("text,reason", [
    ("", "empty output"),
    ("   \n", "empty output"),
    ("The passage is about fish.", "no label found"),
    ("##final score: 5", "not a label"),
    ("I hesitate between 1 and 2", "ambiguous"),
    ("##final score: 2.5", "not a label"),
])
def test_unparseable_output_is_invalid_never_zero(text, reason):
    result = parse_grade(text)
    assert result.label is None
    assert reason in result.invalid_reason


def test_restricted_label_set_rejects_labels_outside_it():
    assert parse_grade("Grade: 0", scale=(1, 2, 3)).label is None
    assert parse_grade("Grade: 2", scale=(1, 2, 3)).label == 2


@pytest.mark.parametrize("text,value", [
    ("Yes", 1), ("No.", 0), ('"Yes"', 1), ("Answer: No", 0), ("‘Yes‘", 1),
    ("The passage does not contain it. No", 0),
])
def test_yes_no_answers(text, value):
    assert parse_yesno(text).label == value


@pytest.mark.parametrize("text", ["", "maybe", "It could be yes or no"])
def test_yes_no_without_a_clear_answer_is_invalid(text):
    assert parse_yesno(text).label is None
