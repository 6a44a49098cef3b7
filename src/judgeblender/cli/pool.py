"""`judgeblender pool`: depth-k pooling of a directory of runs into the pairs to judge."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table
from rich.text import Text

from ..errors import JudgeblenderError
from ..fileio import outputs_together
from ..pairs.corpus import read_corpus
from ..pairs.design import design_path_for, draw_seed, write_design, write_pair_design
from ..pairs.pool import (
    default_bands, parse_bands, pool_pairs, read_query_ids, run_contributions, stratified_sample, write_duplicates,
    write_pairs,
)
from ..pairs.qrels import PAIRS_ONLY, read_qrels
from ..pairs.runs import read_runs_dir
from .console import console, err_console

SHOWN_DUPLICATES = 20
# draw_seed's settings as this command's parameters: its errors are told in their flags
SEED_PARAMETERS = {"queries": "sample_queries", "pairs": "sample_pairs", "weights": "pair_weights"}


def register(app: typer.Typer) -> None:
    @app.command("pool")
    def pool_command(
        runs_dir: Path = typer.Option(..., "--runs", help="Directory of TREC run files (plain or gzip)."),
        depth: int = typer.Option(10, "--depth", "-k", help="Pool each run's top k documents per query."),
        out: Path = typer.Option(..., "--out", "-o", help="Pairs TSV to write: qid<TAB>docid."),
        exclude: Optional[Path] = typer.Option(None, "--exclude", help="Qrels of pairs already judged: pool only the holes."),
        queries_from: Optional[Path] = typer.Option(None, "--queries-from", help="Pool only the queries of this qrels or queries TSV."),
        corpus: Optional[Path] = typer.Option(None, "--corpus", help="Passages JSONL, for --drop-duplicates."),
        drop_duplicates: bool = typer.Option(False, "--drop-duplicates", help="Keep one document per identical text (after case/whitespace folding) per query; needs --corpus."),
        skip_missing: bool = typer.Option(False, "--skip-missing", help="With --drop-duplicates: keep documents that have no text in --corpus (unchecked) instead of failing."),
        duplicates_out: Optional[Path] = typer.Option(None, "--duplicates-out", help="TSV of every dropped duplicate: qid, dropped, kept."),
        sample: Optional[int] = typer.Option(None, "--sample", help="Also draw this many pairs, stratified by query and rank band, for a human seed set."),
        sample_out: Optional[Path] = typer.Option(None, "--sample-out", help="Where --sample writes its pairs TSV."),
        bands: Optional[str] = typer.Option(None, "--bands", help="Rank bands for --sample, e.g. 1-3,4-10 [default: 1-3, 4-10, 11-100, 101-depth, cut to depth]."),
        sample_queries: Optional[int] = typer.Option(None, "--sample-queries", help="Also draw this many whole queries at random (without replacement) for a human seed that `estimate` can use: every pooled pair of each is written to --sample-out, the design beside it."),
        sample_pairs: Optional[float] = typer.Option(None, "--sample-pairs", help="Also draw pairs independently with known probabilities, this many expected (Poisson sampling), for a seed of pairs that `estimate` can use with P@k: written to --sample-out, the design beside it."),
        pair_weights: str = typer.Option("runs", "--pair-weights", help="With --sample-pairs: 'runs' (probability proportional to sqrt(runs that have the pair in their top k)) or 'uniform'."),
        design_out: Optional[Path] = typer.Option(None, "--design-out", help="Where to write the seed's design (JSON) [default: beside --sample-out, STEM.design.json]."),
        seed: int = typer.Option(0, "--seed", help="Seed of the --sample / --sample-queries draw."),
        as_json: bool = typer.Option(False, "--json", help="Print the summary as one JSON object instead of tables."),
    ) -> None:
        """Pool the top k of every run; write the (query, document) pairs left to judge."""
        if drop_duplicates and corpus is None:
            raise JudgeblenderError("--drop-duplicates needs --corpus (the texts to compare)")
        designs = [o for o, v in (("--sample", sample), ("--sample-queries", sample_queries),
                                  ("--sample-pairs", sample_pairs)) if v is not None]
        if len(designs) > 1:
            raise JudgeblenderError(f"{' and '.join(designs)} are different designs: pick one")
        if bool(designs) != (sample_out is not None):
            raise JudgeblenderError("--sample, --sample-queries or --sample-pairs and --sample-out go together")
        if sample_pairs is not None and (exclude or drop_duplicates):
            raise JudgeblenderError("--sample-pairs draws from the whole pool: leave out --exclude and --drop-duplicates")
        band_list = parse_bands(bands, depth) if bands else default_bands(depth)
        runs = read_runs_dir(runs_dir)
        queries = read_query_ids(queries_from) if queries_from else None
        judged = read_qrels(exclude, allowed=PAIRS_ONLY) if exclude else {}  # the pairs already judged
        texts = (lambda wanted: read_corpus(corpus, wanted=wanted)) if drop_duplicates else None
        made = pool_pairs(runs, depth, queries, judged=judged, texts=texts, corpus_name=str(corpus),
                          skip_missing=skip_missing, queries_source=str(queries_from))
        pooled, kept, dupes, no_text, holes = made.pooled, made.kept, made.duplicates, made.without_text, made.holes
        with outputs_together():  # the pool, its duplicates, its sample and design: all, or none
            write_pairs(out, holes)
            if duplicates_out:
                write_duplicates(duplicates_out, dupes)
            drawn = stratified_sample(holes, sample, seed, band_list) if sample else []
            design_file = None
            if sample:
                write_pairs(sample_out, drawn)
                design_file = design_out or design_path_for(sample_out)
                write_pair_design(design_file, holes, drawn, band_list, seed)
            elif sample_queries is not None or sample_pairs is not None:
                drawn, seed_design = draw_seed(holes, depth, queries=sample_queries, pairs=sample_pairs,
                                               weights=pair_weights, random_seed=seed, pairs_file=sample_out,
                                               names=SEED_PARAMETERS)
                write_pairs(sample_out, drawn)
                design_file = design_out or design_path_for(sample_out)
                write_design(design_file, seed_design)

        summary = _summary(runs, depth, pooled, kept, holes, dupes, drawn, band_list)
        summary["without_text"] = no_text
        summary["queries_without_runs"] = sorted(queries - {p.qid for p in pooled}) if queries is not None else []
        if as_json:
            typer.echo(json.dumps(summary))
        else:
            _print_summary(summary, dupes)
        err_console.print(f"wrote {len(holes)} pairs to {out}"
                          + (f", a sample of {len(drawn)} to {sample_out}" if sample_out else "")
                          + (f", its design to {design_file}" if design_file else ""), markup=False)


def _summary(runs, depth, pooled, kept, holes, dupes, drawn, bands) -> dict:
    per_query: dict[str, dict[str, int]] = {}
    for name, pairs in (("pooled", pooled), ("after_dedupe", kept), ("holes", holes), ("sampled", drawn)):
        for qid, n in Counter(p.qid for p in pairs).items():
            per_query.setdefault(qid, {"pooled": 0, "after_dedupe": 0, "holes": 0, "sampled": 0})[name] = n
    for counts in per_query.values():
        counts["duplicates"] = counts["pooled"] - counts.pop("after_dedupe")
        counts["judged"] = counts["pooled"] - counts["duplicates"] - counts["holes"]
    sample_bands = Counter(next(f"{lo}-{hi}" for lo, hi in bands if lo <= p.best_rank <= hi) for p in drawn)
    return {
        "depth": depth,
        "runs": len(runs),
        "queries": len(per_query),
        "pooled": len(pooled),
        "duplicates": len(dupes),
        "judged": len(kept) - len(holes),
        "holes": len(holes),
        "sampled": len(drawn),
        "sample_bands": dict(sample_bands),
        "per_query": per_query,
        "per_run": [vars(c) for c in run_contributions(runs, pooled, holes)],
        "duplicate_pairs": [vars(d) for d in dupes],
    }


def _print_summary(s: dict, dupes) -> None:
    runs = Table(title=Text(f"Contribution of each run (top {s['depth']})"),
                 caption="top-k: pairs in the run's top k; unique: pairs no other run pools; "
                         "holes: pairs left to judge after duplicates and already-judged pairs are dropped.")
    for col in ("run", "top-k", "unique", "holes"):
        runs.add_column(col, justify="left" if col == "run" else "right")
    for c in sorted(s["per_run"], key=lambda c: (-c["unique"], c["run"])):
        runs.add_row(Text(c["run"]), str(c["top_k"]), str(c["unique"]), str(c["holes"]))
    console.print(runs)

    queries = Table(title="Pool per query",
                    caption="pooled: distinct documents in the union of top-k lists; duplicates: dropped as "
                            "copies of another pooled text; judged: already in --exclude; holes: written out.")
    for col in ("query", "pooled", "duplicates", "judged", "holes", "sampled"):
        queries.add_column(col, justify="left" if col == "query" else "right")
    for qid, c in s["per_query"].items():
        queries.add_row(Text(qid), *(str(c[k]) for k in ("pooled", "duplicates", "judged", "holes", "sampled")))
    queries.add_row("total", *(str(s[k]) for k in ("pooled", "duplicates", "judged", "holes", "sampled")),
                    style="bold")
    console.print(queries)

    console.print(f"{s['runs']} runs, depth {s['depth']}, {s['queries']} queries: {s['pooled']} pooled pairs, "
                  f"{s['duplicates']} duplicate texts dropped, {s['judged']} already judged, "
                  f"{s['holes']} left to judge", markup=False)
    if s["sampled"]:
        bands = ", ".join(f"ranks {b}: {n}" for b, n in sorted(s["sample_bands"].items(),
                                                               key=lambda kv: int(kv[0].split("-")[0])))
        console.print(f"sample: {s['sampled']} pairs ({bands})", markup=False)
    if s["queries_without_runs"]:
        console.print(f"warning: no run ranks anything for {len(s['queries_without_runs'])} of the --queries-from "
                      f"queries: {', '.join(s['queries_without_runs'][:10])}", markup=False)
    if s["without_text"]:
        console.print(f"warning: {len(s['without_text'])} pooled document(s) have no text in the corpus and were "
                      f"not checked for duplicates: {', '.join(s['without_text'][:10])}", markup=False)
    for d in dupes[:SHOWN_DUPLICATES]:
        console.print(f"duplicate: query {d.qid}: dropped {d.dropped}, kept {d.kept} (same text)", markup=False)
    if len(dupes) > SHOWN_DUPLICATES:
        console.print(f"... and {len(dupes) - SHOWN_DUPLICATES} more duplicates (--duplicates-out lists all)",
                      markup=False)
