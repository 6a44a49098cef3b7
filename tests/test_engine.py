"""The judging engine with a scripted model: steps, invalid answers, stores, fallbacks."""

import asyncio

import pytest

from judgeblender.backends.scripted import ScriptedBackend
from judgeblender.errors import JudgeblenderError, MissingItemsError
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.pairs import Pair, read_corpus, read_queries
from judgeblender.store import CallStore

PAIRS = [Pair("q1", "d1"), Pair("q1", "d2"), Pair("q2", "d3"), Pair("q2", "d4")]


@pytest.fixture
def data(tiny):
    return read_queries(tiny / "queries.tsv"), read_corpus(tiny / "corpus.jsonl")


def make_judge(backend, prompt="umbrela", mode="generate", **kw):
    return Judge(JudgeSpec(model="scripted:x", prompt=prompt, mode=mode, **kw), backend=backend)


def test_single_step_labels_come_from_parsed_outputs(data):
    backend = ScriptedBackend(rules=[
        {"contains": "flakes", "output": "##final score: 3"},
        {"contains": "freshwater", "output": "M: 1\nT: 2\nO: 1"},
        {"contains": "330 metres", "output": "3"},
        {"contains": "capital", "output": "##final score: 0"},
    ])
    run = judge_pairs([make_judge(backend)], PAIRS, *data)
    labels = {p: j.label for p, j in run.judgments[make_judge(backend).id].items()}
    assert labels == {PAIRS[0]: 3, PAIRS[1]: 1, PAIRS[2]: 3, PAIRS[3]: 0}


def test_invalid_output_is_retried_once_then_left_unjudged(data):
    backend = ScriptedBackend(rules=[{"contains": "flakes", "output": "I cannot tell."}], default="##final score: 1")
    judge = make_judge(backend)
    run = judge_pairs([judge], PAIRS, *data)
    j = run.judgments[judge.id][PAIRS[0]]
    assert j.label is None and "no label found" in j.invalid_reason
    assert [s.attempt for s in j.steps] == [0, 1]
    assert backend.calls[-1].temperature > 0  # the retry samples, else it would repeat itself
    stats = run.stats[judge.id]
    assert stats.judged == 3 and sum(stats.unjudged.values()) == 1 and stats.retries == 1


def test_no_retry_policy(data):
    backend = ScriptedBackend(default="nonsense")
    judge = make_judge(backend, invalid_policy="no-retry")
    run = judge_pairs([judge], PAIRS, *data)
    assert len(backend.calls) == 4
    assert all(j.label is None for j in run.judgments[judge.id].values())


def test_sun_two_step_stops_on_no_and_grades_yes(data):
    backend = ScriptedBackend(rules=[
        {"contains": "The passage below was found to be relevant", "output": "Grade: 3"},
        {"contains": "flakes", "output": "Yes"},
        {"contains": "330 metres", "output": "Yes"},
    ], default="No")
    judge = make_judge(backend, prompt="sun-two-step")
    run = judge_pairs([judge], PAIRS, *data)
    got = run.judgments[judge.id]
    assert [got[p].label for p in PAIRS] == [3, 0, 3, 0]
    assert got[PAIRS[1]].stopped_at == "answerable"
    assert len(backend.calls) == 4 + 2  # step 2 only for the two Yes pairs


def test_multicriteria_feeds_criterion_grades_to_the_aggregation_call(data):
    backend = ScriptedBackend(rules=[
        {"contains": "Exactness: 3\nTopicality: 2\nCoverage: 1\nContextual Fit: 0", "output": "2"},
        {"contains": "Exactness criterion", "output": "3"},
        {"contains": "Topicality criterion", "output": "2"},
        {"contains": "Coverage criterion", "output": "1"},
        {"contains": "Contextual Fit criterion", "output": "0"},
    ])
    judge = make_judge(backend, prompt="multicriteria")
    run = judge_pairs([judge], PAIRS[:1], *data)
    j = run.judgments[judge.id][PAIRS[0]]
    assert j.label == 2 and [s.value for s in j.steps] == [3, 2, 1, 0, 2]


def test_relexp_passes_the_explanation_to_the_grading_call(data):
    backend = ScriptedBackend(rules=[
        {"contains": "Explanation of the passage's relevance: It lists foods.", "output": "Final score: 3"},
        {"contains": "Explain in two or three sentences", "output": "It lists foods."},
    ])
    judge = make_judge(backend, prompt="relexp")
    j = judge_pairs([judge], PAIRS[:1], *data).judgments[judge.id][PAIRS[0]]
    assert j.label == 3 and j.reasoning == "It lists foods."


def test_logprobs_mode_gives_distribution_argmax_and_expected_score(data):
    backend = ScriptedBackend(default="", rules=[{"contains": "", "probs": {"0": 0.1, "1": 0.2, "2": 0.3, "3": 0.4}}])
    judge = make_judge(backend, mode="logprobs")
    j = judge_pairs([judge], PAIRS[:1], *data).judgments[judge.id][PAIRS[0]]
    assert j.label == 3
    assert j.probs == pytest.approx({"0": 0.1, "1": 0.2, "2": 0.3, "3": 0.4})
    assert j.expected == pytest.approx(2.0)
    assert backend.calls[0].mode == "logprobs" and backend.calls[0].choices == ("0", "1", "2", "3")


def test_logprobs_without_support_needs_explicit_fallback_which_is_recorded(data):
    backend = ScriptedBackend(default="##final score: 2", logprobs=False)
    with pytest.raises(JudgeblenderError, match="pass allow_fallback=True to generate instead"):
        make_judge(backend, mode="logprobs")
    judge = make_judge(backend, mode="logprobs", allow_fallback=True)
    j = judge_pairs([judge], PAIRS[:1], *data).judgments[judge.id][PAIRS[0]]
    assert j.label == 2 and j.fallback.startswith("logprobs -> generate")


def test_second_run_makes_no_calls(tmp_path, data):
    backend = ScriptedBackend(default="##final score: 1")
    with CallStore(tmp_path / "s.sqlite") as store:
        judge_pairs([make_judge(backend)], PAIRS, *data, store=store)
        assert len(backend.calls) == 4
        run = judge_pairs([make_judge(backend)], PAIRS, *data, store=store)
    assert len(backend.calls) == 4
    assert run.stats[make_judge(backend).id].cache_hits == 4


class RecordingReporter:
    def __init__(self):
        self.events = []

    def wave(self, label, total):
        self.events.append(("wave", total))

    def advance(self, invalid):
        self.events.append(("call", invalid))

    def answered_from_store(self):
        self.events.append(("stored",))

    def end_wave(self):
        self.events.append(("end",))


def test_progress_counts_calls_and_drops_stored_answers_from_the_total(tmp_path, data):
    backend = ScriptedBackend(default="##final score: 1")
    with CallStore(tmp_path / "s.sqlite") as store:
        judge_pairs([make_judge(backend)], PAIRS[:3], *data, store=store)  # 3 of the 4 stored
        reporter = RecordingReporter()
        judge_pairs([make_judge(backend)], PAIRS, *data, store=store, reporter=reporter)
    events = reporter.events
    assert events[0] == ("wave", 4) and events[-1] == ("end",)
    assert sorted(events[1:-1]) == [("call", False), ("stored",), ("stored",), ("stored",)]


class CountingBackend(ScriptedBackend):
    """Answers after a short sleep on the event loop and records how many calls overlap."""

    def __init__(self, concurrency):
        super().__init__(default="##final score: 2", concurrency=concurrency)
        self.in_flight = self.most_in_flight = 0

    async def aexecute(self, request):
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)
            return self.execute(request)
        finally:
            self.in_flight -= 1


@pytest.mark.parametrize("concurrency", [1, 3])
def test_calls_keep_the_backends_concurrency_busy_and_never_exceed_it(data, concurrency):
    backend = CountingBackend(concurrency)
    pairs = PAIRS + PAIRS  # a pair listed twice is judged once
    run = judge_pairs([make_judge(backend)], pairs, *data)
    assert run.stats[make_judge(backend).id].judged == 4
    assert backend.most_in_flight == concurrency


def test_calls_go_out_in_prompt_order_so_neighbours_share_prefixes(data):
    backend = ScriptedBackend(default="##final score: 1")
    judge_pairs([make_judge(backend)], list(reversed(PAIRS)), *data)
    prompts = ["\n".join(m.content for m in call.messages) for call in backend.calls]
    assert len(prompts) == 4 and prompts == sorted(prompts)


def test_missing_passages_are_an_error_unless_skipped(data):
    queries, corpus = data
    pairs = PAIRS + [Pair("q1", "nope"), Pair("q9", "d1")]
    with pytest.raises(MissingItemsError, match="1 of 6 pairs reference a query missing"):
        judge_pairs([make_judge(ScriptedBackend(default="1"))], pairs, queries, corpus)
    run = judge_pairs([make_judge(ScriptedBackend(default="1"))], pairs, queries, corpus, skip_missing=True)
    assert sorted(reason for _, reason in run.skipped) == ["passage missing", "query missing"]
    assert len(run.pairs) == 4


def test_duplicate_judge_ids_are_refused(data):
    backend = ScriptedBackend(default="1")
    with pytest.raises(JudgeblenderError, match="share the id"):
        judge_pairs([make_judge(backend), make_judge(backend)], PAIRS, *data)


class TokenCounting(ScriptedBackend):
    """A scripted model with a tiny context and a whitespace 'tokenizer', to exercise truncation."""

    def context_tokens(self):
        return 200 + 100 + 32 + 40

    def count_tokens(self, text):
        return len(text.split())


def test_long_passages_are_truncated_and_the_cut_is_recorded(data):
    queries, corpus = data
    corpus = {**corpus, "d1": "word " * 5000}
    backend = TokenCounting(default="##final score: 1")
    judge = make_judge(backend)
    j = judge_pairs([judge], PAIRS[:1], queries, corpus).judgments[judge.id][PAIRS[0]]
    # a count-only tokenizer and a passage far past 256 characters a token of this tiny budget:
    # counted from its head, never whole (issue 38 part 9), so its whole count is not recorded
    assert j.truncated["passage_tokens"] is None and j.truncated["passage_chars"] == 25000
    assert 0 < j.truncated["kept_tokens"] < 5000
    assert len(backend.calls[0].messages[-1].content.split()) < 400
