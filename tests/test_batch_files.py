"""`judge --batch-write / --batch-read`: served judging through Batch API files, via the CLI.

The provider is played by `provider_answers`, which answers a requests file the way the
Batch API's output file does. A real test server stands behind every judge, to prove which
calls go live: none while batch files answer them.
"""

from __future__ import annotations

import json
from pathlib import Path

from openai_server import OpenAITestServer
from typer.testing import CliRunner

from judgeblender.cli import app
from judgeblender.errors import CallsFailed


def judge(tiny: Path, tmp_path: Path, srv: OpenAITestServer, *extra: str, mode: str = "logprobs"):
    args = ["judge", "-q", str(tiny / "queries.tsv"), "-c", str(tiny / "corpus.jsonl"), "-p", str(tiny / "qrels.txt"),
            "--judge", "openai:batch-model", "--base-url", srv.base_url, "--mode", mode,
            "--store", str(tmp_path / "store.sqlite"), "--no-progress", *extra]
    return CliRunner().invoke(app, args)


def provider_answers(requests: Path, output: Path, answer) -> None:
    """Write the Batch API output file for a requests file: answer(body) -> text or None (a failed line)."""
    lines = []
    for raw in requests.read_text().splitlines():
        req = json.loads(raw)
        text = answer(req["body"])
        if text is None:
            lines.append({"custom_id": req["custom_id"], "response": None,
                          "error": {"code": "server_error", "message": "boom"}})
            continue
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        if req["body"].get("logprobs"):
            top = [{"token": text, "logprob": -0.05}, {"token": "0", "logprob": -3.0}]
            choice["logprobs"] = {"content": [{"token": text, "logprob": -0.05, "top_logprobs": top}]}
        lines.append({"custom_id": req["custom_id"], "error": None,
                      "response": {"status_code": 200, "body": {"choices": [choice], "model": req["body"]["model"]}}})
    output.write_text("".join(json.dumps(x) + "\n" for x in lines))


def by_passage(body) -> str:
    user = body["messages"][-1]["content"]
    return "3" if "flakes" in user else "1" if "freshwater" in user else "2"


def qrels_lines(path: Path) -> list[str]:
    return sorted(path.read_text().splitlines())


def test_write_then_read_judges_every_pair_without_a_live_call(tiny, tmp_path):
    with OpenAITestServer(answers="0") as srv:
        first = judge(tiny, tmp_path, srv, "--batch-write", str(tmp_path / "req.jsonl"), "--out", str(tmp_path / "a.qrels"))
        assert first.exit_code == 0, first.output
        requests = [json.loads(x) for x in (tmp_path / "req.jsonl").read_text().splitlines()]
        assert len(requests) == 4 and len({r["custom_id"] for r in requests}) == 4
        assert all(r["url"] == "/v1/chat/completions" and r["body"]["model"] == "batch-model"
                   and r["body"]["logprobs"] is True and r["body"]["max_tokens"] == 1 for r in requests)
        assert (tmp_path / "a.qrels").read_text() == ""  # nothing judged yet
        assert "queued for the Batch API" in first.output and "wrote 4 Batch API requests" in first.output

        provider_answers(tmp_path / "req.jsonl", tmp_path / "out.jsonl", by_passage)
        second = judge(tiny, tmp_path, srv, "--batch-read", str(tmp_path / "out.jsonl"), "--out", str(tmp_path / "b.qrels"))
        assert second.exit_code == 0, second.output
        assert qrels_lines(tmp_path / "b.qrels") == ["q1 0 d1 3", "q1 0 d2 1", "q2 0 d3 2", "q2 0 d4 2"]

        # the answers are in the store: a plain run makes no call either
        third = judge(tiny, tmp_path, srv, "--out", str(tmp_path / "c.qrels"))
        assert third.exit_code == 0, third.output
        assert qrels_lines(tmp_path / "c.qrels") == qrels_lines(tmp_path / "b.qrels")
        assert srv.request_count == 0


def test_invalid_answers_and_failed_lines_queue_the_next_batch(tiny, tmp_path):
    with OpenAITestServer(answers="0") as srv:
        judge(tiny, tmp_path, srv, "--batch-write", str(tmp_path / "req.jsonl"), "--out", str(tmp_path / "a.qrels"),
              mode="generate")

        def answer(body):  # d1: an answer without a label; d2: a failed line; the rest answered
            user = body["messages"][-1]["content"]
            return "I cannot tell." if "flakes" in user else None if "freshwater" in user else "##final score: 2"

        provider_answers(tmp_path / "req.jsonl", tmp_path / "out.jsonl", answer)
        second = judge(tiny, tmp_path, srv, "--batch-read", str(tmp_path / "out.jsonl"),
                       "--batch-write", str(tmp_path / "next.jsonl"), "--out", str(tmp_path / "b.qrels"), mode="generate")
        # the failed line is a failed call: CallsFailed (exit 3 from main) once the rest is written;
        # the queued retry is not a failure
        assert isinstance(second.exception, CallsFailed), second.output
        assert str(second.exception).startswith("1 of 4 pairs not judged because their model calls failed")
        assert qrels_lines(tmp_path / "b.qrels") == ["q2 0 d3 2", "q2 0 d4 2"]
        assert "out.jsonl:" in second.output and "server_error: boom" in second.output  # the failed line, named
        queued = [json.loads(x) for x in (tmp_path / "next.jsonl").read_text().splitlines()]
        # only the invalid answer's retry is queued (it samples: temperature 0.5, the next seed)
        assert len(queued) == 1 and queued[0]["body"]["temperature"] == 0.5 and queued[0]["body"]["seed"] == 1
        assert srv.request_count == 0


def test_read_alone_calls_live_for_what_the_file_lacks(tiny, tmp_path):
    with OpenAITestServer(answers="2", top_logprobs=[("2", -0.1), ("1", -2.5)]) as srv:
        judge(tiny, tmp_path, srv, "--batch-write", str(tmp_path / "req.jsonl"), "--out", str(tmp_path / "a.qrels"))
        lines = (tmp_path / "req.jsonl").read_text().splitlines()
        (tmp_path / "half.jsonl").write_text("\n".join(lines[:2]) + "\n")
        provider_answers(tmp_path / "half.jsonl", tmp_path / "out.jsonl", lambda body: "3")
        result = judge(tiny, tmp_path, srv, "--batch-read", str(tmp_path / "out.jsonl"), "--out", str(tmp_path / "b.qrels"))
        assert result.exit_code == 0, result.output
        labels = [line.split()[3] for line in qrels_lines(tmp_path / "b.qrels")]
        assert sorted(labels) == ["2", "2", "3", "3"] and srv.request_count == 2


def test_batch_files_need_a_served_model(tiny, tmp_path, mock_model):
    result = CliRunner().invoke(app, ["judge", "-q", str(tiny / "queries.tsv"), "-c", str(tiny / "corpus.jsonl"),
                                      "-p", str(tiny / "qrels.txt"), "--judge", "mock:x", "--out",
                                      str(tmp_path / "a.qrels"), "--store", str(tmp_path / "s.sqlite"),
                                      "--batch-write", str(tmp_path / "req.jsonl"), "--no-progress"])
    assert result.exit_code != 0
    assert "work with served models" in str(result.exception) + result.output
