"""Build the right kind of judge for a spec: an LLM prompt judge, or a scorer such as `embed:`.

Which is which the backend registry says (backends/registry.py): scorers register there as LLM
backends do, with their options declared once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..backends.registry import BUILTIN_SCORERS, is_scorer, provider, split_model_string
from .judge import Judge, JudgeSpec

if TYPE_CHECKING:  # the engine builds judges with this module: importing it back would be a circle
    from .engine import PairJudge

# The built-in scorer prefixes (embed:, cross:); plug-ins may add more: ask is_scorer(model).
PAIR_JUDGES = BUILTIN_SCORERS

__all__ = ["PAIR_JUDGES", "build_judge", "is_scorer"]


def build_judge(spec: JudgeSpec) -> "Judge | PairJudge":
    if is_scorer(spec.model):
        return provider(split_model_string(spec.model)[0]).judge(spec)
    return Judge(spec)
