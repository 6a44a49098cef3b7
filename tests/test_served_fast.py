"""The served path's own costs (issue 23, part 4), without changing what it stores or sends.

The store remembers the texts it has written by content (no sha256 per repeated identity,
settings or dictionary), makes a batch's identity JSON once, and a template text is split into
its pieces once: these tests check each shortcut gives exactly what the long way gave (right
identity per call, texts written again after a rollback, prompts rendered byte for byte), and
that a served run through a real HTTP server stores every prompt it sent. The speed itself is
measured in bench/driver.py (docs/_notes-served-fast.md), not here.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai_server import OpenAITestServer

from judgeblender.calls import CallRequest, CallResult, Message, call_key
from judgeblender.errors import TemplateError
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.pairs import Pair, read_corpus, read_queries
from judgeblender.pairs.texts import text_problem
from judgeblender.prompts import render_text
from judgeblender.store import CallStore
from judgeblender.store import compact

IDENT_A = {"backend": "openai", "model": "a", "revision": None}
IDENT_B = {"backend": "openai", "model": "b", "revision": "r2"}


def request(k: int, seed: int = 0) -> CallRequest:
    return CallRequest((Message("system", "You rate passages."),
                        Message("user", "Given a query and a passage, rate the passage from 0 to 3.\n"
                                        f"Query: q{k % 7}\nPassage: passage number {k} " + "word " * 40)),
                       mode="logprobs", max_tokens=1, seed=seed, answer_prefix="##final score:",
                       choices=("0", "1", "2", "3"))


def answer(k: int) -> CallResult:
    return CallResult("2", probs={"0": 0.1, "1": 0.2, "2": 0.6, "3": 0.1}, choice_mass=0.9,
                      extra={"finish_reason": "length", "response_id": f"r{k}", "served_model": "m"})


def test_one_batch_with_calls_of_two_models_stores_each_under_its_own_identity(tmp_path):
    rows = [(call_key(ident, request(k)), "openai", ident, request(k), answer(k), None)
            for k in range(6) for ident in (IDENT_A, IDENT_B)]
    with CallStore(tmp_path / "s.sqlite") as store:
        store.put_many(rows)
        stored = {r["key"]: r["model_identity"] for r in store.iter_calls()}
    assert stored == {key: ident for key, _, ident, _, _, _ in rows}


def test_an_identity_changed_between_batches_is_stored_as_changed(tmp_path):
    ident = dict(IDENT_A)
    with CallStore(tmp_path / "s.sqlite") as store:
        store.put_many([(call_key(ident, request(1)), "openai", ident, request(1), answer(1), None)])
        ident["revision"] = "pinned"  # the same dict object, another model
        store.put_many([(call_key(ident, request(2)), "openai", ident, request(2), answer(2), None)])
        stored = sorted(r["model_identity"]["revision"] or "" for r in store.iter_calls())
    assert stored == ["", "pinned"]


def test_storing_many_calls_of_one_model_hashes_each_repeated_text_once(tmp_path, monkeypatch):
    hashed: list[str] = []
    real = compact.text_id

    def counting(text: str) -> int:
        hashed.append(text)
        return real(text)

    monkeypatch.setattr(compact, "text_id", counting)
    with CallStore(tmp_path / "s.sqlite") as store:
        for start in range(0, 200, 4):  # batches of 4, as the engine's group commit makes them
            store.put_many([(call_key(IDENT_A, request(k)), "openai", IDENT_A, request(k), answer(k), None)
                            for k in range(start, start + 4)])
        assert store.count_calls() == 200
    # identity, settings, the prompt's shape and its dictionary, the answers' shape and theirs:
    # each hashed once, not once per call (the long way hashed about 5 texts per call: 1,000)
    assert len(hashed) <= 8, len(hashed)


def test_texts_of_a_rolled_back_batch_are_written_again_by_the_next(tmp_path):
    path = tmp_path / "s.sqlite"
    bad = CallResult("2", extra={"not json": object()})
    with CallStore(path) as store:
        with pytest.raises(TypeError):  # the second row fails after the first wrote its texts
            store.put_many([(call_key(IDENT_B, request(1)), "openai", IDENT_B, request(1), answer(1), None),
                            (call_key(IDENT_B, request(2)), "openai", IDENT_B, request(2), bad, None)])
        assert store.count_calls() == 0
        store.put_many([(call_key(IDENT_B, request(3)), "openai", IDENT_B, request(3), answer(3), None)])
    with CallStore(path) as store:  # a fresh connection reads the identity, settings and prompt back
        (record,) = list(store.iter_calls())
    assert record["model_identity"] == IDENT_B
    assert record["request"] == json.loads(json.dumps(request(3).key_fields()))
    assert record["extra"] == answer(3).extra


@pytest.mark.parametrize("text, values, rendered", [
    ("Query: {query}\nPassage: {passage}", {"query": "q", "passage": "p"}, "Query: q\nPassage: p"),
    ("{query}", {"query": "only"}, "only"),
    ("{{literal}} {query}}} {{{query}}} }}{{", {"query": "x"}, "{literal} x} {x} }{"),
    ("no placeholders, {{ and }} only", {}, "no placeholders, { and } only"),
    ("{a}{b}{a}", {"a": "1", "b": "{query}"}, "1{query}1"),  # a value is never rendered again
    ("", {}, ""),
])
def test_a_template_text_renders_its_placeholders_and_braces_as_written(text, values, rendered):
    assert render_text(text, values) == rendered
    assert render_text(text, values) == rendered  # the second time from the split pieces


def test_a_placeholder_without_a_value_is_an_error_naming_it():
    with pytest.raises(TemplateError, match=r"no value for placeholder \{passage\}"):
        render_text("{query} {passage}", {"query": "q"})


@pytest.mark.parametrize("value, problem", [
    ("a passage", None),
    (" \t\n\x1c\x1f\x0b ", "blank"),  # ASCII white space, control separators included
    ("", "blank"),
    ("\u200b \ufeff\u2060", "blank"),  # invisible characters only
    (" \u200b\u00a0\u200c ", "blank"),  # white space (non-ASCII too) around invisible characters
    ("\u200b\u200cx\u00e9", None),  # invisible characters first, then a visible one
    ("caf\u00e9", None),
    ("\u00a0\u3000x", None),
    ("text \ud800 with a lone surrogate", "not Unicode text (a lone surrogate)"),
])
def test_a_text_is_checked_the_same_whether_or_not_it_is_ascii(value, problem):
    assert text_problem(value) == problem


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(" \t\n\u00a0\u3000\u200b\u200c\u200d\u2060\ufeffa\u00e9"), max_size=8))
def test_a_text_is_blank_exactly_when_only_white_space_and_invisible_characters_are_in_it(value):
    blank = all(c.isspace() or c in "\u200b\u200c\u200d\u2060\ufeff" for c in value)
    assert (text_problem(value) == "blank") == blank


def test_a_served_run_with_a_store_keeps_every_prompt_it_sent_and_asks_nothing_twice(tiny, tmp_path):
    queries, corpus = read_queries(tiny / "queries.tsv"), read_corpus(tiny / "corpus.jsonl")
    pairs = [Pair(q, d) for q in sorted(queries) for d in sorted(corpus)][:24]
    with OpenAITestServer("##final score: 2") as server, CallStore(tmp_path / "s.sqlite") as store:
        opts = {"base_url": server.base_url, "timeout_s": 5.0, "concurrency": 8}
        judge = Judge(JudgeSpec(model="openai:test-model", options=opts))
        run = judge_pairs([judge], pairs, queries, corpus, store=store)
        sent = sorted(json.dumps(r.body["messages"]) for r in server.requests if r.method == "POST")
        stored = sorted(json.dumps([{"role": role, "content": content} for role, content in rec["request"]["messages"]])
                        for rec in store.iter_calls())
        assert len(sent) == len(pairs) and stored == sent
        assert run.stats[judge.id].judged == len(pairs)
        again = judge_pairs([Judge(JudgeSpec(model="openai:test-model", options=opts))], pairs, queries, corpus,
                            store=store)
        assert server.request_count == len(pairs)  # the second run asked nothing
    assert [j.label for j in again.judgments[judge.id].values()] == [2] * len(pairs)


def test_a_run_leaves_the_objects_alive_before_it_out_of_the_collectors_passes_and_hands_them_back(tiny):
    import gc

    queries, corpus = read_queries(tiny / "queries.tsv"), read_corpus(tiny / "corpus.jsonl")
    frozen_while_answering: list[int] = []

    def answer_and_look(body: dict) -> str:  # the server answers in a thread of this process
        frozen_while_answering.append(gc.get_freeze_count())
        return "##final score: 1"

    with OpenAITestServer(answer_and_look) as server:
        judge = Judge(JudgeSpec(model="openai:test-model", options={"base_url": server.base_url, "timeout_s": 5.0}))
        assert gc.get_freeze_count() == 0
        run = judge_pairs([judge], [Pair(q, d) for q in sorted(queries) for d in sorted(corpus)][:4], queries, corpus)
    assert len(frozen_while_answering) == 4 and min(frozen_while_answering) > 0
    assert gc.get_freeze_count() == 0  # handed back: collected as usual after the run
    assert run.stats[judge.id].judged == 4


def test_a_heap_the_caller_froze_stays_frozen_after_a_run(tiny):
    import gc

    queries, corpus = read_queries(tiny / "queries.tsv"), read_corpus(tiny / "corpus.jsonl")
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        with OpenAITestServer("##final score: 2") as server:
            judge = Judge(JudgeSpec(model="openai:test-model", options={"base_url": server.base_url, "timeout_s": 5.0}))
            judge_pairs([judge], [Pair(q, d) for q in sorted(queries) for d in sorted(corpus)][:2], queries, corpus)
        # still frozen, not handed back to the collector (frozen objects freed meanwhile leave the count)
        assert before > 0 and gc.get_freeze_count() > before // 2
    finally:
        gc.unfreeze()


def test_a_served_answer_is_freed_when_done_not_left_to_the_garbage_collector():
    """The response bound's body wrapper once held its response, which holds the wrapper: every
    answer became a cycle of about 60 objects that only a collector pass frees (the SDK alone
    leaves none), so a served run made 3-4 times the SDK's young collections."""
    import asyncio
    import gc

    from judgeblender.backends.openai_compat import OpenAICompatBackend

    req = CallRequest((Message("user", "Query: q\nPassage: p"),), mode="logprobs", max_tokens=1,
                      answer_prefix="##final score:", choices=("0", "1", "2", "3"))

    async def garbage_of(backend: OpenAICompatBackend, calls: int) -> list:
        await backend.aexecute(req)  # connections and imports made
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)  # what a pass finds unreachable is kept in gc.garbage
        try:
            for _ in range(calls):
                await backend.aexecute(req)
            gc.collect()
            return list(gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            await backend.aclose()

    with OpenAITestServer("2", top_logprobs=[("2", -0.1), ("1", -2.5)]) as server:
        backend = OpenAICompatBackend("test-model", base_url=server.base_url, api_key=None, concurrency=4)
        garbage = asyncio.run(garbage_of(backend, 40))
    kinds = {type(o).__name__ for o in garbage}
    assert not kinds & {"Response", "Request", "Headers", "BoundedBody"}, sorted(kinds)
    assert len(garbage) < 40, len(garbage)  # not one object per call


def test_a_served_run_on_a_fresh_event_loop_hands_nothing_to_a_thread(tiny, monkeypatch):
    """The SDK finds its platform (for a telemetry header) on a client's first request, in a
    thread, and each request that starts before the first has found it does the same: a run's
    first wave made one thread hop per call. The backend finds it once and gives it to each
    client, so a run asks the event loop's thread pool for nothing."""
    import asyncio

    queries, corpus = read_queries(tiny / "queries.tsv"), read_corpus(tiny / "corpus.jsonl")
    pairs = [Pair(q, d) for q in sorted(queries) for d in sorted(corpus)][:24]
    handed: list[str] = []
    real = asyncio.BaseEventLoop.run_in_executor

    def run_in_executor(self, executor, func, *args):
        handed.append(repr(func))
        return real(self, executor, func, *args)

    monkeypatch.setattr(asyncio.BaseEventLoop, "run_in_executor", run_in_executor)
    with OpenAITestServer("##final score: 2") as server:
        judge = Judge(JudgeSpec(model="openai:test-model",
                                options={"base_url": server.base_url, "timeout_s": 5.0, "concurrency": 8}))
        try:
            for _ in range(2):  # each run on an event loop of its own, with clients of its own
                run = judge_pairs([judge], pairs, queries, corpus)
                assert run.stats[judge.id].judged == len(pairs)
        finally:
            judge.close()
        assert server.request_count == 2 * len(pairs)
    assert handed == []
