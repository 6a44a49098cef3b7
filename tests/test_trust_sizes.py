"""Hostile sizes stay cheap (issue 20, part 10): cutting a passage to the model's context
tokenizes it at most twice, however long it is, and the cut is still exact.

The counted tokenizers are real: llama.cpp's (the packaged Qwen model, marked `model`) and the
served backend's estimate (3 UTF-8 bytes a token, with --context-tokens). The old cut, a binary
search over prefixes, stays in judges/truncate.py for backends that can only count tokens; it
is the reference the new cut is compared with, on real DL19 passages of random lengths.
Timings are measured in bench/hostile_sizes.py, not asserted here.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from judgeblender.backends.registry import create_backend
from judgeblender.backends.scripted import ScriptedBackend
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.judges.truncate import _cut_by_counting, truncate_passage
from judgeblender.pairs import Pair

DL19_PASSAGES = Path(__file__).parents[2] / "shared" / "data" / "trec-dl-2019" / "passages.jsonl"
TEXT = "Goldfish eat flakes, pellets, peas and bloodworms; a varied diet keeps them healthy. "


class Counting:
    """Counts a backend's tokenizer calls (count_tokens and token_prefix) around a cut."""

    def __init__(self, backend):
        self.backend, self.calls = backend, 0
        for name in ("count_tokens", "token_prefix"):
            original = getattr(backend, name)

            def counted(*args, _original=original):
                self.calls += 1
                return _original(*args)

            setattr(backend, name, counted)


@pytest.fixture
def served():
    # an OpenAI-compatible backend with a context size: its token count is the 3-bytes estimate
    return create_backend("openai:m", base_url="http://127.0.0.1:9/v1", api_key_env="JB_TEST_NO_KEY",
                          context_tokens=4096)


@pytest.mark.parametrize("size", ["small", "exactly-fitting", "one-over", "huge"])
def test_a_cut_makes_at_most_two_tokenizer_calls_whatever_the_passage_size(size, served, monkeypatch):
    monkeypatch.setenv("JB_TEST_NO_KEY", "sk-test")
    budget = 1000  # tokens: 3000 bytes
    passage = {"small": TEXT, "exactly-fitting": "x" * 2998 + "é", "one-over": "y" * 3001,
               "huge": TEXT * 250_000}[size]  # huge: 21 MB
    counter = Counting(served)
    kept, cut = truncate_passage(passage, budget, served)
    assert counter.calls <= 2
    assert served.count_tokens(kept) <= budget
    if size in ("small", "exactly-fitting"):
        assert kept == passage and cut is None
    else:
        assert cut["kept_tokens"] <= budget and len(kept.encode()) == 3000 == cut["kept_chars"]
        assert cut["passage_chars"] == len(passage)


def test_a_huge_passage_is_recorded_without_a_whole_token_count_it_never_made(served, monkeypatch):
    monkeypatch.setenv("JB_TEST_NO_KEY", "sk-test")
    kept, cut = truncate_passage(TEXT * 250_000, 1000, served)
    assert cut["passage_tokens"] is None  # only the head was tokenized: it holds more than fits
    kept, cut = truncate_passage("é" * 1600, 1000, served)  # 3,200 bytes in 1,600 characters
    assert cut["passage_tokens"] == 1067 and kept == "é" * 1500  # tokenized whole: counted


def test_a_cut_never_splits_a_character_between_two_tokens(served, monkeypatch):
    monkeypatch.setenv("JB_TEST_NO_KEY", "sk-test")
    kept, cut = truncate_passage("ab" + "日本語" * 2000, 10, served)  # 3-byte characters from byte 2
    assert kept == "ab" + "日本語" * 3  # 30 bytes hold 'ab' and 9 whole characters
    assert kept.encode("utf-8") == ("ab" + "日本語" * 2000).encode("utf-8")[: 2 + 27]


class WordTokens(ScriptedBackend):
    """A backend that can only count tokens (no token_prefix): cut by binary search, as before."""

    def context_tokens(self):
        return 600

    def count_tokens(self, text):
        return len(text.split())


def test_a_backend_that_can_only_count_tokens_is_still_cut_to_fit():
    backend = WordTokens(default="##final score: 1")
    kept, cut = truncate_passage("word " * 5000, 100, backend)
    assert backend.count_tokens(kept) == 100 and cut["passage_tokens"] == 5000
    # past 256 characters a token of the budget, counted from the head: not counted whole (issue 38)
    kept, cut = truncate_passage("word " * 6000, 100, backend)
    assert backend.count_tokens(kept) == 100 and cut["passage_tokens"] is None
    kept, cut = truncate_passage("word " * 50, 100, backend)  # fits: counted whole, kept whole
    assert kept == "word " * 50 and cut is None


class CharCountingWords(WordTokens):
    """WordTokens that remembers how many characters each count read."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.read = []

    def count_tokens(self, text):
        self.read.append(len(text))
        return super().count_tokens(text)


def test_counting_prefixes_reads_in_proportion_to_the_cut_not_the_passage():
    """Issue 38 part 9: a binary search over a 20 MB passage counted it whole and then ~25 of
    its prefixes; galloping from the budget reads a few times the kept text, however long the
    passage, and keeps the same text."""
    backend = CharCountingWords(default="##final score: 1")
    short_kept, _ = truncate_passage("word " * 400, 100, backend)
    backend.read.clear()
    kept, cut = truncate_passage("word " * 4_000_000, 100, backend)
    assert kept == short_kept and backend.count_tokens(kept) == 100
    assert max(backend.read) <= 2 * len(kept) + 2 and sum(backend.read) <= 32 * len(kept), backend.read


def test_a_judge_run_over_a_20_mb_passage_sends_a_prompt_that_fits(served, monkeypatch):
    monkeypatch.setenv("JB_TEST_NO_KEY", "sk-test")
    counter = Counting(served)
    sent = []

    async def answer(request):
        from judgeblender.calls import CallResult

        sent.append(request)
        return CallResult(text="##final score: 1", extra={"finish_reason": "stop"})  # a finished answer

    served.aexecute = answer
    judge = Judge(JudgeSpec(model="openai:m"), backend=served)
    huge = TEXT * 240_000  # 20 MB
    run = judge_pairs([judge], [Pair("q1", "d1"), Pair("q2", "d1")], {"q1": "goldfish food", "q2": "fish diet"},
                      {"d1": huge})
    assert [j.label for j in run.judgments[judge.id].values()] == [1, 1]
    assert counter.calls <= 2 * 2 + 2  # two cuts, plus one prompt overhead count per query's budget
    prompt = "\n".join(m.content for m in sent[0].messages)
    assert served.count_tokens(prompt) + 100 <= 4096


# --- the real llama.cpp tokenizer ---------------------------------------------------------------
@pytest.fixture(scope="module")
def models():
    """Each packaged model, loaded once for the module."""
    loaded = {}

    def get(name):
        if name not in loaded:
            loaded[name] = create_backend(name, n_threads=2)
        return loaded[name]

    yield get
    for backend in loaded.values():
        backend.close()


@pytest.fixture(scope="module")
def qwen(models):
    return models("llamacpp:default")


@pytest.fixture
def qwen_calls(qwen):
    """Counts llama.cpp tokenize calls (count_tokens and token_prefix both go through it)."""
    original = qwen.llm.tokenize
    calls = []

    def tokenize(*args, **kwargs):
        calls.append(len(args[0]))
        return original(*args, **kwargs)

    qwen.llm.tokenize = tokenize
    yield calls
    qwen.llm.tokenize = original


@pytest.mark.model
@pytest.mark.parametrize("size", ["small", "exactly-fitting", "one-over", "huge"])
def test_llamacpp_cuts_with_at_most_two_tokenizations(size, qwen, qwen_calls):
    budget = 300
    qwen.max_token_chars()  # read once per model, from the vocabulary (no tokenization)
    fitting = TEXT * 20
    fitting = fitting[: _cut_by_counting(fitting, budget, qwen)[1]["kept_chars"]]  # exactly 300 tokens
    assert qwen.count_tokens(fitting) == budget
    passage = {"small": TEXT, "exactly-fitting": fitting, "one-over": fitting + " x", "huge": TEXT * 250_000}[size]
    qwen_calls.clear()
    kept, cut = truncate_passage(passage, budget, qwen)
    assert len(qwen_calls) <= 2 and max(qwen_calls) < 1_000_000  # never the 21 MB passage whole
    if size in ("small", "exactly-fitting"):
        assert kept == passage and cut is None and len(qwen_calls) == 1
    else:
        assert cut["kept_tokens"] == qwen.count_tokens(kept) <= budget and passage.startswith(kept)


@pytest.mark.model
def test_llamacpp_tokenizes_in_proportion_to_the_cut_not_the_longest_token(qwen, qwen_calls):
    """Issue 38 part 9: a 21 MB passage was cut from a head of (budget + 1) x the longest token
    (256 bytes for Qwen: ~50 times the kept text); now from a head a few times the kept text,
    and the kept text is the same as a passage just past the old bound gives."""
    budget = 300
    bound = (budget + 1) * qwen.max_token_chars()
    within = (TEXT * (bound // len(TEXT) + 1))[:bound]  # tokenized whole, as before: counted
    qwen_calls.clear()
    kept_within, cut_within = truncate_passage(within, budget, qwen)
    assert cut_within["passage_tokens"] == qwen.count_tokens(within)  # the record as before
    qwen_calls.clear()
    kept, cut = truncate_passage(TEXT * 250_000, budget, qwen)
    assert kept == kept_within and cut["kept_tokens"] == budget and cut["passage_tokens"] is None
    assert len(qwen_calls) <= 2 and sum(qwen_calls) <= 4 * len(kept.encode()), qwen_calls


def binary_search_cut(passage: str, budget: int, backend) -> tuple[str, dict | None]:
    """The cut as it was first made, the reference: the passage counted whole, then the longest
    prefix that fits found by halving [0, its length] (judges/truncate.py now gallops from the
    budget on long passages, issue 38)."""
    n = backend.count_tokens(passage)
    if n <= budget:
        return passage, None
    lo, hi = 0, len(passage)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if backend.count_tokens(passage[:mid]) <= budget else (lo, mid - 1)
    return passage[:lo], {"kept_tokens": backend.count_tokens(passage[:lo])}


def dl19_passages(n: int, seed: int) -> list[str]:
    lines = DL19_PASSAGES.read_text(encoding="utf-8").splitlines()
    rng = random.Random(seed)
    return [json.loads(line)["text"] for line in rng.sample(lines, n)]


@pytest.mark.model
@pytest.mark.skipif(not DL19_PASSAGES.exists(), reason="shared data not found")
@pytest.mark.parametrize("model", ["llamacpp:default", "llamacpp:gemma-270m"])  # byte-level BPE, SentencePiece
def test_llamacpp_cuts_exactly_on_real_passages_of_random_length_as_the_binary_search_did(model, models):
    """300 DL19 texts joined to a random length (Unicode, digits, punctuation as they come), cut
    to a random budget. The kept text is exactly the passage's first `budget` tokens (its own
    tokenization, not a re-spelling), in at most two tokenizations. The old binary search kept
    `budget` tokens too, and the same text in most cases; where not, the cut is inside a word
    that a prefix spells with other tokens (the search's probes are not monotone there)."""
    backend = models(model)
    backend.max_token_chars()
    original, calls = backend.llm.tokenize, []
    backend.llm.tokenize = lambda *a, **k: calls.append(1) or original(*a, **k)
    rng = random.Random(20)
    texts = dl19_passages(2000, seed=20)
    same = checked = 0
    for _ in range(300):
        joined = " ".join(rng.sample(texts, rng.randint(1, 12)))
        passage = joined[: rng.randint(50, len(joined))]
        budget = rng.randint(5, 400)
        calls.clear()
        kept, cut = truncate_passage(passage, budget, backend)
        assert len(calls) <= 2
        old_kept, old_cut = binary_search_cut(passage, budget, backend)
        assert (cut is None) == (old_cut is None)
        if cut is None:
            assert kept == passage
            continue
        checked += 1
        ids = original(passage.encode("utf-8"), add_bos=False, special=False)
        assert original(kept.encode("utf-8"), add_bos=False, special=False) == ids[:budget]
        assert cut["kept_tokens"] == old_cut["kept_tokens"] == budget and passage.startswith(kept)
        same += kept == old_kept
    backend.llm.tokenize = original
    assert checked >= 100 and same >= 0.75 * checked, (same, checked)


# --- a Hugging Face fast tokenizer (offsets) ----------------------------------------------------
@pytest.fixture(scope="module")
def hf_tiny(tmp_path_factory):
    for module in ("torch", "transformers", "tokenizers"):
        pytest.importorskip(module)
    from hf_tiny import build_tiny_model

    from judgeblender.backends import hf

    return hf.create(str(build_tiny_model(tmp_path_factory.mktemp("hf-tiny") / "model")))


@pytest.mark.hf
def test_a_hugging_face_tokenizer_cuts_at_its_offsets_with_at_most_two_calls(hf_tiny):
    """The tiny byte-level BPE knows few merges: many tokens are single bytes, and characters
    outside ASCII are split across tokens, the hard case for a cut."""
    rng = random.Random(10)
    alphabet = list("abcdefghij klmnop 0123 .,;") + ["é", "日", "🙂", "\u00a0"]
    tok, counter = hf_tiny.tokenizer, Counting(hf_tiny)
    for _ in range(100):
        passage = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 400)))
        budget = rng.randint(1, 200)
        counter.calls = 0
        kept, cut = truncate_passage(passage, budget, hf_tiny)
        assert counter.calls <= 2 and passage.startswith(kept)
        ids = tok.encode(passage, add_special_tokens=False)
        if cut is None:
            assert kept == passage and len(ids) <= budget
            continue
        kept_ids = tok.encode(kept, add_special_tokens=False)
        assert len(kept_ids) <= budget and kept_ids == ids[: len(kept_ids)]
        assert len(kept_ids) >= budget - 3  # only a character split across tokens is left out
    kept, cut = truncate_passage("abc " * 3_000_000, 50, hf_tiny)  # 12 MB, cut to its head first
    assert cut["passage_tokens"] is None and len(tok.encode(kept, add_special_tokens=False)) <= 50


# --- a real Ray runtime: the cut runs in the worker that holds the tokenizer ---------------------
@pytest.mark.ray
def test_a_20_mb_passage_judged_on_ray_workers_is_cut_from_its_head(monkeypatch):
    ray = pytest.importorskip("ray")
    from openai_server import OpenAITestServer

    from judgeblender.backends.ray_executor import RayBackend

    src = str(Path(__file__).resolve().parents[1] / "src")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.setenv("PYTHONPATH", src)  # workers import this checkout's judgeblender
    monkeypatch.setenv("JB_TEST_KEY", "sk-test")
    ray.init(address="local", num_cpus=1, object_store_memory=200 * 1024**2, include_dashboard=False,
             _node_ip_address="127.0.0.1", log_to_driver=False)
    try:
        with OpenAITestServer("##final score: 1") as server:
            backend = RayBackend("openai:m", {"base_url": server.base_url, "api_key_env": "JB_TEST_KEY",
                                              "context_tokens": 4096}, workers=1)
            judge = Judge(JudgeSpec(model="openai:m"), backend=backend)
            try:
                run = judge_pairs([judge], [Pair("q1", "d1")], {"q1": "goldfish food"}, {"d1": TEXT * 240_000})
            finally:
                backend.close()
            sent = server.requests[0].body["messages"][-1]["content"]
    finally:
        ray.shutdown()
    j = run.judgments[judge.id][Pair("q1", "d1")]
    assert j.label == 1 and j.truncated["passage_chars"] == len(TEXT) * 240_000
    assert j.truncated["passage_tokens"] is None  # the worker tokenized a head, never the 20 MB
    assert j.truncated["kept_tokens"] <= 4096 and len(sent.encode()) < 4096 * 3
