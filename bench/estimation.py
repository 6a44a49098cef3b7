"""Do `estimate`'s intervals hold? A simulation on DL19 with the published LLM label files.

    PYTHONPATH=src .venv/bin/python bench/estimation.py [--sims 1000] [--out docs/estimation.md]

Every run's per-query score is computed once under the full human qrels (the truth: its
mean over the 43 queries is the run's full-human score) and once under each LLM label file.
A simulated seed is then k whole queries drawn at random without replacement, and every
estimate is index arithmetic on those matrices (judgeblender.evaluate.estimate.query_ppi,
the function `estimate` itself uses). For each label file and seed size k (5, 10, 20) over
`--sims` seed sets it measures: coverage of each run's full-human score by the query-level
PPI++ interval (collection target, the default) and by the human-only interval; mean
widths and their ratio; the ratio sqrt(1 - rho^2) that an ideal control variate would give
(rho: correlation over queries of a run's LLM and human per-query scores, averaged over
runs); Kendall's tau of the point estimates against the full-human leaderboard; for the 666
pairs of runs, coverage of the true difference by the unadjusted intervals, how often every
Bonferroni interval holds at once, and how often Holm declares a wrong ordering
(family-wise error). The superpopulation target (ppi-python's ppi_mean_ci as is) is
measured too, against the same collection means.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

from judgeblender.evaluate.estimate import holm, per_query_scores, query_ppi
from judgeblender.evaluate.pair_design import gains, inclusion_probabilities, linear_weights, poisson_estimate
from judgeblender.pairs import read_qrels, read_runs_dir

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
SIZES = (5, 10, 20)
MARKER = "<!-- end of the measured tables: bench/estimation.py keeps what follows -->"
CHUNK = 50  # seed sets per block in the pairwise part: (50 x 666 x 43) arrays


def kendall_rows(est: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of each row of `est` (sims x runs) against `truth` (runs)."""
    i, j = np.triu_indices(len(truth), 1)
    t = np.sign(truth[i] - truth[j])
    e = np.sign(est[:, i] - est[:, j])
    num = (e * t).sum(1)
    den = np.sqrt(np.count_nonzero(e, axis=1) * float(np.count_nonzero(t)))
    return np.where(den > 0, num / den, np.nan)


def seed_masks(rng: np.random.Generator, sims: int, big_n: int, k: int) -> np.ndarray:
    picks = np.argsort(rng.random((sims, big_n)), axis=1)[:, :k]
    mask = np.zeros((sims, big_n), dtype=bool)
    np.put_along_axis(mask, picks, True, axis=1)
    return mask


def simulate(human: np.ndarray, llm: np.ndarray, masks: np.ndarray, confidence: float, target: str) -> dict:
    truth = human.mean(1)
    r = query_ppi(human[None], llm[None], masks[:, None, :], target=target, confidence=confidence)
    h = query_ppi(human[None], llm[None], masks[:, None, :], target=target, confidence=confidence, lam=0.0)
    cover = (r["ci_low"] <= truth) & (truth <= r["ci_high"])
    h_cover = (h["ci_low"] <= truth) & (truth <= h["ci_high"])
    width, h_width = r["ci_high"] - r["ci_low"], h["ci_high"] - h["ci_low"]
    out = {
        "coverage": float(cover.mean()), "coverage_worst_run": float(cover.mean(0).min()),
        "coverage_human_only": float(h_cover.mean()),
        "width": float(width.mean()), "width_human_only": float(h_width.mean()),
        "width_ratio": float(width.mean() / h_width.mean()),
        "tau": float(np.nanmean(kendall_rows(r["estimate"], truth))),
        "tau_human_only": float(np.nanmean(kendall_rows(h["estimate"], truth))),
        "bias": float((r["estimate"] - truth).mean()),
        "flagged": float(1 - r["normal_ok"].mean()),
    }
    if target == "collection":
        out.update(simulate_pairs(human, llm, masks, confidence))
    return out


def simulate_pairs(human: np.ndarray, llm: np.ndarray, masks: np.ndarray, confidence: float) -> dict:
    a, b = np.triu_indices(len(human), 1)
    dh, dl = human[a] - human[b], llm[a] - llm[b]
    truth = dh.mean(1)
    alpha, n_pairs = 1 - confidence, len(a)
    covered, all_bonf, wrong, found, wrong_raw, found_raw = [], [], [], [], [], []
    for lo in range(0, len(masks), CHUNK):
        m = masks[lo:lo + CHUNK, None, :]
        d = query_ppi(dh[None], dl[None], m, confidence=confidence)
        bonf = query_ppi(dh[None], dl[None], m, confidence=1 - alpha / n_pairs, lam=d["lam"])
        covered.append(((d["ci_low"] <= truth) & (truth <= d["ci_high"])).mean(1))
        all_bonf.append(((bonf["ci_low"] <= truth) & (truth <= bonf["ci_high"])).all(1))
        raw = np.stack([holm(p) for p in d["p"]]) < alpha
        sig = raw & d["normal_ok"]  # what `estimate` declares
        wrong.append((sig & (np.sign(d["estimate"]) != np.sign(truth))).any(1))
        found.append(sig.sum(1))
        wrong_raw.append((raw & (np.sign(d["estimate"]) != np.sign(truth))).any(1))
        found_raw.append(raw.sum(1))
    return {
        "pair_coverage": float(np.concatenate(covered).mean()),
        "bonferroni_simultaneous": float(np.concatenate(all_bonf).mean()),
        "holm_any_wrong_order": float(np.concatenate(wrong).mean()),
        "holm_significant_pairs": float(np.concatenate(found).mean()),
        "holm_only_any_wrong_order": float(np.concatenate(wrong_raw).mean()),
        "holm_only_significant_pairs": float(np.concatenate(found_raw).mean()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=1000, help="random seed sets per seed size")
    ap.add_argument("--confidence", type=float, default=0.9)
    ap.add_argument("--measure", default="nDCG@10")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "estimation.md")
    ap.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "estimation.json")
    args = ap.parse_args()

    t0 = time.perf_counter()
    dl19 = DATA / "trec-dl-2019"
    human_qrels = read_qrels(dl19 / "qrels.txt")
    queries = sorted(human_qrels)
    runs = read_runs_dir(dl19 / "runs")
    label_files = sorted((DATA / "llm-labels" / "trec-dl-2019").glob("*.qrels"))
    qrels = {"human": human_qrels} | {p.stem: read_qrels(p) for p in label_files}
    scores = {name: m[args.measure] for name, m in per_query_scores(runs, queries, qrels, [args.measure]).items()}
    t_scores = time.perf_counter() - t0
    human = scores.pop("human")
    rng = np.random.default_rng(args.seed)
    masks = {k: seed_masks(rng, args.sims, len(queries), k) for k in SIZES}  # the same seed sets for every file

    rows = []
    for name, llm in scores.items():
        rho = np.array([np.corrcoef(h, f)[0, 1] for h, f in zip(human, llm)])
        ideal = float(np.nanmean(np.sqrt(1 - rho ** 2)))
        llm_tau = float(kendall_rows(llm.mean(1)[None], human.mean(1))[0])
        for k in SIZES:
            for target in ("collection", "superpopulation"):
                res = simulate(human, llm, masks[k], args.confidence, target)
                rows.append({"labels": name, "k": k, "target": target, "rho": float(np.nanmean(rho)),
                             "ideal_ratio": ideal, "llm_only_tau": llm_tau,
                             "llm_only_bias": float((llm.mean(1) - human.mean(1)).mean()), **res})
                print(f"{name:35s} k={k:2d} {target:15s} cov {res['coverage']:.3f} (human {res['coverage_human_only']:.3f}) "
                      f"width {res['width']:.3f} / {res['width_human_only']:.3f} = {res['width_ratio']:.2f} "
                      f"(ideal {ideal:.2f}) tau {res['tau']:.3f}", file=sys.stderr, flush=True)
    t_part3 = time.perf_counter()
    part3 = pair_designs(runs, queries, qrels, human_qrels, masks, args.sims, args.confidence, rng)
    meta_part3 = round(time.perf_counter() - t_part3, 1)
    elapsed = time.perf_counter() - t0
    meta = {"seconds_part3": meta_part3, "sims": args.sims, "confidence": args.confidence, "measure": args.measure, "seed": args.seed,
            "runs": len(runs), "queries": len(queries), "seconds_scores": round(t_scores, 1),
            "seconds_total": round(elapsed, 1), "python": platform.python_version(),
            "numpy": np.__version__}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"meta": meta, "rows": rows, "pair_designs": part3}, indent=1) + "\n")
    # Text written by hand below the marker (the findings) survives a re-run; the tables are replaced.
    tail = ""
    if args.out.is_file() and MARKER in args.out.read_text():
        tail = args.out.read_text().split(MARKER, 1)[1]
    args.out.write_text(render(rows, meta) + render_part3(part3, meta) + MARKER + tail)
    print(f"wrote {args.out} and {args.json} in {elapsed:.0f} s", file=sys.stderr)


PART3_FILES = ("fourprompts-llama3-70b", "fourprompts-flant5-large", "fourprompts-llama3-8b")
PART3_MEASURE = ("precision", 10, 2)  # P(rel=2)@10: linear in the labels
BUDGET_SHARES = (0.1, 0.25, 0.5, 1.0)


def pair_designs(runs, queries, qrels, human_qrels, masks, sims, confidence, rng) -> list[dict]:
    """Part 3: pairs drawn with known probabilities vs query-level PPI at the same number of labels."""
    kind, k, rel = PART3_MEASURE
    pairs, w = linear_weights(runs, queries, kind, k)
    h = gains(human_qrels, pairs, kind, rel)
    truth = w @ h
    check = per_query_scores(runs, queries, {"human": human_qrels}, [f"P(rel={rel})@{k}"])["human"][f"P(rel={rel})@{k}"]
    assert np.allclose(check.mean(1), truth), "linear weights disagree with the evaluator"
    qidx = {q: i for i, q in enumerate(queries)}
    pairs_per_query = np.bincount([qidx[q] for q, _ in pairs], minlength=len(queries))
    weight_norm = np.sqrt((w ** 2).sum(0))
    jury = {name: q for name, q in qrels.items() if name != "human"}
    share_rel = np.mean([gains(q, pairs, kind, rel) for q in jury.values()], axis=0)
    jury_sd = np.sqrt(share_rel * (1 - share_rel))  # spread of the jury's binary verdicts
    out = []
    for name in PART3_FILES:
        llm = gains(qrels[name], pairs, kind, rel)
        per_q_h = per_query_scores(runs, queries, {"h": human_qrels, "l": qrels[name]}, [f"P(rel={rel})@{k}"])
        yq, fq = per_q_h["h"][f"P(rel={rel})@{k}"], per_q_h["l"][f"P(rel={rel})@{k}"]
        for size, mask in masks.items():
            q_res = query_ppi(yq[None], fq[None], mask[:, None, :], confidence=confidence)
            q_width = float((q_res["ci_high"] - q_res["ci_low"]).mean())
            q_cover = float(((q_res["ci_low"] <= truth) & (truth <= q_res["ci_high"])).mean())
            labels = float((mask * pairs_per_query).sum(1).mean())  # human labels the query seed costs
            row = {"labels_file": name, "k": size, "query_level_labels": labels, "query_level_width": q_width,
                   "query_level_coverage": q_cover, "designs": []}
            for design, sizes in (("uniform", np.ones(len(pairs))), ("weight", weight_norm),
                                  ("weight x (0.05 + jury spread)", weight_norm * (0.05 + jury_sd)),
                                  ("weight x (0.5 + jury spread)", weight_norm * (0.5 + jury_sd))):
                for share in BUDGET_SHARES:
                    pi = inclusion_probabilities(sizes, share * labels)
                    drawn = rng.random((sims, len(pairs))) < pi
                    for lam in (1.0, None):
                        res = poisson_estimate(w, llm, h, drawn, pi, confidence, lam=lam)
                        width = res["ci_high"] - res["ci_low"]
                        row["designs"].append({
                            "design": design, "lambda": "tuned" if lam is None else lam, "budget_share": share,
                            "labels": float(drawn.sum(1).mean()),
                            "coverage": float(((res["ci_low"] <= truth) & (truth <= res["ci_high"])).mean()),
                            "width": float(width.mean()), "bias": float((res["estimate"] - truth).mean()),
                            "tau": float(np.nanmean(kendall_rows(res["estimate"], truth))),
                        })
            # pairs of runs under the design `estimate` uses (pool --sample-pairs: weight, lambda = 1)
            pi = inclusion_probabilities(weight_norm, labels)
            drawn = rng.random((sims, len(pairs))) < pi
            a, b = np.triu_indices(len(runs), 1)
            d = poisson_estimate(w[a] - w[b], llm, h, drawn, pi, confidence, lam=1.0)
            t_d = truth[a] - truth[b]
            raw = np.stack([holm(p) for p in d["p"]]) < 1 - confidence
            sig = raw & d["normal_ok"]  # what `estimate` declares
            wrong = np.sign(d["estimate"]) != np.sign(t_d)
            row["pairs_of_runs"] = {
                "design": "weight", "lambda": 1.0, "budget_share": 1.0,
                "pair_coverage": float(((d["ci_low"] <= t_d) & (t_d <= d["ci_high"])).mean()),
                "holm_any_wrong_order": float((sig & wrong).any(1).mean()),
                "holm_significant_pairs": float(sig.sum(1).mean()),
                "holm_only_any_wrong_order": float((raw & wrong).any(1).mean()),
                "holm_only_significant_pairs": float(raw.sum(1).mean()),
            }
            out.append(row)
            best = min((d for d in row["designs"] if d["budget_share"] == 1.0), key=lambda d: d["width"])
            print(f"part3 {name} k={size}: query-level {labels:.0f} labels width {q_width:.3f}; best pair design "
                  f"{best['design']} ({best['lambda']}) width {best['width']:.3f} cov {best['coverage']:.3f}",
                  file=sys.stderr, flush=True)
    return out


def labels_for_width(designs: list[dict], target: float) -> float | None:
    """Labels a design needs for a mean width of `target`: log-log interpolation between the
    measured budgets (width ~ labels^-1/2 is what sampling theory expects between them)."""
    pts = sorted((d["labels"], d["width"]) for d in designs)
    for (b0, w0), (b1, w1) in zip(pts, pts[1:]):
        if w1 <= target <= w0:
            t = (math.log(target) - math.log(w0)) / (math.log(w1) - math.log(w0))
            return math.exp(math.log(b0) + t * (math.log(b1) - math.log(b0)))
    if pts and target >= pts[0][1]:
        return None  # reached below the smallest budget measured
    return float("inf")


def render_part3(rows: list[dict], meta: dict) -> str:
    kind, k, rel = PART3_MEASURE
    lines = [
        "",
        f"## Part 3: pairs drawn with known probabilities vs whole queries (P(rel={rel})@{k}, linear in the labels)",
        "",
        "Same truth (each run's full-human collection score), same confidence. The query-level",
        "seed of k queries costs the human labels of every top-10 pool pair of those queries (the",
        "**labels** column, mean over seed sets). Each pair design draws pairs of the top-10 pool",
        "independently (Poisson sampling) with the expected budget shown, as a share of the",
        "query-level labels: **uniform** (equal probabilities), **weight** (proportional to the",
        "pair's weight over runs, sqrt(sum_r W[r,p]^2)) and **weight x (c + jury spread)** (that times",
        "c + the spread sqrt(s(1 - s)) of the 7 published label files' binary verdicts on the pair, s",
        "the share saying relevant: active statistical inference, people look where the jury",
        "disagrees; c = 0.05 or 0.5, the floor for pairs the jury agrees on). Estimator: difference",
        "(Horvitz-Thompson) estimator on residuals human - lambda * LLM, normal interval; lambda = 1 or",
        "tuned on the sample. **same-width labels**: labels the design needs for the query-level",
        "width, interpolated (log-log) between its measured budgets; **saving** = 1 - that /",
        "query-level labels.",
        "",
        "| labels file | k | query-level: labels / width / cov | design | lambda | cov @0.1 / 0.25 / 1.0 | width @0.1 / 0.25 / 0.5 / 1.0 | tau @1.0 | same-width labels | saving |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        groups: dict[tuple, list] = {}
        for d in row["designs"]:
            groups.setdefault((d["design"], d["lambda"]), []).append(d)
        for (design, lam), ds in groups.items():
            full = next(d for d in ds if d["budget_share"] == 1.0)
            covs = " / ".join(f"{d['coverage']:.3f}" for d in sorted(ds, key=lambda d: d["budget_share"])
                              if d["budget_share"] in (0.1, 0.25, 1.0))
            need = labels_for_width(ds, row["query_level_width"])
            if need is None:
                need_s, saving = f"< {min(d['labels'] for d in ds):.0f}", f"> {1 - min(d['labels'] for d in ds) / row['query_level_labels']:.0%}"
            elif math.isinf(need):
                need_s, saving = f"> {max(d['labels'] for d in ds):.0f}", "none"
            else:
                need_s, saving = f"{need:.0f}", f"{1 - need / row['query_level_labels']:.0%}"
            widths = " / ".join(f"{d['width']:.3f}" for d in sorted(ds, key=lambda d: d["budget_share"]))
            lines.append(
                f"| {row['labels_file']} | {row['k']} | {row['query_level_labels']:.0f} / {row['query_level_width']:.3f} / "
                f"{row['query_level_coverage']:.3f} | {design} | {lam} | {covs} | {widths} | "
                f"{full['tau']:.3f} | {need_s} | {saving} |")
    lines += ["", "Pairs of runs under the design `estimate` uses for a seed of pairs (`pool --sample-pairs`: weight,",
              "lambda = 1, the query-level budget): coverage of the 666 true differences by the unadjusted",
              "intervals, share of seed sets with at least one declared ordering in the wrong direction and mean",
              "declared orderings, for `estimate`'s rule (Holm, and at least 5 drawn pairs with a residual for the",
              "difference) / Holm alone.",
              "", "| labels file | k (budget) | pair cov | wrong: rule / Holm | found: rule / Holm |",
              "|---|---|---|---|---|"]
    for row in rows:
        pr = row["pairs_of_runs"]
        lines.append(f"| {row['labels_file']} | {row['k']} ({row['query_level_labels']:.0f} labels) | "
                     f"{pr['pair_coverage']:.3f} | {pr['holm_any_wrong_order']:.3f} / {pr['holm_only_any_wrong_order']:.3f} | "
                     f"{pr['holm_significant_pairs']:.0f} / {pr['holm_only_significant_pairs']:.0f} |")
    lines += ["", f"Part 3 took {meta['seconds_part3']} s.", ""]
    return "\n".join(lines)


def render(rows: list[dict], meta: dict) -> str:
    conf = meta["confidence"]
    lines = [
        "# Estimates with guarantees: how far `estimate`'s intervals hold",
        "",
        "Measured by `bench/estimation.py` (simulation on real data; every figure below comes from",
        "that script's last run, also saved in `bench/results/estimation.json`):",
        "",
        "```",
        f"PYTHONPATH=src .venv/bin/python bench/estimation.py --sims {meta['sims']} --confidence {conf} "
        f"--measure '{meta['measure']}' --seed {meta['seed']}",
        "```",
        "",
        f"TREC DL 2019 passages, the {meta['runs']} official runs, {meta['measure']}, the {meta['queries']} judged "
        "queries. The truth is each run's full-human score (its mean over the 43 queries under the official",
        "qrels). A seed is k whole queries drawn at random without replacement, human labels there, the",
        "LLM label file everywhere; the same "
        f"{meta['sims']} seed sets per k for every label file. {conf:.0%} intervals.",
        "",
        "Columns: **cov** coverage of the true score, averaged over runs and seed sets (worst run in",
        "brackets); **human cov** the same for the human-only interval; **width** mean interval width",
        "(PPI++ / human-only) and their **ratio**; **ideal** sqrt(1 - rho^2), the ratio a perfect control",
        "variate with the label file's per-query correlation rho (mean over runs) would give;",
        "**tau** Kendall's tau of the point estimates against the full-human leaderboard (PPI++ /",
        "human-only / LLM-only); **bias** mean of (estimate - truth) over runs and seeds; for the 666",
        "pairs of runs: **pair cov** coverage of the true difference by the unadjusted intervals,",
        "**Bonf. all** share of seed sets where every Bonferroni interval holds at once, **wrong**",
        "share of seed sets with at least one declared ordering in the wrong direction (family-wise",
        f"error; at most {1 - conf:.2g} is the target) and **found** mean number of declared orderings, for",
        "`estimate`'s rule (Holm and Cochran's rule n > 25 g1^2 on the seed) / Holm alone; **flagged** share",
        "of (run, seed) intervals that fail Cochran's rule (marked * by `estimate`).",
        "",
        "## Collection target (the default: mean over the 43 queries, finite-population corrected)",
        "",
        "| labels | rho | k | cov (worst run) | human cov | width PPI++ / human | ratio | ideal | tau PPI++ / human / LLM | bias | flagged | pair cov | Bonf. all | wrong: rule / Holm | found: rule / Holm |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["target"] != "collection":
            continue
        lines.append(
            f"| {r['labels']} | {r['rho']:.2f} | {r['k']} | {r['coverage']:.3f} ({r['coverage_worst_run']:.2f}) | "
            f"{r['coverage_human_only']:.3f} | {r['width']:.3f} / {r['width_human_only']:.3f} | "
            f"{r['width_ratio']:.2f} | {r['ideal_ratio']:.2f} | {r['tau']:.3f} / {r['tau_human_only']:.3f} / "
            f"{r['llm_only_tau']:.3f} | {r['bias']:+.4f} | {r['flagged']:.2f} | {r['pair_coverage']:.3f} | "
            f"{r['bonferroni_simultaneous']:.3f} | {r['holm_any_wrong_order']:.3f} / "
            f"{r['holm_only_any_wrong_order']:.3f} | {r['holm_significant_pairs']:.0f} / "
            f"{r['holm_only_significant_pairs']:.0f} |")
    lines += [
        "",
        "## Superpopulation target (ppi-python's `ppi_mean_ci` as is), scored against the same collection means",
        "",
        "| labels | k | cov (worst run) | human cov | width PPI++ / human | ratio | tau PPI++ |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["target"] != "superpopulation":
            continue
        lines.append(
            f"| {r['labels']} | {r['k']} | {r['coverage']:.3f} ({r['coverage_worst_run']:.2f}) | "
            f"{r['coverage_human_only']:.3f} | {r['width']:.3f} / {r['width_human_only']:.3f} | "
            f"{r['width_ratio']:.2f} | {r['tau']:.3f} |")
    lines += ["", f"Run time: {meta['seconds_total']} s in all ({meta['seconds_scores']} s to score the runs), "
              f"Python {meta['python']}, numpy {meta['numpy']}.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
