"""Stage 4: the SQLite store of every LLM call and every judgment."""

from .calls import CallStore, export_jsonl

__all__ = ["CallStore", "export_jsonl"]
