"""judgeblender: relevance judgments with juries of LLM judges, and how far to trust them.

The flow reads off the sub-packages: pairs -> judges (backends, prompts) -> parse -> store
-> blend -> evaluate.
"""

from .backends.base import CallRequest, CallResult, Message
from .backends.registry import create_backend, register
from .judges import Judge, JudgeRun, JudgeSpec, judge_pairs
from .pairs import Pair, read_corpus, read_pairs, read_qrels, read_queries, read_run
from .prompts import get_template, list_templates
from .store import CallStore

__version__ = "0.1.0"

__all__ = [
    "CallRequest", "CallResult", "CallStore", "Judge", "JudgeRun", "JudgeSpec", "Message", "Pair",
    "create_backend", "get_template", "judge_pairs", "list_templates", "read_corpus", "read_pairs",
    "read_qrels", "read_queries", "read_run", "register",
]
