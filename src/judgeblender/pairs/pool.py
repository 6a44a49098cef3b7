"""Depth-k pooling: which (query, document) pairs a set of runs asks to have judged.

The pool of a query is the union of every run's top k documents for it, in the order every
ranking in judgeblender uses (pairs/runs.py, trec_eval_ranking: trec_eval's rule, scores
compared as float32), so the pool's top k is the one Judged@k and the measures score. Pairs
already judged can be left out, so that only the holes are judged; documents whose text
duplicates another pooled document's can be dropped; and a seeded sample stratified by query
and rank band gives a small, balanced human seed set. `pool_pairs` is the whole recipe, which
the `pool` command and the Python API (workflow.py) both call.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import arguments
from ..errors import ArgumentError, InputError, JudgeblenderError
from ..fileio import atomic_write_text
from .qrels import PAIRS_ONLY, Qrels, read_qrels
from .queries import read_queries
from .runs import Run
from .textfile import iter_lines


@dataclass
class PoolPair:
    qid: str
    docid: str
    best_rank: int  # 1-based: the highest position any run gives the document
    runs: list[str] = field(default_factory=list)  # the runs that have it in their top k


@dataclass
class Duplicate:
    qid: str
    dropped: str
    kept: str


@dataclass
class RunContribution:
    run: str
    top_k: int  # pairs in the run's top k on the pooled queries
    unique: int  # of those, pairs no other run has in its top k
    holes: int  # of those, pairs left to judge (in the final pool)


def pool_runs(runs: Sequence[Run], depth: int, queries: Collection[str] | None = None) -> list[PoolPair]:
    """The union of every run's top `depth`, ordered by query, then best rank, then docid."""
    arguments.bounded("depth", depth)
    by_pair: dict[tuple[str, str], PoolPair] = {}
    for run in runs:
        for qid in run.ranking:
            if queries is not None and qid not in queries:
                continue
            for rank, docid in enumerate(run.top(qid, depth), start=1):
                pair = by_pair.setdefault((qid, docid), PoolPair(qid, docid, rank))
                pair.best_rank = min(pair.best_rank, rank)
                pair.runs.append(run.name)
    return sorted(by_pair.values(), key=lambda p: (qid_key(p.qid), p.best_rank, p.docid))


def qid_key(qid: str) -> tuple:
    # Numeric ids in numeric order (TREC ids are numbers), others after them by text.
    return (0, int(qid), "") if qid.isdigit() else (1, 0, qid)


def normalise_text(text: str) -> str:
    return " ".join(text.lower().split())


def drop_duplicate_texts(pairs: Sequence[PoolPair], corpus: Mapping[str, str], corpus_name: str,
                         judged: Qrels | None = None,
                         skip_missing: bool = False) -> tuple[list[PoolPair], list[Duplicate], list[str]]:
    """Within each query, keep one document per text (equal after case and whitespace folding).

    The kept one is a document already judged if there is one (its label then covers the
    copies), else the best-ranked, then the smallest docid. A pooled document without text is
    an error, or with `skip_missing` stays in the pool unchecked; the third value lists them.
    """
    missing = sorted({p.docid for p in pairs if p.docid not in corpus})
    if missing and not skip_missing:
        raise JudgeblenderError(
            f"{len(missing)} pooled document(s) have no text in {corpus_name} (first: {', '.join(missing[:5])}); "
            "dropping duplicates needs every pooled text (skip_missing=True keeps them unchecked)"
        )
    judged = judged or {}
    groups: dict[tuple[str, str], list[PoolPair]] = {}
    for p in pairs:
        # A document without text is a group of its own: it cannot be shown to be a copy.
        text = normalise_text(corpus[p.docid]) if p.docid in corpus else ("\0missing", p.docid)
        groups.setdefault((p.qid, text), []).append(p)
    keep: set[tuple[str, str]] = set()
    dupes: list[Duplicate] = []
    for (qid, _), members in groups.items():
        members = sorted(members, key=lambda p: (p.docid not in judged.get(qid, {}), p.best_rank, p.docid))
        keep.add((qid, members[0].docid))
        dupes.extend(Duplicate(qid, m.docid, members[0].docid) for m in members[1:])
    dupes.sort(key=lambda d: (qid_key(d.qid), d.dropped))
    return [p for p in pairs if (p.qid, p.docid) in keep], dupes, missing


def exclude_judged(pairs: Sequence[PoolPair], judged: Qrels) -> list[PoolPair]:
    return [p for p in pairs if p.docid not in judged.get(p.qid, {})]


def run_contributions(runs: Sequence[Run], pooled: Sequence[PoolPair], holes: Sequence[PoolPair]) -> list[RunContribution]:
    """Per run: its top-k pairs, those only it brings, and those left to judge."""
    hole_keys = {(p.qid, p.docid) for p in holes}
    out = {r.name: RunContribution(r.name, 0, 0, 0) for r in runs}
    for p in pooled:
        for name in p.runs:
            c = out[name]
            c.top_k += 1
            c.unique += len(p.runs) == 1
            c.holes += (p.qid, p.docid) in hole_keys
    return list(out.values())


# -- stratified sampling -------------------------------------------------------------------

def parse_bands(bands: str, depth: int) -> list[tuple[int, int]]:
    """'1-3,4-10' -> [(1, 3), (4, 10)]; the bands must cover ranks 1..depth without gaps."""
    out = []
    for part in bands.split(","):
        lo_s, sep, hi_s = part.strip().partition("-")
        try:
            lo, hi = int(lo_s), (int(hi_s) if sep else int(lo_s))
        except ValueError:
            raise ArgumentError("bands", "ranges such as 1-3,4-10", described=repr(part)) from None
        out.append((lo, hi))
    expected = 1
    for lo, hi in out:
        if lo != expected or hi < lo:
            raise ArgumentError("bands", "bands that run from rank 1 upwards without gaps or overlaps", bands)
        expected = hi + 1
    if expected <= depth:
        raise ArgumentError("bands", f"bands down to rank depth={depth}", bands,
                            hint=f"these stop at rank {expected - 1}")
    return out


def default_bands(depth: int) -> list[tuple[int, int]]:
    """Top 3, the rest of the top 10, the rest of the top 100, the rest: cut to depth."""
    edges = [e for e in (3, 10, 100) if e < depth] + [depth]
    return [(lo, hi) for lo, hi in zip([1] + [e + 1 for e in edges[:-1]], edges)]


def spread(total: int, capacities: Sequence[int], rng: random.Random) -> list[int]:
    """Share `total` as evenly as capacities allow; who gets the odd units is drawn by `rng`."""
    if total > sum(capacities):
        raise JudgeblenderError(f"cannot draw {total} from {sum(capacities)}")
    quota = [0] * len(capacities)
    left = total
    while left:
        open_ = [i for i, c in enumerate(capacities) if quota[i] < c]
        share, extra = divmod(left, len(open_))
        lucky = set(rng.sample(open_, extra))
        for i in open_:
            give = min(share + (i in lucky), capacities[i] - quota[i])
            quota[i] += give
            left -= give
    return quota


def stratified_sample(pairs: Sequence[PoolPair], sample: int, seed: int,
                      bands: Sequence[tuple[int, int]]) -> list[PoolPair]:
    """`sample` pairs spread evenly over queries, then within each query over rank bands.

    A query or band with too few pairs gives its share to the others. The draw depends on
    the seed and the pool only, so it can be repeated.
    """
    n = arguments.bounded("sample", sample)
    if n > len(pairs):
        raise ArgumentError("sample", f"a sample no larger than the pool ({len(pairs)} pairs)", n)
    rng = random.Random(seed)
    strata: dict[str, list[list[PoolPair]]] = {}
    for p in pairs:
        per_band = strata.setdefault(p.qid, [[] for _ in bands])
        band = next((k for k, (lo, hi) in enumerate(bands) if lo <= p.best_rank <= hi), None)
        if band is None:
            raise JudgeblenderError(f"rank {p.best_rank} of {p.qid} {p.docid} is in no band of {bands}")
        per_band[band].append(p)
    qids = list(strata)
    chosen: set[tuple[str, str]] = set()
    for qid, quota in zip(qids, spread(n, [sum(map(len, strata[q])) for q in qids], rng)):
        band_lists = strata[qid]
        for members, k in zip(band_lists, spread(quota, [len(b) for b in band_lists], rng)):
            chosen.update((p.qid, p.docid) for p in rng.sample(members, k))
    return [p for p in pairs if (p.qid, p.docid) in chosen]


# -- files ---------------------------------------------------------------------------------

def read_query_ids(path: str | Path) -> set[str]:
    """The query ids of a qrels file or a queries TSV.

    A file whose every line has 4 whitespace-separated columns ending in an integer is read
    as qrels; any other as `id<TAB>text` queries.
    """
    rows = [line.split() for _, line in iter_lines(path) if line.strip()]
    if rows and all(len(r) == 4 and r[3].lstrip("-").isdigit() for r in rows):
        return set(read_qrels(path, allowed=PAIRS_ONLY))  # its query ids only
    return set(read_queries(path))


def write_pairs(path: str | Path, pairs: Sequence[PoolPair]) -> None:
    """`qid<TAB>docid` lines, the format `judge --pairs` and `label --pairs` read."""
    atomic_write_text(path, "".join(f"{p.qid}\t{p.docid}\n" for p in pairs))


def write_duplicates(path: str | Path, dupes: Sequence[Duplicate]) -> None:
    atomic_write_text(path, "qid\tdropped\tkept\n" + "".join(f"{d.qid}\t{d.dropped}\t{d.kept}\n" for d in dupes))


def check_runs_cover(runs: Sequence[Run], queries: Collection[str], source: str) -> None:
    """Raise when no run retrieves anything for the requested queries (a wrong file, usually)."""
    if not any(q in r.ranking for r in runs for q in queries):
        raise InputError(source, None, "query ids that the runs rank documents for", "none in common")


# -- the pool's whole recipe --------------------------------------------------------------

@dataclass
class Pooling:
    """What `pool_pairs` made: every pooled pair, those left after duplicate texts were dropped,
    the duplicates, the documents without a text (unchecked), and the holes (left to judge)."""

    pooled: list[PoolPair]
    kept: list[PoolPair]
    duplicates: list[Duplicate]
    without_text: list[str]
    holes: list[PoolPair]


def pool_pairs(runs: Sequence[Run], depth: int, queries: Collection[str] | None = None, *,
               judged: Qrels | None = None, texts: Callable[[set[str]], Mapping[str, str]] | None = None,
               corpus_name: str = "the corpus", skip_missing: bool = False,
               queries_source: str = "queries") -> Pooling:
    """The pool as `judgeblender pool` and `jb.pool` / `jb.find_holes` make it, one recipe for
    both: the runs' top `depth` on `queries` (all the runs rank when None; a set no run ranks
    anything for is an error naming `queries_source`), duplicate texts dropped when `texts` is
    given (it reads the texts of the pooled documents it is handed, from `corpus_name`), then the
    pairs of `judged` left out. The order of the steps matters (a judged copy is the one a
    duplicate group keeps), which is why neither caller composes them itself."""
    if queries is not None:
        check_runs_cover(runs, queries, queries_source)
    pooled = pool_runs(runs, depth, queries)
    kept, dupes, no_text = pooled, [], []
    if texts is not None:
        corpus = texts({p.docid for p in pooled})
        kept, dupes, no_text = drop_duplicate_texts(pooled, corpus, corpus_name, judged, skip_missing)
    return Pooling(pooled, kept, dupes, no_text, exclude_judged(kept, judged or {}))
