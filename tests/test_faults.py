"""Fault injection: a judging job against a server that fails in every way it can loses nothing.

Specification, checked against a real HTTP server on 127.0.0.1 (tests/openai_server.py):
- every pair ends exactly once in the output: with the label a fault-free run gives it, or
  unjudged with the reason, never with a made-up label;
- which pairs end unjudged, and how many retries were made, is predicted independently from
  the server's own log of what it served (`account`), and must match the judge's report exactly;
- a call that was answered is never asked again, and retries are bounded by max_retries;
- "hang" faults are ended by the per-request timeout (--timeout), not by the server.

bench/soak.py runs the same checks on 2,000 pairs per scenario and writes the figures.
"""

from __future__ import annotations

import json
import os
import re
import socketserver
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from openai_server import FAULT_KINDS, OpenAITestServer

from judgeblender.backends.openai_compat import create
from judgeblender.judges import Judge, JudgeSpec, judge_pairs
from judgeblender.pairs import Pair
from judgeblender.store import CallStore

MARK = re.compile(r"passage-(\d{5})")
KINDS = sorted(FAULT_KINDS - {"ok", "400", "reject_logprobs", "raw"})  # the 15 transient faults
# Served answers that fail the call and are retried by the backend, per scoring mode.
TRANSPORT = {"429", "500", "502", "503", "504", "hang", "close", "close_mid", "malformed_json", "empty_choices",
             "budget_exhausted"}
FAILS = {"generate": TRANSPORT | {"no_content"}, "logprobs": TRANSPORT | {"no_logprobs"}}
# Served answers that are stored but invalid, per scoring mode (generate mode reads only answers
# that say they ended normally; logprobs mode does not look at the finish reason).
INVALID = {"generate": {"garbage", "finish_null", "finish_missing"}, "logprobs": {"garbage"}}
MAX_RETRIES = 5  # the backend's default
CONCURRENCY = 16
N_PAIRS = 120  # per fault kind in CI; bench/soak.py does 2,000
CLI_PAIRS = 200  # the mix of every kind through the CLI


def label_of(i: int) -> int:
    return (i * 7 + 3) % 4


@dataclass
class Dataset:
    queries: dict[str, str]
    corpus: dict[str, str]
    pairs: list[Pair]
    garbage: frozenset[int] = frozenset()  # passages the model never answers validly
    poisoned: frozenset[int] = frozenset()  # passages the server crashes on, every time

    def index(self, pair: Pair) -> int:
        return int(pair.docid[1:])

    def write(self, folder: Path) -> tuple[Path, Path, Path]:
        q, c, p = folder / "queries.tsv", folder / "corpus.jsonl", folder / "pairs.tsv"
        q.write_text("".join(f"{k}\t{v}\n" for k, v in self.queries.items()))
        c.write_text("".join(json.dumps({"docid": k, "text": v}) + "\n" for k, v in self.corpus.items()))
        p.write_text("".join(f"{x.qid}\t{x.docid}\n" for x in self.pairs))
        return q, c, p


def dataset(n: int, garbage: tuple[int, ...] = (), poisoned: tuple[int, ...] = ()) -> Dataset:
    # 20 queries whatever n, so a smaller dataset is a prefix of a larger one
    queries = {f"q{j}": f"question number {j} about topic {j * 13 % 97}" for j in range(20)}
    corpus = {f"d{i}": f"passage-{i:05d} talks about topic {i % 97} at some length." for i in range(n)}
    pairs = [Pair(f"q{i % len(queries)}", f"d{i}") for i in range(n)]
    return Dataset(queries, corpus, pairs, frozenset(garbage), frozenset(poisoned))


def serving(data: Dataset):
    """The model behind the server: the label is fixed by the passage; some passages are trouble."""

    def answer(body: dict) -> str:
        i = int(MARK.search(body["messages"][-1]["content"]).group(1))
        if i in data.poisoned:
            raise RuntimeError(f"the server crashes on passage {i}")  # the handler drops the connection
        if i in data.garbage:
            return "I would rather not say."
        return str(label_of(i)) if body.get("logprobs") else f"##final score: {label_of(i)}"

    return answer


@dataclass
class Expected:
    """What must have happened, read from the server's log alone."""

    labels: dict[int, int] = field(default_factory=dict)
    backend_error: set[int] = field(default_factory=set)
    invalid: set[int] = field(default_factory=set)
    backend_retries: int = 0
    invalid_retries: int = 0
    calls_answered: int = 0
    max_attempts: int = 0
    outcomes: Counter = field(default_factory=Counter)
    last: dict[tuple[int, int], str] = field(default_factory=dict)  # (passage, seed) -> what its last answer was


def account(server: OpenAITestServer, data: Dataset, mode: str, max_retries: int = MAX_RETRIES) -> Expected:
    """Replay the server's log: group requests by call (passage, seed) in arrival order."""
    calls: dict[tuple[int, int], list[str]] = defaultdict(list)
    exp = Expected()
    for rec in sorted((r for r in server.requests if r.method == "POST"), key=lambda r: r.number):
        i = int(MARK.search(rec.last_user_message).group(1))
        outcome = "crash" if i in data.poisoned else rec.outcome
        calls[i, rec.body["seed"]].append(outcome)
        exp.outcomes[rec.outcome] += 1
    fails = FAILS[mode] | {"crash"}
    result: dict[tuple[int, int], str] = {}
    for key, outcomes in calls.items():
        answered = [k for k, o in enumerate(outcomes) if o not in fails]
        # an answered call is never asked again, and the backend gives up after max_retries
        assert answered in ([], [len(outcomes) - 1]), f"call {key} asked again after an answer: {outcomes}"
        assert len(outcomes) <= max_retries + 1, f"call {key} retried more than {max_retries} times"
        exp.backend_retries += len(outcomes) - 1
        exp.max_attempts = max(exp.max_attempts, len(outcomes))
        exp.last[key] = outcomes[-1]
        if not answered:
            assert len(outcomes) == max_retries + 1, f"call {key} given up early: {outcomes}"
            result[key] = "failed"
        else:
            exp.calls_answered += 1
            result[key] = "invalid" if outcomes[-1] in INVALID[mode] or key[0] in data.garbage else "ok"
    for pair in data.pairs:
        i = data.index(pair)
        first = result.get((i, 0))
        assert first is not None, f"passage {i} was never asked"
        if first == "invalid":  # the engine asks once more, sampling, with the next seed
            exp.invalid_retries += 1
            second = result.get((i, 1))
            assert second is not None, f"passage {i}: an invalid answer was not retried"
            first = second
        else:
            assert (i, 1) not in result, f"passage {i} was retried without reason"
        if first == "ok":
            exp.labels[i] = label_of(i)
        elif first == "failed":
            exp.backend_error.add(i)
        else:
            exp.invalid.add(i)
    return exp


# Long enough that a busy machine never times out an answer that was sent (the log-based
# accounting would see a repeated call), short next to the server's 30 s hangs.
TIMEOUT_S = 3


def judge_in_process(data: Dataset, server: OpenAITestServer, mode: str, store: CallStore | None = None,
                     timeout_s: float = TIMEOUT_S):
    opts = {"base_url": server.base_url, "timeout_s": timeout_s, "backoff_base_s": 0.01, "concurrency": CONCURRENCY}
    judge = Judge(JudgeSpec(model="openai:test-model", prompt="umbrela", mode=mode, options=opts))
    try:
        run = judge_pairs([judge], data.pairs, data.queries, data.corpus, store)
    finally:
        judge.close()
    return judge, run


@pytest.fixture(autouse=True)
def quiet_server_crashes(monkeypatch):
    # The poisoned passage crashes a handler on purpose; its traceback is noise here.
    monkeypatch.setattr(socketserver.BaseServer, "handle_error", lambda self, request, address: None)


@pytest.fixture(scope="module")
def reference() -> dict[str, dict[int, int | None]]:
    """Labels of a fault-free run, per scoring mode (the datasets below are prefixes of this one)."""
    data = dataset(CLI_PAIRS)
    labels = {}
    for mode in ("generate", "logprobs"):
        with OpenAITestServer(serving(data), max_requests=10_000) as server:
            judge, run = judge_in_process(data, server, mode)
        assert server.request_count == len(data.pairs) and run.stats[judge.id].backend_retries == 0
        labels[mode] = {data.index(p): j.label for p, j in run.judgments[judge.id].items()}
    return labels


# (mode, fault kind): every kind in generate mode, and in logprobs mode the kinds whose effect
# depends on the mode (no_logprobs and no_content swap roles; garbage yields no label token).
MATRIX = [("generate", k) for k in KINDS] + [("logprobs", k) for k in ("no_logprobs", "no_content", "garbage")]


@pytest.mark.parametrize("mode,kind", MATRIX)
def test_ten_percent_of_one_fault_kind_loses_nothing(tmp_path, reference, mode, kind):
    data = dataset(N_PAIRS)
    # The first answers are clean: an answer without logprobs before the server has sent them
    # `concurrency` times means, by design, a server that cannot score (the judge falls back or
    # stops). A request beyond the first 2 x concurrency is sent after concurrency + 1 answers.
    with OpenAITestServer(serving(data), script=["ok"] * (2 * CONCURRENCY), fault_rates={kind: 0.10}, hang_s=30,
                          max_requests=10_000, seed=KINDS.index(kind)) as server, \
            CallStore(tmp_path / "s.sqlite") as store:
        t0 = time.monotonic()
        judge, run = judge_in_process(data, server, mode, store)
        elapsed = time.monotonic() - t0
        exp = account(server, data, mode)
        stored = store.count_calls()
    stats = run.stats[judge.id]
    judgments = run.judgments[judge.id]
    served = sum(exp.outcomes.values())
    assert 0.03 <= exp.outcomes[kind] / served <= 0.2, f"{kind} was served {exp.outcomes[kind]} times of {served}"
    # every pair exactly once, labelled as without faults or unjudged as the server log says
    assert sorted(judgments) == sorted(data.pairs)
    got = {data.index(p): j.label for p, j in judgments.items() if j.label is not None}
    assert got == exp.labels
    assert all(reference[mode][i] == label for i, label in got.items())
    unjudged = {data.index(p): j.invalid_reason for p, j in judgments.items() if j.label is None}
    assert set(unjudged) == exp.backend_error | exp.invalid
    assert all("backend error" in unjudged[i] for i in exp.backend_error)
    assert all("backend error" not in unjudged[i] for i in exp.invalid)
    assert stats.judged == len(exp.labels) and sum(stats.unjudged.values()) == len(unjudged)
    # retries: exactly those the server log implies, and bounded
    assert stats.backend_retries == exp.backend_retries
    assert stats.retries == exp.invalid_retries
    assert stats.backend_retries <= (stats.calls_made + len(exp.backend_error)) * MAX_RETRIES
    assert stats.calls_made == stored == exp.calls_answered
    if kind == "hang":  # each hang ended by the 3 s client timeout, long before the server's 30 s
        assert judge.backend.retry_reasons["timeout"] == exp.outcomes["hang"] and elapsed < 30
    # a 10% fault rate almost never defeats 5 retries; only an invalid answer twice leaves a pair unjudged
    if kind not in INVALID[mode]:
        assert not unjudged


def test_default_request_timeout_is_thirty_seconds_and_settable():
    assert create("m", base_url="http://127.0.0.1:9/v1").timeout_s == 30.0
    assert create("m", base_url="http://127.0.0.1:9/v1", timeout_s=1.5).timeout_s == 1.5


def cli(*args, timeout=300):
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-faults"}
    return subprocess.run([sys.executable, "-m", "judgeblender", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=timeout)


def test_cli_every_fault_kind_at_once_loses_nothing_and_reports_what_is_missing(tmp_path, reference):
    """The whole mix in one job, through `judgeblender judge --json`: 3% of requests each of 15 kinds
    (45% of requests fail somehow), one passage the server always crashes on, one the model
    never answers validly."""
    data = dataset(CLI_PAIRS, garbage=(17,), poisoned=(42,))
    q, c, p = data.write(tmp_path)
    mix = {k: 0.03 for k in KINDS}
    out = tmp_path / "faulty.qrels"
    with OpenAITestServer(serving(data), fault_rates=mix, hang_s=60, max_requests=10_000, seed=7) as server:
        t0 = time.monotonic()
        faulty = cli("judge", "-q", q, "-c", c, "-p", p, "-o", out, "-j", "openai:test-model", "--base-url",
                     server.base_url, "--timeout", TIMEOUT_S, "--concurrency", CONCURRENCY, "--store", tmp_path / "s.sqlite",
                     "--no-progress", "--json")
        elapsed = time.monotonic() - t0
        exp = account(server, data, "generate")
    assert faulty.returncode == 3, faulty.stderr  # calls failed (passage 42 always): what was judged is written
    assert "Traceback" not in faulty.stderr and "pairs not judged because their model calls failed" in faulty.stderr
    assert elapsed < 60  # every hang was cut by --timeout 3, none waited for the server's 60 s
    assert exp.outcomes["hang"] > 0 and all(exp.outcomes[k] > 0 for k in KINDS)

    summary = json.loads(faulty.stdout)["judges"][0]
    # qrels: the fault-free labels, minus exactly the pairs the server log says could not be judged
    missing = {f"d{i}" for i in exp.backend_error | exp.invalid}
    assert {17, 42} <= {int(d[1:]) for d in missing}
    clean_lines = [f"{x.qid} 0 {x.docid} {reference['generate'][data.index(x)]}" for x in data.pairs]
    faulty_lines = out.read_text().splitlines()
    assert faulty_lines == [line for line in clean_lines if line.split()[2] not in missing]
    assert len(faulty_lines) == len(set(faulty_lines))
    # details: every pair once; an unjudged pair has no label and says why
    details = [json.loads(line) for line in (tmp_path / "faulty.qrels.details.jsonl").read_text().splitlines()]
    assert sorted((d["qid"], d["docid"]) for d in details) == sorted((x.qid, x.docid) for x in data.pairs)
    for d in details:
        if d["docid"] in missing:
            assert d["label"] is None and d["invalid_reason"]
        else:
            assert d["label"] == reference["generate"][int(d["docid"][1:])] and d["invalid_reason"] is None
    reasons = {d["docid"]: d["invalid_reason"] for d in details if d["label"] is None}
    assert "backend error" in reasons["d42"] and "failed after 6 attempts" in reasons["d42"]
    # the garbage passage's reason is that of its last call: garbage text, unless the server's
    # fault mix withheld the finish reason of that answer or failed every attempt (the log says which)
    last17 = exp.last[17, max(seed for i, seed in exp.last if i == 17)]
    expected17 = ("backend error" if 17 in exp.backend_error else
                  "no finish reason" if last17 in {"finish_null", "finish_missing"} else "no label found")
    assert expected17 in reasons["d17"]
    # the summary: counts and reasons, retries as the server log implies
    assert summary["judged"] == len(exp.labels) and summary["unjudged"] == len(missing)
    assert sum(summary["unjudged_reasons"].values()) == len(missing)
    assert summary["backend_retries"] == exp.backend_retries and summary["retries"] == exp.invalid_retries
    assert summary["calls_made"] == exp.calls_answered
    shown = " ".join(faulty.stderr.split())
    assert "unjudged openai:test-model/umbrela/generate:" in shown
    why17 = ":".join(reasons["d17"].split(":")[:2])  # "grade: no label found" or "grade: no finish reason"
    assert f"pairs: {why17}" in shown and "pairs: grade: backend error" in shown


def test_consecutive_jobs_in_one_process_leave_no_connection_to_a_closed_event_loop(caplog):
    """Each judge_pairs() runs its own event loop; its connections must be closed before that loop
    ends, or the garbage collector later closes them on another loop and asyncio logs errors."""
    import asyncio
    import gc

    data = dataset(40)
    with OpenAITestServer(serving(data), max_requests=1000) as server:
        for _ in range(2):
            judge, run = judge_in_process(data, server, "generate")
            assert run.stats[judge.id].judged == 40
            del judge, run

        async def next_job_collects_garbage():
            gc.collect()
            await asyncio.sleep(0.05)

        asyncio.run(next_job_collects_garbage())
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text
