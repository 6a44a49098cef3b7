"""Panel selection on queries the seed never saw, on real label files only (issue 37, part 3).

    PYTHONPATH=src python bench/selection_dev.py                  # both checks -> bench/results/selection_dev.json
    PYTHONPATH=src python bench/selection_dev.py --only transfer  # (a) alone; --only draws: (b) alone
    PYTHONPATH=src python bench/selection_dev.py --markdown       # the tables of docs/aggregators.md

The figures in docs/aggregators.md join two runs on the same draws: this script copied into a
checkout of the commit before issue 37 (110be00) and run there with `--skip default`, and run
here with `--skip "before issue 37"`, then `--join-before` that run's JSON.

(a) Transfer across collections: a procedure chooses on all of DL19's human labels with the six
judges whose label files DL19 and DL20 share, and the panel it chose (fitted on DL19) labels
DL20's pairs; then the reverse.

(b) Small seeds: from LLMJudge dev, DL19 and DL20, `--draws` random seeds of 10, 15 and 20
queries each (seeded); a procedure sees only the seed queries' pairs and human labels, and the
panel it chose labels the remaining queries' pairs.

Every figure is Cohen's kappa (0-3) over every human-labelled pair of the queries the choice did
not see, scored as the library scores a choice (`judgeblender.blend.select.scored`): a pair the
panel leaves unlabelled counts as a disagreement, so a panel cannot gain by abstaining. The
procedures compared:
- the library's default (`select(table, gold)`, whatever it is at the commit that runs this);
- the default before issue 37 (`auto` family of issue 32, paired-bound rule), kept as
  `family="subsets"` (up to 8 judges; `ranked` beyond) with `rule="paired-bound"`;
- the judge with the best seed kappa (a procedure: ranked on the seed, applied to the rest);
- the majority vote of all members (mv, tie avg: no human label);
- the best member in hindsight (ranked on the very labels it is scored on: not a procedure).
Regret is the best member in hindsight minus the procedure; "loses" counts draws where a procedure
is below the other by more than 0.0005.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from selection import DATA, collection  # noqa: E402  (bench/selection.py)

from judgeblender.blend import BallotTable  # noqa: E402
from judgeblender.blend.select import (  # noqa: E402
    EXHAUSTIVE_MAX, Choice, apply_choice, best_choice, fast_labels, fit_choice, gold_array, select)
from judgeblender.kappa import kappa_from_confusion  # noqa: E402

SHARED = ("fourprompts-flant5-large", "fourprompts-llama3-70b", "fourprompts-llama3-8b",
          "sun-then-decomposed-flant5-large", "sun-then-decomposed-llama3-8b", "thomas-order3210")
SIZES = (10, 15, 20)
COLLECTIONS = ("llmjudge-dev", "trec-dl-2019", "trec-dl-2020")
DEFAULT, BEFORE, SEED_BEST, VOTE, HINDSIGHT = ("default", "before issue 37", "best seed judge", "all-member vote",
                                               "best member in hindsight")

Procedure = Callable[[BallotTable, dict, int], Choice]


def library_default(table: BallotTable, gold: dict, seed: int) -> Choice:
    return select(table, gold, seed=seed).chosen


def before_issue_37(table: BallotTable, gold: dict, seed: int) -> Choice:
    family = "subsets" if len(table.judges) <= EXHAUSTIVE_MAX else "ranked"
    return select(table, gold, family=family, rule="paired-bound", seed=seed).chosen


def best_seed_judge(table: BallotTable, gold: dict, seed: int) -> Choice:
    return best_choice(select(table, gold, family="ranked", rule="best", seed=seed).members)[0]


PROCEDURES: dict[str, Procedure] = {DEFAULT: library_default, BEFORE: before_issue_37, SEED_BEST: best_seed_judge}


def scored(pred: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The library's scoring of a choice (`judgeblender.blend.select.scored`), written out so this
    script scores alike at the commit before issue 37, which lacks it: an unlabelled pair is
    scored as the label farthest from the human's."""
    return np.where(pred < 0, np.where(y <= 1, 3, 0), pred)


def kappa_on(y: np.ndarray, pred: np.ndarray) -> float:
    """Kappa of a panel's labels over every row with a human label (unlabelled rows: disagreement)."""
    rows = y >= 0
    conf = np.bincount(y[rows] * 4 + scored(pred[rows], y[rows]), minlength=16).reshape(4, 4)
    return float(kappa_from_confusion(conf))


def score_all(train: BallotTable, train_gold: dict, test: BallotTable, test_gold: dict, seed: int,
              procedures: dict[str, Procedure]) -> dict:
    """Each procedure chooses on (train, train_gold); its fitted panel labels `test`; kappas there."""
    y = gold_array(test, test_gold)
    out: dict[str, dict] = {}
    for name, proc in procedures.items():
        started = time.perf_counter()
        chosen = proc(train, train_gold, seed)
        fitted = fit_choice(chosen, train, train_gold, seed)
        out[name] = {"kappa": kappa_on(y, apply_choice(fitted, test, seed)), "chosen": fitted.label,
                     "seconds": time.perf_counter() - started}
    out[VOTE] = {"kappa": kappa_on(y, fast_labels(test.labels.astype(int), "mv", "avg"))}
    members = {j: kappa_on(y, test.labels[:, i].astype(int)) for i, j in enumerate(test.judges)}
    best = max(members, key=members.get)
    out[HINDSIGHT] = {"kappa": members[best], "chosen": f"member {best}"}
    return out


def transfer(data: Path, procedures: dict[str, Procedure]) -> dict:
    tables = {}
    for name in ("trec-dl-2019", "trec-dl-2020"):
        table, gold = collection(name, data)
        tables[name] = (table.only_judges(list(SHARED)), gold)
    out = {}
    for a, b in (("trec-dl-2019", "trec-dl-2020"), ("trec-dl-2020", "trec-dl-2019")):
        print(f"transfer {a} -> {b}", file=sys.stderr, flush=True)
        out[f"{a} -> {b}"] = score_all(*tables[a], *tables[b], 0, procedures)
    return out


def split(table: BallotTable, gold: dict, seed_queries: set[str]) -> tuple[BallotTable, dict, BallotTable, dict]:
    qids = table.query_ids()
    inside = np.isin(qids, np.asarray(sorted(seed_queries), dtype=object))
    return (table.select(np.flatnonzero(inside)), {q: g for q, g in gold.items() if q in seed_queries},
            table.select(np.flatnonzero(~inside)), {q: g for q, g in gold.items() if q not in seed_queries})


_WORK: dict = {}


def _one_draw(job: tuple[str, int, int, list[str]]) -> dict:
    name, size, d, seed_q = job
    table, gold, procedures = _WORK[name]
    return score_all(*split(table, gold, set(seed_q)), d, procedures)


def draws(data: Path, procedures: dict[str, Procedure], n_draws: int, sizes=SIZES, names=COLLECTIONS,
          jobs: int = 1) -> dict:
    """Each collection and seed size: the same `n_draws` seeds (seeded by the size) for every
    procedure and every commit, so two runs' figures pair draw by draw."""
    import multiprocessing

    out = {}
    for name in names:
        table, gold = collection(name, data)
        _WORK[name] = (table, gold, procedures)
        y = gold_array(table, gold)
        queries = sorted({q for (q, _), g in zip(table.pairs, y) if g >= 0})
        for size in sizes:
            rng = np.random.default_rng(1000 + size)
            work = [(name, size, d, sorted(rng.choice(queries, size=size, replace=False).tolist()))
                    for d in range(n_draws)]
            started = time.perf_counter()
            if jobs > 1:
                with multiprocessing.get_context("fork").Pool(jobs) as pool:
                    rows = pool.map(_one_draw, work, chunksize=1)
            else:
                rows = [_one_draw(w) for w in work]
            out[f"{name} / {size} queries"] = summary(rows)
            print(f"{name} / {size}: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return out


def summary(rows: list[dict]) -> dict:
    names = list(rows[0])
    kappa = {n: np.array([r[n]["kappa"] for r in rows]) for n in names}
    multi = {n: float(np.mean([not r[n]["chosen"].startswith("member") for r in rows])) for n in names
             if n not in (VOTE, HINDSIGHT)}
    seconds = {n: float(np.mean([r[n]["seconds"] for r in rows])) for n in multi}
    return figures(kappa, multi, seconds)


def figures(kappa: dict[str, np.ndarray], multi: dict[str, float], seconds: dict[str, float]) -> dict:
    """One cell's figures from every procedure's kappa per draw (the same draws for all)."""
    out = {"draws": len(kappa[VOTE]), "mean_kappa": {n: round(float(np.nanmean(k)), 4) for n, k in kappa.items()}}
    for n in kappa:
        if n in (VOTE, HINDSIGHT):
            continue
        out.setdefault("regret_vs_hindsight", {})[n] = round(float(np.nanmean(kappa[HINDSIGHT] - kappa[n])), 4)
        out.setdefault("loses_to_seed_best_share", {})[n] = round(float(np.mean(kappa[n] < kappa[SEED_BEST] - 5e-4)), 3)
        out.setdefault("loses_to_vote_share", {})[n] = round(float(np.mean(kappa[n] < kappa[VOTE] - 5e-4)), 3)
        out.setdefault("multi_judge_share", {})[n] = round(multi[n], 3)
        out.setdefault("seconds_mean", {})[n] = round(seconds[n], 2)
    out["kappas"] = {n: [round(float(v), 4) for v in k] for n, k in kappa.items()}
    return out


def take_before(results: dict, before: dict) -> None:
    """Put the BEFORE procedure's figures of a run at an older commit (the same draws: they are
    seeded by the size) beside this run's, compared with this run's seed-best judge and vote."""
    for key, row in before.get("transfer", {}).items():
        results["transfer"][key][BEFORE] = row[BEFORE]
    for key, cell in before.get("draws", {}).items():
        mine = results["draws"][key]
        kappa = {n: np.array(v) for n, v in mine["kappas"].items()}
        kappa[BEFORE] = np.array(cell["kappas"][BEFORE])
        multi = {**mine["multi_judge_share"], BEFORE: cell["multi_judge_share"][BEFORE]}
        seconds = {**mine["seconds_mean"], BEFORE: cell["seconds_mean"][BEFORE]}
        results["draws"][key] = figures(kappa, multi, seconds)


def default_from_z(results: dict, sweep: dict, z: float) -> None:
    """The default's column at DECISION_Z `z`, read from bench/selection_z.py's run on the same
    draws: it runs the same comparison and each procedure's final choice, so the default at any z
    is the procedure the rule picks there (at z = 1 the two scripts agree draw for draw)."""
    import selection_z

    for key, cell in sweep.items():
        mine = results["draws"][key]
        kappa = {n: np.array(v) for n, v in mine["kappas"].items()}
        picks = [selection_z.chosen_at(row, z) for row in cell["rows"]]
        kappa[DEFAULT] = np.array([row["kappas"][p] for row, p in zip(cell["rows"], picks)])
        multi = {**mine["multi_judge_share"], DEFAULT: float(np.mean([p != "single" for p in picks]))}
        results["draws"][key] = figures(kappa, multi, mine["seconds_mean"])
    results["default_z"] = z


def markdown(results: dict) -> str:
    lines = []
    if "transfer" in results:
        lines += ["| transfer (6 shared judges) | " + " | ".join((DEFAULT, BEFORE, SEED_BEST, VOTE, HINDSIGHT)) + " |",
                  "|---|" + "---:|" * 5]
        for key, row in results["transfer"].items():
            lines.append(f"| {key} | " + " | ".join(f"{row[n]['kappa']:.4f}" if n in row else "-"
                                                    for n in (DEFAULT, BEFORE, SEED_BEST, VOTE, HINDSIGHT)) + " |")
        lines += ["", "Chosen: " + "; ".join(f"{key}: default {row[DEFAULT]['chosen']}, before "
                                             f"{row.get(BEFORE, {}).get('chosen', '-')}"
                                             for key, row in results["transfer"].items()), ""]
    if "draws" in results:
        lines += ["| collection / seed | draws | default | before issue 37 | best seed judge | all-member vote | "
                  "hindsight | default's regret | before's regret | default loses to seed-best / vote | before loses "
                  "to seed-best / vote | default seats >1 |", "|---|---:|" + "---:|" * 10]
        for key, s in results["draws"].items():
            nan = float("nan")
            m, r = defaultdict(lambda: nan, s["mean_kappa"]), defaultdict(lambda: nan, s["regret_vs_hindsight"])
            ls, lv, multi = (defaultdict(lambda: nan, s[k]) for k in ("loses_to_seed_best_share", "loses_to_vote_share",
                                                                        "multi_judge_share"))
            lines.append(f"| {key} | {s['draws']} | {m[DEFAULT]:.4f} | {m[BEFORE]:.4f} | {m[SEED_BEST]:.4f} | "
                         f"{m[VOTE]:.4f} | {m[HINDSIGHT]:.4f} | {r[DEFAULT]:.4f} | {r[BEFORE]:.4f} | "
                         f"{ls[DEFAULT]:.0%} / {lv[DEFAULT]:.0%} | {ls[BEFORE]:.0%} / {lv[BEFORE]:.0%} | "
                         f"{multi[DEFAULT]:.0%} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "selection_dev.json")
    ap.add_argument("--only", choices=("transfer", "draws"))
    ap.add_argument("--draws", type=int, default=50)
    ap.add_argument("--collection", action="append", choices=COLLECTIONS)
    ap.add_argument("--size", action="append", type=int)
    ap.add_argument("--skip", action="append", default=[], help="leave this procedure out (e.g. 'before issue 37')")
    ap.add_argument("--jobs", type=int, default=1, help="draws scored in this many processes")
    ap.add_argument("--default-from-z", type=Path,
                    help="bench/selection_z.py's JSON: the default's column at the library's DECISION_Z read from "
                         "it (the same draws and panels), and stop")
    ap.add_argument("--join-before", type=Path,
                    help="a JSON of this script run at the commit before issue 37 (--skip default): its 'before issue "
                         "37' figures join --out's, and stop")
    ap.add_argument("--markdown", action="store_true", help="print the docs tables from --out and stop")
    args = ap.parse_args()
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    if args.markdown:
        print(markdown(results))
        return
    if args.default_from_z:
        from judgeblender.blend.select import DECISION_Z

        default_from_z(results, json.loads(args.default_from_z.read_text()), DECISION_Z)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
        print(markdown(results))
        return
    if args.join_before:
        take_before(results, json.loads(args.join_before.read_text()))
        args.out.write_text(json.dumps(results, indent=1) + "\n")
        print(markdown(results))
        return
    procedures = {k: v for k, v in PROCEDURES.items() if k not in args.skip}
    if args.only in (None, "transfer"):
        results["transfer"] = transfer(args.data, procedures)
    if args.only in (None, "draws"):
        got = draws(args.data, procedures, args.draws, tuple(args.size or SIZES), tuple(args.collection or COLLECTIONS),
                    args.jobs)
        results.setdefault("draws", {}).update(got)
    results["command"] = "PYTHONPATH=src python bench/selection_dev.py " + " ".join(sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(markdown(results))


if __name__ == "__main__":
    main()
