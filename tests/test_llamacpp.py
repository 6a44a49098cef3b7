"""The embedded llama.cpp backend on the real packaged models (slow: marked `model`)."""

import pytest

from judgeblender.calls import CallRequest, Message
from judgeblender.backends.registry import create_backend
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.pairs import Pair, read_corpus, read_queries
from judgeblender.calls import call_key

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


INSTRUCTIONS = ("You are a search quality rater. Judge how well the passage answers the query, on the "
                "TREC scale: 3 = perfectly relevant, the passage is dedicated to the query and contains the "
                "exact answer; 2 = highly relevant, it has some answer but it may be a bit unclear or hidden "
                "amongst extraneous information; 1 = related, the passage seems related to the query but does "
                "not answer it; 0 = irrelevant. Consider the intent of the searcher before you answer.\n")
PASSAGES = ["Goldfish eat flakes, pellets and peas.", "Paris is the capital of France.",
            "Goldfish are omnivores: in ponds they eat insects, larvae, algae and plant matter.",
            "Goldfish memory lasts months, not seconds."]


def _long_prompt(query: str, passage: str) -> tuple[Message, ...]:
    return (Message("user", INSTRUCTIONS + f"Query: {query}\nPassage: {passage}\nAnswer as ##final score: X"),)


@pytest.mark.parametrize("space_path", ["separate", "batched"])
def test_logprobs_are_bit_identical_whatever_was_evaluated_before(space_path):
    backend = create_backend("llamacpp:default", n_threads=2, space_path=space_path)
    prompts = [_long_prompt(q, p) for q in ("what do goldfish eat", "what do goldfish eat in ponds")
               for p in PASSAGES]
    fresh = {}
    for prompt in prompts:  # each from an empty cache
        backend.llm.reset()
        result = backend.execute(CallRequest(prompt, **LOGPROBS))
        assert result.extra["evaluated_tokens"] >= result.tokens_in
        fresh[prompt] = result.probs
    reused = 0
    for order in (prompts, prompts[::-1], prompts[1::2] + prompts[::2]):
        for prompt in order:
            result = backend.execute(CallRequest(prompt, **LOGPROBS))
            reused += result.extra["evaluated_tokens"] < result.tokens_in
            assert result.probs == fresh[prompt]  # exact: the same bits, not approximately
    assert reused >= 6  # the shared instructions and query really came from the cache


def test_generate_gives_the_same_text_whatever_was_evaluated_before(qwen):
    prompts = [_long_prompt("what do goldfish eat", p) for p in PASSAGES]
    qwen.llm.reset()
    alone = qwen.execute(CallRequest(prompts[2], max_tokens=8)).text
    for prompt in prompts:
        qwen.execute(CallRequest(prompt, max_tokens=8))
    assert qwen.execute(CallRequest(prompts[2], max_tokens=8)).text == alone


def test_answers_stored_by_the_earlier_prefix_reuse_path_get_other_keys(qwen):
    # the evaluation scheme is part of the model's identity, hence of every call key
    request = CallRequest(PROMPT, **LOGPROBS)
    earlier = {k: v for k, v in qwen.identity().items() if k != "eval"}
    assert qwen.identity()["eval"] == "fixed-blocks-64"
    assert call_key(earlier, request) != call_key(qwen.identity(), request)


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


def test_generate_says_when_the_answer_was_cut_at_the_token_limit(qwen):
    # issue 15, part 2: the judge reads finish_reason "length" as an invalid (cut) answer
    cut = qwen.execute(CallRequest((Message("user", "Write a long story about a goldfish."),), max_tokens=3))
    assert cut.extra["finish_reason"] == "length" and cut.tokens_out == 3
    whole = qwen.execute(CallRequest((Message("user", "Reply with the digit 2 only."),), max_tokens=32))
    assert whole.extra["finish_reason"] == "stop"
