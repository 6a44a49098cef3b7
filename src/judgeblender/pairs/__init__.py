"""Stage 1: the inputs. Queries, passages, qrels, runs, and the pairs to judge."""

from .corpus import read_corpus
from .pairs import Pair, read_pairs
from .pool import Pooling, pool_pairs, write_pairs
from .qrels import Qrels, read_qrels, write_qrels
from .queries import read_queries
from .runs import Run, read_run, read_runs_dir

__all__ = [
    "Pair", "Pooling", "Qrels", "Run", "pool_pairs", "read_corpus", "read_pairs", "read_qrels", "read_queries",
    "read_run", "read_runs_dir", "write_pairs", "write_qrels",
]
