"""Only finished answers count (issue 20, part 2).

In generate mode an answer is read only when the server says it ended normally: a finish
reason on calls.FINISHED_NORMALLY (an allow-list). Any other reason ("length",
"content_filter", "tool_calls", Anthropic's "max_tokens", one never seen) or none at all makes
the stored answer invalid with that reason. "abort" and "error" are failed calls: retried,
then not stored, counted for exit status 3, and asked again on a re-run. Logprobs mode (one
token asked for) keeps its own rules. Served cases run the real CLI against the test server on
127.0.0.1; Batch API results and the scripted backend follow the same rule.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from openai_server import OpenAITestServer
from test_non_answers import files, judge_cli  # noqa: F401 - a fixture and the CLI runner
from typer.testing import CliRunner

from judgeblender.backends.scripted import ScriptedBackend
from judgeblender.calls import FINISHED_NORMALLY
from judgeblender.cli import app
from judgeblender.errors import CallsFailed
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.pairs import Pair
from judgeblender.store import CallStore


def stored_calls(tmp_path: Path) -> list[tuple[str, str]]:
    """(raw output, extra as JSON text) of every stored call, read through the store."""
    with CallStore(tmp_path / "s.sqlite") as store:
        return [(rec["raw_output"], json.dumps(rec["extra"] or {})) for rec in store.iter_calls()]


def served_judge(srv: OpenAITestServer, **options) -> Judge:
    opts = {"base_url": srv.base_url, "timeout_s": 5.0, "backoff_base_s": 0.01, **options}
    return Judge(JudgeSpec(model="openai:test-model", options=opts))


def judge_one(judge: Judge, store: CallStore | None = None):
    run = judge_pairs([judge], [Pair("q1", "d1")], {"q1": "what do goldfish eat"}, {"d1": "Goldfish eat flakes."},
                      store=store)
    return run.judgments[judge.id][Pair("q1", "d1")]


# --- finish reasons off the allow-list ------------------------------------------------------
@pytest.mark.parametrize("finish, words", [
    ("tool_calls", "answer a tool call, not a text answer (finish_reason: tool_calls)"),
    ("max_tokens", "answer did not end normally (finish_reason: max_tokens)"),  # Anthropic's "length"
    ("recitation", "answer did not end normally (finish_reason: recitation)"),
    ("STOP", "answer did not end normally (finish_reason: STOP)"),  # not OpenAI's spelling: not guessed
])
def test_an_answer_with_a_finish_reason_off_the_allow_list_is_invalid_with_that_reason(files, tmp_path, finish, words):
    # "##final score: 2" would parse as label 2: the server did not say the answer ended normally
    with OpenAITestServer(answers="##final score: 2", finish_reason=finish) as srv:
        done, rec = judge_cli(files, tmp_path, srv, "--invalid", "no-retry")
    assert done.returncode == 0, done.stderr
    assert rec["label"] is None and rec["invalid_reason"].endswith(words)
    assert (tmp_path / "out.qrels").read_text() == ""
    # the answer is stored (a re-run does not ask again) and stays invalid when read back
    with OpenAITestServer(answers="##final score: 2") as again:
        done, rec = judge_cli(files, tmp_path, again, "--invalid", "no-retry")
        assert again.request_count == 0
    assert rec["label"] is None and rec["invalid_reason"].endswith(words)


@pytest.mark.parametrize("fault", ["finish_null", "finish_missing"])
def test_an_answer_without_a_finish_reason_is_invalid_and_says_so(files, tmp_path, fault):
    with OpenAITestServer(answers="##final score: 2", script=[fault, fault]) as srv:
        done, rec = judge_cli(files, tmp_path, srv)
        assert srv.request_count == 2  # invalid, so asked once more (the default policy), as any invalid answer
    assert done.returncode == 0, done.stderr
    assert rec["label"] is None
    assert "no finish reason: the server did not say that the answer ended normally" in rec["invalid_reason"]
    assert all("finish_reason" not in json.loads(extra) for _, extra in stored_calls(tmp_path))


@pytest.mark.parametrize("finish", sorted(FINISHED_NORMALLY))
def test_an_answer_that_ended_normally_in_any_documented_spelling_is_read(finish, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with OpenAITestServer(answers="##final score: 2", finish_reason=finish) as srv:
        j = judge_one(served_judge(srv))
    assert j.label == 2 and j.invalid_reason is None


def test_an_answer_without_a_finish_reason_then_a_finished_one_on_retry_is_read(files, tmp_path):
    with OpenAITestServer(answers="##final score: 3", script=["finish_null", "ok"]) as srv:
        done, rec = judge_cli(files, tmp_path, srv)
    assert done.returncode == 0, done.stderr
    assert rec["label"] == 3
    steps = next(iter(rec["judges"].values()))["steps"]
    assert [s["invalid_reason"] for s in steps] == [
        "no finish reason: the server did not say that the answer ended normally", None]


# --- abort and error: failed calls, not answers ---------------------------------------------
@pytest.mark.parametrize("finish", ["abort", "error"])
def test_an_aborted_or_errored_call_is_not_stored_counts_as_failed_and_is_asked_again(tmp_path, finish, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    pairs, queries, corpus = [Pair("q1", "d1")], {"q1": "what do goldfish eat"}, {"d1": "Goldfish eat flakes."}
    with CallStore(tmp_path / "s.sqlite") as store:
        with OpenAITestServer(answers="##final score: 2", finish_reason=finish) as srv:
            run = judge_pairs([served_judge(srv, max_retries=1)], pairs, queries, corpus, store=store)
            assert srv.request_count == 2  # retried once, as a 5xx would be
        stats = next(iter(run.stats.values()))
        j = next(iter(next(iter(run.judgments.values())).values()))
        assert j.label is None and f"finish_reason: {finish}" in j.invalid_reason
        assert stats.failed_calls == 1 and stats.calls_made == 0  # the CLI exits 3 on a failed call
    assert stored_calls(tmp_path) == []
    with CallStore(tmp_path / "s.sqlite") as store, OpenAITestServer(answers="##final score: 2") as again:
        run = judge_pairs([served_judge(again)], pairs, queries, corpus, store=store)
        assert again.request_count == 1  # asked again on the re-run, and answered
    assert next(iter(next(iter(run.judgments.values())).values())).label == 2


def test_an_errored_call_then_an_answer_is_one_retry(files, tmp_path):
    finishes = iter(["error", "stop"])
    with OpenAITestServer(answers="##final score: 1", finish_reason=lambda body: next(finishes)) as srv:
        done, rec = judge_cli(files, tmp_path, srv)
        assert srv.request_count == 2
    assert done.returncode == 0, done.stderr
    assert rec["label"] == 1 and json.loads(done.stdout)["judges"][0]["backend_retries"] == 1


# --- logprobs mode keeps its rules -----------------------------------------------------------
def test_a_logprobs_answer_is_read_whatever_its_finish_reason(files, tmp_path):
    # one token is asked for, so "length" is the normal ending; the label comes from the probabilities
    with OpenAITestServer(top_logprobs=[("2", -0.1), ("3", -2.5)], finish_reason="length") as srv:
        done, rec = judge_cli(files, tmp_path, srv, "--mode", "logprobs")
    assert done.returncode == 0, done.stderr
    assert rec["label"] == 2 and rec["invalid_reason"] is None


# --- Batch API results follow the same rule ---------------------------------------------------
def batch_judge(tiny: Path, tmp_path: Path, srv: OpenAITestServer, *extra: str):
    """`judge` of the tiny data set through Batch API files, in generate mode, invalid answers not re-asked."""
    args = ["judge", "-q", str(tiny / "queries.tsv"), "-c", str(tiny / "corpus.jsonl"), "-p", str(tiny / "qrels.txt"),
            "--judge", "openai:batch-model", "--base-url", srv.base_url, "--invalid", "no-retry",
            "--store", str(tmp_path / "store.sqlite"), "--no-progress", *extra]
    return CliRunner().invoke(app, args)


def batch_output(requests: Path, output: Path, answer) -> None:
    """The Batch API output file for a requests file, each line's answer() = (content, finish_reason)."""
    lines = []
    for raw in requests.read_text().splitlines():
        content, finish = answer()
        choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}
        lines.append({"custom_id": json.loads(raw)["custom_id"], "error": None,
                      "response": {"status_code": 200, "body": {"choices": [choice]}}})
    output.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_batch_results_count_only_answers_that_ended_normally(tiny, tmp_path):
    finishes = iter(["stop", "length", None, "abort"])
    with OpenAITestServer(answers="##final score: 0") as srv:
        first = batch_judge(tiny, tmp_path, srv, "--batch-write", str(tmp_path / "req.jsonl"),
                            "--out", str(tmp_path / "a.qrels"))
        assert first.exit_code == 0, first.output
        batch_output(tmp_path / "req.jsonl", tmp_path / "out.jsonl", lambda: ("##final score: 2", next(finishes)))
        second = batch_judge(tiny, tmp_path, srv, "--batch-read", str(tmp_path / "out.jsonl"),
                             "--out", str(tmp_path / "b.qrels"))
        assert srv.request_count == 0
    assert isinstance(second.exception, CallsFailed), second.output  # the aborted line: exit 3
    details = [json.loads(x) for x in (tmp_path / "b.qrels.details.jsonl").read_text().splitlines()]
    reasons = sorted(d["invalid_reason"] or "" for d in details)
    assert [d["label"] for d in details].count(2) == 1  # only the answer that stopped
    assert any("cut at the token limit (finish_reason: length)" in r for r in reasons)
    assert any("no finish reason" in r for r in reasons)
    assert any("finish_reason: abort" in r for r in reasons)
    db = sqlite3.connect(tmp_path / "store.sqlite")
    try:
        assert db.execute("SELECT COUNT(*) FROM calls").fetchone()[0] == 3  # the aborted call is not stored
    finally:
        db.close()


# --- the scripted backend, as the embedded ones, says how its answers ended --------------------
def test_a_scripted_answer_ends_with_stop_unless_its_rule_says_otherwise():
    backend = ScriptedBackend(rules=[{"contains": "lost", "output": "##final score: 3", "finish_reason": None},
                                     {"contains": "", "output": "##final score: 3"}])
    judge = Judge(JudgeSpec("scripted:x", invalid_policy="no-retry"), backend=backend)
    run = judge_pairs([judge], [Pair("q1", "d1"), Pair("q1", "d2")], {"q1": "query"},
                      {"d1": "a lost passage", "d2": "a passage"})
    lost, found = run.judgments[judge.id][Pair("q1", "d1")], run.judgments[judge.id][Pair("q1", "d2")]
    assert lost.label is None and "no finish reason" in lost.invalid_reason
    assert found.label == 3


# --- answers of in-process models stored before finish reasons were recorded -------------------
class OldEmbeddedModel(ScriptedBackend):
    """Stands for llama.cpp in a store written before issue 15: the test only reads stored rows."""

    kind = "llamacpp"


@pytest.mark.parametrize("tokens_out, label", [(5, 2), (100, None), (0, None)])
def test_an_in_process_answer_stored_without_a_finish_reason_counts_only_if_it_stopped_before_max_tokens(
        tmp_path, tokens_out, label):
    backend = OldEmbeddedModel(default="##final score: 2")
    judge = Judge(JudgeSpec("scripted:x", invalid_policy="no-retry"), backend=backend)
    with CallStore(tmp_path / "s.sqlite") as store:
        judge_one(judge, store)
    db = sqlite3.connect(tmp_path / "s.sqlite")
    try:  # as the store of an older version has it: no finish reason (schema 5: store migration 6 records it)
        db.execute("UPDATE calls SET extra = NULL, tokens_out = ?", (tokens_out,))
        db.execute("PRAGMA user_version=5")
        db.commit()
    finally:
        db.close()
    backend.calls.clear()
    with CallStore(tmp_path / "s.sqlite") as store:
        j = judge_one(judge, store)
    assert backend.calls == []  # read from the store
    assert j.label == label
    if label is None:
        assert ("cut at the token limit" if tokens_out else "no finish reason") in j.invalid_reason

