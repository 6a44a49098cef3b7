"""`judgeblender demo`: an offline jury on bundled TREC DL 2019 pairs, next to the NIST labels.

The jury: the two embedded LLMs (Qwen2.5-Coder-0.5B and Gemma-3-270M, label distributions
from logprobs). The demo judges 12 bundled DL19 pairs (3 per human label, the shortest
passages: judging is most of a cold start's last minute) and prints one table: each member's
agreement with the human labels, their majority vote, and the blend that calibration chose on
a bundled seed set of other pairs (LLMJudge dev, TREC DL 2023 passages). The seed's answers
are stored in data/demo-seed.json under each member's fingerprint, so calibrating costs no
model call; a member whose model or call scheme changed since is reported and the calibrated
row left out, rather than calibrating on stale answers (scripts/make_demo_seed.py rebuilds them).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from rich.table import Table

from ..blend import Blender
from ..judges import build_judge, judge_pairs
from ..panels.calibrate import Calibration, blender_for, calibrate
from ..panels.demo import DEMO_JURY, demo_files, demo_pairs, load_seed
from ..panels.panel import ballots_from_run
from ..kappa import cohen_kappa
from ..pairs import Pair, read_corpus, read_qrels, read_queries
from ..paths import demo_store_path
from ..store import CallStore
from .console import console, err_console
from .options import fail_if_calls_failed
from .progress import RichReporter

SHORT = {"llamacpp:default": "Qwen2.5-0.5B", "llamacpp:gemma-270m": "Gemma-3-270M"}


def short(judge_id: str) -> str:
    """A member's name for 80-column tables: its model's short name."""
    model = judge_id.split("/")[0]
    return SHORT.get(model, model)


def _auc(human: list[int], scores: list[float | None]) -> float:
    """AUC of a score for "relevant" (human label >= 2): the share of (relevant, not relevant)
    pairs that the score orders right, ties counted half; NaN when undefined. Computed here on
    a dozen pairs rather than importing scikit-learn, a few seconds of a cold start."""
    keep = [(h >= 2, s) for h, s in zip(human, scores) if s is not None and math.isfinite(s)]
    pos = np.array([s for y, s in keep if y])
    neg = np.array([s for y, s in keep if not y])
    if not len(pos) or not len(neg):
        return float("nan")
    return float(((pos[:, None] > neg).sum() + 0.5 * (pos[:, None] == neg).sum()) / (len(pos) * len(neg)))


def _row(name: str, human: list[int], labels: list[int | None], scores: list[float | None],
         seed_kappa: float | None) -> list[str]:
    ok = [i for i, label in enumerate(labels) if label is not None]
    h = np.array([human[i] for i in ok])
    p = np.array([labels[i] for i in ok])
    kappa = cohen_kappa(h, p) if len(ok) > 1 else float("nan")
    binary = cohen_kappa((h >= 2).astype(int), (p >= 2).astype(int), labels=(0, 1)) if len(ok) > 1 else float("nan")
    counts = "/".join(str(int((p == k).sum())) for k in range(4))
    cells = [kappa, binary, _auc(human, scores), float("nan") if seed_kappa is None else seed_kappa]
    return [name, counts] + ["n/a" if not math.isfinite(x) else f"{x:.2f}" for x in cells]


LEGEND = ("labels: pairs labelled 0/1/2/3; kappa: Cohen's, 0-3 vs NIST; bin: 0-1 vs 2-3",
          "AUC: label >= 2 ranked by expected label (LLMs), label (blends)",
          "seed: held-out kappa on the calibration seed (other pairs: LLMJudge dev)")


BLENDS = {"av": "av (the rounded mean label)", "mv(avg)": "the majority vote",
          "prob-expected": "prob-expected (the expected label of the mean distribution)"}


def _name(c) -> str:
    return f"{short(c.judges[0])} alone" if c.kind == "member" else BLENDS.get(c.name, c.name)


def calibration_summary(cal: Calibration) -> str:
    """What calibration chose and why, in a sentence or two (wrapped to 80 columns)."""
    import textwrap

    c = cal.chosen
    scored = [x for x in cal.candidates if math.isfinite(x.mean)]
    best = max(scored, key=lambda x: x.mean)
    text = (f"Calibration on {cal.n_pairs} seed pairs ({cal.n_queries} queries, {cal.folds} query folds) "
            f"chose {_name(c)}")
    text += f" (held-out kappa {c.mean:.2f} +- {c.se:.2f})"
    if best is c:
        text += ", the best of the candidates."
    else:
        text += (f". The best was {_name(best)} at {best.mean:.2f} +- {best.se:.2f}; {_name(c)} is within "
                 "one standard error of it and simpler.")
    return textwrap.fill(text, 80)


def jury_table(run, pairs: list[Pair], gold, cal: Calibration | None) -> Table:
    human = [gold[p.qid][p.docid] for p in pairs]
    table = Table(title=f"Offline jury on {len(pairs)} TREC DL 2019 pairs ({len(pairs) // 4} per NIST label)",
                  title_justify="left")
    for col in ("judge", "labels", "kappa", "bin", "AUC", "seed"):
        table.add_column(col, justify="left" if col == "judge" else "right", no_wrap=True)
    seed = {c.name: c.mean for c in cal.candidates} if cal else {}
    for jid, judgments in run.judgments.items():
        js = [judgments[p] for p in pairs]
        scores = [j.score if j.score is not None else j.expected for j in js]
        table.add_row(*_row(short(jid), human, [j.label for j in js], scores, seed.get(f"member {jid}")))
    ballots = ballots_from_run(run)
    index = {pair: i for i, pair in enumerate(ballots.pairs)}
    rows = [index[(p.qid, p.docid)] for p in pairs]

    def labels_of(result) -> list[int | None]:
        out = result.labels
        return [out[i] for i in rows]

    mv = labels_of(Blender("mv", tie="avg").blend(ballots))
    table.add_row(*_row("blend: majority", human, mv, [float(x) if x is not None else None for x in mv],
                        seed.get("mv(avg)")))
    if cal is not None and cal.chosen is not None:
        c = cal.chosen
        chosen = labels_of(blender_for(c, 0).blend(ballots.only_judges(list(c.judges))))
        if c.kind == "member":  # a member alone: its own score ranks the pairs
            jid = c.judges[0]
            scores = [run.judgments[jid][p].score if run.judgments[jid][p].score is not None
                      else run.judgments[jid][p].expected for p in pairs]
            name = f"calibrated: {short(jid)}"
        else:
            scores = [float(x) if x is not None else None for x in chosen]
            name = f"calibrated: {c.name}"
        table.add_row(*_row(name, human, chosen, scores, c.mean))
    return table


def register(app: typer.Typer) -> None:
    @app.command()
    def demo(
        store_path: Optional[Path] = typer.Option(None, "--store", help="Call store [default: the user cache]."),
        threads: Optional[int] = typer.Option(None, "--threads"),
        progress: bool = typer.Option(True, "--progress/--no-progress"),
    ) -> None:
        """Judge 12 bundled TREC DL 2019 pairs with an offline jury; blend it, calibrated on a bundled seed set."""
        paths = demo_files()
        queries = read_queries(paths["queries.tsv"])
        corpus = read_corpus(paths["passages.jsonl"])
        gold = read_qrels(paths["qrels.txt"], allowed=range(4))
        pairs = demo_pairs(gold, corpus)
        judges = [build_judge(spec) for spec in DEMO_JURY(threads)]
        with CallStore(store_path or demo_store_path()) as store:
            with RichReporter(progress) as reporter:
                run = judge_pairs(judges, pairs, queries, corpus, store, reporter)
            seed_table, seed_gold, notes = load_seed(judges, store)
        cal = calibrate(seed_table, seed_gold, folds=5, seed=0) if seed_table is not None else None
        console.print(jury_table(run, pairs, gold, cal))
        for line in LEGEND:
            console.print(line)
        console.print(f"{len(pairs)} pairs are few: each figure is uncertain by about 0.2 (one standard error).")
        for note in notes:
            err_console.print(f"[yellow]note[/] {note}")
        if cal is not None and cal.chosen is not None:
            console.print(calibration_summary(cal))
            for alert in cal.alerts():
                err_console.print(f"warning: {alert}", markup=False, soft_wrap=True)
        elif cal is not None:
            err_console.print(f"[yellow]note[/] calibration chose nothing: {'; '.join(cal.warnings)}")
        console.print("These small offline models agree weakly with people: point `judgeblender judge`\n"
                      "at a real model to judge for real (README).")
        fail_if_calls_failed(run.stats.values())
