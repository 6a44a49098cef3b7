"""The tie-breaker when judging: the named judge is called on the consulted pairs only.

`run_tiebreaker` takes a panel's blend (from `blend_run`), finds the pairs the tie-breaker
must settle (blend/tiebreak.py: panel ties, or member spread >= `spread`, or blend margin
<= `margin`), judges those
pairs and no others with the tie-breaker judge (through the call store, so re-runs reuse
its answers), and returns the final labels. An invalid tie-breaker output leaves the
panel's own decision (its tie rule) in place and is counted as such.
"""

from __future__ import annotations

from ..blend import BlendResult
from ..blend.tiebreak import DEFAULT_SPREAD, TiebreakResult, apply_tiebreaker, to_consult
from ..judges.engine import JudgeRun, judge_pairs


def run_tiebreaker(result: BlendResult, judge, queries: dict[str, str], corpus: dict[str, str], store=None,
                   spread: int | None = DEFAULT_SPREAD, reporter=None,
                   margin: float | None = None) -> tuple[TiebreakResult, JudgeRun]:
    """Judge only the consulted pairs with `judge`; see the module docstring."""
    asked = to_consult(result, spread, margin)  # (qid, docid) tuples: judge_pairs takes them as pairs
    run = judge_pairs([judge], asked, queries, corpus, store, reporter, skip_missing=True)
    judged = run.judgments.get(judge.id, {})
    answers = {p: j.label for p, j in judged.items()}  # label None: invalid output (Pair == (qid, docid))
    return apply_tiebreaker(result, answers, judge.id, spread, margin), run
