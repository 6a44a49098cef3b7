"""`judgeblender judge`: judge (query, passage) pairs and write qrels plus details.

The command only reads its flags into one `RunOptions` and says what happened: the run itself is
the library's (panels/judging.py `judge_to_files`), the same code `jb.judge(..., out=...)` runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from .. import paths
from ..backends.batch import BatchRequests
from ..blend.seed_rules import seed_shortfall
from ..judges import summary_rows
from ..judges.engine import WINDOW, check_stream
from ..judges.injection import describe
from ..judges.judge import DEFAULT_MIN_CHOICE_MASS
from ..panels.judging import JudgedFiles, RunOptions, judge_to_files
from ..panels.panel import get_panel
from ..pairs import read_queries
from ..pairs.corpus import close_corpus, open_corpus
from ..pairs.pairs import PairsFile
from .console import console, err_console
from .options import (AllowFallback, ApiKeyEnv, BaseUrl, Concurrency, ContextTokens, InvalidPolicy, MinChoiceMass,
                      Progress, RayAddress, RayWorkers, Seed, Threads, Timeout, backend_options, fail_if_calls_failed)
from .progress import RichReporter
from .ray_run import say_started


def print_batch_requests(written: dict[Path, int] | None) -> None:
    """Say where the Batch API requests a --batch-write run queued were written."""
    if written is None:
        return
    if not written:
        err_console.print("no call left for the Batch API: every pair is answered", highlight=False)
    for path, n in written.items():
        err_console.print(f"wrote {n} Batch API requests to {escape(str(path))}: submit it, then run again "
                          "with --batch-read OUTPUT", highlight=False)


def print_summary(run, skipped_note: bool = True) -> None:
    """One line per judge, readable at any terminal width."""
    for row in summary_rows(run):
        err_console.print(
            f"[bold]{row['judge']}[/]: {row['judged']} judged, {row['unjudged']} unjudged, "
            f"invalid answers {row['invalid_rate']:.1%}, {row['calls_made']} calls made, {row['cache_hits']} from the store, "
            f"{row['retries']} re-asked, {row['backend_retries']} transport retries, {row['truncated']} truncated, "
            f"{row['seconds']:.1f} s", highlight=False)
    for stats in run.stats.values():
        if stats.fallback:
            err_console.print(f"[yellow]fallback[/] {stats.judge_id}: {stats.fallback}")
        for reason, n in stats.unjudged.most_common():
            err_console.print(f"[yellow]unjudged[/] {stats.judge_id}: {n} pairs: {reason}")
    if skipped_note and run.skipped:
        err_console.print(f"[yellow]skipped[/] {len(run.skipped)} pairs with a missing query or passage "
                          f"(first: {', '.join(f'{p.qid}/{p.docid}' for p, _ in run.skipped[:5])})")


def _report(done: JudgedFiles, json_summary: bool) -> None:
    """What a run wrote, on stderr (and as JSON on stdout with --json); exit status 3 when model
    calls failed after their retries, once the outputs are written."""
    print_batch_requests(done.batch_written)
    print_summary(done.run)
    if done.flagged:
        err_console.print(f"[yellow]possible prompt injection[/] {escape(describe(done.flagged))}", highlight=False)
    for line in done.summary_lines:
        err_console.print(line, markup=False)
    if done.blend is not None:
        err_console.print(f"wrote {done.judged} blended judgments to {done.out} and every judge's label to "
                          f"{done.details}")
        summary = {"qrels": str(done.out), "details": str(done.details), "panel": done.blend, "judged": done.judged,
                   "unjudged": done.unjudged, "judges": summary_rows(done.run), "skipped": len(done.run.skipped),
                   "injection_flagged": len(done.flagged)}
    else:
        err_console.print(f"wrote {done.judged} judgments to {done.out} and details to {done.details}")
        summary = {"qrels": str(done.out), "details": str(done.details), "judges": summary_rows(done.run),
                   "skipped": len(done.run.skipped), "injection_flagged": len(done.flagged)}
    if json_summary:
        console.print_json(json.dumps(summary))
    # a panel's tie-breaker's failed calls count too: its pairs fell back to the panel's own rule
    fail_if_calls_failed(done.call_stats, "judgments (judge x pair)" if len(done.call_stats) > 1 else "pairs")


def _judge_with_panel(panel_name: str, models: list[str] | None, pair_source, queries: dict[str, str], passages,
                      out: Path, details: Path | None, store_path: Path, options: RunOptions, progress: bool,
                      json_summary: bool) -> None:
    """`judge --panel`: the panel read (its warning said first), then run and written by the
    library (a panel whose blend is a per-pair rule and that has no tie-breaker streams its pairs
    in windows; the others judge the whole list at once), then its summary."""
    panel = get_panel(panel_name, models, options.mode, dict(options.backend), **options.spec_fields())
    if panel.warning:
        err_console.print(f"warning: panel {panel.source}: {panel.warning}", markup=False, soft_wrap=True)
    _report(judge_to_files(panel, pair_source, queries, passages, out, details, store_path, options,
                           RichReporter(progress), say_started), json_summary)


def _judge_streamed(spec, pair_source, queries: dict[str, str], passages, out: Path, details: Path | None,
                    store_path: Path, options: RunOptions, progress: bool, json_summary: bool) -> None:
    """`judge` with one judge: its pairs streamed in windows, each window's qrels and details
    written as it completes (by the library, as for a panel), then its summary."""
    _report(judge_to_files(spec, pair_source, queries, passages, out, details, store_path, options,
                           RichReporter(progress), say_started), json_summary)


def register(app: typer.Typer) -> None:
    @app.command()
    def judge(
        queries: Path = typer.Option(..., "--queries", "-q", help="Queries TSV: id<TAB>text (gzip ok), or irds:ID (an ir_datasets id)."),
        corpus: Path = typer.Option(..., "--corpus", "-c", help="Passages JSONL: docid/text, id/contents or doc_id/text, or irds:ID (looked up by id)."),
        pairs: Path = typer.Option(..., "--pairs", "-p", help="Pairs: qrels, TREC run, or 'qid docid' TSV, or irds:ID (its qrels; --pairs-format run: its scoreddocs)."),
        out: Path = typer.Option(..., "--out", "-o", help="Output qrels of the judged pairs."),
        model: str = typer.Option("llamacpp:default", "--judge", "-j", help="Model string, e.g. llamacpp:default, llamacpp:PATH.gguf, openai:MODEL, hf:PATH."),
        prompt: str = typer.Option("umbrela", "--prompt", help="Prompt template name or .toml path (see `judgeblender prompts list`)."),
        mode: str = typer.Option("generate", "--mode", "-m", help="generate (parse text) or logprobs (score label tokens)."),
        store_path: Path = typer.Option(Path("judgments.sqlite"), "--store", help="SQLite store of every call (re-runs reuse it)."),
        details: Optional[Path] = typer.Option(None, "--details", help="Per-pair details JSONL [default: OUT.details.jsonl]."),
        pairs_format: str = typer.Option("auto", "--pairs-format", help="auto, qrels, run or tsv."),
        depth: Optional[int] = typer.Option(None, "--depth", help="With a run file: judge its top-k per query."),
        limit: Optional[int] = typer.Option(None, "--limit", help="Judge only the first N pairs."),
        skip_missing: bool = typer.Option(False, "--skip-missing", help="Judge the pairs that can be, report the ones whose query or passage is missing."),
        allow_fallback: AllowFallback = False,
        invalid_policy: InvalidPolicy = "retry-once",
        seed: Seed = 0,
        min_choice_mass: MinChoiceMass = DEFAULT_MIN_CHOICE_MASS,
        threads: Threads = None,
        base_url: BaseUrl = None,
        api_key_env: ApiKeyEnv = None,
        concurrency: Concurrency = None,
        timeout: Timeout = None,
        context_tokens: ContextTokens = None,
        panel: Optional[str] = typer.Option(None, "--panel", help="A panel preset (promptblender, llmblender, umbrela) or a panel .toml: several judges, blended."),
        models: Optional[list[str]] = typer.Option(None, "--panel-model", help="Model string(s) for a preset panel (llmblender takes three)."),
        redact: bool = typer.Option(False, "--redact", help="Do not keep prompt texts (passages) in the store."),
        batch_read: Optional[Path] = typer.Option(None, "--batch-read", help="Served models: answer calls from this Batch API output file (see docs/served-models.md)."),
        batch_write: Optional[Path] = typer.Option(None, "--batch-write", help="Served models: write the calls not answered yet to this Batch API requests file instead of calling."),
        progress: Progress = True,
        ray_address: RayAddress = None,
        ray_workers: RayWorkers = None,
        json_summary: bool = typer.Option(False, "--json", help="Print the run summary as JSON on stdout."),
        window: int = typer.Option(WINDOW, "--window", help="Pairs judged, and written out, together: a larger window sorts more prompts together (prefix reuse), a smaller one holds less in memory (a panel with a tie-breaker or a Dawid-Skene/GLAD blend judges all its pairs at once)."),
        for_calibration: bool = typer.Option(False, "--for-calibration", help="These labels are a seed for `calibrate`: warn before any model call if the pairs are too few for it."),
    ) -> None:
        """Judge (query, passage) pairs with an LLM judge (or a panel) and write qrels."""
        query_map = read_queries(queries)
        pair_source = PairsFile(pairs, pairs_format, depth, limit)
        passages = open_corpus(corpus)  # looked up by id, a window at a time: never all in memory
        try:
            # the validation pass over the streamed pairs: a missing query or passage is an error
            # before any model is built, Ray is started or the store is created (the engine checks
            # each window again, for library callers)
            check_stream(pair_source, query_map, passages, skip_missing, window)
            short = seed_shortfall((p.qid, p.docid) for p in pair_source) if for_calibration else None
            if short:  # before the first model call: these labels cannot be calibrated on
                err_console.print(f"warning: --for-calibration: {short}; label more pairs first",
                                  markup=False, soft_wrap=True)
            # the requests files, one per model when several models have requests: checked, once
            # the judges' models are known and before the store is made, against every other file
            # this command reads or writes
            read_too = [*([Path(panel)] if panel and panel.endswith(".toml") else []), *filter(None, [batch_read])]
            queue = None if batch_write is None else BatchRequests(
                batch_write, inputs=[queries, corpus, pairs, store_path, *read_too],
                outputs=[("--out", out), ("--details" if details else "the details file beside --out",
                                          details or paths.details_path(out))])
            options = RunOptions(mode=mode, seed=seed, allow_fallback=allow_fallback, invalid_policy=invalid_policy,
                                 min_choice_mass=min_choice_mass,
                                 backend=backend_options(threads, base_url, api_key_env, concurrency, timeout,
                                                         context_tokens),
                                 skip_missing=skip_missing, redact=redact, batch_read=batch_read,
                                 batch_write=queue, ray=ray_address, ray_workers=ray_workers,
                                 window=window).check()
            if panel:
                _judge_with_panel(panel, models, pair_source, query_map, passages, out, details, store_path, options,
                                  progress, json_summary)
                return
            spec = options.spec(model, prompt)
            _judge_streamed(spec, pair_source, query_map, passages, out, details, store_path, options, progress,
                            json_summary)
        finally:
            close_corpus(passages)
