"""Stage 4: the SQLite store of every LLM call and every judgment."""

from .calls import CallStore, export_jsonl
from .merge import MergeConflict, MergeReport, merge_stores

__all__ = ["CallStore", "MergeConflict", "MergeReport", "export_jsonl", "merge_stores"]
