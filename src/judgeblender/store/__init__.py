"""Stage 4: the SQLite store of every LLM call and every judgment."""

from .calls import CallStore, StoreError, check_store, export_jsonl
from .merge import MergeConflict, MergeReport, merge_stores

__all__ = ["CallStore", "MergeConflict", "MergeReport", "StoreError", "check_store", "export_jsonl", "merge_stores"]
