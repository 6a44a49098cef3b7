"""The embedded llama.cpp backend on the real packaged models (slow: marked `model`)."""

import pytest

from judgeblender.calls import CallRequest, Message
from judgeblender.backends.registry import create_backend
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.pairs import Pair, read_corpus, read_queries

pytestmark = pytest.mark.model

PROMPT = (Message("user", "Query: what do goldfish eat\nPassage: Goldfish eat flakes, pellets and peas.\n"
                          "Rate relevance 0-3. Answer as ##final score: X"),)
OTHER = (Message("user", "Query: what do goldfish eat\nPassage: Paris is the capital of France.\n"
                         "Rate relevance 0-3. Answer as ##final score: X"),)
LOGPROBS = dict(mode="logprobs", answer_prefix="##final score:", choices=("0", "1", "2", "3"))


@pytest.fixture(scope="module")
def qwen():
    return create_backend("llamacpp:default", n_threads=2)


def test_packaged_default_is_verified_qwen_with_a_chat_template(qwen):
    ident = qwen.identity()
    assert ident["model"] == "qwen2.5-coder-0.5b"
    assert ident["sha256"] == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert qwen.formatter is not None
    assert "<|im_start|>assistant" in qwen.format_prompt(PROMPT)


def test_generate_is_deterministic(qwen):
    first = qwen.execute(CallRequest(PROMPT, max_tokens=12))
    second = qwen.execute(CallRequest(PROMPT, max_tokens=12))
    assert first.text and first.text == second.text
    assert first.tokens_in > 20 and 0 < first.tokens_out <= 12


def test_logprobs_distribution_is_identical_with_and_without_prefix_reuse(qwen):
    qwen.execute(CallRequest(PROMPT, **LOGPROBS))  # leaves PROMPT's tokens in the KV cache
    reused = qwen.execute(CallRequest(OTHER, **LOGPROBS))
    assert reused.extra["evaluated_tokens"] < reused.tokens_in  # the shared prefix was not re-evaluated
    qwen.llm.reset()  # empty cache: everything evaluated from scratch
    fresh = qwen.execute(CallRequest(OTHER, **LOGPROBS))
    assert fresh.extra["evaluated_tokens"] >= fresh.tokens_in
    assert sum(fresh.probs.values()) == pytest.approx(1.0)
    for label in "0123":
        assert reused.probs[label] == pytest.approx(fresh.probs[label], abs=1e-3)


def test_label_mass_includes_the_space_then_digit_spelling(qwen):
    # "##final score: 2" is tokenized ":", " ", "2": without the space path the digits get ~0 mass.
    result = qwen.execute(CallRequest(PROMPT, **LOGPROBS))
    assert result.choice_mass > 0.3


def test_gemma_base_model_uses_plain_prompt(tiny):
    gemma = create_backend("llamacpp:gemma-270m", n_threads=2)
    assert gemma.formatter is None
    assert gemma.format_prompt(PROMPT).endswith("##final score: X\n\n")
    result = gemma.execute(CallRequest(PROMPT, **LOGPROBS))
    assert set(result.probs) == {"0", "1", "2", "3"} and sum(result.probs.values()) == pytest.approx(1.0)


def test_judging_pairs_end_to_end_in_both_modes(qwen, tiny):
    queries, corpus = read_queries(tiny / "queries.tsv"), read_corpus(tiny / "corpus.jsonl")
    pairs = [Pair("q1", "d1"), Pair("q2", "d4")]
    for mode in ("logprobs", "generate"):
        judge = Judge(JudgeSpec(model="llamacpp:default", mode=mode, options={"n_threads": 2}), backend=qwen)
        run = judge_pairs([judge], pairs, queries, corpus)
        for j in run.judgments[judge.id].values():
            assert j.label in (0, 1, 2, 3) or j.invalid_reason  # a label, or an explicit reason
            assert j.steps and j.steps[0].raw is not None
            if mode == "logprobs":
                assert j.probs is not None and 0 <= j.expected <= 3
