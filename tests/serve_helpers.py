"""`judgeblender serve` as a real subprocess on 127.0.0.1, for the tests and bench/serve.py.

`Served(args)` starts `python -m judgeblender serve ARGS --port 0`, reads the address it tells on
stderr, keeps draining stderr (so the server never blocks on a full pipe), and talks HTTP with
the standard library (http.client: one connection per call, or per thread in `post_many`).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

LISTENING = re.compile(r"serving .* on (http://[^\s]+) \(")
API_KEY = "sk-test-serve-0123456789"  # the served model's key: a test checks it is written nowhere


DL19 = Path(__file__).parent / "data" / "dl19_slice"


def dl19_frame(n: int) -> Any:
    """The first `n` pairs of the DL19 slice's qrels as a DataFrame qid, docid, query, passage."""
    import pandas as pd

    queries = dict(line.split("\t", 1) for line in (DL19 / "queries.tsv").read_text().splitlines())
    passages = {r["docid"]: r["text"] for r in map(json.loads, (DL19 / "passages.jsonl").read_text().splitlines())}
    rows = [line.split() for line in (DL19 / "qrels.txt").read_text().splitlines()][:n]
    return pd.DataFrame([(q, d, queries[q], passages[d]) for q, _, d, _ in rows],
                        columns=["qid", "docid", "query", "passage"])


def answer_of(body: dict) -> str:
    """The canned model's answer to a request: a label fixed by the prompt's text (a few
    invalid), Yes/No for a two-step template's first step."""
    text = body["messages"][-1]["content"]
    k = zlib.crc32(text.encode())
    if 'Reply with "Yes" or "No" only' in text:
        return "Yes" if k % 5 else "No"
    if k % 9 == 0:
        return "I cannot decide."  # invalid: asked once more, then unjudged
    return str(k % 4)


class Response:
    def __init__(self, status: int, headers: dict[str, str], body: bytes):
        self.status, self.headers, self.body = status, headers, body

    def json(self) -> Any:
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"Response({self.status}, {self.body[:300]!r})"


class Served:
    """A running `judgeblender serve`; `stop()` sends SIGTERM and returns the exit status."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None,
                 start_timeout: float = 60.0):
        cmd = [sys.executable, "-m", "judgeblender", "serve", *args]
        if "--port" not in args:
            cmd += ["--port", "0"]
        self.env = {**os.environ, "OPENAI_API_KEY": API_KEY, **(env or {})}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env,
                                     cwd=cwd)
        self.lines: list[str] = []
        self.url = ""
        found = threading.Event()

        def drain() -> None:
            for line in self.proc.stderr:  # type: ignore[union-attr]
                self.lines.append(line)
                m = LISTENING.search(line)
                if m and not found.is_set():
                    self.url = m.group(1)
                    found.set()
            found.set()

        self.drainer = threading.Thread(target=drain, daemon=True)
        self.drainer.start()
        if not found.wait(start_timeout) or not self.url:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"serve did not start: {self.stderr}")
        m = re.match(r"http://([^:/]+|\[[^\]]+\]):(\d+)", self.url)
        assert m, self.url
        self.host, self.port = m.group(1), int(m.group(2))

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def __enter__(self) -> "Served":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def request(self, method: str, path: str, body: Any = None, token: str | None = None, raw: bytes | None = None,
                headers: dict[str, str] | None = None, timeout: float = 120) -> Response:
        conn = http.client.HTTPConnection("127.0.0.1" if self.host in ("0.0.0.0", "[::]") else self.host.strip("[]"),
                                          self.port, timeout=timeout)
        try:
            data = raw if raw is not None else None if body is None else json.dumps(body).encode()
            sent = dict(headers or {})
            if data is not None:
                sent.setdefault("Content-Type", "application/json")
            if token is not None:
                sent["Authorization"] = f"Bearer {token}"
            conn.request(method, path, body=data, headers=sent)
            r = conn.getresponse()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
        finally:
            conn.close()

    def judge(self, pairs: list[dict], token: str | None = None) -> Response:
        return self.request("POST", "/v1/judge", {"pairs": pairs}, token=token)

    def get(self, path: str, token: str | None = None) -> Response:
        return self.request("GET", path, token=token)

    def post_many(self, bodies: Iterable[list[dict]], concurrency: int, token: str | None = None) -> list[Response]:
        """POST each list of pairs, `concurrency` at a time (a keep-alive connection per thread)."""
        local = threading.local()

        def one(pairs: list[dict]) -> Response:
            conn = getattr(local, "conn", None)
            if conn is None:
                conn = local.conn = http.client.HTTPConnection(self.host, self.port, timeout=300)
            data = json.dumps({"pairs": pairs}).encode()
            headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
            conn.request("POST", "/v1/judge", body=data, headers=headers)
            r = conn.getresponse()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())

        with ThreadPoolExecutor(concurrency) as pool:
            return list(pool.map(one, bodies))

    def stop(self, timeout: float = 60) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        self.drainer.join(10)
        return code

    def wait_until(self, condition, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError("condition not met in time")
            time.sleep(0.01)
