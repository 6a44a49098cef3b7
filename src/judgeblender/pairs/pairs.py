"""Which (query, passage) pairs to judge: from qrels, a TREC run (top-k), or a `qid docid` TSV."""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .. import arguments
from ..errors import InputError
from .qrels import PAIRS_ONLY, read_qrels
from .runs import read_run
from . import irds
from .textfile import check_id, iter_lines, report_repair


class Pair(NamedTuple):
    """A (query, passage) pair: the one key of "a label per pair" through judging, blending and
    evaluation. A named tuple, so `Pair("q1", "d1") == ("q1", "d1")` and either finds the other
    in a dict: ballot tables, blends and judge runs share their keys without conversions."""

    qid: str
    docid: str


FORMATS = ("auto", "qrels", "run", "tsv")


def detect_format(path: str | Path) -> str:
    """From the first non-blank line's column count; columns are split on spaces and tabs alike."""
    for lineno, line in iter_lines(path, report=False):
        if not line.strip():
            continue
        n = len(line.split())
        if n == 2:
            return "tsv"
        if n == 4:
            return "qrels"
        if n == 6:
            return "run"
        raise InputError(path, lineno, "2 columns (qid docid), 4 (qrels) or 6 (TREC run)", line)
    raise InputError(path, None, "at least one pair", "an empty file")


def _depth(depth: object) -> int | None:
    """A run's top-k: a slice with -1 would quietly drop each query's last document, and 2.5 fail
    as a slice, so it is checked where the pairs are asked for (read_pairs, PairsFile)."""
    return None if depth is None else arguments.bounded("depth", depth)


def read_pairs(path: str | Path, fmt: str = "auto", depth: int | None = None) -> list[Pair]:
    """Pairs in first-seen order, duplicates removed. `depth` keeps a run's top-k per query.

    `irds:ID`: an ir_datasets id's qrels (format auto or qrels; auto takes its scoreddocs when
    it has no qrels) or its scoreddocs as a run (format run)."""
    depth = _depth(depth)
    if irds.is_irds(path):
        return _irds_pairs(path, fmt, depth)
    if fmt not in FORMATS:
        raise InputError(path, None, f"a pairs format in {FORMATS}", fmt)
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "qrels":
        pairs = [Pair(q, d) for q, docs in read_qrels(path, allowed=PAIRS_ONLY).items() for d in docs]
    elif fmt == "run":
        run = read_run(path)
        pairs = [Pair(q, d) for q in run.ranking for d in run.top(q, depth)]
    else:
        return list(_tsv_pairs(path, report=True))
    if not pairs:
        raise InputError(path, None, "at least one pair", "none")
    return list(dict.fromkeys(pairs))


def _irds_pairs(source: str | Path, fmt: str, depth: int | None) -> list[Pair]:
    if fmt == "tsv" or fmt not in FORMATS:
        raise InputError(source, None, "pairs format auto, qrels or run for an ir_datasets id", fmt)
    if fmt == "auto":
        fmt = "qrels" if irds.has(source, "qrels") else "run"
    if fmt == "qrels":
        pairs = [Pair(q, d) for q, docs in irds.read_qrels(source, allowed=PAIRS_ONLY).items() for d in docs]
    else:
        run = read_run(source)  # in trec_eval's order, as a run file's
        pairs = [Pair(q, d) for q in run.ranking for d in run.top(q, depth)]
    if not pairs:
        raise InputError(source, None, "at least one pair", "none")
    return list(dict.fromkeys(pairs))


class SeenPairs:
    """Which pairs were seen, as 16-byte digests: 17 bytes a pair in memory (a set of Pair
    tuples takes about 250), for streams of 10^7 pairs and more. Two pairs would share a digest
    with probability about n^2 / 2^129: never, for any n a machine can hold.

    The latest RECENT digests are a Python set; older ones sit in sorted numpy arrays of 17-byte
    strings (the digest and a closing 1), merged two equal sizes at a time (a log-structured set: about log2(n / RECENT)
    arrays, each searched by bisection)."""

    RECENT = 1 << 16

    def __init__(self) -> None:
        self._recent: set[bytes] = set()
        self._levels: list[np.ndarray] = []
        self._n = 0

    def add(self, pair: tuple[str, str]) -> bool:
        """Whether `pair` is new (and now seen)."""
        # numpy's fixed-size bytes drop trailing NULs when read back: a last byte of 1 keeps them
        key = hashlib.blake2b(f"{pair[0]}\t{pair[1]}".encode("utf-8", "surrogatepass"), digest_size=16).digest() + b"\1"
        if key in self._recent:
            return False
        for level in self._levels:
            i = int(np.searchsorted(level, key))
            if i < len(level) and level[i] == key:
                return False
        self._recent.add(key)
        self._n += 1
        if len(self._recent) >= self.RECENT:
            self._spill()
        return True

    def _spill(self) -> None:
        level = np.sort(np.array(list(self._recent), dtype="S17"))
        self._recent = set()
        while self._levels and len(self._levels[-1]) <= len(level):
            level = np.sort(np.concatenate([self._levels.pop(), level]))
        self._levels.append(level)

    def nbytes(self) -> int:
        """The sorted arrays' bytes (the recent set adds at most RECENT x about 100 bytes)."""
        return sum(level.nbytes for level in self._levels)

    def __len__(self) -> int:
        return self._n


def unique_pairs(pairs: Iterable[tuple[str, str]]) -> Iterator[Pair]:
    """Each pair once, in first-seen order, lazily; (qid, docid) tuples become Pairs."""
    seen = SeenPairs()
    for p in pairs:
        if seen.add(p):
            yield p if isinstance(p, Pair) else Pair(*map(str, p))


class Repeats:
    """Where a 'qid docid' file repeats a pair: the line numbers that a complete pass over it
    found (8 bytes a repeated line), so that a later pass over the same file skips them instead
    of looking every pair's digest up again (`judge`'s judging pass, after its validation pass:
    4-6 us a pair)."""

    def __init__(self) -> None:
        self.lines = array("Q")
        self.complete = False  # the pass that fills it read the whole file


def iter_pairs(path: str | Path, fmt: str = "auto", depth: int | None = None, report: bool = True,
               repeats: Repeats | None = None) -> Iterator[Pair]:
    """`read_pairs`, lazily: a 'qid docid' file is read line by line, each pair once in
    first-seen order, holding only SeenPairs' digests; qrels, runs and irds ids are read whole
    (a qrels file is checked as a whole, a run is ranked per query) and then yielded. `report`
    False: a later pass over the same file, whose repairs the first pass reported. `repeats`
    (a 'qid docid' file's): filled by a pass that reads the whole file, used by any pass after it."""
    if irds.is_irds(path) or fmt not in FORMATS or (fmt == "auto" and detect_format(path) != "tsv") \
            or fmt in ("qrels", "run"):
        yield from read_pairs(path, fmt, depth)
        return
    if repeats is not None and repeats.complete:
        yield from _known_pairs(path, repeats.lines)
        return
    yield from _tsv_pairs(path, report, repeats)


def _line_pair(path: str | Path, lineno: int, line: str) -> Pair | None:
    """A 'qid docid' line's pair, None for a blank line."""
    if not line.strip():
        return None
    cols = line.split()
    if len(cols) != 2:
        raise InputError(path, lineno, "2 columns 'query_id doc_id'", line)
    return Pair(check_id(path, lineno, cols[0], "query id"), check_id(path, lineno, cols[1], "doc id"))


def _tsv_pairs(path: str | Path, report: bool, found: Repeats | None = None) -> Iterator[Pair]:
    """A 'qid docid' file's pairs, each once in first-seen order, read line by line; the lines
    of repeated pairs go to `found`, which is complete once the file is read to its end."""
    seen = SeenPairs()
    repeats: list[int] = []
    n_repeats = 0
    for lineno, line in iter_lines(path, report):
        pair = _line_pair(path, lineno, line)
        if pair is None:
            continue
        if seen.add(pair):
            yield pair
            continue
        n_repeats += 1
        if found is not None:
            found.lines.append(lineno)
        if not repeats:
            repeats.append(lineno)
    if not len(seen):
        raise InputError(path, None, "at least one pair", "none")
    if report:
        report_repair(path, "repeated pairs kept once", repeats, count=n_repeats)
    if found is not None:
        found.complete = True


def _known_pairs(path: str | Path, skip: array) -> Iterator[Pair]:
    """A 'qid docid' file's pairs but the lines in `skip` (ascending: the repeats a complete
    pass found), each line checked as the first pass checked it."""
    later = iter(skip)
    next_skip = next(later, 0)
    for lineno, line in iter_lines(path, report=False):
        if lineno == next_skip:
            next_skip = next(later, 0)
            continue
        pair = _line_pair(path, lineno, line)
        if pair is not None:
            yield pair


class PairsFile:
    """A pairs file (or irds id), read anew each time it is iterated, so the validation pass and
    the run each stream it without holding the pairs (`iter_pairs`); `limit` keeps the first N.
    Its pairs come each once (`unique`): the engine does not de-duplicate them again."""

    unique = True

    def __init__(self, path: str | Path, fmt: str = "auto", depth: int | None = None, limit: int | None = None):
        self.path, self.fmt, self.depth, self.limit = path, fmt, _depth(depth), limit
        self._passes = 0
        self._repeats = Repeats()  # the first pass's, read to the file's end: later passes skip them

    def __iter__(self) -> Iterator[Pair]:
        self._passes += 1
        # filled by the first pass alone (a later one started before it ended reads as it did)
        repeats = self._repeats if self._passes == 1 or self._repeats.complete else None
        pairs = iter_pairs(self.path, self.fmt, self.depth, report=self._passes == 1, repeats=repeats)
        return islice(pairs, self.limit) if self.limit is not None else pairs
