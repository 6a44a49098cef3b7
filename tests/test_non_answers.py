"""A non-answer is never a label (issue 15, part 2).

- logprobs mode: when the label tokens hold less than `min_choice_mass` of the next-token
  probability (the model wanted to say "Sorry"), the answer is invalid with that reason; the
  threshold is an option and is recorded in the details;
- generate mode: an answer cut at the token limit (finish_reason "length") or filtered
  ("content_filter") is invalid, whatever it holds;
- a pair whose prompt leaves no room for the passage is not sent, and says why.
Served cases run the real CLI against the test OpenAI server; the rest use the scripted model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from openai_server import OpenAITestServer

from judgeblender.backends.scripted import ScriptedBackend
from judgeblender.errors import JudgeblenderError
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.judges.judge import DEFAULT_MIN_CHOICE_MASS
from judgeblender.pairs import Pair

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture
def files(tmp_path):
    q, c, p = tmp_path / "q.tsv", tmp_path / "c.jsonl", tmp_path / "p.tsv"
    q.write_text("q1\twhat do goldfish eat\n")
    c.write_text(json.dumps({"docid": "d1", "text": "Goldfish eat flakes and pellets."}) + "\n")
    p.write_text("q1\td1\n")
    return q, c, p


def judge_cli(files, tmp_path: Path, srv: OpenAITestServer, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    q, c, p = files
    out = tmp_path / "out.qrels"
    cmd = [sys.executable, "-m", "judgeblender", "judge", "-q", str(q), "-c", str(c), "-p", str(p), "-o", str(out),
           "--store", str(tmp_path / "s.sqlite"), "-j", "openai:test-model", "--base-url", srv.base_url,
           "--timeout", "5", "--no-progress", "--json", *extra]
    done = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(SRC), "OPENAI_API_KEY": "sk-test"},
                          capture_output=True, text=True, timeout=120)
    details = (tmp_path / "out.qrels.details.jsonl")
    return done, json.loads(details.read_text().splitlines()[0]) if details.exists() else {}


# --- logprobs: the share of the mass on the label tokens ---------------------------------------
SORRY = [("Sorry", -0.000001), ("I", -14.0), ("0", -13.8)]  # "0" holds about 1e-6 of the mass


def test_logprobs_answer_with_almost_no_mass_on_the_labels_is_invalid(files, tmp_path):
    with OpenAITestServer(top_logprobs=SORRY) as srv:
        done, rec = judge_cli(files, tmp_path, srv, "--mode", "logprobs")
    assert done.returncode == 0, done.stderr
    assert rec["label"] is None
    assert f"below min_choice_mass {DEFAULT_MIN_CHOICE_MASS:g}" in rec["invalid_reason"]
    judgment = next(iter(rec["judges"].values()))
    assert judgment["min_choice_mass"] == DEFAULT_MIN_CHOICE_MASS
    assert judgment["steps"][0]["choice_mass"] < 1e-5
    assert (tmp_path / "out.qrels").read_text() == ""
    assert json.loads(done.stdout)["judges"][0]["invalid_outputs"] == 2  # asked, then asked once more


def test_min_choice_mass_is_an_option_and_is_recorded(files, tmp_path):
    with OpenAITestServer(top_logprobs=SORRY) as srv:
        done, rec = judge_cli(files, tmp_path, srv, "--mode", "logprobs", "--min-choice-mass", "0")
    assert done.returncode == 0, done.stderr
    assert rec["label"] == 0 and next(iter(rec["judges"].values()))["min_choice_mass"] == 0.0


def test_logprobs_answer_with_enough_mass_is_a_label(files, tmp_path):
    with OpenAITestServer(top_logprobs=[("2", -0.1), ("3", -2.5), ("The", -3.0)]) as srv:
        done, rec = judge_cli(files, tmp_path, srv, "--mode", "logprobs")
    assert done.returncode == 0 and rec["label"] == 2 and rec["invalid_reason"] is None


def test_min_choice_mass_out_of_range_is_a_usage_error(files, tmp_path):
    with OpenAITestServer() as srv:
        done, _ = judge_cli(files, tmp_path, srv, "--mode", "logprobs", "--min-choice-mass", "1.5")
        assert done.returncode == 2 and srv.request_count == 0
    with pytest.raises(JudgeblenderError, match="min_choice_mass"):
        Judge(JudgeSpec("scripted:x", mode="logprobs", min_choice_mass=float("nan")), backend=ScriptedBackend())


def test_scripted_low_mass_is_invalid_in_process():
    backend = ScriptedBackend(rules=[{"contains": "", "probs": {"0": 0.001, "1": 0.0005}}])
    judge = Judge(JudgeSpec("scripted:x", mode="logprobs", invalid_policy="no-retry", min_choice_mass=0.01),
                  backend=backend)
    run = judge_pairs([judge], [Pair("q1", "d1")], {"q1": "query"}, {"d1": "passage"})
    j = run.judgments[judge.id][Pair("q1", "d1")]
    assert j.label is None and "0.0015 of the next-token probability" in j.invalid_reason


# --- generate: cut or filtered answers ----------------------------------------------------------
@pytest.mark.parametrize("finish, words", [("length", "cut at the token limit"),
                                           ("content_filter", "withheld by the content filter")])
def test_generate_answer_cut_or_filtered_is_invalid(files, tmp_path, finish, words):
    # "##final score: 2" would parse as label 2: the finish reason says it is not the whole answer
    with OpenAITestServer(answers="##final score: 2", finish_reason=finish) as srv:
        done, rec = judge_cli(files, tmp_path, srv)
    assert done.returncode == 0, done.stderr
    assert rec["label"] is None and f"answer {words} (finish_reason: {finish})" in rec["invalid_reason"]


def test_generate_answer_that_stopped_is_read(files, tmp_path):
    with OpenAITestServer(answers="##final score: 2", finish_reason="stop") as srv:
        done, rec = judge_cli(files, tmp_path, srv)
    assert done.returncode == 0 and rec["label"] == 2


def test_scripted_cut_answer_is_invalid_in_process():
    backend = ScriptedBackend(rules=[{"contains": "", "output": "##final score: 3", "finish_reason": "length"}])
    judge = Judge(JudgeSpec("scripted:x", invalid_policy="no-retry"), backend=backend)
    run = judge_pairs([judge], [Pair("q1", "d1")], {"q1": "query"}, {"d1": "passage"})
    j = run.judgments[judge.id][Pair("q1", "d1")]
    assert j.label is None and "cut at the token limit" in j.invalid_reason


# --- a prompt with no room for the passage ------------------------------------------------------
def test_a_query_that_fills_the_context_is_not_judged(tmp_path):
    q, c, p = tmp_path / "q.tsv", tmp_path / "c.jsonl", tmp_path / "p.tsv"
    q.write_text("q1\t" + "goldfish " * 900 + "\nq2\twhat do goldfish eat\n")  # q1: ~2,700 tokens estimated
    c.write_text(json.dumps({"docid": "d1", "text": "Goldfish eat flakes and pellets."}) + "\n")
    p.write_text("q1\td1\nq2\td1\n")
    with OpenAITestServer(answers="##final score: 2") as srv:
        done, _ = judge_cli((q, c, p), tmp_path, srv, "--context-tokens", "2048")
        asked = [r.last_user_message for r in srv.requests if r.method == "POST"]
    assert done.returncode == 0, done.stderr
    assert len(asked) == 1 and "what do goldfish eat" in asked[0]  # q1's prompt was never sent
    recs = {r["qid"]: r for r in map(json.loads, (tmp_path / "out.qrels.details.jsonl").read_text().splitlines())}
    assert recs["q1"]["label"] is None
    assert "leaves no room for the passage in the model's 2048-token context" in recs["q1"]["invalid_reason"]
    assert recs["q2"]["label"] == 2
    summary = json.loads(done.stdout)["judges"][0]
    assert summary["no_room"] == 1 and summary["judged"] == 1
    assert (tmp_path / "out.qrels").read_text().split() == ["q2", "0", "d1", "2"]
