"""Judging through the OpenAI-compatible backend against a real local HTTP server."""

import pytest

from openai_server import OpenAITestServer

from judgeblender.errors import JudgeblenderError
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.pairs import Pair, read_corpus, read_queries

PAIRS = [Pair("q1", "d1"), Pair("q1", "d2"), Pair("q2", "d3"), Pair("q2", "d4")]
ANSWERS = {"flakes": "##final score: 3", "freshwater": "##final score: 1", "330 metres": "##final score: 2",
           "capital": "##final score: 0"}


@pytest.fixture
def data(tiny):
    return read_queries(tiny / "queries.tsv"), read_corpus(tiny / "corpus.jsonl")


def judge_for(server, mode="generate", concurrency=4, **kw):
    opts = {"base_url": server.base_url, "timeout_s": 2.0, "backoff_base_s": 0.01, "concurrency": concurrency}
    return Judge(JudgeSpec(model="openai:test-model", mode=mode, options=opts, **kw))


def test_faults_are_retried_and_counted_labels_unchanged(data, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-PLANTED-engine")
    with OpenAITestServer(ANSWERS, default_answer="?", script=["429", "500", "close_mid"]) as server:
        judge = judge_for(server)
        run = judge_pairs([judge], PAIRS, *data)
    labels = [run.judgments[judge.id][p].label for p in PAIRS]
    assert labels == [3, 1, 2, 0]
    stats = run.stats[judge.id]
    assert stats.backend_retries == 3 and stats.calls_made == 4


def test_server_without_logprobs_needs_the_fallback_flag(data):
    with OpenAITestServer(ANSWERS, script=["no_logprobs"] * 20) as server:
        with pytest.raises(JudgeblenderError, match="allow_fallback=True"):
            judge_pairs([judge_for(server, mode="logprobs")], PAIRS, *data)
    # one call at a time, so the first pair's call is the one the server answers without
    # logprobs (with four at once, any of them may be; the server's stand-in token for the
    # others, the whole answer "##final score: 3", is read as label 3 as generate mode reads it)
    with OpenAITestServer(ANSWERS, script=["no_logprobs"]) as server:
        judge = judge_for(server, mode="logprobs", allow_fallback=True, concurrency=1)
        run = judge_pairs([judge], PAIRS, *data)
    j = run.judgments[judge.id][PAIRS[0]]
    assert j.label == 3 and j.fallback.startswith("logprobs -> generate")
    assert run.stats[judge.id].fallback


def test_a_pair_that_keeps_failing_ends_unjudged_with_its_reason(data):
    with OpenAITestServer(ANSWERS, script=["500"] * 10) as server:
        opts = {"base_url": server.base_url, "backoff_base_s": 0.01, "max_retries": 2, "concurrency": 1}
        judge = Judge(JudgeSpec(model="openai:test-model", options=opts))
        run = judge_pairs([judge], PAIRS, *data)
    unjudged = [p for p, j in run.judgments[judge.id].items() if j.label is None]
    assert unjudged  # the first requests exhaust their retries on 500s
    for p in unjudged:
        assert "backend error" in run.judgments[judge.id][p].invalid_reason
    assert all(run.judgments[judge.id][p].label is not None for p in PAIRS if p not in unjudged)


def test_the_command_line_names_its_flag_where_the_library_names_allow_fallback(tiny, tmp_path):
    """The library's error names its argument (allow_fallback=True); `judgeblender judge` tells the
    same error with its own flag, through the one map of arguments to flags (cli/usage.py told)."""
    import subprocess
    import sys

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{p.qid}\t{p.docid}\n" for p in PAIRS))
    with OpenAITestServer(ANSWERS, script=["no_logprobs"] * 20) as server:
        done = subprocess.run(
            [sys.executable, "-m", "judgeblender", "judge", "-q", str(tiny / "queries.tsv"), "-c",
             str(tiny / "corpus.jsonl"), "-p", str(pairs), "-o", str(tmp_path / "out.qrels"), "-j",
             "openai:test-model", "--mode", "logprobs", "--base-url", server.base_url, "--store",
             str(tmp_path / "s.sqlite")], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0, done.stdout
    assert "--allow-fallback" in done.stderr and "allow_fallback" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("error:") == 1
