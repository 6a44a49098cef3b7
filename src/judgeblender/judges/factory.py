"""Build the right kind of judge for a spec: an LLM prompt judge, or a scorer such as `embed:`."""

from __future__ import annotations

from importlib import import_module

from .engine import PairJudge
from .judge import Judge, JudgeSpec

# Model prefixes served by judges that are not LLM prompts: prefix -> "module:class".
PAIR_JUDGES: dict[str, str] = {
    "embed": "judgeblender.judges.embedding:EmbeddingJudge",
    "cross": "judgeblender.judges.embedding:CrossEncoderJudge",
}


def is_scorer(model: str) -> bool:
    """Whether a model string names a scorer judge (no prompt, no scoring mode)."""
    return model.partition(":")[0] in PAIR_JUDGES


def build_judge(spec: JudgeSpec) -> Judge | PairJudge:
    prefix = spec.model.partition(":")[0]
    if prefix in PAIR_JUDGES:
        module, cls = PAIR_JUDGES[prefix].split(":")
        return getattr(import_module(module), cls)(spec)
    return Judge(spec)
