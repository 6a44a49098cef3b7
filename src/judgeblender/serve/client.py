"""`jb.Client`: `judgeblender serve` from Python, answering as `jb.judge` does.

    client = jb.Client("http://127.0.0.1:8000", token="...")
    run = client.judge(df)            # a DataFrame qid, docid, query, passage (or queries=, corpus=)
    run.labels; run.blend("mv"); run.agreement(gold)

`judge` returns the same `Judged` that `jb.judge` returns, built from the service's answer: each
pair's details record is read back into the judgment that wrote it (`Judgment.from_record`), so
`.labels`, `.blend()` and `.agreement()` are the in-process run's by construction, not by a
second implementation. The standard library speaks HTTP here (no web framework, no [serve]
extra needed to call a server).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from .. import arguments, masking
from ..api import Judged, judge_inputs
from ..errors import ArgumentError, JudgeblenderError
from ..judges import JudgeRun, JudgeSpec
from ..judges.engine import JudgeStats, resolve_pairs
from ..judges.judgment import Judgment
from ..pairs import Pair
from ..panels.panel import Panel

RETRIES_WHEN_BUSY = 5  # a 429 (the server's queue is full) is waited out this many times, as it says


class ServiceError(JudgeblenderError):
    """The service refused a request or failed it: its status and its own message."""

    def __init__(self, url: str, status: int, message: str, field: str | None = None):
        self.status, self.field = status, field
        super().__init__(f"{url}: {status}: {message}")


class Client:
    """A client of one `judgeblender serve` server; `token` is one of its bearer tokens (None
    for a loopback server started without --token-file)."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 600.0):
        arguments.text("url", url)
        masking.register_url(url)  # a user:password@ in it is masked wherever judgeblender writes
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ArgumentError("url", "the server's http:// or https:// address, e.g. http://127.0.0.1:8000", url)
        if token is not None:
            arguments.text("token", token)
        arguments.number_between("timeout", timeout, 0, float("inf"))
        self.url = url.rstrip("/")
        self.shown = masking.text(self.url)  # the address as messages, reprs and panels show it
        self._token = token
        self.timeout = timeout

    def __repr__(self) -> str:  # never the token
        return f"Client({self.shown!r}{', token=...' if self._token else ''})"

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        for attempt in range(RETRIES_WHEN_BUSY + 1):
            request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                answer = _json_of(exc)
                if exc.code == 429 and attempt < RETRIES_WHEN_BUSY:
                    time.sleep(_seconds(exc.headers.get("Retry-After")))
                    continue
                message = answer.get("error") if isinstance(answer, dict) else None
                raise ServiceError(self.shown + path, exc.code, message or exc.reason or "no message",
                                   answer.get("field") if isinstance(answer, dict) else None) from None
            except urllib.error.URLError as exc:
                raise JudgeblenderError(f"{self.shown}: cannot reach the judgeblender service "
                                        f"({masking.text(str(exc.reason))})") from None
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def health(self) -> dict[str, Any]:
        return self._request("GET", "/v1/health")

    def panel(self) -> dict[str, Any]:
        """What the server serves: its members, how they are blended, its limits."""
        return self._request("GET", "/v1/panel")

    def judge(self, pairs: Any, *, queries: Any = None, corpus: Any = None, batch: int | None = None) -> Judged:
        """Judge `pairs` on the server, as `jb.judge` would in this process with the server's
        judges and store: `pairs` in any shape `jb.judge` takes (a DataFrame with query and
        passage columns, or pairs with queries= and corpus=; ids only when the server has
        --queries/--corpus), sent `batch` pairs a request (default: the server's most)."""
        keys, query_texts, passages = judge_inputs(pairs, queries, corpus, texts_required=False)
        if not keys:  # an empty table would look like a judged run
            raise ArgumentError("pairs", "at least one (qid, docid) pair to judge", pairs)
        served = self.panel()
        if batch is None:
            batch = int(served["limits"]["max_pairs"])
        arguments.positive_int("batch", batch)
        listed = list(dict.fromkeys(Pair(*k) for k in keys))
        if query_texts is not None and passages is not None:  # the check `jb.judge` makes, before any call
            resolve_pairs(listed, query_texts, passages)
        judgments: dict[str, dict[Pair, Judgment]] = {m["id"]: {} for m in served["judges"]}
        stats: dict[str, JudgeStats] = {}
        flagged: dict[Pair, list] = {}
        for chunk in _chunks(listed, batch):
            body = {"pairs": [_pair_body(p, query_texts, passages) for p in chunk]}
            answer = self._request("POST", "/v1/judge", body)
            for pair, result in zip(chunk, answer["results"]):
                details = result["details"]
                for jid, record in details["judges"].items():
                    judgments.setdefault(jid, {})[pair] = Judgment.from_record(jid, pair.qid, pair.docid, record)
                if details.get("injection"):
                    flagged[pair] = list(details["injection"])
            for row in answer["stats"]:
                _add_stats(stats, row)
        run = JudgeRun(pairs=listed, judgments=judgments, stats=stats)
        return Judged(run, _panel_of(served, self.shown), flagged)


def _pair_body(pair: Pair, queries: dict[str, str] | None, passages: dict[str, str] | None) -> dict[str, str]:
    body = {"qid": pair.qid, "docid": pair.docid}
    if queries is not None:
        body["query"] = queries[pair.qid]
    if passages is not None:
        body["passage"] = passages[pair.docid]
    return body


def _chunks(items: list[Pair], size: int) -> Iterator[list[Pair]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _add_stats(stats: dict[str, JudgeStats], row: dict[str, Any]) -> None:
    """One request's stats of a judge, counted into the run's (JudgeStats.add, as windows are)."""
    from collections import Counter

    fields = {k: v for k, v in row.items() if k in JudgeStats.__dataclass_fields__ and k != "judge_id"}
    fields["unjudged"] = Counter(fields.get("unjudged") or {})
    one = JudgeStats(row["judge"], **fields)
    if row["judge"] in stats:
        stats[row["judge"]].add(one)
    else:
        stats[row["judge"]] = one


def _panel_of(served: dict[str, Any], url: str) -> Panel:
    """The served judges as a Panel: a panel's own name and blend, or one judge as `jb.judge`
    makes a list of judges."""
    specs = [JudgeSpec(model=m["model"], prompt=m["prompt"], mode=m["mode"], weight=m["weight"], id=m["id"],
                       seed=m["seed"], invalid_policy=m["invalid_policy"]) for m in served["judges"]]
    if served.get("panel") is None:
        return Panel(name="judges", judges=specs, source="a list of judges")
    return Panel(name=served["panel"], judges=specs, method=served["method"], tie=served["tie"], seed=served["seed"],
                 thresholds=served.get("thresholds"), source=url)


def _json_of(exc: urllib.error.HTTPError) -> Any:
    try:
        return json.loads(exc.read())
    except (ValueError, OSError):
        return None


def _seconds(retry_after: str | None) -> float:
    try:
        return min(max(float(retry_after or 1), 0.05), 30.0)
    except ValueError:
        return 1.0
