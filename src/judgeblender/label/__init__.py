"""Human labels: a local labeling page with a crash-safe journal, and merging with LLM labels."""

from .journal import Journal, JournalEntry
from .merge import Merged, merge_labels
from .session import LabelSession

__all__ = ["Journal", "JournalEntry", "LabelSession", "Merged", "merge_labels"]
