"""`judgeblender demo`: judge the bundled 40 DL19 pairs with the embedded model, next to NIST labels."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ..judges import Judge, JudgeSpec, judge_pairs
from ..pairs import Pair, read_corpus, read_qrels, read_queries
from ..paths import demo_store_path
from ..store import CallStore
from .console import console
from .judge import print_summary
from .progress import RichReporter


def demo_files() -> dict[str, Path]:
    data = files("judgeblender") / "data"
    return {k: Path(str(data / f"demo-dl19-{k}")) for k in ("queries.tsv", "passages.jsonl", "qrels.txt")}


def register(app: typer.Typer) -> None:
    @app.command()
    def demo(
        model: str = typer.Option("llamacpp:default", "--judge", "-j", help="Model string."),
        prompt: str = typer.Option("umbrela", "--prompt"),
        mode: str = typer.Option("logprobs", "--mode", "-m", help="logprobs (fast) or generate."),
        store_path: Optional[Path] = typer.Option(None, "--store", help="Call store [default: the user cache]."),
        threads: Optional[int] = typer.Option(None, "--threads"),
        progress: bool = typer.Option(True, "--progress/--no-progress"),
    ) -> None:
        """Judge 40 bundled TREC DL 2019 pairs (10 per label) and compare with the human labels."""
        paths = demo_files()
        queries = read_queries(paths["queries.tsv"])
        corpus = read_corpus(paths["passages.jsonl"])
        gold = read_qrels(paths["qrels.txt"], allowed=range(4))
        pairs = [Pair(q, d) for q, docs in gold.items() for d in docs]
        opts = {"n_threads": threads} if threads else {}
        judge = Judge(JudgeSpec(model=model, prompt=prompt, mode=mode, options=opts, allow_fallback=True))
        store_file = store_path or demo_store_path()
        with CallStore(store_file) as store, RichReporter(progress) as reporter:
            run = judge_pairs([judge], pairs, queries, corpus, store, reporter)
        judgments = run.judgments[judge.id]
        table = Table(title=f"{judge.id} on 40 TREC DL 2019 pairs", title_justify="left")
        for col in ("qid", "docid", "human", "judge", "expected", "query"):
            table.add_column(col, justify="left" if col == "query" else "right")
        human, predicted, scored = [], [], []
        for p in pairs:
            j = judgments[p]
            label = "invalid" if j.label is None else str(j.label)
            expected = "" if j.expected is None else f"{j.expected:.2f}"
            table.add_row(p.qid, p.docid, str(gold[p.qid][p.docid]), label, expected, queries[p.qid][:40])
            if j.label is not None:
                human.append(gold[p.qid][p.docid])
                predicted.append(j.label)
                scored.append(j.expected)
        console.print(table)
        print_summary(run)
        if human:
            from ..evaluate import agreement

            pred = {}
            for p in pairs:
                if judgments[p].label is not None:
                    pred.setdefault(p.qid, {})[p.docid] = judgments[p].label
            report = agreement(gold, pred, judge.id)
            console.print(f"Cohen's kappa (0-3): {report.kappa:.3f}   binary (0-1 vs 2-3): {report.kappa_binary:.3f}   "
                          f"on {report.n} of {len(pairs)} pairs with a valid label")
            if all(x is not None for x in scored):
                from scipy.stats import spearmanr
                from sklearn.metrics import roc_auc_score

                auc = roc_auc_score([h >= 2 for h in human], scored)
                rho = spearmanr(scored, human).statistic
                console.print(f"expected score vs human label: AUC (label >= 2) {auc:.3f}, Spearman {rho:.3f}")
        console.print("The embedded 0.5B model is a weak grader: see the README to use a real model.")
        from .options import fail_if_calls_failed

        fail_if_calls_failed(run.stats.values())
