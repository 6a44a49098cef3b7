"""The openai:MODEL backend against a real OpenAI-compatible HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from email.utils import formatdate

import pytest
from openai_server import Fault, OpenAITestServer, openai_server_factory  # noqa: F401 - fixture

from judgeblender.backends.base import LogprobsUnsupported
from judgeblender.calls import CallRequest, Message
from judgeblender.backends.openai_batch import read_batch_results, write_batch_file
from judgeblender.backends.openai_compat import OpenAICompatBackend, create, parse_retry_after
from judgeblender.masking import public_base_url
from judgeblender.backends.registry import create_backend
from judgeblender.errors import BackendError, InputError

PLANTED = "sk-test-PLANTED-123"
CHOICES = ("0", "1", "2", "3")


def gen(text: str = "Query: cats. Passage: about cats. Score?", **kw) -> CallRequest:
    return CallRequest(messages=(Message("system", "You judge relevance."), Message("user", text)), **kw)


def lp(text: str = "Query: cats. Passage: about cats.", prefix: str = "Relevance:") -> CallRequest:
    return CallRequest(
        messages=(Message("user", text),), mode="logprobs", answer_prefix=prefix, choices=CHOICES, seed=7
    )


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    # Every test starts from a known environment with the planted key.
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    for var in ("OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "OPENAI_CUSTOM_HEADERS", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(var, raising=False)


def backend(srv: OpenAITestServer, **kw) -> OpenAICompatBackend:
    kw.setdefault("backoff_base_s", 0.01)
    kw.setdefault("timeout_s", 5.0)
    return create("judge-model", base_url=srv.base_url, **kw)


def assert_no_key(*texts: str) -> None:
    for t in texts:
        assert PLANTED not in t


# --- generate ----------------------------------------------------------------------------
def test_generate_sends_settings_and_returns_text(openai_server_factory):
    srv = openai_server_factory(answers={"cats": "3", "dogs": "0"})
    b = backend(srv)
    try:
        r = b.execute(gen(temperature=0.0, seed=11, max_tokens=64))
        r2 = b.execute(gen("Query: dogs. Passage: about birds."))
    finally:
        b.close()
    assert (r.text, r2.text) == ("3", "0")
    assert r.tokens_in > 0 and r.tokens_out == 1
    assert r.latency_s > 0
    assert r.extra["retries"] == 0 and r.extra["finish_reason"] == "stop"
    body = srv.requests[0].body
    assert body["model"] == "judge-model"
    assert body["temperature"] == 0.0 and body["seed"] == 11 and body["max_tokens"] == 64
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "logprobs" not in body and "response_format" not in body
    # the key from the environment is what the server received
    assert srv.requests[0].headers["authorization"] == f"Bearer {PLANTED}"
    # one request per call (the SDK's own retries are off), and none of the SDK's telemetry headers
    # (only the one by which it is asked for the raw response, which it sends as it is)
    assert len(srv.requests) == 2
    assert [h for h in srv.requests[0].headers if h.startswith("x-stainless")] == ["x-stainless-raw-response"]
    assert srv.requests[0].headers["user-agent"].startswith("AsyncOpenAI/Python")
    assert b.retries_total == 0


def test_json_schema_becomes_response_format(openai_server_factory):
    srv = openai_server_factory(answers='{"score": 2}')
    schema = {"title": "Rubric score", "type": "object", "properties": {"score": {"type": "integer"}}}
    b = backend(srv)
    try:
        r = b.execute(gen(json_schema=schema))
    finally:
        b.close()
    assert json.loads(r.text) == {"score": 2}
    rf = srv.requests[0].body["response_format"]
    assert rf["type"] == "json_schema"
    assert rf["json_schema"]["schema"] == schema and rf["json_schema"]["name"] == "Rubric_score"


def test_max_completion_tokens_option(openai_server_factory):
    srv = openai_server_factory()
    b = backend(srv, max_tokens_param="max_completion_tokens")
    try:
        b.execute(gen(max_tokens=9))
    finally:
        b.close()
    body = srv.requests[0].body
    assert body["max_completion_tokens"] == 9 and "max_tokens" not in body


# --- retries -----------------------------------------------------------------------------
def test_429_with_retry_after_then_success(openai_server_factory):
    srv = openai_server_factory(answers="2", script=[Fault("429", retry_after="0.1")])
    b = backend(srv, backoff_base_s=5.0)  # a backoff this long would fail the timing: Retry-After rules
    try:
        t0 = time.monotonic()
        r = b.execute(gen())
        elapsed = time.monotonic() - t0
    finally:
        b.close()
    assert r.text == "2"
    assert b.retries_total == 1 and r.extra["retries"] == 1
    assert b.retry_reasons["HTTP 429"] == 1
    assert srv.outcomes() == ["429", "ok"]
    assert 0.1 <= elapsed < 2.0


def test_500_then_success(openai_server_factory):
    srv = openai_server_factory(script=["500", "502", "504"])
    b = backend(srv)
    try:
        r = b.execute(gen())
    finally:
        b.close()
    assert r.text == "2" and b.retries_total == 3
    assert srv.outcomes() == ["500", "502", "504", "ok"]


def test_hang_times_out_then_retry_succeeds(openai_server_factory):
    srv = openai_server_factory(script=[Fault("hang", hang_s=10)])
    b = backend(srv, timeout_s=0.5)
    try:
        t0 = time.monotonic()
        r = b.execute(gen())
        elapsed = time.monotonic() - t0
    finally:
        b.close()
    assert r.text == "2" and b.retries_total == 1
    assert b.retry_reasons["timeout"] == 1
    assert 0.5 <= elapsed < 3.0
    assert srv.request_count == 2


@pytest.mark.parametrize("fault", ["close", "close_mid", "malformed_json", "empty_choices", "no_content"])
def test_broken_answers_are_retried(openai_server_factory, fault):
    srv = openai_server_factory(answers="1", script=[fault])
    b = backend(srv)
    try:
        r = b.execute(gen())
    finally:
        b.close()
    assert r.text == "1" and b.retries_total == 1
    assert srv.outcomes() == [fault, "ok"]


def test_persistent_failure_raises_after_max_retries(openai_server_factory):
    srv = openai_server_factory(fault_rates={"503": 1.0})
    b = backend(srv, max_retries=3)
    try:
        with pytest.raises(BackendError) as err:
            b.execute(gen())
    finally:
        b.close()
    msg = str(err.value)
    assert "4 attempts" in msg and "HTTP 503" in msg and "upstream failure 503" in msg
    assert srv.request_count == 4 and b.retries_total == 3
    assert_no_key(msg, repr(err.value))
    # the SDK's exception (which holds the request, headers included) is not chained on
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_persistent_empty_choices_raises(openai_server_factory):
    srv = openai_server_factory(fault_rates={"empty_choices": 1.0})
    b = backend(srv, max_retries=2)
    try:
        with pytest.raises(BackendError, match="no choices"):
            b.execute(gen())
    finally:
        b.close()
    assert srv.request_count == 3


def test_non_retryable_4xx_fails_at_once_without_the_key(openai_server_factory):
    # A careless server that echoes the key in its message: the error must not repeat it.
    srv = openai_server_factory(script=[Fault("400", message=f"invalid model for key {PLANTED}")])
    b = backend(srv)
    try:
        with pytest.raises(BackendError) as err:
            b.execute(gen())
    finally:
        b.close()
    msg = str(err.value)
    assert "HTTP 400" in msg and "invalid model for key ***" in msg
    assert_no_key(msg)
    assert srv.request_count == 1 and b.retries_total == 0


def test_retry_after_beyond_the_cap_waits_the_cap_then_retries(openai_server_factory):
    # docs/reliability.md: Retry-After is honoured up to max_retry_after_s (120 s by default);
    # a longer one (300 s here) is waited for the cap, then the call is asked again. It used to
    # give up after the one request. The cap is small here so the test is quick.
    srv = openai_server_factory(answers="2", script=[Fault("429", retry_after="300")])
    b = backend(srv, max_retry_after_s=0.3, backoff_base_s=60.0, backoff_max_s=60.0)
    try:
        started = time.monotonic()
        r = b.execute(gen())
        waited = time.monotonic() - started
    finally:
        b.close()
    assert r.text == "2" and srv.request_count == 2 and b.retries_total == 1
    assert 0.3 <= waited < 20.0  # the cap, not 300 s and not the 30 to 60 s backoff


def test_retry_after_beyond_the_cap_every_time_fails_the_call_with_the_reason(openai_server_factory):
    srv = openai_server_factory(script=[Fault("429", retry_after="300")] * 3)
    b = backend(srv, max_retry_after_s=0.05, max_retries=2)
    try:
        with pytest.raises(BackendError) as err:
            b.execute(gen())
    finally:
        b.close()
    msg = str(err.value)
    assert "failed after 3 attempts" in msg and "HTTP 429" in msg
    assert "Retry-After 300 s, waited at most the cap max_retry_after_s=0.05 s" in msg
    assert srv.request_count == 3


def test_retry_after_parsing():
    assert parse_retry_after({"Retry-After": "0.25"}) == 0.25
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    now = 1_700_000_000.0
    assert parse_retry_after({"Retry-After": formatdate(now + 30, usegmt=True)}, now=now) == pytest.approx(30)
    assert parse_retry_after({"Retry-After": formatdate(now - 30, usegmt=True)}, now=now) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({"Retry-After": "-1"}) is None
    assert parse_retry_after({}) is None


# --- logprobs ----------------------------------------------------------------------------
def test_logprobs_distribution_from_top_logprobs(openai_server_factory):
    top = [(" 2", -0.5), ("2", -1.0), ("1", -1.5), ("The", -2.0), (" 3 ", -6.0)]
    srv = openai_server_factory(top_logprobs=top)
    b = backend(srv)
    try:
        r = b.execute(lp())
    finally:
        b.close()
    # "2" takes the best of " 2" and "2"; "0" never appears.
    w = {"0": 0.0, "1": math.exp(-1.5), "2": math.exp(-0.5), "3": math.exp(-6.0)}
    total = sum(w.values())
    assert r.probs is not None and set(r.probs) == set(CHOICES)
    for c in CHOICES:
        assert r.probs[c] == pytest.approx(w[c] / total)
    assert r.choice_mass == pytest.approx(total)
    assert r.text == "2"
    assert r.extra["generated_token"] == " 2"
    body = srv.requests[0].body
    assert body["logprobs"] is True and body["top_logprobs"] == 20
    assert body["max_tokens"] == 1 and body["temperature"] == 0.0 and body["seed"] == 7
    # instruct mode: the prefix is turned into an instruction in the last user message
    last = body["messages"][-1]
    assert last["role"] == "user" and last["content"].startswith("Query: cats.")
    assert 'Complete "Relevance:" with the label alone: one of 0, 1, 2, 3.' in last["content"]


def test_logprobs_top_k_is_configurable(openai_server_factory):
    srv = openai_server_factory(top_logprobs=[("1", -0.1), ("0", -2.5), ("2", -3.0)])
    b = backend(srv, top_logprobs=2)
    try:
        r = b.execute(lp())
    finally:
        b.close()
    assert srv.requests[0].body["top_logprobs"] == 2
    assert r.probs is not None and r.probs["2"] == 0.0 and r.text == "1"


def test_logprobs_without_any_choice_has_zero_mass(openai_server_factory):
    srv = openai_server_factory(top_logprobs=[("The", -0.1), ("Score", -2.5)])
    b = backend(srv)
    try:
        r = b.execute(lp())
    finally:
        b.close()
    assert r.choice_mass == 0.0 and r.text == "" and r.probs == {c: 0.0 for c in CHOICES}


def test_logprobs_prefill_mode(openai_server_factory):
    srv = openai_server_factory(top_logprobs=[("3", -0.01)])
    b = backend(srv, answer_prefix_mode="prefill")
    try:
        r = b.execute(lp(prefix="Relevance: "))
    finally:
        b.close()
    assert r.text == "3"
    body = srv.requests[0].body
    assert body["messages"][-1] == {"role": "assistant", "content": "Relevance: "}
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False


@pytest.mark.parametrize("fault", ["no_logprobs", "reject_logprobs"])
def test_logprobs_unsupported(openai_server_factory, fault):
    srv = openai_server_factory(script=[fault])
    b = backend(srv)
    try:
        with pytest.raises(LogprobsUnsupported) as err:
            b.execute(lp())
        assert b.execute(gen()).text == "2"  # the backend still works for generate mode
    finally:
        b.close()
    assert srv.outcomes() == [fault, "ok"] and b.retries_total == 0
    assert_no_key(str(err.value))


# --- concurrency -------------------------------------------------------------------------
def test_concurrency_is_bounded_and_parallel(openai_server_factory):
    srv = openai_server_factory(delay_s=0.2)
    b = backend(srv, concurrency=8)
    assert b.max_concurrency == 8

    async def main():
        t0 = time.monotonic()
        results = await asyncio.gather(*(b.aexecute(gen(f"q{i}")) for i in range(16)))
        elapsed = time.monotonic() - t0
        await b.aclose()
        return results, elapsed

    results, elapsed = asyncio.run(main())
    b.close()
    assert [r.text for r in results] == ["2"] * 16
    assert elapsed < 1.2, elapsed
    assert srv.max_in_flight <= 8
    assert srv.max_in_flight >= 4  # really in parallel
    assert srv.request_count == 16


def test_high_concurrency_spreads_over_clients(openai_server_factory):
    srv = openai_server_factory(delay_s=0.1)
    b = backend(srv, concurrency=20)

    async def main():
        try:
            return await asyncio.gather(*(b.aexecute(gen(f"q{i}")) for i in range(60)))
        finally:
            await b.aclose()

    t0 = time.monotonic()
    results = asyncio.run(main())
    elapsed = time.monotonic() - t0
    b.close()
    assert len(results) == 60 and all(r.text == "2" for r in results)
    assert 10 <= srv.max_in_flight <= 20
    assert elapsed < 3.0, elapsed  # ideal 0.3 s; loose, a functional check of parallelism


def test_execute_from_many_threads(openai_server_factory):
    srv = openai_server_factory(delay_s=0.05)
    b = backend(srv, concurrency=4)
    try:
        with ThreadPoolExecutor(max_workers=12) as pool:
            texts = list(pool.map(lambda i: b.execute(gen(f"q{i}")).text, range(24)))
    finally:
        b.close()
    assert texts == ["2"] * 24
    assert 1 <= srv.max_in_flight <= 4


def test_execute_inside_a_running_event_loop_and_after_close(openai_server_factory):
    srv = openai_server_factory()
    b = backend(srv)

    async def main():
        return b.execute(gen())  # blocks this loop, but runs on the backend's own loop

    try:
        assert asyncio.run(main()).text == "2"
        b.close()
        assert b.execute(gen()).text == "2"  # reconnects after close()

        async def in_another_loop():
            try:
                return await b.aexecute(gen())  # a second loop gets its own clients
            finally:
                await b.aclose()

        assert asyncio.run(in_another_loop()).text == "2"
    finally:
        b.close()
    assert srv.request_count == 3


# --- secrets and identity ----------------------------------------------------------------
def test_planted_key_never_shows(openai_server_factory, caplog):
    srv = openai_server_factory(script=["429", Fault("400", message="nope")])
    caplog.set_level(logging.DEBUG)
    b = backend(srv)
    try:
        with pytest.raises(BackendError) as err:
            b.execute(gen())
    finally:
        b.close()
    assert srv.requests[0].headers["authorization"] == f"Bearer {PLANTED}"
    assert_no_key(repr(b), str(b.identity()), json.dumps(b.identity()), str(err.value), repr(err.value), caplog.text)
    assert_no_key(repr(vars(b)), b.name)
    assert "openai_compat" in caplog.text or "retry" in caplog.text  # the retry was logged, keylessly


def test_identity_without_credentials(openai_server_factory):
    srv = openai_server_factory()
    url = f"http://user:pass@127.0.0.1:{srv.port}/v1/?token=abc"
    b = create("judge-model", base_url=url, model_revision="2024-08-06", context_tokens=8192)
    assert b.identity() == {
        "backend": "openai",
        "model": "judge-model",
        "revision": "2024-08-06",
    }  # what it serves, not where it listens (no base_url: tests/test_resume_served.py)
    assert b.context_tokens() == 8192 and b.name == "openai:judge-model"
    assert "pass" not in repr(b) and "token" not in repr(b)
    assert "pass" not in repr(vars(b)) and "token=abc" not in repr(vars(b))
    # settings that change logprobs answers are part of the identity when not the default
    b2 = create("judge-model", base_url=url, answer_prefix_mode="prefill", top_logprobs=5)
    assert b2.identity()["answer_prefix_mode"] == "prefill" and b2.identity()["top_logprobs"] == 5
    assert public_base_url("https://api.openai.com/v1/") == "https://api.openai.com/v1"


def test_base_url_from_environment(openai_server_factory, monkeypatch):
    srv = openai_server_factory(answers="1")
    monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
    b = create_backend("openai:judge-model", concurrency="2")
    try:
        assert isinstance(b, OpenAICompatBackend) and b.max_concurrency == 2
        assert b.execute(gen()).text == "1"
    finally:
        b.close()


def test_local_server_without_key_uses_placeholder(openai_server_factory, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    srv = openai_server_factory()
    b = backend(srv)
    try:
        assert b.execute(gen()).text == "2"
    finally:
        b.close()
    assert srv.requests[0].headers["authorization"] == "Bearer unused"


def test_default_openai_endpoint_needs_a_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(BackendError, match="OPENAI_API_KEY"):
        create("gpt-4o-mini")
    monkeypatch.setenv("MY_KEY", PLANTED)
    b = create("gpt-4o-mini", api_key_env="MY_KEY")  # no network until a call
    assert b.public_base_url == "https://api.openai.com/v1" and "base_url" not in b.identity()
    assert_no_key(repr(b))


def test_a_missing_key_on_the_command_line_names_the_option_it_has(tmp_path):
    """The error names what the user can act on where they are: `--api-key-env` on the command
    line, `api_key_env` and `api_key_file` in Python or a panel file; one line, exit 2, no call."""
    import subprocess
    import sys

    (tmp_path / "q.tsv").write_text("q1\tcats\n")
    (tmp_path / "c.jsonl").write_text('{"docid": "d1", "text": "cats are felines"}\n')
    (tmp_path / "p.tsv").write_text("q1\td1\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MY_KEY")}
    run = subprocess.run([sys.executable, "-m", "judgeblender", "judge", "-q", "q.tsv", "-c", "c.jsonl", "-p",
                          "p.tsv", "-o", "o.qrels", "-j", "openai:gpt-4o-mini", "--no-progress",
                          "--api-key-env", "MY_KEY"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2 and run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no API key for https://api.openai.com/v1: "), run.stderr
    assert "set the environment variable MY_KEY (--api-key-env" in lines[0] and "api_key_file" in lines[0]
    assert not (tmp_path / "o.qrels").exists()


def test_key_file_permissions(openai_server_factory, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    key_file = tmp_path / "key"
    key_file.write_text("sk-from-file-456\n")
    srv = openai_server_factory()
    if os.name == "posix":
        os.chmod(key_file, 0o644)
        with pytest.raises(BackendError, match="chmod 600") as err:
            create("m", base_url=srv.base_url, api_key_file=str(key_file))
        assert "sk-from-file-456" not in str(err.value) and "0644" in str(err.value)
    os.chmod(key_file, 0o600)
    b = create("m", base_url=srv.base_url, api_key_file=str(key_file))
    try:
        assert b.execute(gen()).text == "2"
    finally:
        b.close()
    assert srv.requests[0].headers["authorization"] == "Bearer sk-from-file-456"
    assert "sk-from-file-456" not in repr(b)
    with pytest.raises(BackendError, match="does not exist"):
        create("m", base_url=srv.base_url, api_key_file=str(tmp_path / "missing"))
    empty = tmp_path / "empty"
    empty.write_text("")
    os.chmod(empty, 0o600)
    with pytest.raises(BackendError, match="empty"):
        create("m", base_url=srv.base_url, api_key_file=str(empty))


# --- the test server itself --------------------------------------------------------------
def test_server_budget_then_stops():
    with OpenAITestServer(max_requests=2) as srv:
        b = create("m", base_url=srv.base_url, max_retries=0)
        try:
            assert b.execute(gen()).text == "2"
            assert b.execute(gen()).text == "2"
            with pytest.raises(BackendError, match="budget exhausted"):
                b.execute(gen())
        finally:
            b.close()
        for _ in range(100):
            if srv.stopped:
                break
            time.sleep(0.02)
        assert srv.stopped


def test_server_models_endpoint():
    import urllib.request

    with OpenAITestServer(model="m1") as srv:
        with urllib.request.urlopen(f"{srv.base_url}/models", timeout=5) as resp:
            data = json.load(resp)
    assert data["data"][0]["id"] == "m1"


# --- Batch API files ---------------------------------------------------------------------
def test_batch_file_roundtrip(tmp_path):
    requests = {"q1-d1": gen(max_tokens=5), "q1-d2": lp()}
    n = write_batch_file(requests, tmp_path / "in.jsonl", "gpt-4o-mini")
    assert n == 2
    lines = [json.loads(x) for x in (tmp_path / "in.jsonl").read_text().splitlines()]
    assert [x["custom_id"] for x in lines] == ["q1-d1", "q1-d2"]
    assert all(x["method"] == "POST" and x["url"] == "/v1/chat/completions" for x in lines)
    assert lines[0]["body"]["max_tokens"] == 5 and lines[1]["body"]["logprobs"] is True

    def completion(content, logprobs=None):
        return {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop", "logprobs": logprobs}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1},
        }

    top = [{"token": "1", "logprob": -0.1}, {"token": "0", "logprob": -2.4}]
    out = tmp_path / "out.jsonl"
    out.write_text(
        "\n".join(
            json.dumps(x)
            for x in [
                {"custom_id": "q1-d1", "response": {"status_code": 200, "body": completion("3")}, "error": None},
                {
                    "custom_id": "q1-d2",
                    "response": {"status_code": 200, "body": completion("1", {"content": [{"token": "1", "logprob": -0.1, "top_logprobs": top}]})},
                    "error": None,
                },
            ]
        )
        + "\n"
    )
    res = read_batch_results(out, requests)
    assert res["q1-d1"].text == "3" and res["q1-d1"].tokens_in == 10
    assert res["q1-d2"].text == "1" and res["q1-d2"].probs is not None
    assert res["q1-d2"].probs["1"] == pytest.approx(1 / (1 + math.exp(-2.3)))

    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"custom_id": "q1-d1", "response": {"status_code": 200, "body": completion("2")}})
        + "\n"
        + json.dumps({"custom_id": "q1-d2", "response": None, "error": {"code": "server_error", "message": "boom"}})
        + "\n"
    )
    with pytest.raises(BackendError, match="q1-d2: server_error: boom"):
        read_batch_results(bad, requests)
    assert set(read_batch_results(bad, requests, allow_errors=True)) == {"q1-d1"}
    (tmp_path / "junk.jsonl").write_text("{not json\n")
    with pytest.raises(InputError, match="junk.jsonl:1"):
        read_batch_results(tmp_path / "junk.jsonl")
    with pytest.raises(BackendError, match="twice"):
        write_batch_file([("a", gen()), ("a", gen())], tmp_path / "dup.jsonl", "m")


def test_no_threads_left_running_after_close(openai_server_factory):
    srv = openai_server_factory()
    before = {t.name for t in threading.enumerate()}
    b = backend(srv)
    b.execute(gen())
    b.close()
    after = {t.name for t in threading.enumerate() if t.is_alive()}
    assert not any(name.startswith("judgeblender-openai") for name in after - before)
