"""Judging with every member of a panel, then blending: the library's side of `judge --panel`.

A panel (a preset or a TOML file, see panels/panel.py) names several judges and how their
labels are blended. `run_panel` judges the pairs with each member through one store, blends,
and flags possible prompt injections (reported only: labels stay as judged); a panel with a
tie-breaker then calls it on the pairs it must settle (`run_tiebreaker`); `write_panel_run`
writes the blended qrels and every member's label beside them. Printing is the caller's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .. import paths
from ..backends.batch import BatchRequests, use_batch_files
from ..blend import BlendResult
from ..blend.blender import BlendTally
from ..blend.registry import get_method
from ..pairs import Pair
from ..store import CallStore
from ..judges.engine import JudgeRun, Reporter, StreamTotals, judge_pairs, judge_stream
from ..judges.factory import build_judge
from ..judges.injection import InjectionScan
from ..fileio import outputs_together
from ..judges.outputs import write_details, write_qrels_file
from ..judges.judge import JudgeSpec
from .panel import Panel, ballots_from_run, blend_run
from ..blend.tiebreak import DEFAULT_SPREAD, TiebreakResult, apply_tiebreaker, to_consult


@dataclass
class PanelRun:
    """What a panel produced: every member's judgments, the blend, and the blended label per pair."""

    panel: Panel
    run: JudgeRun
    result: BlendResult
    labels: dict[Pair, int]
    # per pair: why the blend chose its label, the tied labels, and any injection flags
    extra: dict[Pair, dict[str, Any]]
    flagged: dict[Pair, list]
    # the Batch API requests queued with batch_write, still to be written (None without it)
    batch_queue: BatchRequests | None = None
    # the tie-breaker's outcome where the panel has one (`run_tiebreaker`), else None
    tiebreak: TiebreakResult | None = None
    # the tie-breaker's own calls (its stats count towards the failed-calls exit status)
    tiebreak_run: JudgeRun | None = None
    blend_info: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.blend_info = blend_info(self.panel)
        if self.tiebreak is not None:
            self.blend_info["tiebreaker"] = {"judge": self.tiebreak.tiebreaker, **self.tiebreak.measure(),
                                             **self.tiebreak.counts(), "failed_calls": self.tiebreak_failed_calls()}

    def tiebreak_failed_calls(self) -> int:
        return sum(s.failed_calls for s in self.tiebreak_run.stats.values()) if self.tiebreak_run is not None else 0

    def call_stats(self) -> list:
        """Every judge's call stats, the tie-breaker's included: what the exit status 3 rule counts."""
        return [*self.run.stats.values(), *(self.tiebreak_run.stats.values() if self.tiebreak_run is not None else [])]

    def summary_lines(self) -> list[str]:
        lines = [*self.result.summary_lines(), *(self.tiebreak.summary_lines() if self.tiebreak is not None else [])]
        if self.tiebreak_failed_calls():
            lines.append(f"  of those, tie-breaker calls failed after all retries: {self.tiebreak_failed_calls()} "
                         "(counted as failed calls: exit status 3)")
        return lines


def blend_info(panel: Panel) -> dict[str, Any]:
    """How the panel blends: written into every details line."""
    return {"panel": panel.name, "method": panel.method, "tie": panel.tie, "seed": panel.seed}


def run_panel(panel: Panel, pairs: list[Pair], queries: dict[str, str], corpus: dict[str, str],
              store: CallStore | None = None, reporter: Reporter | None = None, skip_missing: bool = False,
              batch_read: Path | None = None, batch_write: Path | None = None,
              tiebreaker: tuple[JudgeSpec, int | None, float | None] | None = None,
              make_judge: Callable[[JudgeSpec], Any] = build_judge) -> PanelRun:
    """Judge `pairs` with every member of `panel` (calls cached in `store`), then blend; with a
    `tiebreaker` (spec, spread, margin), that judge is called on the pairs where the members tie
    or spread by `spread` or more (or the blend's margin is at most `margin`), and only those (`run_tiebreaker`). `make_judge` builds
    each judge from its spec (judges/ray_judges.py's `RayJudges` runs their calls on Ray)."""
    judges = [make_judge(spec) for spec in panel.judges]
    batch_queue = use_batch_files(judges, batch_read, batch_write)
    scan = InjectionScan(judges)  # the longest text any member (or the tie-breaker) is sent
    try:
        run = judge_pairs(judges, pairs, queries, corpus, store, reporter, skip_missing)
    finally:
        for judge in judges:
            getattr(judge, "close", lambda: None)()
    result = blend_run(run, panel)
    labels = result.by_pair()
    extra = {pair: {"blend_reason": dec.reason, "tied": list(dec.tied) if dec.tied else None}
             for pair, dec in zip(result.table.pairs, result.decisions)}
    tiebreak = tiebreak_run = None
    if tiebreaker is not None:
        spec, spread, margin = tiebreaker
        judge = make_judge(spec)
        scan.add(judge)
        try:
            tiebreak, tiebreak_run = run_tiebreaker(result, judge, queries, corpus, store, spread, reporter, margin)
        finally:
            getattr(judge, "close", lambda: None)()
        labels = dict(zip(result.table.pairs, tiebreak.labels))
        for pair, outcome in zip(result.table.pairs, tiebreak.outcomes):
            extra[pair]["tiebreaker"] = outcome
    judgments = {**run.judgments, **(tiebreak_run.judgments if tiebreak_run is not None else {})}
    flagged = scan.flag(run.pairs, queries, corpus, judgments)  # reported only: labels stay as judged
    for p, found in flagged.items():
        extra[p]["injection"] = [str(f) for f in found]
    return PanelRun(panel, run, result, labels, extra, flagged, batch_queue, tiebreak, tiebreak_run)


def run_tiebreaker(result: BlendResult, judge, queries: dict[str, str], corpus: dict[str, str], store=None,
                   spread: int | None = DEFAULT_SPREAD, reporter=None,
                   margin: float | None = None) -> tuple[TiebreakResult, JudgeRun]:
    """The tie-breaker when judging: `judge` is called on the consulted pairs only (blend/tiebreak.py
    says which: panel ties, member spread >= `spread`, or blend margin <= `margin`), through the
    call store, so re-runs reuse its answers. An invalid answer leaves the panel's own decision
    (its tie rule) in place and is counted as such."""
    asked = to_consult(result, spread, margin)  # (qid, docid) tuples: judge_pairs takes them as pairs
    run = judge_pairs([judge], asked, queries, corpus, store, reporter, skip_missing=True)
    judged = run.judgments.get(judge.id, {})
    answers = {p: j.label for p, j in judged.items()}  # label None: invalid output (Pair == (qid, docid))
    return apply_tiebreaker(result, answers, judge.id, spread, margin), run


def write_panel_run(panel_run: PanelRun, out: Path, details: Path | None = None) -> tuple[int, Path]:
    """Write the blended qrels to `out` and every member's label to `details` (default
    OUT.details.jsonl); returns how many judgments were written and the details path."""
    details_path = details or paths.details_path(out)
    with outputs_together():  # both, or neither (a full disk on the second)
        n = write_qrels_file(out, panel_run.run, panel_run.labels)
        write_details(details_path, panel_run.run, panel_run.labels, blend=panel_run.blend_info, extra=panel_run.extra)
    return n, details_path


# ------------------------------------------------------------------------------------ streamed
def streams(panel: Panel, tiebreaker: object | None) -> bool:
    """Whether a panel's run can be streamed in windows: its blend is a per-pair rule (a model
    fitted across pairs, Dawid-Skene or GLAD, needs every pair at once) and it has no
    tie-breaker (every details line carries the tie-breaker's counts over the whole run)."""
    return tiebreaker is None and get_method(panel.method).pair_rule is not None


@dataclass
class PanelTotals:
    """What a streamed panel run reports once its windows are written."""

    panel: Panel
    totals: StreamTotals
    tally: BlendTally | None
    flagged: dict[Pair, list]
    batch_queue: BatchRequests | None
    blend_info: dict[str, Any]

    def call_stats(self) -> list:
        return list(self.totals.stats.values())

    def summary_lines(self) -> list[str]:
        return self.tally.lines() if self.tally is not None else []

    def unjudged(self) -> dict[str, int]:
        return dict(self.tally.unjudged) if self.tally is not None else {}


def stream_panel(panel: Panel, pairs: Iterable[Pair], queries: Mapping[str, str], corpus: Mapping[str, str],
                 on_window: Callable[[JudgeRun, dict[Pair, int | None], dict[str, Any], dict[Pair, dict]], None],
                 store: CallStore | None = None, reporter: Reporter | None = None, skip_missing: bool = False,
                 batch_read: Path | None = None, batch_write: Path | None = None,
                 make_judge: Callable[[JudgeSpec], Any] = build_judge, window: int | None = None) -> PanelTotals:
    """`run_panel` for a panel that `streams`: every member judges a window of pairs, the window
    is blended (a random tie rule is seeded per pair, so a window gives the labels the whole
    table does) and flagged, and `on_window(run, labels, blend_info, extra)` writes
    it; nothing of a window is kept after it. Same labels and details as `run_panel`."""
    judges = [make_judge(spec) for spec in panel.judges]
    batch_queue = use_batch_files(judges, batch_read, batch_write)
    blender = panel.blender()
    info = blend_info(panel)
    scan = InjectionScan(judges)  # the longest text any member is sent, each distinct passage once a run
    flagged: dict[Pair, list] = {}
    tally: BlendTally | None = None

    def blend_window(run: JudgeRun, texts: dict[str, str]) -> None:
        nonlocal tally
        labels: dict[Pair, int | None] = {}
        extra: dict[Pair, dict[str, Any]] = {}
        if run.pairs:
            result = blender.blend(ballots_from_run(run))
            labels = result.by_pair()
            extra = {pair: {"blend_reason": dec.reason, "tied": list(dec.tied) if dec.tied else None}
                     for pair, dec in zip(result.table.pairs, result.decisions)}
            if tally is None:
                tally = BlendTally.of(result)
            else:
                tally.add(result)
        found = scan.flag_run(run, queries, texts)  # reported only: labels stay as judged
        for p, f in found.items():
            extra[p]["injection"] = [str(x) for x in f]
        flagged.update(found)
        on_window(run, labels, info, extra)

    try:
        totals = judge_stream(judges, pairs, queries, corpus, blend_window, store, reporter, skip_missing, window)
    finally:
        for judge in judges:
            getattr(judge, "close", lambda: None)()
    return PanelTotals(panel, totals, tally, flagged, batch_queue, info)
