"""Trust at the seams, where model text becomes a label (issue 29, parts 7 and 10).

Part 7: logprobs mode reads a top token as generate mode reads an answer. A label digit in
another script (full-width "３", Arabic-Indic "٣", Extended Arabic-Indic "۳", Devanagari "३",
Bengali "৩", any Unicode decimal digit generate mode reads), with whitespace or punctuation
around it, counts for that label; "10", "-1", "2/4" or a word count for none. A property test
builds top-token lists and checks that both modes agree and where the probability goes.

Part 10: an answer giving the same number 20 or more times in a row ("1, 1, 1, ...", "3 3 3",
one a line), however it finishes, is invalid ("degenerate answer") in every kind of step:
labels, yes/no, JSON verdicts and free text. 19 in a row, a list of different numbers, or a run
broken by a word still read as before.

Served cases run against the test OpenAI server on 127.0.0.1, through the Python API and the CLI.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import test_non_answers
from hypothesis import given
from hypothesis import strategies as st
from openai_server import OpenAITestServer
from test_non_answers import files, judge_cli  # noqa: F401 - a fixture and the CLI runner
from test_trust_finish import judge_one

import judgeblender
from judgeblender.backends.base import normalise_choice_probs
from judgeblender.backends.openai_wire import parse_logprobs
from judgeblender.calls import CallRequest, CallResult, Message
from judgeblender.judges import Judge, JudgeSpec
from judgeblender.judges.engine import interpret
from judgeblender.parse import parse_grade, parse_yesno
from judgeblender.parse.verdict import parse_verdict
from judgeblender.prompts.template import Step

GRADES = ("0", "1", "2", "3")
RUBRIC = {"type": "object", "properties": {"reason": {"type": "string"}, "score": {"type": "number"}},
          "required": ["reason", "score"]}


def served_judge(srv: OpenAITestServer, **spec) -> Judge:
    """A judge on the test server; `spec`: JudgeSpec fields (mode, invalid_policy)."""
    return Judge(JudgeSpec(model="openai:test-model", **spec,
                           options={"base_url": srv.base_url, "timeout_s": 5.0, "backoff_base_s": 0.01}))


def completion(top: list[tuple[str, float]]) -> dict:
    """A chat completion as a server sends it in logprobs mode: the generated token is the most
    probable one, and `top` ((token, probability) pairs) are its top_logprobs alternatives."""
    alts = sorted(((t, math.log(p)) for t, p in top), key=lambda a: -a[1])
    first = alts[0]
    return {"id": "chatcmpl-1", "model": "m", "choices": [{
        "index": 0, "message": {"role": "assistant", "content": first[0]}, "finish_reason": "length",
        "logprobs": {"content": [{"token": first[0], "logprob": first[1],
                                  "top_logprobs": [{"token": t, "logprob": v} for t, v in alts]}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1}}


# --- part 7: one reading of a digit, in both modes ---------------------------------------------
OTHER_SCRIPTS = [
    ("３", 3), ("٣", 3), ("۳", 3), ("३", 3), ("৩", 3),  # full-width, Arabic-Indic, Persian, Devanagari, Bengali
    ("２", 2), ("٢", 2), ("੨", 2), ("๒", 2), ("௨", 2),  # Gurmukhi, Thai, Tamil
    ("０", 0), ("٠", 0), ("१", 1), ("𝟑", 3),  # mathematical bold three (Nd too)
    (" ３", 3), ("３.", 3), ("**３**", 3), ("(٣)", 3), ("३\n", 3), ("３:", 3),  # spaced, punctuated
]


@pytest.mark.parametrize("token, label", OTHER_SCRIPTS)
def test_a_label_digit_in_another_script_counts_for_that_label_in_logprobs_mode(token, label):
    assert parse_grade(token).label == label  # what generate mode reads
    other = "2" if label == 1 else "1"
    result = parse_logprobs(completion([(token, 0.90), (other, 0.05), ("The", 0.05)]), GRADES)
    assert result.text == str(label)
    expected = {c: 0.0 for c in GRADES}
    expected[str(label)], expected[other] = 0.90, 0.05
    mass = 0.95
    assert result.choice_mass == pytest.approx(mass)
    assert result.probs == pytest.approx({c: p / mass for c, p in expected.items()})


def test_the_issues_case_a_full_width_three_at_090_is_label_three_not_a_certain_one():
    result = parse_logprobs(completion([("３", 0.90), ("1", 0.05), ("Sorry", 0.05)]), GRADES)
    assert result.text == "3" and result.probs["3"] == pytest.approx(0.90 / 0.95)
    assert result.probs["1"] == pytest.approx(0.05 / 0.95) and result.choice_mass == pytest.approx(0.95)


@pytest.mark.parametrize("token", ["10", "１０", "-1", "4", "٤", "2/4", "2.5", "Score", "The", "³", "Ⅲ", " ",
                                   "3a", "x3", ".3"])
def test_a_token_generate_mode_reads_as_no_label_counts_for_none(token):
    assert parse_grade(token).label is None
    result = parse_logprobs(completion([(token, 0.90), ("1", 0.06), ("2", 0.04)]), GRADES)
    assert result.text == "1"
    assert result.probs == pytest.approx({"0": 0.0, "1": 0.6, "2": 0.4, "3": 0.0})
    assert result.choice_mass == pytest.approx(0.10)


def test_ascii_digits_keep_todays_numbers():
    """Bare and spaced ASCII digits read as before: each choice takes its best token's probability."""
    top = [("2", 0.80), (" 2", 0.10), ("3", 0.05), (" 1", 0.03), ("The", 0.02)]
    result = parse_logprobs(completion(top), GRADES)
    lp = {"0": -math.inf, "1": math.log(0.03), "2": math.log(0.80), "3": math.log(0.05)}
    probs, mass = normalise_choice_probs(lp)
    assert result.text == "2" and result.probs == probs and result.choice_mass == mass
    assert result.extra["generated_token"] == "2"
    assert result.extra["top_logprobs"] == [[t, math.log(p)] for t, p in top]  # recorded as sent


def test_a_step_on_one_to_three_reads_its_own_scale():
    result = parse_logprobs(completion([("０", 0.5), ("３", 0.3), ("2", 0.2)]), ("1", "2", "3"))
    assert parse_grade("０", (1, 2, 3)).label is None  # 0 is off the 1-3 scale in generate mode too
    assert result.text == "3" and result.probs == pytest.approx({"1": 0.0, "2": 0.4, "3": 0.6})


def test_a_yes_no_step_reads_tokens_as_its_parser_does():
    result = parse_logprobs(completion([("yes", 0.6), (" No", 0.3), ("Not", 0.1)]), ("Yes", "No"))
    assert [parse_yesno(t).label for t in ("yes", " No", "Not")] == [1, 0, None]
    assert result.text == "Yes" and result.probs == pytest.approx({"Yes": 2 / 3, "No": 1 / 3})


def test_choices_of_a_callers_own_keep_the_exact_rule():
    result = parse_logprobs(completion([("B", 0.5), (" A", 0.3), ("a", 0.2)]), ("A", "B"))
    assert result.probs == pytest.approx({"A": 0.375, "B": 0.625})  # "a" is not "A"


def test_served_logprobs_and_generate_read_a_full_width_three_alike(tmp_path):
    """Through the Python API and the real HTTP client: logprobs mode's top token "３" at 0.90
    and generate mode's answer "３" are both label 3."""
    with OpenAITestServer(answers="３", top_logprobs=[("３", math.log(0.90)), ("1", math.log(0.05)),
                                                      ("The", math.log(0.05))]) as srv:
        by_logprobs = judge_one(served_judge(srv, mode="logprobs"))
        by_generating = judge_one(served_judge(srv))
    assert by_logprobs.label == 3 and by_logprobs.invalid_reason is None
    assert by_logprobs.probs == pytest.approx({"0": 0.0, "1": 0.05 / 0.95, "2": 0.0, "3": 0.90 / 0.95})
    assert by_generating.label == 3


@pytest.fixture
def cli_code(monkeypatch):
    """The CLI runs the code this test imports (the worktree's, or the one PYTHONPATH names)."""
    monkeypatch.setattr(test_non_answers, "SRC", Path(judgeblender.__file__).resolve().parents[1])


def test_the_cli_in_logprobs_mode_reads_an_arabic_indic_two(files, tmp_path, cli_code):  # noqa: F811
    with OpenAITestServer(top_logprobs=[("٢", math.log(0.7)), (" 3", math.log(0.2)), ("I", math.log(0.1))]) as srv:
        done, rec = judge_cli(files, tmp_path, srv, "--mode", "logprobs")
    assert done.returncode == 0, done.stderr
    assert rec["label"] == 2 and rec["invalid_reason"] is None
    step = next(iter(rec["judges"].values()))["steps"][0]
    assert step["choice_mass"] == pytest.approx(0.9)
    assert (tmp_path / "out.qrels").read_text().split() == ["q1", "0", "d1", "2"]


@pytest.mark.hf
def test_the_hf_backend_counts_a_full_width_digit_token_for_its_label(tmp_path, monkeypatch):
    """In process, the vocabulary is read the same way: a tokenizer that has "３" and " ３" as
    tokens counts them for label 3 (the best of its tokens, as for "3" and " 3")."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import hf_tiny
    import torch
    from test_hf_backend import MESSAGES, _reference, _templated

    from judgeblender.backends import hf

    monkeypatch.setattr(hf_tiny, "_SENTENCES", [*hf_tiny._SENTENCES, "Final score: ３ Final score: ３ ３ ３"])
    folder = hf_tiny.build_tiny_model(tmp_path / "model")
    tok, model = _reference(folder)
    full_width = [tok.convert_tokens_to_ids(t) for t in tok.tokenize("３ ３")]
    assert len(full_width) == 2 and tok.unk_token_id not in full_width  # "３" and " ３", one token each
    result = hf.create(str(folder)).execute(CallRequest(MESSAGES, mode="logprobs", answer_prefix="Final score:",
                                                        choices=GRADES))
    ids = result.extra["choice_token_ids"]
    assert set(full_width) <= set(ids["3"]) and not set(full_width) & set(ids["0"] + ids["1"] + ids["2"])
    prompt = tok(_templated("Final score:"), add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logprobs = torch.log_softmax(model(input_ids=prompt).logits[0, -1].float(), dim=-1)
    for c in GRADES:  # each label's log-probability is its best token's, "３" among label 3's
        assert result.extra["logprobs"][c] == pytest.approx(max(float(logprobs[i]) for i in ids[c]), abs=1e-5)


# -- the property: both modes agree, and the mass goes where generate mode reads it
ZEROS = [0x30, 0xFF10, 0x660, 0x6F0, 0x966, 0x9E6, 0xE50, 0xBE6, 0x1D7CE]  # the "0" of nine scripts
# what generate mode reads around a lone number ("(3", "3.", "**3**"); not "." before it (".3")
BEFORE = ["", " ", "  ", "\n", "**", "\"", "(", " \n"]
AFTER = ["", " ", "\n", "**", "\"", ")", ".", ":", " \n"]


@st.composite
def digit_tokens(draw):
    """(token, its value): one or two digits of one script, with whitespace or punctuation."""
    zero = draw(st.sampled_from(ZEROS))
    value = draw(st.integers(0, 9) | st.integers(10, 12))
    digits = "".join(chr(zero + int(d)) for d in str(value))
    return draw(st.sampled_from(BEFORE)) + digits + draw(st.sampled_from(AFTER)), value


other_tokens = st.sampled_from(["The", " Score", "Sorry", "\n", " ", "##", "-", "Ⅲ", "³", "½", "yes", "x3", "3a",
                                "1/10", "-1", "2-3"]).map(lambda t: (t, None))


# log-probabilities at least 0.01 apart: two that exp() makes one probability are a tie in either mode
logprobs = st.integers(-2500, 0).map(lambda n: n / 100)


@given(tokens=st.lists(st.tuples(digit_tokens() | other_tokens, logprobs), min_size=1, max_size=20,
                       unique_by=(lambda c: c[0][0], lambda c: c[1])),
       scale=st.sampled_from([(0, 1, 2, 3), (1, 2, 3)]))
def test_logprobs_mode_and_generate_mode_agree_on_any_top_token_list(tokens, scale):
    choices = tuple(map(str, scale))
    top = [(token, lp) for (token, _), lp in tokens]
    # generate mode reads a digit token as its value where that is on the scale, else as nothing
    for (token, value), _ in tokens:
        if value is not None:
            assert parse_grade(token, scale).label == (value if value in scale else None), token
    read = {token: parse_grade(token, scale).label for token, _ in top}
    best = max(top, key=lambda t: t[1])
    data = completion([(t, math.exp(lp)) for t, lp in top])
    data["choices"][0]["logprobs"]["content"][0].update(token=best[0], logprob=best[1])  # exact, not via exp/log
    for alt in data["choices"][0]["logprobs"]["content"][0]["top_logprobs"]:
        alt["logprob"] = dict(top)[alt["token"]]
    result = parse_logprobs(data, choices)

    # the mass: each label takes its best token's probability, among the tokens read as that label
    expected = {c: max((lp for t, lp in top if read[t] == int(c)), default=-math.inf) for c in choices}
    probs, mass = normalise_choice_probs(expected)
    assert result.probs == pytest.approx(probs) and result.choice_mass == pytest.approx(mass)
    # the label: generate mode, given the most probable token as its answer, reads the same one
    if read[best[0]] is not None:
        assert result.text == str(read[best[0]])
    elif mass == 0:
        assert result.text == ""
    else:  # the top token is no label: logprobs mode takes the most probable token that is one
        assert result.text == str(read[max((t for t in top if read[t[0]] is not None), key=lambda t: t[1])[0]])


# --- part 10: degenerate answers ---------------------------------------------------------------
def degenerate(reason: str | None) -> bool:
    """The reason is the degenerate-answer one (a judgment's reason starts with its step's id)."""
    return reason is not None and reason.removeprefix("grade: ").startswith("degenerate answer: ")


RUNS = {
    "commas": "1, " * 20,
    "exactly twenty": ", ".join(["2"] * 20),
    "no spaces": ",".join(["2"] * 25),
    "spaces": "3 " * 40,
    "one a line": "3\n" * 30,
    "a list": "- 1\n" * 24,
    "bold": "**3** " * 22,
    "after an answer": "The passage answers it.\nFinal score: 2\n" + "2\n" * 25,
    "before an answer": "0 " * 30 + "\nFinal score: 3",
    "full-width": "３ " * 20,
    "decimals": "2.5, " * 20,
    "off the scale": "10 " * 20,
    "a long number": ("7" * 300 + " ") * 20,
    "the same value written three ways": "3, 3.0, 03, ３, " * 5,
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_number_repeated_twenty_times_in_a_row_is_a_degenerate_answer(name):
    result = parse_grade(RUNS[name])
    assert result.label is None and degenerate(result.invalid_reason), result
    assert "repeated 20 or more times in a row" in result.invalid_reason


HELD = {  # (text, label, reason's start): what they read as on main too
    "nineteen in a row": ("1, " * 19, 1, None),
    "nineteen one a line": ("3\n" * 19, 3, None),
    "different numbers": ("0 1 2 3 " * 10, None, "ambiguous"),
    "nineteen, then another number, then nineteen": ("1, " * 19 + "2, " + "1, " * 19, None, "ambiguous"),
    "broken by a word": (("2 " * 15 + "again ") * 3, 2, None),
    "ten": ("10", None, "last line: 10 is not a label"),
    "ascii answer": ("##final score: 2", 2, None),
    "a scale description": ("0 = irrelevant, 1 = related, 2 = highly, 3 = perfectly.\nFinal score: 1", 1, None),
}


@pytest.mark.parametrize("name", sorted(HELD))
def test_fewer_than_twenty_or_a_broken_run_reads_as_before(name):
    text, label, reason = HELD[name]
    result = parse_grade(text)
    assert result.label == label
    assert not degenerate(result.invalid_reason)
    if reason is not None:
        assert result.invalid_reason.startswith(reason)


@pytest.mark.parametrize("text", [
    '{"reason": "' + "1 " * 25 + '", "score": 1}',
    '{"reason": "ok", "score": 1, "per_sentence": [' + ", ".join(["1"] * 20) + "]}",
    '{"reason": "ok", "score": 0}\n' + "0\n" * 20,
])
def test_a_degenerate_json_verdict_is_invalid(text):
    result = parse_verdict(text, RUBRIC, score_range=[0.0, 1.0])
    assert result.score is None and degenerate(result.invalid_reason)


def test_a_json_verdict_with_nineteen_still_reads():
    text = '{"reason": "ok", "score": 1, "per_sentence": [' + ", ".join(["1"] * 19) + "]}"
    assert parse_verdict(text, RUBRIC, score_range=[0.0, 1.0]).score == 1.0


def test_a_degenerate_yes_no_and_text_answer_are_invalid():
    assert degenerate(parse_yesno("Yes. " + "1 " * 20).invalid_reason)
    assert parse_yesno("Yes. " + "1 " * 19).label == 1
    note = Step(id="note", output="text", user="Summarise the passage.")
    request = CallRequest((Message("user", "Summarise the passage."),), max_tokens=64)
    for text, value in (("3 " * 20, None), ("It has 3 3 3 parts.", "It has 3 3 3 parts.")):
        outcome = interpret(note, [0, 1, 2, 3], request, CallResult(text=text, extra={"finish_reason": "stop"}))
        assert outcome.value == value
        assert degenerate(outcome.invalid_reason) == (value is None)


@pytest.mark.parametrize("finish", ["stop", "length"])
def test_a_served_degenerate_answer_is_invalid_however_it_finishes(tmp_path, finish):
    """A normal finish does not make a loop an answer; a cut one stays invalid for being cut."""
    with OpenAITestServer(answers="1, " * 30, finish_reason=finish) as srv:
        j = judge_one(served_judge(srv, invalid_policy="no-retry"))
    assert j.label is None
    if finish == "stop":
        assert degenerate(j.invalid_reason), j.invalid_reason
    else:
        assert "cut at the token limit" in j.invalid_reason


def test_the_cli_records_a_degenerate_answer_as_invalid(files, tmp_path, cli_code):  # noqa: F811
    with OpenAITestServer(answers="\n".join(["3"] * 40), finish_reason="stop") as srv:
        done, rec = judge_cli(files, tmp_path, srv, "--invalid", "no-retry")
    assert done.returncode == 0, done.stderr
    assert rec["label"] is None and degenerate(rec["invalid_reason"])
    assert (tmp_path / "out.qrels").read_text() == ""
    assert json.loads(done.stdout)["judges"][0]["invalid_outputs"] == 1
