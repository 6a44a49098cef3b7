"""Retrieval-method comparison under one qrels, with Judged@10 beside every score.

As in Vespa's LLM-as-a-judge workflow: before trusting a method's nDCG@10, look at its
Judged@10, the share of its top 10 that has any label. A method whose top 10 is full of
unjudged documents is scored as if they were irrelevant, which is a hole, not a finding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import JudgeblenderError
from ..evaluate.leaderboard import RunSet, evaluate_runs, parse_measures
from ..pairs.qrels import Qrels
from ..pairs.runs import Run

# R@10 is ir_measures' recall with its default threshold: a label >= 1 counts as relevant.
METHOD_MEASURES = ("nDCG@10", "Judged@10", "R@10")
JUDGED = "Judged@10"


@dataclass
class MethodTable:
    measures: list[str]
    runs: list[str]  # best first by the first measure
    scores: dict[str, dict[str, float]]  # run -> measure -> mean over the qrels' queries
    n_queries: int

    def holes(self, min_judged: float) -> list[str]:
        """Runs whose Judged@10 is below `min_judged`: their scores rest on unlabelled documents."""
        if JUDGED not in self.measures:
            return []
        return [r for r in self.runs if self.scores[r][JUDGED] < min_judged]


def method_table(runs: Sequence[Run], qrels: Qrels, measures: Sequence[str] = METHOD_MEASURES) -> MethodTable:
    """Each run's mean of each measure over the queries the qrels label, best first."""
    queries = sorted(q for q, docs in qrels.items() if docs)
    if not queries:
        raise JudgeblenderError("the qrels label no query: nothing to compare on")
    parsed = parse_measures(measures)
    names = [str(m) for m in parsed]
    per_query = evaluate_runs(RunSet(runs, queries), qrels, parsed)
    scores = {run.name: {n: float(per_query[n][i].mean()) for n in names} for i, run in enumerate(runs)}
    order = sorted(scores, key=lambda r: (-scores[r][names[0]], r))
    return MethodTable(measures=names, runs=order, scores=scores, n_queries=len(queries))
