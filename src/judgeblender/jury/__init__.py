"""Juries beyond relevance: rubric judges with JSON verdicts, pooled per item."""

from .jury import ItemResult, JudgeVerdict, Jury, JuryRun
from .combine import POOLING_METHODS, Pooled, pool

__all__ = ["ItemResult", "JudgeVerdict", "Jury", "JuryRun", "POOLING_METHODS", "Pooled", "pool"]
