"""The openai SDK's private parts that backends/openai_compat.py still leans on (issue 30 part 3).

Everything else the served backend uses of the SDK is its public API. Each private part left has
a test here that fails naming it when an SDK upgrade changes it, so the upgrade is caught here,
not by a served run that crashes, or that quietly sends what it should not (the SDK's telemetry
headers) or hands a thread per call to the loop's pool. Real clients against the test server
on 127.0.0.1.
"""

from __future__ import annotations

import asyncio

import openai
import pytest
from openai_server import OpenAITestServer

from judgeblender.backends import openai_compat
from judgeblender.backends.openai_compat import OpenAICompatBackend, chat_url
from judgeblender.calls import CallRequest, Message


def sdk_part(part: str, what: str) -> str:
    return (f"openai {openai.__version__}: the SDK's private {part} changed; backends/openai_compat.py relies on "
            f"it ({what}): adapt it to this SDK, or pin an SDK that has it")


def backend(server: OpenAITestServer) -> OpenAICompatBackend:
    return OpenAICompatBackend("judge-model", base_url=server.base_url, api_key="sk-test-sdk", timeout_s=5.0)


def ask_once(server: OpenAITestServer):
    """One call through the backend, on a loop of its own, its connections closed on that loop."""
    async def call(b: OpenAICompatBackend):
        try:
            return await b.aexecute(CallRequest((Message("user", "Query: x. Passage: y."),), max_tokens=8))
        finally:
            await b.aclose()

    return asyncio.run(call(backend(server)))


def test_the_raw_response_header_still_asks_the_sdk_for_the_unparsed_response():
    constants = getattr(openai, "_constants", None)
    assert getattr(constants, "RAW_RESPONSE_HEADER", None) == openai_compat._RAW_RESPONSE_HEADER, sdk_part(
        "openai._constants.RAW_RESPONSE_HEADER", "the header by which a post returns the unparsed HTTP response")

    async def post(server: OpenAITestServer):
        client = openai.AsyncOpenAI(api_key="sk-test-sdk", base_url=server.base_url, max_retries=0)
        try:
            return await client.post(chat_url(client.base_url), cast_to=object,
                                     body={"model": "judge-model", "messages": [{"role": "user", "content": "x"}]},
                                     options={"headers": dict(openai_compat._headers()[1])})
        finally:
            await client.close()

    with OpenAITestServer(answers="2") as server:
        raw = asyncio.run(post(server))
        assert server.requests[0].path == "/v1/chat/completions"
    response = getattr(raw, "http_response", None)
    assert response is not None and b'"choices"' in response.content, sdk_part(
        "raw-response protocol (RAW_RESPONSE_HEADER: 'true')",
        f"a post with it set returns an object whose http_response is the HTTP response; got {type(raw).__name__}")


def test_a_preset_platform_is_what_the_sdk_uses(monkeypatch):
    from openai import _base_client

    assert callable(getattr(_base_client, "get_platform", None)), sdk_part(
        "openai._base_client.get_platform", "found once per process, not once per client in a thread")
    client = openai.AsyncOpenAI(api_key="sk-test-sdk", base_url="http://127.0.0.1:9/v1")
    assert getattr(client, "_platform", False) is None, sdk_part(
        "AsyncOpenAI._platform", "a new client's platform, preset so its first request hands no thread to the loop")

    def never(*args, **kwargs):
        raise AssertionError(sdk_part("AsyncOpenAI._platform", "the SDK looked the platform up again, though preset"))

    backend_platform = openai_compat._sdk_platform()  # found here, before the lookup is refused
    monkeypatch.setattr(_base_client, "get_platform", never)

    with OpenAITestServer(answers="2") as server:
        result = ask_once(server)
    assert result.text == "2" and backend_platform is not None


def test_no_telemetry_header_of_the_sdk_is_sent():
    with OpenAITestServer(answers="2") as server:
        ask_once(server)
        sent = [h for h in server.requests[0].headers if h.startswith("x-stainless")]
    assert sent == [openai_compat._RAW_RESPONSE_HEADER.lower()], sdk_part(
        "telemetry header names (X-Stainless-*)",
        f"openai_compat leaves out {openai_compat._CLIENT_TELEMETRY + openai_compat._CALL_TELEMETRY} by name; "
        f"sent: {sent}")


@pytest.mark.parametrize("base, expected", [
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1/chat/completions"),
    ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000/v1/chat/completions"),
    ("https://example.org/openai/deployments/x", "https://example.org/openai/deployments/x/chat/completions"),
])
def test_the_endpoint_is_joined_to_the_public_base_url_as_the_sdk_joins_a_path(base, expected):
    client = openai.AsyncOpenAI(api_key="sk-test-sdk", base_url=base)
    assert chat_url(client.base_url) == expected
