"""Soak: 2,000 pairs per scenario through a misbehaving OpenAI-compatible server; nothing may be lost.

    .venv/bin/python bench/soak.py [--pairs 2000] [--out bench/results/soak.json] [--quick]

Scenarios (the checks of tests/test_faults.py, on 2,000 pairs, with the backend's defaults:
30 s request timeout, 5 retries, backoff from 0.5 s; concurrency 32):
  one kind at a time   each of the 15 fault kinds on 10% of requests, generate mode, and the
                       kinds whose effect depends on the mode again in logprobs mode;
  the mix, CLI         every kind at once, 3% of requests each (39% of requests fail somehow),
                       plus one passage the server always crashes on and one the model never
                       answers validly, through `judgeblender judge -j openai:test-model --json`;
  the mix, logprobs    the same mix in logprobs mode, in process.
Hangs sleep 120 s on the server, so only the client's 30 s timeout can end them.
For each: pairs lost (absent from the output), pairs judged twice, labels that differ from a
fault-free run, unjudged pairs and why, retries reported vs implied by the server's log, the
most attempts any call took, and wall time. Exits 1 if any check fails. `--quick`: 300 pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socketserver
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from openai_server import OpenAITestServer  # noqa: E402
from test_faults import KINDS, account, dataset, serving  # noqa: E402

from judgeblender.judges import Judge, JudgeSpec, judge_pairs  # noqa: E402
from judgeblender.store import CallStore  # noqa: E402

CONCURRENCY = 32
HANG_S = 120
MIX = {k: 0.03 for k in KINDS}
# The server drops the connection on the poisoned passage on purpose; its tracebacks are noise.
socketserver.BaseServer.handle_error = lambda self, request, address: None  # type: ignore[method-assign]


def in_process(data, server, mode: str, store: CallStore):
    judge = Judge(JudgeSpec(model="openai:test-model", prompt="umbrela", mode=mode,
                            options={"base_url": server.base_url, "concurrency": CONCURRENCY}))
    try:
        run = judge_pairs([judge], data.pairs, data.queries, data.corpus, store)
    finally:
        judge.close()
    return judge, run


def check(name: str, data, exp, reference: dict[int, int], labels: dict, reasons: dict, reported: dict,
          seconds: float) -> dict:
    """Figures of one scenario; `failures` lists every broken promise."""
    lost = [i for i in range(len(data.pairs)) if i not in labels]
    judged = {i: v for i, v in labels.items() if v is not None}
    wrong = [i for i, v in judged.items() if v != reference[i]]
    unjudged = {i for i, v in labels.items() if v is None}
    failures = []
    if lost:
        failures.append(f"{len(lost)} pairs lost")
    if reported["duplicates"]:
        failures.append(f"{reported['duplicates']} pairs judged twice")
    if wrong:
        failures.append(f"{len(wrong)} labels differ from the fault-free run")
    if unjudged != exp.backend_error | exp.invalid:
        failures.append("unjudged pairs differ from those the server log implies")
    if any(not reasons.get(i) for i in unjudged):
        failures.append("an unjudged pair without a reason")
    if reported["backend_retries"] != exp.backend_retries or reported["retries"] != exp.invalid_retries:
        failures.append("retries reported differ from the server log")
    served = sum(exp.outcomes.values())
    return {
        "scenario": name, "pairs": len(data.pairs), "requests": served,
        "faults_served": {k: n for k, n in sorted(exp.outcomes.items()) if k != "ok"},
        "lost": len(lost), "judged_twice": reported["duplicates"], "labels_differing": len(wrong),
        "judged": len(judged), "unjudged_backend_error": len(exp.backend_error), "unjudged_invalid": len(exp.invalid),
        "backend_retries": reported["backend_retries"], "invalid_retries": reported["retries"],
        "retries_per_pair": round((reported["backend_retries"] + reported["retries"]) / len(data.pairs), 3),
        "max_attempts_per_call": exp.max_attempts, "seconds": round(seconds, 1), "failures": failures,
    }


def one_kind(kind: str, mode: str, n: int, reference: dict[int, int], folder: Path) -> dict:
    data = dataset(n)
    with OpenAITestServer(serving(data), script=["ok"] * (2 * CONCURRENCY), fault_rates={kind: 0.10}, hang_s=HANG_S,
                          max_requests=10 * n, max_lifetime_s=3600, seed=KINDS.index(kind)) as server, \
            CallStore(folder / f"{kind}-{mode}.sqlite") as store:
        t0 = time.monotonic()
        judge, run = in_process(data, server, mode, store)
        seconds = time.monotonic() - t0
        exp = account(server, data, mode)
    js = run.judgments[judge.id]
    labels = {data.index(p): j.label for p, j in js.items()}
    reasons = {data.index(p): j.invalid_reason for p, j in js.items()}
    st = run.stats[judge.id]
    reported = {"duplicates": len(js) - len(set(js)), "backend_retries": st.backend_retries, "retries": st.retries}
    fig = check(f"{kind} 10% ({mode})", data, exp, reference, labels, reasons, reported, seconds)
    if kind == "hang":
        fig["timeouts"] = judge.backend.retry_reasons["timeout"]
    return fig


def mix_cli(n: int, reference: dict[int, int], folder: Path) -> dict:
    data = dataset(n, garbage=(17,), poisoned=(42,))
    q, c, p = data.write(folder)
    out = folder / "mix.qrels"
    with OpenAITestServer(serving(data), fault_rates=MIX, hang_s=HANG_S, max_requests=10 * n, max_lifetime_s=3600,
                          seed=7) as server:
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "judgeblender", "judge", "-q", str(q), "-c", str(c), "-p", str(p),
                               "-o", str(out), "-j", "openai:test-model", "--base-url", server.base_url,
                               "--concurrency", str(CONCURRENCY), "--store", str(folder / "mix.sqlite"),
                               "--no-progress", "--json"], capture_output=True, text=True,
                              env={**os.environ, "OPENAI_API_KEY": "sk-soak"})
        seconds = time.monotonic() - t0
        exp = account(server, data, "generate")
    if proc.returncode != 0:
        raise SystemExit(f"the CLI failed:\n{proc.stderr}")
    summary = json.loads(proc.stdout)["judges"][0]
    details = [json.loads(line) for line in Path(f"{out}.details.jsonl").read_text().splitlines()]
    labels = {int(d["docid"][1:]): d["label"] for d in details}
    reasons = {int(d["docid"][1:]): d["invalid_reason"] for d in details}
    qrels = out.read_text().splitlines()
    reported = {"duplicates": (len(details) - len({(d["qid"], d["docid"]) for d in details})
                               + len(qrels) - len(set(qrels))),
                "backend_retries": summary["backend_retries"], "retries": summary["retries"]}
    fig = check("mix of 15 kinds, 3% each (generate, CLI)", data, exp, reference, labels, reasons, reported, seconds)
    fig["unjudged_reasons"] = summary["unjudged_reasons"]
    fig["traceback_in_stderr"] = "Traceback" in proc.stderr
    if fig["traceback_in_stderr"] or len(qrels) != fig["judged"]:
        fig["failures"].append("a traceback, or qrels lines != judged pairs")
    return fig


def mix_logprobs(n: int, reference: dict[int, int], folder: Path) -> dict:
    data = dataset(n, garbage=(17,), poisoned=(42,))
    with OpenAITestServer(serving(data), script=["ok"] * (2 * CONCURRENCY), fault_rates=MIX, hang_s=HANG_S,
                          max_requests=10 * n, max_lifetime_s=3600, seed=8) as server, \
            CallStore(folder / "mix-logprobs.sqlite") as store:
        t0 = time.monotonic()
        judge, run = in_process(data, server, "logprobs", store)
        seconds = time.monotonic() - t0
        exp = account(server, data, "logprobs")
    js = run.judgments[judge.id]
    st = run.stats[judge.id]
    reported = {"duplicates": len(js) - len(set(js)), "backend_retries": st.backend_retries, "retries": st.retries}
    return check("mix of 15 kinds, 3% each (logprobs)", data, exp, reference,
                 {data.index(p): j.label for p, j in js.items()},
                 {data.index(p): j.invalid_reason for p, j in js.items()}, reported, seconds)


def fault_free(n: int, mode: str, folder: Path) -> dict[int, int]:
    data = dataset(n)
    with OpenAITestServer(serving(data), max_requests=2 * n, max_lifetime_s=3600) as server, \
            CallStore(folder / f"clean-{mode}.sqlite") as store:
        judge, run = in_process(data, server, mode, store)
    return {data.index(p): j.label for p, j in run.judgments[judge.id].items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--quick", action="store_true", help="300 pairs")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "soak.json")
    args = ap.parse_args()
    n = 300 if args.quick else args.pairs
    started = time.monotonic()
    results = []
    with tempfile.TemporaryDirectory(prefix="judgeblender-soak-") as tmp:
        folder = Path(tmp)
        reference = {mode: fault_free(n, mode, folder) for mode in ("generate", "logprobs")}
        scenarios = [(k, "generate") for k in KINDS] + [(k, "logprobs") for k in ("no_logprobs", "no_content", "garbage")]
        for kind, mode in scenarios:
            results.append(one_kind(kind, mode, n, reference[mode], folder))
            print(json.dumps(results[-1]), flush=True)
        results.append(mix_cli(n, reference["generate"], folder))
        print(json.dumps(results[-1]), flush=True)
        results.append(mix_logprobs(n, reference["logprobs"], folder))
        print(json.dumps(results[-1]), flush=True)
    failures = [f"{r['scenario']}: {f}" for r in results for f in r["failures"]]
    report = {"pairs_per_scenario": n, "concurrency": CONCURRENCY, "timeout_s": 30, "max_retries": 5,
              "server_hang_s": HANG_S, "seconds": round(time.monotonic() - started, 1), "machine": platform.platform(),
              "command": " ".join([".venv/bin/python", "bench/soak.py", *sys.argv[1:]]), "scenarios": results,
              "failures": failures}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"{len(results)} scenarios, {len(failures)} failures, {report['seconds']} s; figures in {args.out}")
    for f in failures:
        print("FAILED", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
