"""Judging pairs as `judgeblender judge` does, for the command line and `jb.judge` alike.

Both build one `RunOptions` (from the command's flags, or from `jb.judge`'s keyword arguments)
and hand it here with the judges (one `JudgeSpec`, or a `Panel`), so that what the command can
do the library can, through the same code: one judge streamed in windows or a panel blended
(streamed where its blend is a per-pair rule and it has no tie-breaker), the calls answered from
or written to Batch API files, the calls run on a Ray cluster, possible prompt injections
flagged (reported, never changing a label), the qrels and details files written as the CLI
writes them. Nothing here prints: the caller says what happened, from what comes back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ContextManager

from .. import arguments, paths
from ..backends.batch import BatchRequests, served_models, use_batch_files
from ..backends.registry import command_options
from ..errors import ArgumentError
from ..fileio import outputs_together
from ..judges.engine import WINDOW, JudgeRun, Reporter, judge_pairs, judge_stream, window_texts
from ..judges.factory import build_judge
from ..judges.injection import InjectionScan
from ..judges.judge import (DEFAULT_MIN_CHOICE_MASS, JudgeSpec, check_invalid_policy, check_min_choice_mass,
                            check_mode)
from ..judges.outputs import RunFiles, final_labels
from ..pairs import Pair
from ..store import CallStore
from .panel import Panel
from .panel_file import load_tiebreaker
from .run_panel import run_panel, stream_panel, streams, write_panel_run


@dataclass(frozen=True)
class RunOptions:
    """How a judging run goes, beyond which judges judge which pairs: one typed object that the
    CLI builds from its flags and `jb.judge` from its keyword arguments, checked once (`check`).

    `mode`, `seed`, `allow_fallback`, `invalid_policy` and `min_choice_mass` are every judge's
    defaults (a judge's own declaration wins); `backend` holds the options every judge gets as
    its backend declares them (n_threads, base_url, concurrency, timeout_s, context_tokens ...).
    The rest is the run's: `skip_missing` judges what can be and reports the rest, `redact`
    keeps no passage text in a store opened from a path, `batch_read`/`batch_write` answer the
    calls from a Batch API output file or queue them into a requests file (a path, or a
    BatchRequests that knows the command's other files, checked against them before any call),
    `ray` runs the calls
    on a Ray cluster (local, auto, HOST:PORT or ray://HOST:PORT) with `ray_workers` workers,
    and `window` is how many pairs are judged, and written out, together."""

    mode: str = "generate"
    seed: int = 0
    allow_fallback: bool = False
    invalid_policy: str = "retry-once"
    min_choice_mass: float = DEFAULT_MIN_CHOICE_MASS
    backend: Mapping[str, Any] = field(default_factory=dict)
    skip_missing: bool = False
    redact: bool = False
    batch_read: Path | None = None
    batch_write: Path | BatchRequests | None = None
    ray: str | None = None
    ray_workers: int | None = None
    window: int = WINDOW

    def check(self) -> RunOptions:
        """Each option checked, by its name, before any file is read or model called."""
        check_mode(self.mode)  # the rules every judge's declaration is checked by (judges/judge.py)
        arguments.integer("seed", self.seed)
        arguments.flag("allow_fallback", self.allow_fallback)
        check_invalid_policy(self.invalid_policy)
        check_min_choice_mass(self.min_choice_mass)
        if not isinstance(self.backend, Mapping):
            raise ArgumentError("options", "a dict of backend options", self.backend)
        arguments.flag("skip_missing", self.skip_missing)
        arguments.flag("redact", self.redact)
        arguments.bounded("window", self.window)
        if self.ray is not None:
            arguments.text("ray", self.ray)
            if self.batch_read is not None or self.batch_write is not None:
                raise ArgumentError("ray", "no Ray cluster when Batch API files (batch_read, batch_write) answer the "
                                           "calls", self.ray)
        if self.ray_workers is not None:
            arguments.bounded("ray_workers", self.ray_workers)
        return self

    def spec_fields(self) -> dict[str, Any]:
        """The judge declaration's fields these options give every judge (besides mode)."""
        return {"seed": self.seed, "allow_fallback": self.allow_fallback, "invalid_policy": self.invalid_policy,
                "min_choice_mass": self.min_choice_mass}

    def spec(self, model: str, prompt: str = "umbrela") -> JudgeSpec:
        """One judge of `model` with `prompt`, declared by these options."""
        return JudgeSpec(model=model, prompt=prompt, mode=self.mode, options=command_options(model, self.backend),
                         **self.spec_fields())


@dataclass
class JudgedFiles:
    """What a run that wrote its outputs produced: what the CLI's summary, its `--json` and its
    exit status are made of, and what `jb.judge(..., out=...)` returns."""

    out: Path
    details: Path
    judged: int  # judgments written to `out`
    run: Any  # a JudgeRun or StreamTotals: each judge's stats, the skipped pairs
    flagged: dict[Pair, list]  # pairs whose passage may hold a prompt injection
    batch_written: dict[Path, int] | None = None  # Batch API requests written (None: no batch_write)
    blend: dict[str, Any] | None = None  # a panel's: how it blends (written into every details line)
    unjudged: dict[str, int] = field(default_factory=dict)  # a panel's pairs left without a label, by reason
    summary_lines: list[str] = field(default_factory=list)  # a panel's blend (and tie-breaker) summary
    call_stats: list = field(default_factory=list)  # every judge's stats, a tie-breaker's too: exit status 3

    def summary(self):
        """Per judge: pairs, judged, invalid outputs, calls made, cache hits, seconds ..."""
        import pandas as pd

        from ..judges import summary_rows

        return pd.DataFrame(summary_rows(self.run))


@contextmanager
def judges_built(specs: list[JudgeSpec], options: RunOptions, one_judge: bool = False,
                 on_ray_start: Callable[[str, Any], None] | None = None) -> Iterator[Callable[[JudgeSpec], Any]]:
    """The function that builds each judge of the run: `build_judge`, or, with `options.ray`, one
    whose judges' calls run on that Ray cluster (joined here, left when the block ends).
    `one_judge`: the run's only judge, which must then be an LLM judge to run on Ray."""
    if options.ray is None:
        yield build_judge
        return
    from ..judges.ray_judges import done, start  # Ray is imported only here

    made = None
    try:
        made = start(specs, options.ray, options.ray_workers,
                     options.batch_read is not None or options.batch_write is not None, on_ray_start,
                     scorers_on_driver=not one_judge)
        yield made
    finally:
        if made is not None:
            made.close()
        done()


def _store(store: CallStore | str | Path | None, redact: bool) -> ContextManager[CallStore | None]:
    """The run's store: one opened from a path (closed after the run), or the caller's own."""
    if isinstance(store, (str, Path)):
        return CallStore(store, redact_passages=redact)
    if redact and store is not None and not store.redact_passages:
        raise ArgumentError("redact", "a store opened from a path, or a CallStore made with redact_passages=True",
                            store)
    return nullcontext(store)


def _written(queue: BatchRequests | None) -> dict[Path, int] | None:
    """The Batch API requests files written: one per model, all of them or none (a full disk on
    the last leaves none)."""
    if queue is None:
        return None
    with outputs_together():
        return queue.write()


def panel_tiebreaker(panel: Panel, options: RunOptions) -> tuple[JudgeSpec, int | None, float | None] | None:
    """A panel file's [tiebreaker], as a judge declared by the run's options; None without one."""
    if not str(panel.source).endswith(".toml"):
        return None
    return load_tiebreaker(panel.source, options.mode, options.backend, seed=options.seed,
                           min_choice_mass=options.min_choice_mass)


def judge_to_files(judges: JudgeSpec | Panel, pairs: Iterable[Pair], queries: Mapping[str, str],
                   passages: Mapping[str, str], out: str | Path, details: str | Path | None = None,
                   store: CallStore | str | Path | None = None, options: RunOptions = RunOptions(),
                   progress: ContextManager[Reporter] | None = None,
                   on_ray_start: Callable[[str, Any], None] | None = None) -> JudgedFiles:
    """Judge `pairs` and write the qrels to `out` and every pair's details to `details` (default
    OUT.details.jsonl), as `judgeblender judge` does: with one judge, or with a panel blended
    (its [tiebreaker] called on the pairs it must settle). `pairs` is iterated twice (checked,
    then judged), so give a list or a re-readable source such as pairs.pairs.PairsFile; each
    window's outputs are written as it completes, and the files replace `out` and `details`
    only when the run ends. `progress`: a reporter to enter for the run (the progress bar)."""
    options.check()
    out = Path(out)
    details_path = Path(details) if details is not None else paths.details_path(out)
    progress = progress if progress is not None else nullcontext(None)
    if isinstance(judges, Panel):
        return _panel_to_files(judges, pairs, queries, passages, out, details, details_path, store, options,
                               progress, on_ray_start)
    return _judge_to_files(judges, pairs, queries, passages, out, details_path, store, options, progress,
                           on_ray_start)


def _judge_to_files(spec: JudgeSpec, pairs: Iterable[Pair], queries: Mapping[str, str], passages: Mapping[str, str],
                    out: Path, details: Path, store: CallStore | str | Path | None, options: RunOptions,
                    progress: ContextManager[Reporter], on_ray_start) -> JudgedFiles:
    """One judge, its pairs streamed in windows (judges/engine.py `judge_stream`), each window's
    qrels and details written as it completes (judges/outputs.py `RunFiles`)."""
    flagged: dict[Pair, list] = {}
    with judges_built([spec], options, one_judge=True, on_ray_start=on_ray_start) as make_judge:
        judge = make_judge(spec)
        try:
            queue = use_batch_files([judge], options.batch_read, options.batch_write)
            scan = InjectionScan([judge])  # what the judge is sent, each distinct passage once a run

            def write(run: JudgeRun, texts: Mapping[str, str]) -> None:
                found = scan.flag_run(run, queries, texts)  # reported only: labels stay as judged
                flagged.update(found)
                files.write(run, final_labels(run),
                            extra={p: {"injection": [str(f) for f in f_]} for p, f_ in found.items()})

            with _store(store, options.redact) as opened, progress as reporter, RunFiles(out, details) as files:
                totals = judge_stream([judge], pairs, queries, passages, write, opened, reporter,
                                      options.skip_missing, options.window)
                files.finish(totals.skipped)
        finally:
            getattr(judge, "close", lambda: None)()
    return JudgedFiles(out, details, files.judged, totals, flagged, _written(queue),
                       call_stats=list(totals.stats.values()))


def _panel_to_files(panel: Panel, pairs: Iterable[Pair], queries: Mapping[str, str], passages: Mapping[str, str],
                    out: Path, details: str | Path | None, details_path: Path, store: CallStore | str | Path | None,
                    options: RunOptions, progress: ContextManager[Reporter], on_ray_start) -> JudgedFiles:
    """A panel: streamed in windows when its blend is a per-pair rule and it has no tie-breaker
    (`stream_panel`); otherwise every pair judged at once (`run_panel`), then blended."""
    tiebreaker = panel_tiebreaker(panel, options)
    specs = [*panel.judges, *([tiebreaker[0]] if tiebreaker else [])]
    if isinstance(options.batch_write, BatchRequests):  # before the store is made (run_panel checks again)
        options.batch_write.check(served_models(spec.model for spec in panel.judges))
    streamed = result = None
    with judges_built(specs, options, on_ray_start=on_ray_start) as make_judge, \
            _store(store, options.redact) as opened, progress as reporter:
        if streams(panel, tiebreaker):
            with RunFiles(out, details_path) as files:
                streamed = stream_panel(panel, pairs, queries, passages, files.write, opened, reporter,
                                        options.skip_missing, options.batch_read, options.batch_write, make_judge,
                                        options.window)
                files.finish(streamed.totals.skipped)
        else:
            listed = list(pairs)
            corpus = window_texts(passages, (p.docid for p in listed))
            result = run_panel(panel, listed, queries, corpus, opened, reporter, options.skip_missing,
                               options.batch_read, options.batch_write, tiebreaker, make_judge)
    if streamed is not None:
        return JudgedFiles(out, details_path, files.judged, streamed.totals, streamed.flagged,
                           _written(streamed.batch_queue), streamed.blend_info, streamed.unjudged(),
                           streamed.summary_lines(), streamed.call_stats())
    n, details_path = write_panel_run(result, out, Path(details) if details is not None else None)
    return JudgedFiles(out, details_path, n, result.run, result.flagged, _written(result.batch_queue),
                       result.blend_info, dict(result.result.unjudged()), result.summary_lines(), result.call_stats())


@dataclass
class JudgedPairs:
    """Every judge's judgment of every pair, in memory (`jb.judge` without `out`)."""

    run: JudgeRun
    flagged: dict[Pair, list]
    batch_written: dict[Path, int] | None = None


def judge_in_memory(specs: list[JudgeSpec], pairs: list[Pair], queries: Mapping[str, str],
                    passages: Mapping[str, str], store: CallStore | str | Path | None = None,
                    options: RunOptions = RunOptions(), progress: ContextManager[Reporter] | None = None,
                    on_ray_start: Callable[[str, Any], None] | None = None) -> JudgedPairs:
    """Every judge over every pair, kept in memory (the notebook's `jb.judge`): built locally or
    on Ray, the calls answered from or queued into Batch API files, possible prompt injections
    flagged. The options are the CLI's, through the same code as `judge_to_files`."""
    options.check()
    progress = progress if progress is not None else nullcontext(None)
    with judges_built(specs, options, on_ray_start=on_ray_start) as make_judge:
        with ExitStack() as built:
            judges = []
            for spec in specs:
                judge = make_judge(spec)
                built.callback(getattr(judge, "close", lambda: None))
                judges.append(judge)
            queue = use_batch_files(judges, options.batch_read, options.batch_write)
            scan = InjectionScan(judges)  # the longest text any judge is sent, each distinct passage once
            with _store(store, options.redact) as opened, progress as reporter:
                run = judge_pairs(judges, pairs, queries, passages, opened, reporter, skip_missing=options.skip_missing)
    return JudgedPairs(run, scan.flag_run(run, queries, passages), _written(queue))
