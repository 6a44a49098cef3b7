"""`judgeblender fill`: human qrels with their holes filled by LLM labels, with provenance.

The filled labels are evaluate/scope.py's, the same `jb.experiment` scores as its filled column:
with --scope labels (the default) every pair either file labels, with --scope pool (and --runs,
--depth) the runs' pooled pairs only. `compare --qrels OUT` then gives that column's figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table
from rich.text import Text

from .. import paths
from ..errors import ArgumentError
from ..evaluate.scope import DEFAULT_DEPTH, DEFAULT_SCOPE, SCOPE_HELP, check_scope, pool_of, query_set, scored_columns
from ..evaluate.agreement import LEVELS
from ..fileio import outputs_together
from ..label.merge import HUMAN, LLM, merge_labels, write_provenance
from ..pairs import read_pairs, read_qrels, read_runs_dir, write_qrels
from .console import console, err_console


def register(app: typer.Typer) -> None:
    @app.command("fill")
    def fill_command(
        gold: Path = typer.Option(..., "--gold", help="Human qrels: these labels are kept as they are."),
        llm: Path = typer.Option(..., "--llm", help="LLM qrels: used only for pairs the human qrels lack."),
        out: Path = typer.Option(..., "--out", "-o", help="Merged qrels to write."),
        provenance: Optional[Path] = typer.Option(None, "--provenance", help="TSV qid, docid, label, source (human|llm) [default: OUT stem + .provenance.tsv]."),
        pairs: Optional[Path] = typer.Option(None, "--pairs", help="The pool ('qid docid' TSV, qrels or run): report its pairs that neither file labels."),
        scope: str = typer.Option(DEFAULT_SCOPE, "--scope", help=SCOPE_HELP),
        runs_dir: Optional[Path] = typer.Option(None, "--runs", help="Directory of TREC run files, for --scope pool: their top --depth is the pool."),
        depth: int = typer.Option(DEFAULT_DEPTH, "--depth", "-k", help="With --scope pool: pool each run's top k."),
        as_json: bool = typer.Option(False, "--json", help="Print the counts as one JSON object."),
    ) -> None:
        """Merge human and LLM labels, human first; every pair records where its label came from."""
        check_scope(scope, "--scope")
        if scope == "pool" and runs_dir is None:
            raise ArgumentError("--runs", "a directory of runs to pool with --scope pool", described="none",
                                hint="--scope labels fills every pair the LLM labels, without runs")
        if scope == "labels" and runs_dir is not None:
            raise ArgumentError("--scope", "pool when --runs is given (--scope labels fills every labelled pair and "
                                "pools nothing)", scope)
        human = read_qrels(gold, allowed=LEVELS)
        machine = read_qrels(llm, allowed=LEVELS)
        pool_list = read_pairs(pairs) if pairs else None
        pool = pool_of(read_runs_dir(runs_dir), depth) if runs_dir is not None else None
        # a label file keeps every query either file labels: compare scores what it is given
        counted = query_set({**machine, **human})
        columns = scored_columns(human, machine, scope=scope, queries=counted, pool=pool, depth=depth)
        merged = columns.merged
        if pool_list is not None:
            merged.unlabelled = merge_labels(human, machine, pool_list).unlabelled
        llm_only = sorted(set(machine) - set(human))
        provenance = provenance or paths.provenance_path(out)
        with outputs_together():  # the qrels and their provenance, or neither (a full disk on the second)
            write_qrels(out, merged.qrels())
            write_provenance(provenance, merged)

        by_level = {src: [0] * len(LEVELS) for src in (HUMAN, LLM)}
        for _, _, label, src in merged.rows:
            by_level[src][label] += 1
        counts = {"pairs": len(merged.rows), HUMAN: merged.count(HUMAN), LLM: merged.count(LLM),
                  "labelled_by_both": merged.both, "llm_disagreed_with_human": merged.disagree,
                  "labels": by_level, "unlabelled_pool_pairs": len(merged.unlabelled) if pairs else None,
                  **columns.summary(), "depth": columns.depth, "queries_without_human_labels": llm_only}
        if as_json:
            typer.echo(json.dumps(counts))
        else:
            table = Table(title=Text(f"{out}: {len(merged.rows)} pairs ({columns.describe()})"))
            for col in ("source", "pairs", *(f"label {lvl}" for lvl in LEVELS)):
                table.add_column(col, justify="left" if col == "source" else "right")
            for src in (HUMAN, LLM):
                table.add_row(src, str(counts[src]), *map(str, by_level[src]))
            console.print(table)
            console.print(f"{merged.both} pairs were labelled by both; the LLM disagreed on {merged.disagree} "
                          "of them (the human label is kept)", markup=False)
            if pairs:
                console.print(f"{len(merged.unlabelled)} pairs of {pairs} have no label from either file"
                              + (f" (first: {', '.join(f'{p.qid}/{p.docid}' for p in merged.unlabelled[:5])})"
                                 if merged.unlabelled else ""), markup=False)
            if llm_only:
                console.print(f"{len(llm_only)} queries have LLM labels only (first: {', '.join(llm_only[:5])}): "
                              "experiment, report and correlate do not count a query without a human label",
                              markup=False)
        err_console.print(f"wrote {out} and {provenance}", markup=False)
