"""`judgeblender judge`: judge (query, passage) pairs and write qrels plus details."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from .. import paths
from ..backends.batch import BatchRequests, use_batch_files
from ..backends.registry import command_options
from ..judges import JudgeSpec, build_judge, summary_rows
from ..judges.engine import WINDOW, check_stream, judge_stream, window_texts
from ..judges.calibrate_panel import seed_shortfall
from ..judges.judge import DEFAULT_MIN_CHOICE_MASS
from ..judges.injection import InjectionScan, describe
from ..judges.outputs import RunFiles, final_labels
from ..judges.panel import get_panel
from ..judges.panel_file import load_tiebreaker
from ..judges.run_panel import run_panel, stream_panel, streams, write_panel_run
from ..pairs import Pair, read_queries
from ..pairs.corpus import close_corpus, open_corpus
from ..pairs.pairs import PairsFile
from ..store import CallStore
from .console import console, err_console
from .options import (ApiKeyEnv, BaseUrl, Concurrency, MinChoiceMass, Progress, RayAddress, RayWorkers, Threads, Timeout,
                      backend_options, fail_if_calls_failed)
from .progress import RichReporter


def write_batch_requests(queue: BatchRequests | None) -> None:
    """Write the Batch API requests a --batch-write run queued, and say where."""
    if queue is None:
        return
    written = queue.write()
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


def _judge_with_panel(panel_name: str, panel_models: list[str] | None, pair_source, queries: dict[str, str],
                      passages, out: Path, details: Path | None, store_path: Path, options: dict,
                      mode: str, seed: int, allow_fallback: bool, invalid_policy: str, skip_missing: bool,
                      redact: bool, progress: bool, json_summary: bool, batch_read: Path | None,
                      batch_write: Path | None, min_choice_mass: float = DEFAULT_MIN_CHOICE_MASS,
                      ray_address: str | None = None, ray_workers: int | None = None,
                      window: int | None = None) -> None:
    """`judge --panel`: run the panel (judges/run_panel.py), write its files, print its summary.
    With `ray_address`, the members' calls run on Ray workers (one set per distinct model). A
    panel whose blend is a per-pair rule and that has no tie-breaker streams its pairs in
    windows (`stream_panel`); the others judge the whole list at once (`run_panel`)."""
    panel = get_panel(panel_name, panel_models, mode, options, seed=seed, allow_fallback=allow_fallback,
                      invalid_policy=invalid_policy, min_choice_mass=min_choice_mass)
    if panel.warning:
        err_console.print(f"warning: panel {panel.source}: {panel.warning}", markup=False, soft_wrap=True)
    tiebreaker = (load_tiebreaker(panel.source, mode, options, seed=seed, min_choice_mass=min_choice_mass)
                  if str(panel.source).endswith(".toml") else None)
    make_judge = build_judge
    if ray_address is not None:  # Ray is imported only here
        from .ray_run import ray_done, ray_judges_cli

        specs = [*panel.judges, *([tiebreaker[0]] if tiebreaker else [])]
        make_judge = ray_judges_cli(specs, ray_address, ray_workers, batch_read or batch_write)
    details_path = details or paths.details_path(out)
    try:
        with CallStore(store_path, redact_passages=redact) as store, RichReporter(progress) as reporter:
            if streams(panel, tiebreaker):
                with RunFiles(out, details_path) as files:
                    result = stream_panel(panel, pair_source, queries, passages, files.write, store, reporter,
                                          skip_missing, batch_read, batch_write, make_judge, window)
                    files.finish(result.totals.skipped)
                n, run, unjudged = files.judged, result.totals, result.unjudged()
            else:
                pairs = list(pair_source)
                corpus = window_texts(passages, (p.docid for p in pairs))
                result = run_panel(panel, pairs, queries, corpus, store, reporter, skip_missing, batch_read,
                                   batch_write, tiebreaker, make_judge)
                n, details_path = write_panel_run(result, out, details)
                run, unjudged = result.run, dict(result.result.unjudged())
    finally:
        if ray_address is not None:
            make_judge.close()
            ray_done()
    write_batch_requests(result.batch_queue)
    print_summary(run)
    if result.flagged:
        err_console.print(f"[yellow]possible prompt injection[/] {escape(describe(result.flagged))}", highlight=False)
    for line in result.summary_lines():
        err_console.print(line, markup=False)
    err_console.print(f"wrote {n} blended judgments to {out} and every judge's label to {details_path}")
    if json_summary:
        console.print_json(json.dumps({"qrels": str(out), "details": str(details_path), "panel": result.blend_info,
                                       "judged": n, "unjudged": unjudged,
                                       "judges": summary_rows(run), "skipped": len(run.skipped),
                                       "injection_flagged": len(result.flagged)}))
    # the tie-breaker's failed calls count too: its pairs fell back to the panel's own rule
    fail_if_calls_failed(result.call_stats(), "judgments (judge x pair)" if len(result.call_stats()) > 1 else "pairs")


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
        allow_fallback: bool = typer.Option(False, "--allow-fallback", help="Let logprobs mode fall back to generate when a model cannot score (recorded)."),
        invalid_policy: str = typer.Option("retry-once", "--invalid", help="retry-once (then unjudged) or no-retry."),
        seed: int = typer.Option(0, "--seed"),
        min_choice_mass: MinChoiceMass = DEFAULT_MIN_CHOICE_MASS,
        threads: Threads = None,
        base_url: BaseUrl = None,
        api_key_env: ApiKeyEnv = None,
        concurrency: Concurrency = None,
        timeout: Timeout = None,
        context_tokens: Optional[int] = typer.Option(None, "--context-tokens", help="Model context size, to truncate long passages."),
        panel: Optional[str] = typer.Option(None, "--panel", help="A panel preset (promptblender, llmblender, umbrela) or a panel .toml: several judges, blended."),
        panel_models: Optional[list[str]] = typer.Option(None, "--panel-model", help="Model string(s) for a preset panel (llmblender takes three)."),
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
            opts = backend_options(threads, base_url, api_key_env, concurrency, timeout, context_tokens)
            if panel:
                _judge_with_panel(panel, panel_models, pair_source, query_map, passages, out, details, store_path,
                                  opts, mode, seed, allow_fallback, invalid_policy, skip_missing, redact, progress,
                                  json_summary, batch_read, batch_write, min_choice_mass, ray_address, ray_workers,
                                  window)
                return
            spec = JudgeSpec(model=model, prompt=prompt, mode=mode, options=command_options(model, opts),
                             allow_fallback=allow_fallback,
                             invalid_policy=invalid_policy, seed=seed, min_choice_mass=min_choice_mass)
            _judge_streamed(spec, pair_source, query_map, passages, out, details, store_path, skip_missing, redact,
                            progress, json_summary, batch_read, batch_write, ray_address, ray_workers, window)
        finally:
            close_corpus(passages)


def _judge_streamed(spec: JudgeSpec, pair_source, query_map: dict[str, str], passages, out: Path,
                    details: Path | None, store_path: Path, skip_missing: bool, redact: bool, progress: bool,
                    json_summary: bool, batch_read: Path | None, batch_write: Path | None,
                    ray_address: str | None, ray_workers: int | None, window: int) -> None:
    """`judge` with one judge: pairs streamed in windows (judges/engine.py `judge_stream`), each
    window's qrels and details written as it completes (judges/outputs.py `RunFiles`)."""
    if ray_address is not None:  # Ray is imported only here
        from .ray_run import ray_judge_cli

        judge_obj = ray_judge_cli(spec, ray_address, ray_workers, batch_read or batch_write)
    else:
        judge_obj = build_judge(spec)
    batch_queue = use_batch_files([judge_obj], batch_read, batch_write)
    details_path = details or paths.details_path(out)
    flagged: dict = {}
    scan = InjectionScan([judge_obj])  # what the judge is sent, each distinct passage once a run

    def write(run, texts) -> None:
        found = scan.flag_run(run, query_map, texts)  # reported only: labels stay as judged
        flagged.update(found)
        files.write(run, final_labels(run), extra={p: {"injection": [str(f) for f in f_]} for p, f_ in found.items()})

    try:
        with CallStore(store_path, redact_passages=redact) as store, RichReporter(progress) as reporter, \
                RunFiles(out, details_path) as files:
            totals = judge_stream([judge_obj], pair_source, query_map, passages, write, store, reporter, skip_missing,
                                  window)
            files.finish(totals.skipped)
    finally:
        getattr(judge_obj, "close", lambda: None)()
        if ray_address is not None:
            from .ray_run import ray_done

            ray_done()
    write_batch_requests(batch_queue)
    n = files.judged
    print_summary(totals)
    if flagged:
        err_console.print(f"[yellow]possible prompt injection[/] {escape(describe(flagged))}", highlight=False)
    err_console.print(f"wrote {n} judgments to {out} and details to {details_path}")
    if json_summary:
        console.print_json(json.dumps({"qrels": str(out), "details": str(details_path),
                                       "judges": summary_rows(totals), "skipped": len(totals.skipped),
                                       "injection_flagged": len(flagged)}))
    fail_if_calls_failed(totals.stats.values())
