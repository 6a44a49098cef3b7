"""Bias by system family: do LLM labels favour some kinds of runs over others?

A high tau can hide a systematic tilt, e.g. LLM labels that flatter neural rerankers
(which may share the LLM's notion of relevance) and penalise lexical baselines. Grouping
runs by family and averaging their score and rank changes makes such a tilt visible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..pairs.textfile import iter_lines
from .leaderboard import CorrelationReport
from .rank_correlation import average_ranks
from .svgplot import Point, Scatter

UNGROUPED = "(ungrouped)"


def read_groups(path: str | Path) -> dict[str, str]:
    """Read `run<TAB>group` lines; blank lines and lines starting with # are skipped."""
    groups: dict[str, str] = {}
    for lineno, line in iter_lines(path):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cols = [c.strip() for c in line.split("\t")]
        if len(cols) != 2 or not cols[0] or not cols[1]:
            raise InputError(path, lineno, "'run<TAB>group'", line)
        run, group = cols
        if groups.get(run, group) != group:
            raise InputError(path, lineno, f"one group per run ({run} was put in {groups[run]!r} before)", group)
        groups[run] = group
    if not groups:
        raise InputError(path, None, "at least one 'run<TAB>group' line", "an empty file")
    return groups


def leaderboard_ranks(scores: Sequence[float]) -> np.ndarray:
    """Rank 1 = best score; tied runs share their average rank."""
    return average_ranks(-np.asarray(scores, dtype=float)[None, :])[0]


@dataclass
class GroupBias:
    group: str
    n_runs: int
    mean_score_diff: float  # mean over the group's runs of (score under LLM - score under gold)
    mean_rank_shift: float  # mean of (rank under LLM - rank under gold): > 0 = LLM ranks them lower
    runs: list[str]


def group_bias(runs: Sequence[str], gold_scores: Sequence[float], pred_scores: Sequence[float],
               groups: Mapping[str, str]) -> list[GroupBias]:
    """Per group, the mean score difference and mean rank shift, groups in sorted order.

    Runs the mapping does not name go to the group "(ungrouped)".
    """
    gold = np.asarray(gold_scores, dtype=float)
    pred = np.asarray(pred_scores, dtype=float)
    diff = pred - gold
    shift = leaderboard_ranks(pred) - leaderboard_ranks(gold)
    members: dict[str, list[int]] = {}
    for i, run in enumerate(runs):
        members.setdefault(groups.get(run, UNGROUPED), []).append(i)
    return [
        GroupBias(
            group=g, n_runs=len(idx), mean_score_diff=float(diff[idx].mean()),
            mean_rank_shift=float(shift[idx].mean()), runs=[runs[i] for i in idx],
        )
        for g, idx in sorted(members.items())
    ]


def report_bias(report: CorrelationReport, groups: Mapping[str, str]) -> list[GroupBias]:
    return group_bias(report.runs, report.gold_scores, report.pred_scores, groups)


def leaderboard_scatter(report: CorrelationReport, groups: Mapping[str, str] | None = None,
                        gold_name: str = "human labels") -> Scatter:
    """Each run at (score under gold, score under the prediction), coloured by group."""
    points = [
        Point(x=g, y=p, group=(groups.get(run, UNGROUPED) if groups else ""), label=run)
        for run, g, p in zip(report.runs, report.gold_scores, report.pred_scores)
    ]
    return Scatter(
        points=points,
        title=f"{report.name}: {report.measure}  (tau {report.kendall_tau:.3f})",
        x_label=f"{report.measure}, {gold_name}",
        y_label=f"{report.measure}, {report.name}",
    )
