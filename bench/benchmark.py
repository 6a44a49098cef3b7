"""judgeblender performance benchmark (issue #5): embedded judging, served judging, meta-evaluation.

    python bench/benchmark.py all --out docs/benchmarks.md        # everything (see bench/run_all.sh)
    python bench/benchmark.py served --concurrency 1 8 64        # one part, table on stdout
    python bench/benchmark.py case '{"kind": "served", ...}'      # one case (what `all` runs per subprocess)

Every case runs in its own subprocess, so its peak memory is that process's maxrss (os.wait4)
and a model loaded for one case does not flatter the next. Inside a case, each figure is the
median over `--repeats` repeats. All times are wall-clock on a shared machine: the load
average before and after every case is recorded next to its figures.

Embedded (llama.cpp through judgeblender, and the transformers reference method):
- ref: transformers `generate` at batch size 1, the whole prompt every call (as UMBRELA's
  Hugging Face backend does), the same GGUF dequantised by transformers (gguf_file=);
- generate: judgeblender's embedded llama.cpp backend in generate mode (greedy, prefix reuse);
- logprobs: judgeblender's logprobs mode (one forward pass per pair, label logits);
- the limit: the tokens that must be evaluated (the unique tokens of the sorted prompts, i.e.
  the nodes of their prefix tree) divided by the engine's raw prefill rate, measured in the
  same process on whole prompts from an empty cache.
Served: judgeblender against tests/openai_server.py (in its own process) answering after a
fixed delay; pairs/s at each concurrency against the ideal concurrency / delay.
Meta-evaluation: `judgeblender correlate` over the DL19 runs and LLM label files, cold (empty
parse cache) and warm, plus the in-process stages, and a check that every per-query value
equals ir_measures' on the full runs.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
DL19 = DATA / "trec-dl-2019"
LABELS = DATA / "llm-labels" / "trec-dl-2019"
MODELS = {"qwen": "llamacpp:default", "gemma": "llamacpp:gemma-270m"}
SERVED_DELAY_S = 0.2
TOP_LOGPROBS = [("2", -0.4), ("3", -1.6), ("1", -2.2), ("0", -3.5)]


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------
def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    flags = ""
    try:
        text = Path("/proc/cpuinfo").read_text()
        flags = "AVX-512" if "avx512f" in text else ("AVX2" if "avx2" in text else "")
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"nproc": os.cpu_count(), "cpu": cpu, "simd": flags, "memory_gb": round(mem_gb, 1),
            "python": platform.python_version(), "platform": platform.platform()}


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def first_pairs(n: int):
    from judgeblender.pairs import Pair

    pairs = []
    with open(DL19 / "qrels.txt", encoding="utf-8") as fh:
        for line in fh:
            q, _, d, _ = line.split()
            pairs.append(Pair(q, d))
            if len(pairs) >= n:
                break
    return pairs


def dl19_texts():
    from judgeblender.pairs import read_corpus, read_queries

    return read_queries(DL19 / "queries.tsv"), read_corpus(DL19 / "passages.jsonl")


def run_case(spec: dict[str, Any], env: dict[str, str] | None = None, timeout: float = 7200) -> dict[str, Any]:
    """Run one case in a fresh interpreter; its result (last JSON line) plus its peak memory."""
    before = load()
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "case", json.dumps(spec)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, **(env or {})})
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return {"case": spec, "error": f"timed out after {timeout:.0f} s", "load_before": before, "load_after": load()}
    rusage = getattr(proc, "_rusage", None)
    result: dict[str, Any] = {}
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            result = json.loads(line)
            break
    if not result:
        result = {"error": (err.strip().splitlines() or ["no output"])[-1][:300]}
    result["case"] = spec
    result["wall_s"] = round(time.perf_counter() - started, 2)
    result["maxrss_mb"] = round(rusage.ru_maxrss / 1024, 1) if rusage else result.get("maxrss_mb")
    result["load_before"], result["load_after"] = before, load()
    if proc.returncode:
        result.setdefault("error", (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:300])
    return result


class _Popen(subprocess.Popen):
    """Popen that keeps the child's rusage from wait4 (peak memory of that process alone)."""

    def _try_wait(self, wait_flags):  # type: ignore[override]
        try:
            pid, sts, rusage = os.wait4(self.pid, wait_flags)
        except ChildProcessError:
            return self.pid, 0
        if pid == self.pid:
            self._rusage = rusage
        return pid, sts


subprocess.Popen = _Popen  # type: ignore[misc]  # only this script's own children


def self_maxrss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --------------------------------------------------------------------------------------------
# embedded judging
# --------------------------------------------------------------------------------------------
def requantized(model: str, ftype: str) -> Path:
    """The packaged model requantised (Q4_K_M -> Q4_0), cached next to it; a speed knob to check."""
    import llama_cpp

    from judgeblender.backends.packaged_models import ensure_model

    src = ensure_model(model.split(":", 1)[1])
    dst = src.with_name(src.stem + f".requant-{ftype}.gguf")
    if not dst.exists():
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype.upper()}")
        params.allow_requantize = True
        params.nthread = 2
        tmp = dst.with_name(dst.name + ".part")
        rc = llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), params)
        if rc != 0:
            raise RuntimeError(f"llama_model_quantize returned {rc}")
        tmp.rename(dst)
    return dst


def unique_tokens(sequences: list[list[int]]) -> int:
    """Nodes of the prefix tree of the sequences: tokens left to evaluate when each sequence
    reuses the longest prefix it shares with any other (sorted order achieves it)."""
    total, prev = 0, []
    for seq in sorted(sequences):
        shared = 0
        for a, b in zip(seq, prev):
            if a != b:
                break
            shared += 1
        total += len(seq) - shared
        prev = seq
    return total


def judging_case(spec: dict[str, Any]) -> dict[str, Any]:
    """One (model, method) on the first `pairs` DL19 pairs: median seconds over repeats."""
    from judgeblender.backends.registry import create_backend
    from judgeblender.judges import Judge, JudgeSpec, judge_pairs
    from judgeblender.judges.engine import build_request
    from judgeblender.store import CallStore

    model, method, n, repeats = MODELS[spec["model"]], spec["method"], spec["pairs"], spec["repeats"]
    threads = spec.get("threads", 2)
    queries, corpus = dl19_texts()
    pairs = first_pairs(n)
    t0 = time.perf_counter()
    if method == "ref":
        from judgeblender.backends.packaged_models import ensure_model

        backend = create_backend("hf:" + str(ensure_model(model.split(":", 1)[1])), n_threads=threads,
                                 dtype="float32")
        mode = "generate"
    else:
        opts: dict[str, Any] = {"n_threads": threads, "space_path": spec.get("space_path", "separate")}
        target = str(requantized(model, spec["requant"])) if spec.get("requant") else model
        backend = create_backend("llamacpp:" + target if spec.get("requant") else target, **opts)
        mode = method
    load_s = time.perf_counter() - t0
    judge = Judge(JudgeSpec(model=model, mode=mode), backend=backend)
    seconds, evaluated = [], []
    labels: dict[str, Any] = {}
    out: dict[str, Any] = {"n": n, "threads": threads, "load_s": round(load_s, 1),
                           "omp_wait_policy": getattr(backend, "omp_wait_policy", os.environ.get("OMP_WAIT_POLICY"))}
    limit = bool(spec.get("limit")) and method == "logprobs"
    seqs: list[list[int]] = []
    rates: list[float] = []
    cpu_rates: list[float] = []
    if limit:
        # the tokens that must be evaluated: prompt + answer prefix + the space token
        step = judge.template.steps[0]
        space = backend._space
        for p in pairs:
            req = build_request(judge, step, {"query": queries[p.qid], "passage": corpus[p.docid]}, 0)
            toks = backend._tokens(backend.format_prompt(req.messages) + req.answer_prefix)
            seqs.append(toks + ([space] if space is not None else []))

    def raw_prefill(k: int) -> None:
        """The engine's raw prefill rate: k whole prompts from an empty cache (wall and CPU tok/s)."""
        llm = backend.llm
        for _ in range(k):
            seq = seqs[len(rates) * 37 % len(seqs)]
            llm.n_tokens = 0
            llm._ctx.kv_cache_clear()
            t, c = time.perf_counter(), time.process_time()
            llm.eval(seq)
            rates.append(len(seq) / (time.perf_counter() - t))
            cpu_rates.append(len(seq) / (time.process_time() - c))

    cpu_seconds: list[float] = []
    for _ in range(repeats):
        if limit:  # interleaved with the repeats, so both see the same machine load
            raw_prefill(spec.get("rate_prompts", 2))
        if hasattr(backend, "llm"):  # each repeat starts from an empty KV cache
            backend.llm.n_tokens = 0
            backend.llm._ctx.kv_cache_clear()
        store = CallStore(Path(tempfile.mkdtemp()) / "calls.sqlite")
        started, cpu0 = time.perf_counter(), time.process_time()
        run = judge_pairs([judge], pairs, queries, corpus, store=store)
        seconds.append(time.perf_counter() - started)
        cpu_seconds.append(time.process_time() - cpu0)
        evaluated.append(sum((c["extra"] or {}).get("evaluated_tokens", 0) for c in store.iter_calls()
                             if isinstance(c.get("extra"), dict)))
        js = run.judgments[judge.id]
        labels = {f"{p.qid} {p.docid}": {"label": js[p].label, "probs": js[p].probs} for p in pairs}
        out["invalid"] = sum(1 for v in labels.values() if v["label"] is None)
        out["tokens_out_mean"] = round(statistics.mean(c["tokens_out"] or 0 for c in store.iter_calls()), 1)
    out.update({"seconds": seconds, "median_s": median(seconds), "pairs_per_s": n / median(seconds),
                "cpu_seconds": cpu_seconds, "evaluated_tokens": median(evaluated) if any(evaluated) else None})
    if spec.get("labels_out"):
        Path(spec["labels_out"]).write_text(json.dumps(labels))
    if limit:
        raw_prefill(spec.get("rate_prompts", 2))
        # per-call Python work next to the model: formatting, tokenizing, one log-softmax row
        reqs = [build_request(judge, step, {"query": queries[p.qid], "passage": corpus[p.docid]}, 0) for p in pairs[:50]]
        t = time.perf_counter()
        texts = [backend.format_prompt(req.messages) for req in reqs]
        format_ms = (time.perf_counter() - t) / len(reqs) * 1000
        t = time.perf_counter()
        for text in texts:
            backend._tokens(text)
        tokenize_ms = (time.perf_counter() - t) / len(texts) * 1000
        backend._eval_logprobs(seqs[0][:8])
        t = time.perf_counter()
        for _ in range(20):
            backend._logprobs_row(-1)
        softmax_ms = (time.perf_counter() - t) / 20 * 1000
        uniq = unique_tokens(seqs)
        bound = uniq / median(rates)
        cpu_bound = uniq / median(cpu_rates)
        out.update({"format_ms": format_ms, "tokenize_ms": tokenize_ms, "logsoftmax_ms": softmax_ms,
                    "prompt_tokens_mean": round(statistics.mean(len(s) for s in seqs), 1),
                    "total_tokens": sum(len(s) for s in seqs), "unique_tokens": uniq,
                    "prefill_tok_per_s": median(rates), "prefill_rates": rates, "bound_s": bound,
                    "fraction_of_bound": median(seconds) / bound, "prefill_cpu_tok_per_s": median(cpu_rates),
                    "cpu_bound_s": cpu_bound, "fraction_of_cpu_bound": median(cpu_seconds) / cpu_bound})
    return out


UMBRELA_SCRIPT = r"""
import json, os, sys, time, types
from pathlib import Path
gguf, folder = sys.argv[1], sys.argv[2]
import torch
torch.set_num_threads(int(os.environ.get("THREADS", "2")))
if not (Path(folder) / "config.json").exists():
    # transformers refuses save_pretrained on a GGUF-loaded model: copy its dequantised weights
    from transformers import AutoModelForCausalLM, AutoTokenizer
    p = Path(gguf)
    tok = AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
    model = AutoModelForCausalLM.from_pretrained(str(p.parent), gguf_file=p.name, dtype=torch.float32)
    cfg = model.config
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    plain = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    plain.load_state_dict(model.state_dict(), strict=False)
    plain.save_pretrained(folder)
    tok.save_pretrained(folder)
if os.environ.get("STUB_PYSERINI"):
    # UMBRELA imports pyserini, whose Anserini jar needs Java 21; with few_shot_count=0 it is never
    # called, so stand-ins for the two imports let UMBRELA's own judge run.
    for name, attrs in (("pyserini", {}), ("pyserini.index", {}), ("pyserini.index.lucene", {"IndexReader": None}),
                        ("pyserini.search", {"get_qrels": None, "get_topics": None})):
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        sys.modules[name] = mod
from umbrela.osllm_judge import OSLLMJudge
from fastchat.model import load_model
requests = json.loads(sys.stdin.read())
judge = OSLLMJudge(qrel="dl19-passage", model_name=folder, few_shot_count=0, device="cpu")
t = time.perf_counter()
load_model(folder, device="cpu", num_gpus=1)
load_s = time.perf_counter() - t
times, labels = [], []
for req in requests:  # UMBRELA loads the model inside every judge() call: one call per query
    t = time.perf_counter()
    out = judge.judge(req, max_new_tokens=100)
    times.append(time.perf_counter() - t)
    labels += [o["judgment"] for o in out]
print(json.dumps({"judge_s": times, "model_load_s": load_s, "labels": labels}))
"""


def umbrela_case(spec: dict[str, Any]) -> dict[str, Any]:
    """UMBRELA's own Hugging Face judge (OSLLMJudge, zero-shot) from a throwaway venv, if given one."""
    from judgeblender.backends.packaged_models import ensure_model

    queries, corpus = dl19_texts()
    pairs = first_pairs(spec["pairs"])
    by_query: dict[str, list] = {}
    for p in pairs:
        by_query.setdefault(p.qid, []).append(p)
    requests = [{"query": {"text": queries[q], "qid": q},
                 "candidates": [{"doc": {"segment": corpus[p.docid]}, "docid": p.docid} for p in ps]}
                for q, ps in by_query.items()]
    gguf = ensure_model(MODELS[spec["model"]].split(":", 1)[1])
    folder = Path(tempfile.gettempdir()) / f"judgeblender-umbrela-{gguf.stem}-hf"  # ~1 GB of float32 weights
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "STUB_PYSERINI": "1",
           "THREADS": str(spec.get("threads", 2))}
    proc = subprocess.run([spec["python"], "-c", UMBRELA_SCRIPT, str(gguf), str(folder)], input=json.dumps(requests),
                          capture_output=True, text=True, env=env)
    if proc.returncode:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:300]}
    res = json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])
    total = sum(res["judge_s"]) - len(res["judge_s"]) * res["model_load_s"]
    return {"n": len(pairs), "median_s": total, "pairs_per_s": len(pairs) / total, "model_load_s": res["model_load_s"],
            "judge_s_with_loads": sum(res["judge_s"]), "labels": res["labels"]}


# --------------------------------------------------------------------------------------------
# served
# --------------------------------------------------------------------------------------------
SERVER_SCRIPT = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from openai_server import OpenAITestServer
cfg = json.loads(sys.argv[2])
srv = OpenAITestServer(answers="2", top_logprobs=[tuple(x) for x in cfg["top"]], delay_s=cfg["delay"],
                       max_requests=cfg["max_requests"], max_lifetime_s=cfg["lifetime"])
srv.start()
print(srv.port, flush=True)
while not srv.stopped:
    line = sys.stdin.readline()
    if not line or line.strip() == "stop":
        srv.stop()
        break
    if line.strip() == "stats":
        print(json.dumps({"requests": srv.request_count, "max_in_flight": srv.max_in_flight}), flush=True)
        srv.reset_counters()
"""


@contextlib.contextmanager
def answering_server(n: int, conc: int, repeats: int):
    """tests/openai_server.py in its own process, answering after SERVED_DELAY_S: (process, port)."""
    cfg = {"top": TOP_LOGPROBS, "delay": SERVED_DELAY_S, "max_requests": n * (repeats + 1) + 100,
           "lifetime": 60 + repeats * (n / min(conc / SERVED_DELAY_S, 400) + 30)}
    server = subprocess.Popen([sys.executable, "-c", SERVER_SCRIPT, str(ROOT / "tests"), json.dumps(cfg)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        yield server, int(server.stdout.readline())
    finally:
        try:
            server.stdin.write("stop\n")
            server.stdin.flush()
        except OSError:
            pass
        server.wait(timeout=30)


def served_case(spec: dict[str, Any]) -> dict[str, Any]:
    """pairs/s through judge_pairs against the test server at one concurrency."""
    from judgeblender.judges import Judge, JudgeSpec, judge_pairs
    from judgeblender.store import CallStore

    conc, n, repeats = spec["concurrency"], spec["pairs"], spec["repeats"]
    queries, corpus = dl19_texts()
    pairs = first_pairs(n)
    with answering_server(n, conc, repeats) as (server, port):
        opts = {"base_url": f"http://127.0.0.1:{port}/v1", "concurrency": conc, "timeout_s": 30}
        rates, in_flight, cpu, writer_cpu = [], [], [], []
        for rep in range(repeats + 1):  # the first pass warms up connections and imports
            judge = Judge(JudgeSpec(model="openai:test-model", mode="logprobs", options=opts))
            store = CallStore(Path(tempfile.mkdtemp()) / "calls.sqlite") if spec.get("store") else None
            server.stdin.write("stats\n")
            server.stdin.flush()
            server.stdout.readline()
            children = resource.getrusage(resource.RUSAGE_CHILDREN)
            c0, t0 = time.process_time(), time.perf_counter()
            run = judge_pairs([judge], pairs, queries, corpus, store=store)
            elapsed, used = time.perf_counter() - t0, time.process_time() - c0
            judge.close()
            if store is not None:
                store.close()  # its writer process ends: its CPU is in RUSAGE_CHILDREN from here
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if rep:
                writer_cpu.append((after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime) / n * 1000)
            assert run.stats[judge.id].judged == n, run.stats[judge.id]
            server.stdin.write("stats\n")
            server.stdin.flush()
            stats = json.loads(server.stdout.readline())
            if rep:
                rates.append(n / elapsed)
                in_flight.append(stats["max_in_flight"])
                cpu.append(used / n * 1000)
    ideal = conc / SERVED_DELAY_S
    return {"pairs_per_s": median(rates), "ideal": ideal, "fraction_of_ideal": median(rates) / ideal,
            "rates": rates, "max_in_flight": max(in_flight), "client_cpu_ms_per_call": median(cpu),
            "writer_cpu_ms_per_call": median(writer_cpu), "n": n}


def served_sdk_case(spec: dict[str, Any]) -> dict[str, Any]:
    """The ceiling of the client side: the openai SDK alone (the same clients, raw responses, the
    same bodies), no judgeblender code, against the same server at the same concurrency."""
    import asyncio

    import openai

    from judgeblender.backends.openai_compat import CALLS_PER_CLIENT
    from judgeblender.backends.openai_wire import build_chat_body
    from judgeblender.judges import Judge, JudgeSpec
    from judgeblender.judges.engine import build_request

    conc, n, repeats = spec["concurrency"], spec["pairs"], spec["repeats"]
    queries, corpus = dl19_texts()
    judge = Judge(JudgeSpec(model="openai:test-model", mode="logprobs", options={"base_url": "http://127.0.0.1:9/v1"}))
    step = judge.template.steps[0]
    bodies = [build_chat_body(build_request(judge, step, {"query": queries[p.qid], "passage": corpus[p.docid]}, 0),
                              "test-model")[0] for p in first_pairs(n)]

    async def run_once(port: int) -> tuple[float, float]:
        clients = [openai.AsyncOpenAI(api_key="unused", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
                   for _ in range(-(-conc // CALLS_PER_CLIENT))]
        sem = asyncio.Semaphore(conc)

        async def one(i: int) -> None:
            async with sem:
                raw = await clients[i % len(clients)].post("/chat/completions", cast_to=object, body=bodies[i],
                                                           options={"headers": {"X-Stainless-Raw-Response": "true"}})
                json.loads(raw.http_response.content)

        c0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        elapsed, used = time.perf_counter() - t0, time.process_time() - c0
        for client in clients:
            await client.close()
        return elapsed, used

    with answering_server(n, conc, repeats) as (_, port):
        rates, cpu = [], []
        for rep in range(repeats + 1):  # the first pass warms up
            elapsed, used = asyncio.run(run_once(port))
            if rep:
                rates.append(n / elapsed)
                cpu.append(used / n * 1000)
    ideal = conc / SERVED_DELAY_S
    return {"pairs_per_s": median(rates), "ideal": ideal, "fraction_of_ideal": median(rates) / ideal,
            "rates": rates, "max_in_flight": conc, "client_cpu_ms_per_call": median(cpu), "n": n}


# --------------------------------------------------------------------------------------------
# meta-evaluation
# --------------------------------------------------------------------------------------------
def correlate_command() -> list[str]:
    exe = str(Path(sys.executable).with_name("judgeblender"))
    return [exe, "correlate", *sorted(str(p) for p in LABELS.glob("*.qrels")), "--gold", str(DL19 / "qrels.txt"),
            "--runs", str(DL19 / "runs")]


def correlate_cli_case(spec: dict[str, Any]) -> dict[str, Any]:
    """Wall time of the whole `judgeblender correlate` command (its own process), median of repeats.
    `cache`: "cold" gives every repeat an empty parse cache, "warm" one cache filled beforehand."""
    cache = Path(tempfile.mkdtemp(prefix="jb-cache-"))
    env = {**os.environ, "JUDGEBLENDER_CACHE": str(cache)}
    cmd = correlate_command()
    if spec["cache"] == "warm":
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
    walls, rss, cpu = [], [], []
    for _ in range(spec["repeats"]):
        if spec["cache"] == "cold":
            cache = Path(tempfile.mkdtemp(prefix="jb-cache-"))
            env["JUDGEBLENDER_CACHE"] = str(cache)
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
        proc.wait()
        walls.append(time.perf_counter() - t)
        ru = proc._rusage  # type: ignore[attr-defined]
        rss.append(ru.ru_maxrss / 1024)
        cpu.append(ru.ru_utime + ru.ru_stime)
        assert proc.returncode == 0
    return {"median_s": median(walls), "seconds": walls, "cpu_s": median(cpu), "maxrss_mb": max(rss)}


def correlate_stages_case(spec: dict[str, Any]) -> dict[str, Any]:
    """The stages of correlate in one process (warm parse cache), and the exactness check."""
    t = time.perf_counter()
    import ir_measures
    import numpy as np

    from judgeblender.pairs.qrels import read_prediction
    from judgeblender.evaluate import leaderboard as lb
    from judgeblender.pairs import read_qrels, read_runs_dir

    import_s = time.perf_counter() - t
    stages: dict[str, list[float]] = {}

    def timed(name, fn):
        t0 = time.perf_counter()
        value = fn()
        stages.setdefault(name, []).append(time.perf_counter() - t0)
        return value

    read_runs_dir(DL19 / "runs")  # fill the parse cache
    from judgeblender.pairs.runs import read_run_fast

    files = sorted(p for p in (DL19 / "runs").iterdir() if p.is_file())
    raw_mb = 0.0
    for _ in range(spec["repeats"]):  # what the parse cache saves: decompress and parse every run
        timed("parse 37 runs, no cache (gunzip + vectorised parse)", lambda: [read_run_fast(f) for f in files])
    for f in files:
        with open(f, "rb") as fh:
            data = fh.read()
        raw_mb += len(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data) / 1e6
    preds: dict[str, Any] = {}
    for _ in range(spec["repeats"]):
        runs = timed("read 37 runs (parse cache)", lambda: read_runs_dir(DL19 / "runs"))
        gold = timed("read gold + 7 label files", lambda: read_qrels(DL19 / "qrels.txt"))
        for p in sorted(LABELS.glob("*.qrels")):
            preds[p.stem] = timed("read gold + 7 label files", lambda p=p: read_prediction(p, "error")[0])
        timed("correlate (evaluate 8 qrels, bootstrap 1000, 2 measures)",
              lambda: lb.correlate(gold, preds, runs, bootstrap=1000))
    # per qrels: the rank-matrix evaluation and ir_measures (pytrec_eval) on the same full runs
    measures = lb.parse_measures(["nDCG@10", "AP(rel=2)", "Judged@10", "P@10", "AP", "nDCG@5", "P(rel=2)@5"])
    runset = lb.RunSet(runs, sorted(gold))
    exact, worst, fast_s, ref_s = True, 0.0, [], []
    for q in [gold, *preds.values()]:
        t0 = time.perf_counter()
        fast = lb.evaluate_runs(runset, q, measures)
        fast_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        qr = {k: q[k] for k in runset.queries if k in q}
        wanted = set(runset.queries)
        for r, run in enumerate(runs):
            scored = {k: dict(v) for k, v in run.ranking.items() if k in wanted and v}
            ref = {str(m): np.zeros(len(runset.queries)) for m in measures}
            for metric in ir_measures.iter_calc(measures, qr, scored):
                ref[str(metric.measure)][runset.queries.index(metric.query_id)] = metric.value
            for name, values in ref.items():
                exact &= bool(np.array_equal(values, fast[name][r]))
                worst = max(worst, float(np.abs(values - fast[name][r]).max()))
        ref_s.append(time.perf_counter() - t0)
    summed = {k: sum(v) / spec["repeats"] for k, v in stages.items()}
    return {"import_s": import_s, "stages_s": {k: median(v) if len(v) == spec["repeats"] else summed[k]
                                                for k, v in stages.items()},
            "evaluate_fast_s_per_qrels": median(fast_s), "evaluate_ir_measures_s_per_qrels": median(ref_s),
            "exact": exact, "max_abs_diff": worst, "measures_checked": [str(m) for m in measures],
            "runs_text_mb": round(raw_mb, 1), "run_lines": int(sum(len(r.columns().docs) for r in runs)),
            "qrels_checked": 1 + len(preds)}


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------
CASES = {"served": served_case, "served_sdk": served_sdk_case, "judging": judging_case, "correlate_cli": correlate_cli_case,
         "correlate_stages": correlate_stages_case, "umbrela": umbrela_case}


def agreement(a_path: str, b_path: str) -> dict[str, Any]:
    """Labels and probabilities of two runs on the same pairs: identical share, Cohen's kappa, max |dp|."""
    from judgeblender.kappa import cohen_kappa

    a, b = json.loads(Path(a_path).read_text()), json.loads(Path(b_path).read_text())
    keys = [k for k in b if k in a and a[k]["label"] is not None and b[k]["label"] is not None]
    la, lb_ = [a[k]["label"] for k in keys], [b[k]["label"] for k in keys]
    same = sum(x == y for x, y in zip(la, lb_))
    kappa = cohen_kappa(la, lb_)  # NaN where undefined (e.g. one label throughout)
    dp = max((abs(a[k]["probs"][c] - b[k]["probs"][c]) for k in keys if a[k]["probs"] and b[k]["probs"]
              for c in a[k]["probs"]), default=None)
    return {"n": len(keys), "identical": same, "kappa": kappa, "max_abs_dp": dp}


def _f(x: Any, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and x != x):
        return "n/a"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


def _by_name(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in items}


def merge(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Results of parts run one after the other (`all --parts ...`) as one: each part from the
    file that has it, the commands and times of all."""
    out: dict[str, Any] = {"machine": results[0]["machine"], "embedded": [], "knobs": [], "baselines": [],
                           "served": [], "correlate": {}}
    for res in results:
        for key in ("embedded", "knobs", "baselines", "served"):
            out[key] += res.get(key, [])
        out["correlate"].update(res.get("correlate") or {})
    if len(results) == 1:
        return {**results[0], **out}
    out["started"] = " / ".join(r["started"] for r in results)
    out["finished"] = " / ".join(r.get("finished", "?") for r in results)
    out["load_start"] = " / ".join(r["load_start"] for r in results)
    out["load_end"] = " / ".join(r.get("load_end", "?") for r in results)
    out["command"] = "`; `".join(r["command"] for r in results)
    return out


def render(res: dict[str, Any]) -> str:
    m = res["machine"]
    lines = [
        "# Benchmarks",
        "",
        "Produced by `bench/benchmark.py` (see `bench/run_all.sh`); every figure is a median over repeats,",
        "and every row of one table comes from the same run. The load average (1, 5, 15 min) is given",
        "before each case (about 2 is the benchmark's own two threads of the case before); ratios",
        "between rows of the same run mean more than absolute speeds.",
        "",
        f"- machine: {m['nproc']} cores, {m['cpu']} ({m['simd']}), {m['memory_gb']} GB RAM, Python {m['python']}",
        f"- run: {res['started']} to {res.get('finished', '?')}; load at start {res['load_start']}, "
        f"at end {res.get('load_end', '?')}",
        f"- command: `{res['command']}`",
        "",
    ]
    emb = _by_name(res.get("embedded", []))
    if emb:
        lines += ["## Embedded judging (DL19 pairs, UMBRELA prompt, 2 threads)", "",
                  "| model | method | pairs | pairs/s | s/pair | vs reference | peak MB | load before |",
                  "|---|---|---:|---:|---:|---:|---:|---|"]
        for key in ("gemma", "qwen"):
            ref = emb.get(f"{key} reference", {})
            ref_rate = ref.get("pairs_per_s")
            for name, label in ((f"{key} umbrela", "UMBRELA's own OSLLMJudge (HF generate), model load excluded"),
                                (f"{key} reference", "reference: transformers generate, batch 1, full prompt"),
                                (f"{key} generate", "judgeblender generate (llama.cpp)"),
                                (f"{key} logprobs, reference pairs", "judgeblender logprobs, the reference's pairs"),
                                (f"{key} logprobs", "judgeblender logprobs")):
                r = emb.get(name)
                if not r:
                    continue
                if r.get("error"):
                    lines.append(f"| {key} | {label} | | error: {r['error']} | | | | {r.get('load_before')} |")
                    continue
                rate = r["pairs_per_s"]
                ratio = f"{rate / ref_rate:.1f}x" if ref_rate and name != f"{key} reference" else ""
                r.setdefault("maxrss_mb", None)
                lines.append(f"| {key} | {label} | {r['n']} | {_f(rate, 3)} | {_f(r['median_s'] / r['n'])} | "
                             f"{ratio} | {_f(r['maxrss_mb'], 0)} | {r['load_before']} |")
        lines += ["", "Waiting policy of the OpenMP threads in each case: " + ", ".join(
            f"{n}: {r.get('omp_wait_policy')}" for n, r in emb.items() if not r.get("error")) + ".", ""]
        lines += ["### Against the limit", "",
                  "The limit is the time to evaluate only the tokens that must be evaluated: the prompts "
                  "(chat-formatted prompt + answer prefix + the space token whose logits the \" \"-then-digit "
                  "spelling needs), sorted, each reusing the longest prefix it shares with another; i.e. the "
                  "nodes of their prefix tree. It is divided by the engine's raw prefill rate: whole prompts "
                  "evaluated from an empty cache in the same process, two before each repeat and two after "
                  "the last (the median of those), so that both see the same machine load.", "",
                  "| model | pairs | prompt tokens | unique tokens | evaluated by judgeblender | raw prefill tok/s | "
                  "limit s | judgeblender s | judgeblender / limit |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for key in ("gemma", "qwen"):
            r = emb.get(f"{key} logprobs")
            if r and not r.get("error") and r.get("bound_s"):
                lines.append(f"| {key} | {r['n']} | {r['total_tokens']} | {r['unique_tokens']} | "
                             f"{_f(r.get('evaluated_tokens'), 0)} | {_f(r['prefill_tok_per_s'], 1)} | "
                             f"{_f(r['bound_s'], 1)} | {_f(r['median_s'], 1)} | {_f(r['fraction_of_bound'], 3)} |")
        extra = [(k, r) for k in ("gemma", "qwen") if (r := emb.get(f"{k} logprobs")) and r.get("tokenize_ms")]
        if extra:
            lines += ["", "Python work per call next to the model (median s/pair above): " + "; ".join(
                f"{k}: chat formatting {r['format_ms']:.2f} ms, tokenizing the whole prompt {r['tokenize_ms']:.2f} ms, "
                f"one log-softmax over the vocabulary {r['logsoftmax_ms']:.2f} ms (two per pair)" for k, r in extra)
                + "."]
        lines.append("")
    if res.get("knobs"):
        lines += ["## Speed knobs and agreement with the unchanged path", "",
                  "Same pairs; kappa is Cohen's kappa of the labels, |dp| the largest change of a label "
                  "probability. A knob run on fewer pairs than the default row used the first of them; its "
                  "default pairs/s is then the default path on those same pairs (`--parts baselines`), or "
                  "n/a when that was not measured.", "",
                  "| model | knob | pairs | pairs/s | default pairs/s | identical labels | kappa | max abs dp | "
                  "load before |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---|"]
        for k in res["knobs"]:
            key = k["case"]["model"]
            same = _by_name(res.get("baselines", [])).get(f"{key} logprobs, first {k['n']} pairs")
            main = emb.get(f"{key} logprobs", {})
            default = (same or {}).get("pairs_per_s") if main.get("n") != k["n"] else main.get("pairs_per_s")
            a = k.get("agreement") or {}
            if k.get("error"):
                lines.append(f"| {key} | {k.get('knob')} | | error: {k['error']} | | | | | |")
                continue
            lines.append(f"| {key} | {k.get('knob')} | {k['n']} | {_f(k['pairs_per_s'], 3)} | {_f(default, 3)} | "
                         f"{a.get('identical')}/{a.get('n')} | {_f(a.get('kappa'), 3)} | "
                         f"{_f(a.get('max_abs_dp'), 6)} | {k['load_before']} |")
        lines.append("")
    if res.get("served"):
        lines += [f"## Served judging (tests/openai_server.py in its own process, {SERVED_DELAY_S * 1000:.0f} ms "
                  "per answer, logprobs mode, max_tokens 1)", "",
                  "| concurrency | store | pairs | pairs/s | ideal | fraction of ideal | max in flight | "
                  "client CPU ms/call | peak MB | load before |",
                  "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for r in res["served"]:
            c = r["case"]
            if r.get("error"):
                lines.append(f"| {c['concurrency']} | | | error: {r['error']} | | | | | | |")
                continue
            what = "SDK alone, no judgeblender" if c["kind"] == "served_sdk" else ("yes" if c.get("store") else "no")
            lines.append(f"| {c['concurrency']} | {what} | {r['n']} | "
                         f"{_f(r['pairs_per_s'], 1)} | {_f(r['ideal'], 0)} | {_f(r['fraction_of_ideal'], 3)} | "
                         f"{r['max_in_flight']} | {_f(r['client_cpu_ms_per_call'])} | {_f(r['maxrss_mb'], 0)} | "
                         f"{r['load_before']} |")
        lines.append("")
    c = res.get("correlate") or {}
    if c:
        lines += ["## Meta-evaluation: `judgeblender correlate`, 37 DL19 runs x 7 LLM label files", "",
                  "Defaults: nDCG@10 and AP(rel=2), 1000 bootstrap samples. Command: `judgeblender correlate "
                  "<7 label files> --gold trec-dl-2019/qrels.txt --runs trec-dl-2019/runs`."
                  + (f" {c['note']}" if c.get("note") else ""), "",
                  "| case | wall s | CPU s | peak MB | load before |", "|---|---:|---:|---:|---|"]
        for key, label in (("cli_warm", "whole command, parse cache warm"),
                           ("cli_cold", "whole command, parse cache empty")):
            r = c.get(key)
            if r and not r.get("error"):
                lines.append(f"| {label} | {_f(r['median_s'])} | {_f(r['cpu_s'])} | {_f(r['maxrss_mb'], 0)} | "
                             f"{r['load_before']} |")
        st = c.get("stages")
        if st and not st.get("error"):
            lines += ["", "| stage (one process) | seconds |", "|---|---:|",
                      f"| import judgeblender, ir_measures, numpy | {_f(st['import_s'])} |"]
            for name, sec in st["stages_s"].items():
                lines.append(f"| {name} | {_f(sec)} |")
            lines += [f"| evaluate one qrels, 7 measures, rank matrix | {_f(st['evaluate_fast_s_per_qrels'], 3)} |",
                      f"| evaluate one qrels, 7 measures, ir_measures/pytrec_eval | "
                      f"{_f(st['evaluate_ir_measures_s_per_qrels'], 3)} |", "",
                      f"Exactness: every per-query value of {', '.join(st['measures_checked'])} on "
                      f"{st['qrels_checked']} qrels equals ir_measures' on the full runs: "
                      f"{'yes' if st['exact'] else 'NO'} (max abs difference {st['max_abs_diff']:g})."]
            if st.get("runs_text_mb"):
                lines += ["", f"The runs are {st['run_lines']:,} lines, {st['runs_text_mb']:.0f} MB of text once "
                          "decompressed. A first `correlate` over them parses all of it; the parsed columns are "
                          "then kept in the cache folder (`~/.cache/judgeblender/runs`, keyed by each file's "
                          "path, size, mtime and inode), so later runs over the same files read arrays instead."]
        lines.append("")
    lines += targets(res)
    findings = Path(__file__).with_name("findings.md")  # written by hand from the figures above
    if findings.exists():
        lines += ["", findings.read_text().rstrip()]
    return "\n".join(lines) + "\n"


def targets(res: dict[str, Any]) -> list[str]:
    """The issue's targets, each with the measurement that decides it."""
    out = ["## Targets", "", "| target | measured | met |", "|---|---|---|"]
    emb = _by_name(res.get("embedded", []))
    for key in ("gemma", "qwen"):
        jb, same, ref = emb.get(f"{key} logprobs"), emb.get(f"{key} logprobs, reference pairs"), emb.get(
            f"{key} reference")
        if jb and ref and not jb.get("error") and not ref.get("error"):
            ratio = jb["pairs_per_s"] / ref["pairs_per_s"]
            same_ratio = same["pairs_per_s"] / ref["pairs_per_s"] if same and not same.get("error") else None
            ceiling, best = "", None
            if jb.get("bound_s"):  # judging exactly at the limit: the most any implementation could gain here
                best = (ref["median_s"] / ref["n"]) / (jb["bound_s"] / jb["n"])
                ceiling = f"; at the prefill limit itself it would be {best:.1f}x"
            met = ratio >= 10 and (same_ratio or 10) >= 10
            verdict = "yes" if met else ("no: not reachable here, the limit itself is below 10x"
                                         if best is not None and best < 10 else "no")
            out.append(f"| {key}: judgeblender logprobs >= 10x the reference | {ratio:.1f}x on {jb['n']} pairs"
                       + (f" ({same_ratio:.1f}x on the reference's {same['n']} pairs)" if same_ratio else "")
                       + ceiling + f" | {verdict} |")
        if jb and not jb.get("error") and jb.get("fraction_of_bound"):
            f = jb["fraction_of_bound"]
            out.append(f"| {key}: embedded time <= 1.25x the unique-token prefill limit | {f:.3f}x "
                       f"({jb['median_s']:.0f} s vs {jb['bound_s']:.0f} s) | {'yes' if f <= 1.25 else 'no'} |")
    served = [r for r in res.get("served", []) if not r.get("error") and r["case"]["kind"] == "served"]
    sdk = [r for r in res.get("served", []) if not r.get("error") and r["case"]["kind"] == "served_sdk"]
    if served:
        top = max(r["case"]["concurrency"] for r in served)
        for r in sdk:
            out.append(f"| (ceiling) the openai SDK alone, no judgeblender code, concurrency {r['case']['concurrency']} "
                       f"| {r['fraction_of_ideal']:.3f} ({r['pairs_per_s']:.0f} pairs/s, "
                       f"{r['client_cpu_ms_per_call']:.2f} ms CPU per call) | |")
        for r in served:
            if r["case"]["concurrency"] == top:
                fr = r["fraction_of_ideal"]
                out.append(f"| served >= 0.9 of ideal at concurrency {top} ({'with' if r['case'].get('store') else 'no'}"
                           f" store) | {fr:.3f} ({r['pairs_per_s']:.0f} of {r['ideal']:.0f} pairs/s, load "
                           f"{r['load_before'].split()[0]}) | {'yes' if fr >= 0.9 else 'no'} |")
    c = res.get("correlate") or {}
    for key, label in (("cli_warm", "warm parse cache"), ("cli_cold", "empty parse cache")):
        r = c.get(key)
        if r and not r.get("error"):
            out.append(f"| correlate, 37 runs x 7 label files, < 2 s ({label}) | {r['median_s']:.2f} s wall, "
                       f"{r['cpu_s']:.2f} s CPU, load {r['load_before'].split()[0]} | "
                       f"{'yes' if r['median_s'] < 2 else 'no'} |")
    return out + [""]


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    out_dir = Path(tempfile.mkdtemp(prefix="jb-bench-"))
    results: dict[str, Any] = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                               "load_start": load(), "command": " ".join(sys.argv), "embedded": [], "knobs": [],
                               "served": [], "correlate": {}}

    def step(name: str, spec: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
        print(f"[{time.strftime('%H:%M:%S')}] {name} (load {load()})", file=sys.stderr, flush=True)
        res = run_case(spec, env)
        res["name"] = name
        if res.get("error"):
            print(f"    error: {res['error']}", file=sys.stderr, flush=True)
        partial.write_text(json.dumps(results, indent=1))  # what is done so far, if the run is cut short
        return res

    partial = args.json.with_suffix(".partial.json")
    partial.parent.mkdir(parents=True, exist_ok=True)

    if "correlate" in args.parts:
        c = results["correlate"]
        c["cli_warm"] = step("correlate CLI, warm parse cache", {"kind": "correlate_cli", "cache": "warm",
                                                                 "repeats": args.correlate_repeats})
        c["cli_cold"] = step("correlate CLI, empty parse cache", {"kind": "correlate_cli", "cache": "cold",
                                                                  "repeats": args.correlate_repeats})
        c["stages"] = step("correlate stages + exactness", {"kind": "correlate_stages",
                                                            "repeats": args.correlate_repeats})
    if "served" in args.parts:
        for conc in args.concurrency:
            n = max(50, int(conc / SERVED_DELAY_S * args.served_seconds))
            results["served"].append(step(f"served c={conc}", {"kind": "served", "concurrency": conc, "pairs": n,
                                                               "repeats": args.repeats, "store": True}))
        conc = max(args.concurrency)
        n = max(50, int(conc / SERVED_DELAY_S * args.served_seconds))
        results["served"].append(step(f"served c={conc}, no store", {"kind": "served", "concurrency": conc,
                                                                    "pairs": n, "repeats": args.repeats,
                                                                    "store": False}))
        results["served"].append(step(f"served c={conc}, the openai SDK alone", {
            "kind": "served_sdk", "concurrency": conc, "pairs": n, "repeats": args.repeats}))
    if "baselines" in args.parts:  # the default path on the knobs' smaller pair sets
        results["baselines"] = []
        for key in args.models:
            for n in sorted({args.knob_pairs[key], args.omp_pairs} - {args.pairs}):
                results["baselines"].append(step(f"{key} logprobs, first {n} pairs", {
                    "kind": "judging", "model": key, "threads": args.threads, "method": "logprobs", "pairs": n,
                    "repeats": 1}))
    if "embedded" in args.parts:
        for key in args.models:
            base = {"kind": "judging", "model": key, "threads": args.threads}
            lab = str(out_dir / f"{key}-logprobs.json")
            emb = results["embedded"]
            emb.append(step(f"{key} logprobs", {**base, "method": "logprobs", "pairs": args.pairs,
                                                "repeats": args.repeats, "limit": True, "labels_out": lab}))
            emb.append(step(f"{key} logprobs, reference pairs", {**base, "method": "logprobs",
                                                                 "pairs": args.ref_pairs[key], "repeats": args.repeats}))
            emb.append(step(f"{key} generate", {**base, "method": "generate", "pairs": args.gen_pairs,
                                                "repeats": args.repeats}))
            # the reference's torch threads wait as llama.cpp's do in judgeblender (same rule)
            policy = os.environ.get("OMP_WAIT_POLICY") or ("PASSIVE" if os.getloadavg()[0] >= (os.cpu_count() or 1)
                                                           else "")
            emb.append(step(f"{key} reference", {**base, "method": "ref", "pairs": args.ref_pairs[key],
                                                 "repeats": args.ref_repeats},
                            env={"OMP_WAIT_POLICY": policy} if policy else None))
            if args.umbrela_python and key == "gemma":
                emb.append(step(f"{key} umbrela", {"kind": "umbrela", "model": key, "pairs": args.ref_pairs[key],
                                                   "python": args.umbrela_python, "threads": args.threads},
                                env={"OMP_WAIT_POLICY": policy} if policy else None))
            # knobs: the unchanged path, and speed settings that may move outputs
            bat = str(out_dir / f"{key}-batched.json")
            knob = step(f"{key} logprobs, space path batched", {**base, "method": "logprobs",
                                                                "pairs": args.knob_pairs[key],
                                                                "repeats": 1, "space_path": "batched",
                                                                "labels_out": bat})
            knob.update(knob="space_path=batched: the space token in the prompt's batch, no 2nd pass",
                        agreement=agreement(lab, bat))
            results["knobs"].append(knob)
            if args.requant:
                rq = str(out_dir / f"{key}-q4_0.json")
                knob = step(f"{key} logprobs, Q4_0", {**base, "method": "logprobs", "pairs": args.knob_pairs[key],
                                                       "repeats": 1, "requant": "q4_0", "labels_out": rq})
                knob.update(knob="requantise Q4_K_M -> Q4_0", agreement=agreement(lab, rq))
                results["knobs"].append(knob)
            if args.omp:
                for policy in ("ACTIVE", "PASSIVE"):
                    path = str(out_dir / f"{key}-omp-{policy}.json")
                    knob = step(f"{key} logprobs, OMP_WAIT_POLICY={policy}",
                                {**base, "method": "logprobs", "pairs": args.omp_pairs, "repeats": 1,
                                 "labels_out": path}, env={"OMP_WAIT_POLICY": policy})
                    knob.update(knob=f"OMP_WAIT_POLICY={policy}", agreement=agreement(lab, path))
                    results["knobs"].append(knob)
    results["load_end"] = load()
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    return results


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    case = sub.add_parser("case", help="run one case (JSON spec) and print its result as JSON")
    case.add_argument("spec")
    served = sub.add_parser("served")
    served.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64])
    served.add_argument("--repeats", type=int, default=3)
    served.add_argument("--store", action="store_true")
    full = sub.add_parser("all", help="every part; JSON results, and the markdown report with --out")
    full.add_argument("--parts", nargs="+", default=["correlate", "served", "embedded"])
    full.add_argument("--models", nargs="+", default=["gemma", "qwen"], choices=sorted(MODELS))
    full.add_argument("--pairs", type=int, default=300)
    full.add_argument("--gen-pairs", type=int, default=20)
    full.add_argument("--ref-pairs-qwen", type=int, default=6)
    full.add_argument("--ref-pairs-gemma", type=int, default=10)
    full.add_argument("--repeats", type=int, default=3)
    full.add_argument("--ref-repeats", type=int, default=3)
    full.add_argument("--threads", type=int, default=2)
    full.add_argument("--requant", action="store_true", help="also check the Q4_0 requantisation knob")
    full.add_argument("--omp", action="store_true", help="also compare OMP_WAIT_POLICY=ACTIVE and PASSIVE")
    full.add_argument("--omp-pairs", type=int, default=60)
    full.add_argument("--umbrela-python", help="python of a venv with `pip install umbrela` (see docs/benchmarks.md)")
    full.add_argument("--knob-pairs-qwen", type=int, default=100, help="pairs for the knob checks (a prefix of --pairs)")
    full.add_argument("--knob-pairs-gemma", type=int, default=300)
    full.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64])
    full.add_argument("--served-seconds", type=float, default=8.0, help="ideal seconds of work per served case")
    full.add_argument("--correlate-repeats", type=int, default=5)
    full.add_argument("--json", type=Path, default=ROOT / "bench" / "out" / "benchmarks.json")
    full.add_argument("--out", type=Path, help="write the markdown report here (docs/benchmarks.md)")
    report = sub.add_parser("report", help="render the markdown report from results JSON files (parts run apart)")
    report.add_argument("json", type=Path, nargs="+")
    report.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "all":
        args.ref_pairs = {"qwen": args.ref_pairs_qwen, "gemma": args.ref_pairs_gemma}
        args.knob_pairs = {"qwen": min(args.pairs, args.knob_pairs_qwen), "gemma": min(args.pairs, args.knob_pairs_gemma)}
        results = run_all(args)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1))
        if args.out:
            args.out.write_text(render(results))
        print(render(results))
    elif args.cmd == "report":
        text = render(merge([json.loads(path.read_text()) for path in args.json]))
        if args.out:
            args.out.write_text(text)
        print(text)
    elif args.cmd == "case":
        spec = json.loads(args.spec)
        result = CASES[spec["kind"]](spec)
        result.setdefault("maxrss_mb", round(self_maxrss_mb(), 1))
        print(json.dumps(result), flush=True)
    elif args.cmd == "served":
        for c in args.concurrency:
            n = max(50, int(c / SERVED_DELAY_S * 8))
            res = run_case({"kind": "served", "concurrency": c, "pairs": n, "repeats": args.repeats,
                            "store": args.store})
            print(json.dumps(res))


if __name__ == "__main__":
    main()
