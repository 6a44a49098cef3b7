"""Issue 29 part 6: the API key reaches no output in any form a server may echo it.

A real HTTP server on 127.0.0.1 echoes the key it is sent back in each form: raw, JSON-escaped
(`\\/` only, every character as `\\uXXXX` in lower and in upper case, and JSON text inside the
answer's JSON string), URL-encoded (upper and lower case hex, `+` form encoding, encoded twice),
HTML character references, base64 (standard and URL-safe, with and without padding) and inside
`Authorization: Basic` strings at the three byte alignments. It echoes them in 200 answers,
in 4xx error bodies (JSON and plain text), in 5xx error bodies (retried, then given up), and in
response headers. Every encoded form is computed here with the standard library, not with the
code under test; then every byte the jobs leave behind is searched for every form: each file
(qrels, details, the store and its write-ahead log, `store export`, `store judgments`, an HTML
report, a Batch API requests file), the store's compressed texts read back through its reader,
stdout and stderr of every command, and every log record at DEBUG of every library.

The key is at least 20 characters and holds `/`, `+` and `=`, and its bytes make its base64
hold `+` and `/` and need padding, so every alphabet and padding difference is exercised.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import secrets
import subprocess
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from judgeblender.calls import CallRequest, CallResult, Message
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.pairs import Pair
from judgeblender.store import CallStore


def planted_key() -> str:
    """A fresh key of 40+ characters with `/`, `+` and `=`, whose base64 (std) holds `+` and `/`
    and ends in padding, so its URL-safe form differs and its unpadded form is shorter."""
    while True:
        # "???" and ">>>" put a "/" and a "+" into the base64 whatever their offset
        key = f"sk-proj/{secrets.token_hex(8)}+???>>>{secrets.token_hex(1 + secrets.randbelow(6))}=z/"
        std = base64.b64encode(key.encode()).decode()
        if "+" in std and "/" in std and std.endswith("=") and len(key) % 3 != 0:
            return key


def _lower_hex(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), text)


def _u(ch: str, upper: bool = False) -> str:
    """JSON's \\uXXXX escape of a character (a surrogate pair past U+FFFF)."""
    escaped = json.dumps(ch, ensure_ascii=True)[1:-1] if ord(ch) > 0xFFFF else f"\\u{ord(ch):04x}"
    return re.sub(r"[0-9a-f]{4}", lambda m: m.group().upper(), escaped) if upper else escaped


def encoded_forms(key: str) -> dict[str, str]:
    """Every form of `key` a server may echo, by name, made with the standard library."""
    forms = {
        "raw": key,
        "json-slash": json.dumps(key)[1:-1].replace("/", "\\/"),
        "json-u-lower": "".join(_u(c) for c in key),
        "json-u-upper": "".join(_u(c, upper=True) for c in key),
        "json-in-json": json.dumps(json.dumps(key).replace("/", "\\/"))[3:-3],
        "url-upper": urllib.parse.quote(key, safe=""),
        "url-lower": _lower_hex(urllib.parse.quote(key, safe="")),
        "url-form": urllib.parse.quote_plus(key),
        "url-twice": urllib.parse.quote(urllib.parse.quote(key, safe=""), safe=""),
        "html-refs": "".join(f"&#{ord(c)};" if not c.isalnum() else c for c in key),
        "html-hex-refs": "".join(f"&#x{ord(c):X};" for c in key),
        "b64": base64.b64encode(key.encode()).decode(),
        "b64-nopad": base64.b64encode(key.encode()).decode().rstrip("="),
        "b64url": base64.urlsafe_b64encode(key.encode()).decode(),
        "b64url-nopad": base64.urlsafe_b64encode(key.encode()).decode().rstrip("="),
    }
    for user in ("u", "ab", "abc"):  # "u:" + key, "ab:" + key, "abc:" + key: the key at offsets 2, 0 and 1
        forms[f"basic-{len(user) + 1}"] = base64.b64encode(f"{user}:{key}".encode()).decode()
        forms[f"basic-url-{len(user) + 1}"] = base64.urlsafe_b64encode(f"{user}:{key}".encode()).decode().rstrip("=")
    return forms


def searched_for(key: str) -> dict[str, str]:
    """What must not be found: every form, and the middle of each (a form cut short, or masked
    only in part, still shows that), and the key's first 16 characters (a key cut in two)."""
    found = {}
    for name, form in encoded_forms(key).items():
        found[name] = form
        found[name + " (middle)"] = form[len(form) // 4:-(len(form) // 4)]
    found["raw (first 16)"] = key[:16]
    return found


def leaks(key: str, outputs: dict[str, bytes | str]) -> list[str]:
    """(form, output) for every form found in an output."""
    wanted = searched_for(key)
    out = []
    for where, data in outputs.items():
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        out += [f"{name} in {where}" for name, form in wanted.items() if form in text]
    return out


# Where the server echoes the form (the passage's text names the place and the form).
PLACES = ("answer", "answer-bytes", "400", "403-text", "500", "header", "header-503")


class EchoServer:
    """An OpenAI-compatible server that echoes the caller's key (its Authorization header) in the
    form and place the last user message names ("ECHO PLACE FORM"); "LONG" puts the raw key at
    the end of a 510-character 400 error, across the point where messages are shortened."""

    def __init__(self):
        self.keys_seen: list[str] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                auth = self.headers.get("Authorization", "")
                # a base URL's user:password@ comes as Basic: its credentials are what is echoed then
                key = base64.b64decode(auth[6:]).decode() if auth.startswith("Basic ") else auth.removeprefix("Bearer ")
                with owner.lock:
                    owner.keys_seen.append(key)
                text = body["messages"][-1]["content"]
                if "LONG" in text:
                    return self._json(400, {"error": {"message": "x" * 488 + " key " + key + " tail"}})
                found = re.search(r"ECHO (\S+) (\S+)", text)
                if found is None:
                    return self._answer(body, "##final score: 1")
                place, name = found.groups()
                form = encoded_forms(key)[name]
                if place == "answer":  # the form in the answer's text (JSON-escaped once more on the wire)
                    return self._answer(body, f"##final score: 2 (served for {form})")
                if place == "answer-bytes":  # the form as the wire's own spelling of the key
                    data = json.dumps(self._completion(body, "##final score: 2 (served for @@KEY@@)"))
                    if name.startswith("json-") and name != "json-in-json":
                        return self._send(200, data.replace("@@KEY@@", form).encode(), "application/json")
                    return self._answer(body, f"##final score: 2 (served for {form})")
                if place == "400":
                    return self._json(400, {"error": {"message": f"Incorrect API key provided: {form}."}})
                if place == "403-text":
                    return self._send(403, f"<html>forbidden for {form}</html>".encode(), "text/html")
                if place == "500":
                    return self._json(500, {"error": {"message": f"internal error serving key {form}"}})
                if place == "header":
                    return self._answer(body, "##final score: 2", {"X-Echo-Key": form, "WWW-Authenticate": form})
                if place == "header-503":
                    return self._json(503, {"error": {"message": "overloaded"}}, {"X-Echo-Key": form})
                raise AssertionError(place)

            def _completion(self, body, answer):
                return {"id": "x", "object": "chat.completion", "model": body["model"],
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                                     "finish_reason": "stop"}]}

            def _answer(self, body, answer, headers=None):
                self._json(200, self._completion(body, answer), headers)

            def _json(self, status, payload, headers=None):
                self._send(status, json.dumps(payload).encode(), "application/json", headers)

            def _send(self, status, data, ctype, headers=None):
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def url(self, userinfo: str) -> str:
        """The base URL with credentials: `http://USERINFO@127.0.0.1:PORT/v1`."""
        return self.base_url.replace("http://", f"http://{userinfo}@")

    def __enter__(self) -> "EchoServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def corpus(key: str) -> dict[str, str]:
    """One passage per (place, form), plus the long error and a plain one."""
    docs = {f"d-{place}-{name}": f"a passage. ECHO {place} {name}"
            for place in PLACES for name in encoded_forms(key)}
    docs["d-long"] = "a passage. LONG"
    docs["d-plain"] = "a plain passage about goldfish"
    return docs


def batch_output(requests: Path, results: Path, key: str) -> None:
    """The provider's output file for a requests file, echoing the key as EchoServer does: in the
    answer of an "answer" passage, in the error of a "400" one; the rest answered plainly."""
    lines = []
    for line in requests.read_text().splitlines():
        request = json.loads(line)
        found = re.search(r"ECHO (\S+) (\S+)", request["body"]["messages"][-1]["content"])
        place, name = found.groups() if found else ("", "")
        form = encoded_forms(key)[name] if name else ""
        answer = f"##final score: 2 (served for {form})" if place.startswith("answer") else "##final score: 1"
        body = {"id": "b", "object": "chat.completion", "model": "test-model",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}]}
        out = {"id": "r", "custom_id": request["custom_id"], "response": {"status_code": 200, "body": body}}
        if place == "400":
            out = {"id": "r", "custom_id": request["custom_id"], "response": None,
                   "error": {"code": "invalid_api_key", "message": f"Incorrect API key provided: {form}"}}
        lines.append(json.dumps(out))
    results.write_text("\n".join(lines) + "\n")


def cli(*args, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    return subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], capture_output=True, text=True,
                          env={**full, "COLUMNS": "200", **(env or {})}, timeout=600, cwd=cwd)


@pytest.fixture
def job(tmp_path):
    key = planted_key()
    docs = corpus(key)
    (tmp_path / "q.tsv").write_text("q1\twhat do goldfish eat\n")
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"docid": d, "text": t}) + "\n" for d, t in docs.items()))
    (tmp_path / "p.tsv").write_text("".join(f"q1\t{d}\n" for d in docs))
    return tmp_path, key, docs


def stored_texts(store: Path) -> str:
    """Every call and judgment the store holds, decompressed by its own reader, as JSON text."""
    with CallStore(store) as opened:
        calls = list(opened.iter_calls())
        judgments = opened.judgments()
    assert calls and judgments
    return json.dumps([calls, judgments], ensure_ascii=False)


def test_every_encoded_form_of_the_key_reaches_no_file_store_text_or_stream(job):
    folder, key, docs = job
    env = {"OPENAI_API_KEY": key}
    with EchoServer() as server:
        panel = folder / "panel.toml"  # one judge; quick retries, so the 5xx pairs give up soon
        panel.write_text(f'[[judges]]\nmodel = "openai:test-model"\nid = "served"\noptions = {{ base_url = '
                         f'"{server.base_url}", backoff_base_s = 0.01, max_retries = 1, timeout_s = 10 }}\n')
        run = cli("judge", "-q", "q.tsv", "-c", "c.jsonl", "-p", "p.tsv", "-o", "out.qrels", "--store", "s.sqlite",
                  "--panel", panel.name, "--no-progress", "--json", cwd=folder, env=env)
        # the same pairs through Batch API files: the provider's output file echoes the key too
        batch = cli("judge", "-q", "q.tsv", "-c", "c.jsonl", "-p", "p.tsv", "-o", "batch.qrels",
                    "--store", "batch.sqlite", "-j", "openai:test-model", "--base-url", server.base_url,
                    "--batch-write", "requests.jsonl", "--no-progress", cwd=folder, env=env)
        assert batch.returncode == 0, batch.stderr[-3000:]
        batch_output(folder / "requests.jsonl", folder / "results.jsonl", key)
        read = cli("judge", "-q", "q.tsv", "-c", "c.jsonl", "-p", "p.tsv", "-o", "batch.qrels",
                   "--store", "batch.sqlite", "-j", "openai:test-model", "--base-url", server.base_url,
                   "--batch-read", "results.jsonl", "--no-progress", cwd=folder, env=env)
    assert run.returncode == 3, run.stderr[-3000:]  # the error pairs are failed calls: exit 3, the rest written
    assert read.returncode == 3, read.stderr[-3000:]  # its failed lines too
    from_batch = {json.loads(line)["docid"]: json.loads(line) for line in (folder / "batch.qrels.details.jsonl").open()}
    assert from_batch["d-answer-b64"]["label"] == 2 and "***" in from_batch["d-400-raw"]["invalid_reason"]
    assert server.keys_seen and set(server.keys_seen) == {key}  # the plant was real: the server got it
    details = {json.loads(line)["docid"]: json.loads(line) for line in (folder / "out.qrels.details.jsonl").open()}
    judged = details["d-answer-json-u-lower"]["judges"]["served"]
    # each path was taken, and the key was masked on it (not only absent)
    assert judged["label"] == 2 and "***" in judged["raw_output"], judged
    assert details["d-answer-bytes-json-slash"]["judges"]["served"]["label"] == 2
    assert details["d-header-b64"]["label"] == 2 and details["d-plain"]["label"] == 1
    for place in ("400", "403-text", "500"):
        reason = details[f"d-{place}-url-lower"]["invalid_reason"]
        assert reason and f"HTTP {place[:3]}" in reason and "***" in reason, (place, reason)
    assert "failed after 2 attempts" in details["d-header-503-raw"]["invalid_reason"]
    assert "***" in details["d-long"]["invalid_reason"]

    runs = folder / "runs"
    runs.mkdir()
    (runs / "r1").write_text("".join(f"q1 Q0 {d} {i + 1} {100 - i} r1\n" for i, d in enumerate(docs)))
    (runs / "r2").write_text("".join(f"q1 Q0 {d} {i + 1} {100 - i} r2\n" for i, d in enumerate(reversed(docs))))
    (folder / "gold.qrels").write_text("".join(f"q1 0 {d} {i % 4}\n" for i, d in enumerate(docs)))
    follow = [cli("store", "export", "--store", "s.sqlite", "-o", "export.jsonl", cwd=folder, env=env),
              cli("store", "judgments", "--store", "s.sqlite", "-o", "judgments.jsonl", cwd=folder, env=env),
              cli("store", "stats", "--store", "s.sqlite", cwd=folder, env=env),
              cli("report", "--gold", "gold.qrels", "--pred", "out.qrels", "--runs", "runs", "--store", "s.sqlite",
                  "-o", "report.html", "--bootstrap", "0", cwd=folder, env=env)]
    assert all(done.returncode == 0 for done in follow), [done.stderr[-2000:] for done in follow]
    assert "***" in (folder / "report.html").read_text()  # the report shows the (masked) error reasons

    files = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*")
             if p.is_file() and p.name != "results.jsonl"}  # (the provider's file: the test's own input)
    assert {"s.sqlite", "out.qrels.details.jsonl", "export.jsonl", "judgments.jsonl", "report.html",
            "requests.jsonl"} <= set(files)
    streams = {f"{i}:{kind}": getattr(done, kind) for i, done in enumerate([run, batch, read, *follow])
               for kind in ("stdout", "stderr")}
    found = leaks(key, {**files, **streams, "store texts": stored_texts(folder / "s.sqlite"),
                        "batch store texts": stored_texts(folder / "batch.sqlite")})
    assert not found, found


def test_no_log_record_of_any_library_carries_an_encoded_key(job, monkeypatch, caplog):
    """In process, at DEBUG: the HTTP client logs response headers, the SDK its responses."""
    folder, key, docs = job
    monkeypatch.setenv("OPENAI_API_KEY", key)
    caplog.set_level(logging.DEBUG)
    chosen = {d: t for d, t in docs.items() if d.startswith(("d-header", "d-answer-bytes", "d-500", "d-long"))}
    with EchoServer() as server:
        judge = Judge(JudgeSpec(model="openai:test-model", options={
            "base_url": server.base_url, "backoff_base_s": 0.01, "max_retries": 1, "timeout_s": 10}))
        try:
            run = judge_pairs([judge], [Pair("q1", d) for d in chosen], {"q1": "what do goldfish eat"}, chosen)
        finally:
            judge.close()
    assert set(server.keys_seen) == {key}
    results = run.judgments[judge.id]
    assert results[Pair("q1", "d-header-json-slash")].label == 2
    assert "***" in results[Pair("q1", "d-500-b64")].invalid_reason
    assert any("X-Echo-Key" in r.getMessage() or "x-echo-key" in r.getMessage().lower() for r in caplog.records) \
        or len(caplog.records) > 50  # the client did log at DEBUG
    found = leaks(key, {"log messages": caplog.text, "log args": repr([r.args for r in caplog.records]),
                        "judgments": repr(run.judgments)})
    assert not found, found


def test_rows_written_by_the_driver_are_masked_too(tmp_path):
    """The store's own writes (not the writer process): a row and a judgment holding every form."""
    from judgeblender import masking

    key = planted_key()
    masking.register(key)
    forms = encoded_forms(key)
    text = " | ".join(forms.values())
    request = CallRequest(messages=(Message("user", "an earlier answer: " + text),))
    result = CallResult(text="##final score: 2 " + text, extra={"finish_reason": "stop", "served_model": text,
                                                                "top_logprobs": [[text, -0.1]]})
    with CallStore(tmp_path / "s.sqlite") as store:
        store.put("k1", "openai", {"backend": "openai", "model": "m"}, request, result, {"label": 2, "why": text})
        store.put_judgments("j", [("q1", "d1", {"label": None, "invalid_reason": "HTTP 401: " + text,
                                                "raw_output": text, "steps": [{"raw": text}]})])
        got = store.get("k1")
    assert got is not None and got.result.text.startswith("##final score: 2 ***")
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    found = leaks(key, {**files, "store texts": stored_texts(tmp_path / "s.sqlite")})
    assert not found, found


# -- the mask itself ---------------------------------------------------------------------------

@pytest.mark.parametrize("key", [
    "sk-proj/AbC+dEf=GhI/jKl0123456789",
    "sk-ünï/cødé+kéy=2024-abcdefgh",  # non-ASCII: \u escapes, UTF-8 percent-encoding
    "sk-😀/emoji+key=0123456789ab",  # past U+FFFF: a JSON surrogate pair
    "key with spaces+plus/slash=xyz",  # `+` for a space, a space for `+`
])
def test_the_mask_finds_every_form_in_any_surrounding(key):
    from judgeblender.masking import Mask

    mask = Mask([key])
    forms = encoded_forms(key) | {
        "json-ascii": json.dumps(key, ensure_ascii=True)[1:-1],
        "half-escaped": "".join(_u(c) if i % 2 else c for i, c in enumerate(key)),
        "url-and-json": "".join(urllib.parse.quote(c, safe="") if i % 3 == 0 else _u(c) if i % 3 == 1 else c
                                for i, c in enumerate(key)),
    }
    for name, form in forms.items():
        for text in (form, f"before {form} after", json.dumps({"a": f"x{form}y"}), f"{form}{form}"):
            masked = mask.text(text)
            assert "***" in masked and not leaks(key, {name: masked}), (name, text, masked)
            assert not leaks(key, {name: mask.bytes(text.encode())})


def test_the_mask_keeps_json_valid_and_leaves_text_without_the_key_as_it_is():
    from judgeblender.masking import Mask

    key = planted_key()
    mask = Mask([key])
    for name, form in encoded_forms(key).items():
        doc = json.dumps({"answer": f"score 2 {form}", "n": [1, form]})
        masked = json.loads(mask.text(doc))  # still JSON
        if name.startswith(("b64", "basic")):  # the few characters the key's bytes only partly decide stay
            assert masked["answer"].startswith("score 2 ") and "***" in masked["n"][1], name
            assert not leaks(key, {name: json.dumps(masked)})
        else:
            assert masked["answer"] == "score 2 ***" and masked["n"] == [1, "***"], name
    plain = [json.dumps({"text": "50% off &amp; more\n\\u00e9 %2F \u00e9"}, ensure_ascii=False),
             "##final score: 2", "a" * 5000, base64.b64encode(os.urandom(300)).decode()]
    for text in plain:
        assert mask.text(text) is text  # the same object: no copy, the same bytes
    data = b"\xff\xfe not UTF-8 " + key.encode() + b" \x80"
    assert mask.bytes(data) == b"\xff\xfe not UTF-8 *** \x80"


def test_a_placeholder_key_masks_only_itself():
    """vLLM's `EMPTY`: its few base64 characters are not masked (they would hit ordinary words)."""
    from judgeblender.masking import Mask

    mask = Mask(["EMPTY"])
    assert mask.text("RU1QVFk is a word; EMPTY is the key") == "RU1QVFk is a word; *** is the key"


# -- credentials in a URL (issue 38, part 4) ---------------------------------------------------

def _post(url: str, body: dict) -> tuple[int, bytes]:
    import http.client

    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_credentials_in_a_url_reach_no_start_line_error_log_store_or_report(tmp_path):
    """A `user:password@` in `--base-url`, `$OPENAI_BASE_URL` and `proxy --upstream`, echoed by
    the server in answers and errors, is masked in every command's start line, error, stdout and
    stderr, the outputs, the stores, `store export`, a report and serve's metrics."""
    import signal

    from serve_helpers import Served

    password = planted_key()  # 40+ characters with "/", "+" and "=": percent-encoded in the URL
    userinfo = "alice:" + urllib.parse.quote(password, safe="")
    docs = {"d1": "a passage. ECHO answer raw", "d2": "a passage. ECHO 400 url-lower", "d3": "ECHO answer b64",
            "d4": "a passage. ECHO 403-text html-refs"}
    (tmp_path / "q.tsv").write_text("q1\twhat do goldfish eat\n")
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"docid": d, "text": t}) + "\n" for d, t in docs.items()))
    (tmp_path / "p.tsv").write_text("".join(f"q1\t{d}\n" for d in docs))
    env = {"OPENAI_API_KEY": "sk-test-credentials-0123456789"}
    inputs = ("-q", "q.tsv", "-c", "c.jsonl", "-p", "p.tsv", "--no-progress")
    with EchoServer() as server:  # it echoes the Basic credentials it is sent, decoded, in the form asked
        url = server.url(userinfo)
        runs = {"judge": cli("judge", *inputs, "-o", "out.qrels", "--store", "s.sqlite", "-j", "openai:test-model",
                             "--base-url", url, "--timeout", "10", cwd=tmp_path, env=env)}
        # the same URL from the environment, with a server that is gone: its connection error
        runs["judge (env, gone)"] = cli("judge", *inputs, "-o", "gone.qrels", "--store", "gone.sqlite", "-j",
                                        "openai:test-model", "--timeout", "5", cwd=tmp_path,
                                        env={**env, "OPENAI_BASE_URL": f"http://{userinfo}@127.0.0.1:9/v1"})
        runs["proxy (bad scheme)"] = cli("proxy", "--upstream", f"ftp://{userinfo}@127.0.0.1/v1", "--store", "x.sqlite",
                                         cwd=tmp_path, env=env)
        runs["judge (bad url)"] = cli("judge", *inputs, "-o", "bad.qrels", "-j", "openai:test-model", "--base-url",
                                      f"htp://{userinfo}@127.0.0.1/v1", cwd=tmp_path, env=env)
        proxy = subprocess.Popen([sys.executable, "-m", "judgeblender", "proxy", "--upstream", url, "--store",
                                  "p.sqlite", "--port", "0"], cwd=tmp_path, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env={**os.environ, **env})
        try:
            start = proxy.stdout.readline()
            proxied = re.search(r" at (http://\S+/v1) ", start).group(1)
            answers = [_post(proxied, {"model": "test-model", "temperature": 0,
                                       "messages": [{"role": "user", "content": text}]})
                       for text in ("ECHO answer raw", "ECHO 400 basic-4", "ECHO answer raw")]
        finally:
            proxy.send_signal(signal.SIGTERM)
            out, err = proxy.communicate(timeout=60)
        runs["proxy"] = subprocess.CompletedProcess(proxy.args, proxy.returncode, start + out, err)
        with Served(["-j", "openai:test-model", "--base-url", url, "--store", str(tmp_path / "served.sqlite")],
                    env=env) as served:
            judged = served.judge([{"qid": "q1", "docid": "d1", "query": "goldfish", "passage": "ECHO 400 raw"},
                                   {"qid": "q1", "docid": "d3", "query": "goldfish", "passage": "ECHO answer json-u-lower"}])
            metrics = served.get("/metrics")
            served.stop()
        runs["serve"] = subprocess.CompletedProcess(served.proc.args, served.proc.returncode, "", served.stderr)
    # the plant was real: the servers sent it, the commands failed and ran where they should
    assert f"alice:{password}" in server.keys_seen
    assert runs["judge"].returncode == 3 and runs["proxy"].returncode == 0 and runs["serve"].returncode == 0
    assert [status for status, _ in answers] == [200, 400, 200] and b"***" in answers[0][1]
    assert runs["proxy (bad scheme)"].returncode == 2 and "***" in runs["proxy (bad scheme)"].stderr
    assert runs["judge (env, gone)"].returncode != 0 and runs["judge (bad url)"].returncode == 2
    assert "***" in runs["proxy"].stdout  # its start line names the upstream, masked
    assert judged.status in (200, 502) and metrics.status == 200
    follow = [cli("store", "export", "--store", store, "-o", f"{store}.jsonl", cwd=tmp_path, env=env)
              for store in ("s.sqlite", "p.sqlite", "served.sqlite")]
    (tmp_path / "gold.qrels").write_text("".join(f"q1 0 {d} {i % 4}\n" for i, d in enumerate(docs)))
    (tmp_path / "runs").mkdir()
    for name, order in (("r1", list(docs)), ("r2", list(reversed(docs)))):
        (tmp_path / "runs" / name).write_text("".join(f"q1 Q0 {d} {i + 1} {9 - i} {name}\n" for i, d in enumerate(order)))
    follow.append(cli("report", "--gold", "gold.qrels", "--pred", "out.qrels", "--runs", "runs", "--store", "s.sqlite",
                      "-o", "report.html", "--bootstrap", "0", cwd=tmp_path, env=env))
    assert all(done.returncode == 0 for done in follow), [done.stderr[-2000:] for done in follow]
    files = {str(p.relative_to(tmp_path)): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    streams = {f"{name}:{kind}": getattr(done, kind) for name, done in [*runs.items(), *enumerate(follow)]
               for kind in ("stdout", "stderr")}
    found = leaks(password, {**files, **streams, "proxy answers": b"".join(body for _, body in answers),
                             "served answer": judged.body, "metrics": metrics.body,
                             "store texts": stored_texts(tmp_path / "s.sqlite"),
                             "served store texts": stored_texts(tmp_path / "served.sqlite")})
    assert not found, found


@pytest.mark.parametrize("url, secrets_, public", [
    ("http://alice:s3cret-passw0rd@127.0.0.1:8000/v1", ["alice:s3cret-passw0rd", "s3cret-passw0rd"],
     "http://127.0.0.1:8000/v1"),
    ("https://alice:p%40ss%2Fw0rd%2B%3D@[::1]:8443/v1/?x=1#f", ["alice:p@ss/w0rd+=", "p@ss/w0rd+="], "https://[::1]:8443/v1"),
    ("http://a:b@c@host.example/v1", ["a:b@c"], "http://host.example/v1"),  # the last "@" ends it
    ("http://tok-0123456789abcdef@host.example/v1", ["tok-0123456789abcdef"], "http://host.example/v1"),
    ("http://bob:pw@host.example/v1", ["bob:pw"], "http://host.example/v1"),  # "pw" alone: only beside its user
    ("http://host.example/v1?user=a@b", [], "http://host.example/v1"),  # an "@" in the query is no userinfo
    ("http://127.0.0.1:8000/v1", [], "http://127.0.0.1:8000/v1"),
])
def test_a_urls_credentials_are_its_user_information(url, secrets_, public):
    from judgeblender.masking import Mask, public_base_url, url_credentials

    assert url_credentials(url) == secrets_
    assert public_base_url(url) == public
    mask = Mask(url_credentials(url))
    shown = mask.text(f"started against {url}; Authorization: Basic "
                      + (base64.b64encode(secrets_[0].encode()).decode() if secrets_ else ""))
    for secret in secrets_:
        assert not leaks(secret, {"shown": shown}) if len(secret) >= 20 else secret not in shown
    if secrets_:
        assert "***@" in shown
    assert mask.text("a pw and a bob") == "a pw and a bob"  # a short password alone is a word
