"""Which panel-selection procedure holds on queries it never saw (issue 32): nested query cross-fitting.

    PYTHONPATH=src python bench/selection.py                      # everything, bench/results/selection.json
    PYTHONPATH=src python bench/selection.py --only llmjudge-dev  # one collection (merged into the JSON)

For every labelled collection in ../shared/data (human qrels + the published label files in
llm-labels/<collection>/) and for seeded synthetic many-judge juries built from those files, each
procedure is run the honest way: the queries are dealt into 5 outer folds; for each, the whole
procedure (scoring candidates on 5 inner folds of the other queries, then its choice rule) sees
only the other queries' human labels, and what it chose labels the outer fold's queries. Cohen's
kappa (0-3) and Krippendorff's ordinal alpha are computed on all outer folds' pairs pooled (pairs
with a human label that every judge labelled), with 95% percentile intervals from 1,000 resamples
of the queries. Rules are compared by this outer figure only: an inner figure is what the rule
maximised, so it is biased upwards (the winner's curse), and the JSON keeps both to show by how much.

Candidates are scored by the library (judgeblender.blend.select: `select` with `fold_queries`, the
vectorised `CandidateScorer`); the rules that are not the library's are written here on its per-query
confusion counts. The synthetic juries: each judge reads a latent score made of two published
judges' labels, a shared noise component (judges that share it are alike), its own noise (strong
or weak) and its own cut points (lenient or strict), all seeded; `--synthetic-judges` sets how many.
"""

from __future__ import annotations

import argparse
import json
import os
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from judgeblender.blend import BallotTable, load_qrels_ballots
from judgeblender.blend.select import (
    EXHAUSTIVE_MAX, STATISTICS, Choice, Selection, CandidateScorer, apply_choice, best_choice, choose, estimates, fast_labels, fit_choice,
    gold_array, query_folds, select)
from judgeblender.blend.votes import ABSTAIN
from judgeblender.pairs import read_qrels

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
COLLECTIONS = ("llmjudge-dev", "trec-dl-2019", "trec-dl-2020")
OUTER = INNER = 5


# ---- data ----

def collection(name: str, data: Path) -> tuple[BallotTable, dict]:
    files = sorted((data / "llm-labels" / name).glob("*.qrels"))
    return load_qrels_ballots(files, invalid_labels="abstain"), read_qrels(data / name / "qrels.txt", allowed=range(4))


def synthetic_jury(table: BallotTable, gold: dict, n_judges: int, pairs_per_query: float, seed: int
                   ) -> tuple[BallotTable, dict]:
    """A seeded jury of `n_judges` judges from the published ones: judge j reads
    w * base_a + (1 - w) * base_b + load * shared[g] + sigma * own + its cut points, where base_a and
    base_b are two published judges' labels, shared[g] one of four noise components per pair (the
    judges of a group are alike), sigma its own noise (a third each strong 0.35, middling 0.7 and
    weak 1.1), and its cut points 0.5/1.5/2.5 shifted by a per-judge bias (N(0, 0.35), lenient or
    strict) and jitter. A pair a base judge lacks is abstained. `pairs_per_query` keeps that share
    of each query's pairs (seeded), all queries kept."""
    rng = np.random.default_rng(seed)
    y = gold_array(table, gold)
    keep = (y >= 0) & table.voted.all(axis=1) & (rng.random(table.n_pairs) < pairs_per_query)
    sub = table.select(np.flatnonzero(keep))
    base = sub.labels.astype(float)
    n, m = base.shape
    shared = rng.normal(size=(n, 4))
    labels = np.empty((n, n_judges), dtype=np.int8)
    names = []
    for j in range(n_judges):
        a, b = rng.choice(m, size=2, replace=False)
        w = rng.uniform(0.5, 1.0)
        sigma = (0.35, 0.7, 1.1)[j % 3]
        load = rng.uniform(0.2, 0.6)
        cuts = np.sort(np.array([0.5, 1.5, 2.5]) + rng.normal(0, 0.35) + rng.normal(0, 0.1, 3))
        z = w * base[:, a] + (1 - w) * base[:, b] + load * shared[:, j % 4] + sigma * rng.normal(size=n)
        labels[:, j] = np.searchsorted(cuts, z, side="right")
        names.append(f"s{j:02d}-{('strong', 'mid', 'weak')[j % 3]}-g{j % 4}")
    return BallotTable(sub.pairs, tuple(names), labels), gold


# ---- choice rules written here (the library's are best_choice and one_se_choice) ----

def best_mean(cands: Sequence[Choice]) -> Choice:
    """Highest mean per-fold statistic (today's score, without the one-SE step)."""
    return max((c for c in cands if math.isfinite(c.mean)), key=lambda c: (c.mean, -c.cost, -len(c.judges)))


def within_paired_se(cands: Sequence[Choice], best: Choice, figure: Callable[[Choice], float]) -> list[Choice]:
    """The candidates whose `figure` is at most one standard error of their fold-wise differences
    to `best` (paired) below best's."""
    b = np.asarray(best.fold_values())
    ok = []
    for c in cands:
        d = np.asarray(c.fold_values()) - b
        d = d[np.isfinite(d)]
        se = d.std(ddof=1) / math.sqrt(len(d)) if len(d) > 1 else 0.0
        if math.isfinite(figure(c)) and figure(c) >= figure(best) - se:
            ok.append(c)
    return ok


def one_se_paired(cands: Sequence[Choice]) -> Choice:
    """One-SE with the standard error of the fold-wise differences to the best (paired)."""
    return min(within_paired_se(cands, best_mean(cands), lambda c: c.mean), key=Choice.key)


def largest_within_se(cands: Sequence[Choice]) -> Choice:
    """Shrink toward larger juries: among candidates within one paired SE (fold-wise differences)
    of the best pooled one, the one with the most members, then the higher pooled figure."""
    near = within_paired_se(cands, best_choice(cands)[0], lambda c: c.value)
    return max(near, key=lambda c: (len(c.judges), c.value))


def bagged(cands: Sequence[Choice], samples: int = 200, seed: int = 0) -> Choice:
    """Stability over query resamples: the candidate that is best (pooled) most often when the
    inner queries are drawn with replacement."""
    scored = [c for c in cands if math.isfinite(c.value)]
    stack = np.stack([c.confusion.reshape(len(c.confusion), -1) for c in scored])  # (C, Q, 16)
    q = stack.shape[1]
    counts = np.zeros((samples, q))
    rng = np.random.default_rng(seed)
    np.add.at(counts, (np.arange(samples)[:, None], rng.integers(0, q, size=(samples, q))), 1.0)
    reps = np.einsum("bq,cqk->bck", counts, stack).reshape(samples, len(scored), 4, 4)
    values = STATISTICS[scored[0].optimise](reps)
    wins = np.bincount(np.nanargmax(np.nan_to_num(values, nan=-np.inf), axis=1), minlength=len(scored))
    return scored[int(np.argmax(wins))]


def pooled_repeats(runs: Sequence[Selection]) -> Choice:
    """Repeated inner folds: each candidate's per-query counts summed over the repeats (every
    repeat deals the queries into folds differently), then the best pooled figure."""
    first = list(runs[0].candidates)
    by_key = [{(c.name, c.top, c.judges): c for c in run.candidates} for run in runs]
    merged = []
    for c in first:
        key = (c.name, c.top, c.judges)
        conf = sum(r[key].confusion for r in by_key)
        merged.append(Choice(c.name, c.judges, c.method, c.tie, c.kind, conf, c.cost, c.folds, c.optimise, c.learner,
                             top=c.top))
    chosen = best_choice(merged)[0]
    return next(c for c in first if (c.name, c.top, c.judges) == (chosen.name, chosen.top, chosen.judges))


def shuffled_folds(table: BallotTable, y: np.ndarray, k: int, seed: int) -> list[list[str]]:
    queries = sorted({q for (q, _), g in zip(table.pairs, y) if g >= 0})
    order = np.random.default_rng(seed).permutation(len(queries))
    return [[queries[i] for i in order[f::k]] for f in range(k)]


# ---- the nested run ----

class Nested:
    """The outer loop: every procedure's held-out label for every pair of the outer folds."""

    def __init__(self, table: BallotTable, gold: dict, seed: int = 0):
        self.table, self.gold, self.seed = table, gold, seed
        self.y = gold_array(table, gold)
        self.outer = query_folds(table, self.y, OUTER)
        self.qids = table.query_ids()
        self.pred: dict[str, np.ndarray] = {}
        self.inner: dict[str, list[float]] = {}
        self.picks: dict[str, list[str]] = {}
        self.seconds: dict[str, float] = {}

    def folds(self):
        for n, test_q in enumerate(self.outer):
            test = np.isin(self.qids, np.asarray(test_q, dtype=object))
            train = self.table.select(np.flatnonzero(~test))
            train_q = set(train.query_ids())
            assert not train_q & set(test_q)
            yield n, test, train, {q: g for q, g in self.gold.items() if q in train_q}

    def record(self, name: str, test: np.ndarray, train: BallotTable, train_gold: dict, chosen: Choice,
               inner_value: float) -> None:
        fitted = fit_choice(chosen, train, train_gold, self.seed)
        pred = apply_choice(fitted, self.table, self.seed)
        self.pred.setdefault(name, np.full(self.table.n_pairs, ABSTAIN))[test] = pred[test]
        self.inner.setdefault(name, []).append(inner_value)
        self.picks.setdefault(name, []).append(chosen.label)

    def run(self, procedures: dict[str, tuple[Callable, dict[str, Callable]]]) -> None:
        """procedures: family name -> (selection: (train, train_gold) -> Selection (or a tuple of
        them), {procedure name: rule: that -> the chosen Choice})."""
        for n, test, train, train_gold in self.folds():
            for family, (score, rules) in procedures.items():
                started = time.perf_counter()
                sel = score(train, train_gold)
                for name, rule in rules.items():
                    chosen = rule(sel)
                    self.record(name, test, train, train_gold, chosen, chosen.value)
                self.seconds[family] = self.seconds.get(family, 0.0) + time.perf_counter() - started
            print(f"  outer fold {n + 1} done", file=sys.stderr, flush=True)
        vote = fast_labels(self.table.labels.astype(int), "mv", "avg")
        self.pred["all-member mv (no human label)"] = vote

    def report(self, extra_hindsight: bool = True) -> dict:
        rows = self.y >= 0
        rows &= self.table.voted.all(axis=1)
        for pred in self.pred.values():
            rows &= pred != ABSTAIN
        tested = sorted({q for q, r in zip(self.qids, rows) if r})
        index = {q: i for i, q in enumerate(tested)}
        qrow = np.array([index.get(q, -1) for q in self.qids])

        def per_query(pred):
            cells = (qrow[rows] * 4 + self.y[rows]) * 4 + pred[rows]
            return np.bincount(cells, minlength=len(tested) * 16).reshape(-1, 4, 4)

        named = {name: per_query(p) for name, p in self.pred.items()}
        if extra_hindsight:
            for i, j in enumerate(self.table.judges):
                named[f"member {j} (hindsight)"] = per_query(self.table.labels[:, i].astype(int))
        est, _ = estimates(named, 1000, self.seed, 0.95)
        out = {"pairs": int(rows.sum()), "queries": len(tested), "procedures": {}}
        for name, e in est.items():
            row = {k: (round(v, 4) if isinstance(v, float) else [round(x, 4) for x in v]) for k, v in e.figures().items()}
            if name in self.inner:
                row["inner_mean"] = round(float(np.mean(self.inner[name])), 4)
                row["chosen"] = self.picks[name]
            out["procedures"][name] = row
        out["seconds"] = {k: round(v, 1) for k, v in self.seconds.items()}
        return out


NEW_DEFAULT = "new default: auto family, paired-bound rule"  # issue 32's, as it was then
ISSUE37 = "issue 37 default: the out-of-sample decision"
TODAY = "today: subsets, one-SE (--slow)"
BEST_MEMBER = "best member chosen the same way"


def procedures(explore: bool, subsets: bool = True, issue37: bool = False) -> dict:
    """The procedures compared: issue 32's default (then "new"), the same optimising alpha, the best
    member chosen the same way, the one-SE rule before it; with `explore`, the other families and
    rules weighed on the way (issue 32's list); with `issue37`, the library's default (issue 37's
    out-of-sample decision, re-run whole inside each outer fold) beside issue 32's default alone."""
    def sel(**kw):
        return lambda train, train_gold: select(train, train_gold, **{"folds": INNER, **kw})

    library = lambda rule: (lambda s: choose(s.candidates, rule, s.members)[0])  # noqa: E731

    def issue32(**kw):  # issue 32's `auto`: every subset up to 8 judges, the ranked family beyond
        return lambda train, train_gold: select(train, train_gold, **{
            "folds": INNER, "family": "subsets" if len(train.judges) <= EXHAUSTIVE_MAX else "ranked", **kw})

    out = {
        "default": (issue32(), {NEW_DEFAULT: lambda s: s.chosen, BEST_MEMBER: lambda s: s.best_member}),
        "default-alpha": (issue32(optimise="alpha"), {"new default, optimising alpha": lambda s: s.chosen}),
    }
    if issue37:
        return {"issue37": (sel(), {ISSUE37: lambda s: s.chosen}), "default": out["default"]}
    if subsets:
        out["today"] = (sel(family="subsets", rule="one-se", slow=True), {TODAY: lambda s: s.chosen})
    if not explore:
        return out
    out["ranked"] = (sel(family="ranked"), {
        "ranked top-k, paired-bound": library("paired-bound"),
        "ranked top-k, best pooled": library("best"),
        "ranked top-k, best mean": lambda s: best_mean(s.candidates),
        "ranked top-k, one-SE": library("one-se"),
        "ranked top-k, one-SE paired": lambda s: one_se_paired(s.candidates),
        "ranked top-k, largest within paired SE": lambda s: largest_within_se(s.candidates),
        "ranked top-k, bagged (most often best)": lambda s: bagged(s.candidates),
        "all judges x rules (or one member), best pooled": lambda s: best_choice(
            [c for c in s.candidates if c.top in (1, len(s.members))])[0]})
    out["ranked-10"] = (sel(family="ranked", folds=10), {"ranked top-k, best pooled, 10 inner folds": library("best")})

    def repeated(train, train_gold):
        y = gold_array(train, train_gold)
        return tuple(select(train, train_gold, family="ranked", folds=INNER,
                            fold_queries=None if r == 0 else shuffled_folds(train, y, INNER, r)) for r in range(3))

    out["ranked-repeated"] = (repeated, {"ranked top-k, best pooled, 3 repeated fold deals": pooled_repeats})
    if subsets:
        out["subsets"] = (sel(family="subsets"), {
            "subsets, best pooled": library("best"), "subsets, best mean": lambda s: best_mean(s.candidates),
            "subsets, one-SE": library("one-se"), "subsets, one-SE paired": lambda s: one_se_paired(s.candidates),
            "subsets, paired-bound": library("paired-bound")})
    return out


def candidates_searched(table: BallotTable, gold: dict, sizes: Sequence[int], seed: int = 0) -> list[dict]:
    """How the honest figure moves with the number of candidates searched: the members plus S
    random subsets (2 judges or more, seeded) x the fast aggregators, the best pooled chosen on
    the inner folds; inner (what was maximised) and outer (honest) kappa for each S."""
    nested = Nested(table, gold, seed)
    rng = np.random.default_rng(seed)
    judges = table.judges
    draws = []
    while len(draws) < max(sizes):
        k = int(rng.integers(2, len(judges) + 1))
        draws.append(tuple(sorted(rng.choice(len(judges), size=k, replace=False))))
    results = {s: {"pred": np.full(table.n_pairs, ABSTAIN), "inner": [], "candidates": 0} for s in sizes}
    for n, test, train, train_gold in nested.folds():
        y = gold_array(train, train_gold)
        scorer = CandidateScorer(train, y, query_folds(train, y, INNER), seed)
        costs = {j: 1.0 for j in judges}
        scored: list[Choice] = [scorer.member(j, 1.0) for j in judges]
        done = 0
        for s in sorted(sizes):
            while done < s:
                scored += scorer.fast(tuple(judges[i] for i in draws[done]), costs)
                done += 1
            chosen = best_choice(scored)[0]
            fitted = fit_choice(chosen, train, train_gold, seed)
            pred = apply_choice(fitted, table, seed)
            results[s]["pred"][test] = pred[test]
            results[s]["inner"].append(chosen.value)
            results[s]["candidates"] = len(scored)
        print(f"  candidates: outer fold {n + 1} done", file=sys.stderr, flush=True)
    y = gold_array(table, gold)
    out = []
    for s in sorted(sizes):
        rows = (y >= 0) & table.voted.all(axis=1) & (results[s]["pred"] != ABSTAIN)
        conf = np.bincount(y[rows] * 4 + results[s]["pred"][rows], minlength=16).reshape(4, 4)
        out.append({"random_subsets": s, "candidates_per_fold": results[s]["candidates"],
                    "inner_kappa_mean": round(float(np.mean(results[s]["inner"])), 4),
                    "outer_kappa": round(float(STATISTICS["kappa"](conf)), 4),
                    "outer_alpha": round(float(STATISTICS["alpha"](conf)), 4)})
    return out


TABLE_ROWS = (TODAY, ISSUE37, NEW_DEFAULT, "new default, optimising alpha", BEST_MEMBER, "all-member mv (no human label)")


def markdown(results: dict) -> str:
    """The tables of docs/aggregators.md from the JSON: per entry, the main procedures, then the
    other rules weighed, then how the figure moves with the candidates searched."""
    out = []
    for name, entry in results.items():
        procs = entry["procedures"]
        out += [f"#### {name} ({len(entry['judges'])} judges, {entry['pairs']:,} pairs over {entry['queries']} "
                f"queries scored)", "", "| procedure | held-out kappa [95% CI] | alpha [95% CI] | inner figure |",
                "|---|---:|---:|---:|"]
        hindsight = max((k for k in procs if k.endswith("(hindsight)")), key=lambda k: procs[k]["kappa"])
        rows = [r for r in TABLE_ROWS if r in procs] + [hindsight]
        others = sorted((k for k in procs if k not in rows and not k.endswith("(hindsight)")),
                        key=lambda k: -procs[k]["kappa"])
        default = ISSUE37 if ISSUE37 in procs else NEW_DEFAULT  # the library's default at the run
        for row in [*rows, *others]:
            p = procs[row]
            bold = "**" if row == default else ""
            label = row if row != hindsight else f"best member in hindsight: {row[7:].removesuffix(' (hindsight)')}"
            if default == ISSUE37 and row == NEW_DEFAULT:
                label = "issue 32 default: auto family (subsets up to 8 judges), paired-bound rule"
            out.append(f"| {bold}{label}{bold} | {bold}{p['kappa']:.4f}{bold} [{p['kappa_ci'][0]:.3f}, "
                       f"{p['kappa_ci'][1]:.3f}] | {p['alpha']:.4f} [{p['alpha_ci'][0]:.3f}, {p['alpha_ci'][1]:.3f}] | "
                       f"{p.get('inner_mean', float('nan')):.4f} |".replace("nan", "-"))
        if "candidates_searched" in entry:
            out += ["", "| random subsets searched | candidates per fold | inner kappa (maximised) | held-out kappa | "
                    "held-out alpha |", "|---:|---:|---:|---:|---:|"]
            for r in entry["candidates_searched"]:
                out.append(f"| {r['random_subsets']} | {r['candidates_per_fold']:,} | {r['inner_kappa_mean']:.4f} | "
                           f"{r['outer_kappa']:.4f} | {r['outer_alpha']:.4f} |")
        out.append("")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "selection.json")
    ap.add_argument("--only", action="append", help="run only these entries (collection or synthetic names)")
    ap.add_argument("--synthetic-judges", type=int, default=33)
    ap.add_argument("--quick", action="store_true",
                    help="only today's rule, the new default (and optimising alpha), the best member and the vote")
    ap.add_argument("--no-subsets-on-synthetic", action="store_true",
                    help="skip the subsets family (today's rule) on the synthetic juries (its greedy search is slow)")
    ap.add_argument("--issue37", action="store_true",
                    help="only the library's default (issue 37) beside issue 32's, the best member and the vote")
    ap.add_argument("--markdown", action="store_true", help="print the docs tables from --out and stop")
    args = ap.parse_args()
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    if args.markdown:
        print(markdown(results))
        return
    entries: dict[str, Callable[[], tuple[BallotTable, dict, bool]]] = {
        name: (lambda name=name: (*collection(name, args.data), True)) for name in COLLECTIONS}
    for base, share in (("llmjudge-dev", 0.48), ("trec-dl-2020", 0.3)):
        def make(base=base, share=share):
            table, gold = collection(base, args.data)
            return (*synthetic_jury(table, gold, args.synthetic_judges, share, seed=0),
                    not args.no_subsets_on_synthetic)
        entries[f"synthetic-{args.synthetic_judges}-from-{base}"] = make
    for name, make in entries.items():
        if args.only and name not in args.only:
            continue
        print(f"{name}:", file=sys.stderr, flush=True)
        started = time.perf_counter()
        table, gold, subsets = make()
        nested = Nested(table, gold)
        nested.run(procedures(not (args.quick or args.issue37), subsets, args.issue37))
        out = nested.report()
        out["judges"] = list(table.judges)
        if name.startswith("synthetic"):
            out["candidates_searched"] = candidates_searched(table, gold, (0, 10, 30, 100, 300, 1000, 3000))
        out["total_seconds"] = round(time.perf_counter() - started, 1)
        out["command"] = ("PYTHONPATH=src python bench/selection.py --only " + name + (" --quick" if args.quick else "")
                          + (f" --issue37 --out {os.path.relpath(args.out.resolve(), ROOT)}" if args.issue37 else ""))
        results[name] = out
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
        best = sorted(out["procedures"].items(), key=lambda kv: -kv[1]["kappa"])
        for proc, row in best:
            print(f"  {row['kappa']:.4f} [{row['kappa_ci'][0]:.3f}, {row['kappa_ci'][1]:.3f}]  alpha {row['alpha']:.4f}"
                  f"  {proc}", file=sys.stderr)


if __name__ == "__main__":
    main()
