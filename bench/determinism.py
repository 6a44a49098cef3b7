"""What the embedded path's determinism costs: fixed 64-token blocks against free prefix reuse.

Since the fixed-block change (backends/llamacpp.py), every prompt is evaluated in blocks at
fixed positions and only whole blocks are reused, so a pair's probabilities no longer depend on
the pairs before it. That costs in two ways, both measured here on the first N DL19 pairs with
the UMBRELA prompt in logprobs mode:

- tokens: the tokens evaluated per run, against the unique tokens of the sorted prompts (what
  free prefix reuse evaluated: the nodes of their prefix tree). Counted twice: from the token
  sequences alone, and by judging the first `--check` pairs with the real backend (its
  `evaluated_tokens`), which must agree;
- speed: the raw prefill rate of 64-token blocks against 512-token batches, the same prompts
  from an empty cache, alternating A B A B in one process so both see the same machine load.

The cost factor is (evaluated / unique) x (rate at 512 / rate at 64 tokens): how much longer a
logprobs run takes than the prefix-reuse path's limit.

    .venv/bin/python bench/determinism.py --pairs 300 --json bench/out/determinism.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmark import MODELS, dl19_texts, first_pairs, machine, unique_tokens  # noqa: E402


def block_evaluated(prompts: list[list[int]], block: int) -> int:
    """Tokens the fixed-block path evaluates for these prompts (+ the space token each) in sorted order."""
    total, prev, canonical = 0, [], 0
    for seq in sorted(prompts):
        shared = 0
        for a, b in zip(seq, prev[:canonical]):
            if a != b:
                break
            shared += 1
        start = min(shared, len(seq) - 1)
        start -= start % block
        total += len(seq) - start + 1  # + the space token, evaluated on its own
        prev, canonical = seq, len(seq) - len(seq) % block
    return total


def measure(model_key: str, n: int, check: int, rate_prompts: int, threads: int, block: int) -> dict:
    import llama_cpp

    from judgeblender.backends.registry import create_backend
    from judgeblender.judges import Judge, JudgeSpec, judge_pairs
    from judgeblender.judges.engine import build_request
    from judgeblender.store import CallStore

    backend = create_backend(MODELS[model_key], n_threads=threads, block=block)
    judge = Judge(JudgeSpec(model=MODELS[model_key], mode="logprobs"), backend=backend)
    queries, corpus = dl19_texts()
    pairs = first_pairs(n)
    step = judge.template.steps[0]
    prompts = []
    for p in pairs:
        req = build_request(judge, step, {"query": queries[p.qid], "passage": corpus[p.docid]}, 0)
        prompts.append(backend._tokens(backend.format_prompt(req.messages) + req.answer_prefix))
    with_space = [s + [backend._space] for s in prompts]
    out = {"model": model_key, "pairs": n, "block": backend.block, "threads": threads,
           "prompt_tokens": sum(len(s) for s in with_space), "unique_tokens": unique_tokens(with_space),
           "block_tokens": block_evaluated(prompts, backend.block)}

    # the count above, checked against the real backend on the first `check` pairs (sorted as the engine sorts)
    backend.llm.reset()
    store = CallStore(Path(tempfile.mkdtemp()) / "calls.sqlite")
    judge_pairs([judge], pairs[:check], queries, corpus, store=store)
    real = sum((c["extra"] or {}).get("evaluated_tokens", 0) for c in store.iter_calls())
    out.update(check_pairs=check, check_real_tokens=real, check_counted_tokens=block_evaluated(prompts[:check], backend.block))

    # raw prefill: 512-token batches against 64-token blocks, alternating, from an empty cache each time
    path = str(backend.path)
    engines = {size: llama_cpp.Llama(model_path=path, n_ctx=4096, n_threads=threads, n_threads_batch=threads,
                                     n_batch=size, n_ubatch=size, verbose=False) for size in (512, backend.block)}
    rates: dict[int, list[float]] = {size: [] for size in engines}
    for i in range(rate_prompts):
        seq = with_space[i * 37 % len(with_space)]
        for size, llm in engines.items():
            llm.reset()
            llm._ctx.kv_cache_clear()
            t = time.perf_counter()
            llm.eval(seq)
            rates[size].append(len(seq) / (time.perf_counter() - t))
    r512, rblock = statistics.median(rates[512]), statistics.median(rates[backend.block])
    ratios = [a / b for a, b in zip(rates[512], rates[backend.block])]
    out.update(rate_512=r512, rate_block=rblock, rate_ratio_median=statistics.median(ratios),
               rate_ratio_min=min(ratios), rate_ratio_max=max(ratios),
               token_factor=out["block_tokens"] / out["unique_tokens"])
    out["cost_factor"] = out["token_factor"] * out["rate_ratio_median"]
    return out


def render(results: list[dict], env: dict) -> str:
    lines = ["| model | block | pairs | unique tokens (prefix reuse) | evaluated in fixed blocks | token factor | "
             "prefill tok/s, 512 batch | prefill tok/s, blocks | rate ratio (min-max) | cost factor |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['model']} | {r['block']} | {r['pairs']} | {r['unique_tokens']} | {r['block_tokens']} | "
                     f"{r['token_factor']:.3f} | {r['rate_512']:.1f} | {r['rate_block']:.1f} | "
                     f"{r['rate_ratio_median']:.3f} ({r['rate_ratio_min']:.2f}-{r['rate_ratio_max']:.2f}) | "
                     f"{r['cost_factor']:.3f} |")
    checks = "; ".join(f"{r['model']} (block {r['block']}): {r['check_real_tokens']} evaluated by the backend on the first "
                       f"{r['check_pairs']} pairs, {r['check_counted_tokens']} counted" for r in results)
    return "\n".join(lines) + f"\n\nCount checked against the real backend: {checks}.\nMachine: {env}\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--check", type=int, default=12)
    ap.add_argument("--rate-prompts", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--blocks", type=int, nargs="+", default=[64], help="block sizes to measure")
    ap.add_argument("--models", nargs="+", default=["qwen", "gemma"], choices=sorted(MODELS))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    results = [measure(m, args.pairs, args.check, args.rate_prompts, args.threads, b)
               for m in args.models for b in args.blocks]
    env = machine()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": env, "results": results}, indent=1))
    print(render(results, env))


if __name__ == "__main__":
    main()
