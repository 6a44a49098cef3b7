"""Stage 2: judges (model + prompt + scoring mode) and the engine that runs them over pairs."""

from .engine import JudgeRun, JudgeStats, judge_pairs, judge_pairs_async, resolve_pairs, summary_rows
from .factory import build_judge
from .judge import Judge, JudgeSpec
from .judgment import Judgment, StepOutcome

__all__ = [
    "Judge", "build_judge", "JudgeRun", "JudgeSpec", "JudgeStats", "Judgment", "StepOutcome", "judge_pairs",
    "judge_pairs_async", "resolve_pairs", "summary_rows",
]
