"""A pair's judgment goes to the store when the pair is finished, while other calls are in flight,
not in one write after the window's last answer (issue 23, part 1: "written as judgments complete").

The store's judgments must still be exactly the run's: checked after a plain run, a run that
retries invalid answers, and a run whose server stops giving log-probabilities part-way."""

import sqlite3

import pytest

from openai_server import OpenAITestServer

from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.judges.engine import FLUSH_EVERY_S
from judgeblender.pairs import Pair, read_corpus, read_queries
from judgeblender.store import CallStore

PAIRS = [Pair("q1", "d1"), Pair("q1", "d2"), Pair("q2", "d3"), Pair("q2", "d4")]
ANSWERS = {"flakes": "##final score: 3", "freshwater": "##final score: 1", "330 metres": "##final score: 2",
           "capital": "##final score: 0"}
DIGITS = {"flakes": "3", "freshwater": "1", "330 metres": "2", "capital": "0"}  # one token: a logprobs answer


@pytest.fixture
def data(tiny):
    return read_queries(tiny / "queries.tsv"), read_corpus(tiny / "corpus.jsonl")


def judge_for(server, concurrency, mode="generate", **kw):
    opts = {"base_url": server.base_url, "timeout_s": 5.0, "backoff_base_s": 0.01, "concurrency": concurrency}
    return Judge(JudgeSpec(model="openai:test-model", mode=mode, options=opts, **kw))


def stored_judgments(path) -> int:
    """The judgments in the store's file now, read through a connection of its own."""
    with sqlite3.connect(path) as db:
        return db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]


def assert_store_holds_the_run(store: CallStore, judge: Judge, run) -> None:
    """Every judgment of the run is in the store, as the run holds it."""
    stored = {(r["qid"], r["docid"]): r for r in store.judgments(judge.id)}
    made = run.judgments[judge.id]
    assert set(stored) == {(p.qid, p.docid) for p in made}
    for pair, judgment in made.items():
        record = {k: v for k, v in stored[pair.qid, pair.docid].items() if k not in ("judge_id", "qid", "docid")}
        assert record == dict(sorted(judgment.record().items())), pair


def test_finished_pairs_are_in_the_store_while_the_last_call_is_still_to_be_made(tmp_path):
    n = 12
    queries = {f"q{i}": f"question {i}" for i in range(n)}
    corpus = {f"d{i}": f"passage {i} about something" for i in range(n)}
    pairs = [Pair(f"q{i}", f"d{i}") for i in range(n)]
    path = tmp_path / "calls.sqlite"
    seen_at_each_call: list[int] = []
    # answers 50 ms apart, more than the engine's FLUSH_EVERY_S between commits nobody waits on
    assert FLUSH_EVERY_S < 0.05
    with OpenAITestServer({}, default_answer="##final score: 2", delay_s=0.05) as server, CallStore(path) as store:
        judge = judge_for(server, concurrency=1)
        ask = judge.backend.aexecute

        async def counting(request):
            seen_at_each_call.append(stored_judgments(path))
            return await ask(request)

        judge.backend.aexecute = counting
        run = judge_pairs([judge], pairs, queries, corpus, store=store)
        assert_store_holds_the_run(store, judge, run)
    assert len(seen_at_each_call) == n
    # one call at a time: a pair counts once its call is committed, a little after the next call
    # has gone out. On a quiet machine call k sees the pairs up to k-3 in the store; on a loaded
    # one a commit may lag a few calls, so the check leaves six calls' slack (300 ms): written
    # only after the last answer, every count would be 0.
    assert seen_at_each_call[0] == 0
    assert seen_at_each_call == sorted(seen_at_each_call)
    assert seen_at_each_call[-1] >= n - 6, seen_at_each_call


def test_a_retried_invalid_answer_leaves_the_store_with_the_retry_s_judgment(data, tmp_path):
    # the first answer is not a label: that pair is asked once more (retry-once) and its final
    # judgment, with both steps, is what the store holds
    with OpenAITestServer(ANSWERS, script=["garbage"]) as server, CallStore(tmp_path / "s.sqlite") as store:
        judge = judge_for(server, concurrency=1)
        run = judge_pairs([judge], PAIRS, *data, store=store)
        assert_store_holds_the_run(store, judge, run)
    stats = run.stats[judge.id]
    assert stats.retries == 1 and stats.judged == len(PAIRS)
    retried = [j for j in run.judgments[judge.id].values() if len(j.steps) == 2]
    assert len(retried) == 1 and retried[0].label is not None


def test_answers_scored_before_a_server_stops_giving_logprobs_stand_and_only_the_rest_are_asked_again(data, tmp_path):
    # four calls at once; two answers with log-probabilities, then one without: the judge falls
    # back to generating; the pairs already scored keep their distribution and carry no fallback
    with OpenAITestServer(DIGITS, script=["ok", "ok", "no_logprobs"]) as server, \
            CallStore(tmp_path / "s.sqlite") as store:
        judge = judge_for(server, concurrency=4, mode="logprobs", allow_fallback=True)
        run = judge_pairs([judge], PAIRS, *data, store=store)
        assert_store_holds_the_run(store, judge, run)
        requests = [r for r in server.requests if r.method == "POST"]
    judgments = run.judgments[judge.id]
    scored = [j for j in judgments.values() if j.probs is not None]
    generated = [j for j in judgments.values() if j.probs is None]
    assert len(scored) >= 2 and generated
    assert all(j.fallback is None and j.label is not None for j in scored)
    assert all(j.fallback.startswith("logprobs -> generate") and j.label is not None for j in generated)
    # every pair asked once in logprobs mode; only the pairs without a scored answer asked again
    assert len(requests) == len(PAIRS) + len(generated)
    assert [j.label for j in judgments.values()] == [3, 1, 2, 0]
