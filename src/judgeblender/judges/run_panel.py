"""Judging with every member of a panel, then blending: the library's side of `judge --panel`.

A panel (a preset or a TOML file, see judges/panel.py) names several judges and how their
labels are blended. `run_panel` judges the pairs with each member through one store, blends,
and flags possible prompt injections (reported only: labels stay as judged); `write_panel_run`
writes the blended qrels and every member's label beside them. Printing is the caller's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any

from .. import paths
from ..backends.batch import BatchRequests, use_batch_files
from ..blend import BlendResult
from ..pairs import Pair
from ..store import CallStore
from .engine import JudgeRun, Reporter, judge_pairs
from .factory import build_judge
from .injection import flag_pairs
from .outputs import write_details, write_qrels_file
from .judge import JudgeSpec
from .panel import Panel, blend_run
from ..blend.tiebreak import TiebreakResult
from .tiebreak_run import run_tiebreaker


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
    # the tie-breaker's outcome where the panel has one (judges/tiebreak_run.py), else None
    tiebreak: TiebreakResult | None = None
    # the tie-breaker's own calls (its stats count towards the failed-calls exit status)
    tiebreak_run: JudgeRun | None = None
    blend_info: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.blend_info = {"panel": self.panel.name, "method": self.panel.method, "tie": self.panel.tie,
                           "seed": self.panel.seed}
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


def run_panel(panel: Panel, pairs: list[Pair], queries: dict[str, str], corpus: dict[str, str],
              store: CallStore | None = None, reporter: Reporter | None = None, skip_missing: bool = False,
              batch_read: Path | None = None, batch_write: Path | None = None,
              tiebreaker: tuple[JudgeSpec, int | None, float | None] | None = None,
              make_judge: Callable[[JudgeSpec], Any] = build_judge) -> PanelRun:
    """Judge `pairs` with every member of `panel` (calls cached in `store`), then blend; with a
    `tiebreaker` (spec, spread, margin), that judge is called on the pairs where the members tie
    or spread by `spread` or more (or the blend's margin is at most `margin`), and only those (judges/tiebreak_run.py). `make_judge` builds
    each judge from its spec (judges/ray_executor.py's `RayJudges` runs their calls on Ray)."""
    judges = [make_judge(spec) for spec in panel.judges]
    batch_queue = use_batch_files(judges, batch_read, batch_write)
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
        try:
            tiebreak, tiebreak_run = run_tiebreaker(result, judge, queries, corpus, store, spread, reporter, margin)
        finally:
            getattr(judge, "close", lambda: None)()
        labels = dict(zip(result.table.pairs, tiebreak.labels))
        for pair, outcome in zip(result.table.pairs, tiebreak.outcomes):
            extra[pair]["tiebreaker"] = outcome
    flagged = flag_pairs(run.pairs, queries, corpus)  # reported only: labels stay as judged
    for p, found in flagged.items():
        extra[p]["injection"] = [str(f) for f in found]
    return PanelRun(panel, run, result, labels, extra, flagged, batch_queue, tiebreak, tiebreak_run)


def write_panel_run(panel_run: PanelRun, out: Path, details: Path | None = None) -> tuple[int, Path]:
    """Write the blended qrels to `out` and every member's label to `details` (default
    OUT.details.jsonl); returns how many judgments were written and the details path."""
    n = write_qrels_file(out, panel_run.run, panel_run.labels)
    details_path = details or paths.details_path(out)
    write_details(details_path, panel_run.run, panel_run.labels, blend=panel_run.blend_info, extra=panel_run.extra)
    return n, details_path
