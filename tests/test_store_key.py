"""The store's one key rule (issue 40 part 1): `calls.store_key` of an identity, a request's
fields and an optional per-client part. `call_keys`, the fast builder the engine uses, gives the
same key for every request; the proxy's `cache_key` and the schema 4 migration's re-keying are
that rule, not copies of it; and a key without a client part is the key every stored call has
always had, so no store is re-keyed.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

import judgeblender
from judgeblender.calls import CallRequest, Message, call_key, call_keys, store_key
from judgeblender.serve.proxy import cache_key, identity_of

PACKAGE_ROOT = Path(judgeblender.__file__).resolve().parent

REQUESTS = [
    CallRequest((Message("user", "Query: q. Passage: p."),)),
    CallRequest((Message("system", "Judge."), Message("user", "é ü \u2028 \"quoted\"")), mode="logprobs",
                answer_prefix="Score: ", choices=("0", "1", "2", "3"), max_tokens=1),
    CallRequest((Message("user", "x"),), temperature=0, seed=7, max_tokens=64),  # ints where floats are usual
    CallRequest((Message("user", "x"),), temperature=0.0, seed=7, max_tokens=64),
    CallRequest((Message("user", "rubric"),), json_schema={"type": "object", "properties": {"b": {}, "a": {}}}),
    CallRequest((), choices=["0", "1"]),  # a list, not a tuple: no settings key
]
IDENTITIES = [{"backend": "openai", "model": "m", "revision": None}, {"sha256": "ab" * 32, "n_ctx": 4096}]


def literal(fields: dict) -> str:
    """The rule as stored keys were made: sha256 of the sorted, compact JSON, in UTF-8."""
    text = json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_the_fast_builder_gives_the_one_rules_key_for_every_request():
    for identity in IDENTITIES:
        build = call_keys(identity)
        for request in REQUESTS * 2:  # the second time from the builder's settings cache
            expected = store_key(identity, request.key_fields())
            assert build(request) == expected == call_key(identity, request)
            assert expected == literal({"identity": identity, "request": request.key_fields()})
    assert len({call_key(IDENTITIES[0], r) for r in REQUESTS}) == len(REQUESTS)  # 0 and 0.0 are two keys


def test_the_client_part_changes_the_key_and_its_absence_keeps_the_old_one():
    identity, fields = IDENTITIES[0], REQUESTS[0].key_fields()
    assert store_key(identity, fields, None) == literal({"identity": identity, "request": fields})
    with_client = store_key(identity, fields, "c" * 64)
    assert with_client == literal({"client": "c" * 64, "identity": identity, "request": fields})
    assert with_client != store_key(identity, fields) != store_key(identity, fields, "d" * 64)


def test_the_proxys_key_is_the_store_key_of_its_identity_and_body():
    body = {"model": "m", "stream": False, "user": "u", "temperature": 0.0,
            "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}
    upstream = "http://user:secret@127.0.0.1:9/v1"
    request = {"temperature": 0, "messages": body["messages"], "tools": body["tools"]}
    for client in (None, "e" * 64):
        assert cache_key(upstream, body, client) == store_key(identity_of(upstream, "m"), request, client)


def test_no_other_module_hashes_an_identity_and_a_request_itself():
    """The rule is written once: outside calls.py no module builds the {"identity", "request"}
    mapping whose hash is a key."""
    found = []
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        if path == PACKAGE_ROOT / "calls.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict) and {"identity", "request"} <= {
                    k.value for k in node.keys if isinstance(k, ast.Constant)}:
                found.append(f"{path.relative_to(PACKAGE_ROOT)}:{node.lineno}")
    assert found == [], f"a second copy of the store's key rule: {found}"
