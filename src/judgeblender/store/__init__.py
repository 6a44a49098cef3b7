"""Stage 4: the SQLite store of every LLM call and every judgment."""

from .calls import CallStore, call_key, export_jsonl, sha256_file

__all__ = ["CallStore", "call_key", "export_jsonl", "sha256_file"]
