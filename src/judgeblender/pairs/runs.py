"""TREC run files: `query_id Q0 doc_id rank score run_tag`, plain or gzip, and the one rule by
which judgeblender ranks a run's documents (`trec_eval_ranking`, `tied`).

Every place that ranks (the pool, holes and Judged@k, the fast measures, runs given as
DataFrames or dicts, ir_datasets scoreddocs) takes a run's order from here, so that all of them
see the same top k of a run with tied scores, and the same top k as the evaluator.

A run is held as columns (query ids, per-query offsets, doc ids and scores as numpy arrays,
already in trec_eval's order); `Run.ranking`, the {qid: [(docid, score)]} view, is built
from them on first use. Reading is vectorised for the usual file (ASCII, six columns on
every non-blank line, digit ranks, finite scores, no document twice in a query); anything
else goes through the line-by-line reader, which names the file and line of the problem.
Large runs are also kept, parsed, in the user's cache folder, keyed by the file's path,
size, mtime and inode, so reading the same run files again skips the parsing.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..fileio import atomic_writer
from ..hashing import sha256_text
from ..paths import runs_cache_dir
from . import irds
from .decimals import parse_decimal_chars
from .run_rules import each_document_once, read_score
from .textfile import check_id, iter_lines, read_whole

# Files at least this large (on disk) are cached once parsed; smaller ones parse in milliseconds.
CACHE_MIN_BYTES = 256 * 1024
_CACHE_VERSION = 2  # 2: ties at float32 precision (trec_eval_ranking)
# ASCII bytes that str.split() treats as whitespace (tab, newline, VT, FF, CR, FS, GS, RS, US, space).
_ASCII_SPACE = np.zeros(256, dtype=bool)
_ASCII_SPACE[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True
# Other ASCII control bytes: in an id they are an error, which the line reader names.
_ASCII_CONTROL = np.zeros(256, dtype=bool)
_ASCII_CONTROL[[*range(0, 9), *range(14, 28), 127]] = True
# The bytes of a decimal score as trec_eval's atof reads one (0: padding); numpy's own
# conversion, the fallback of parse_decimal_chars, would also take "1_0" (run_rules.py has the rule).
_SCORE_BYTES = np.zeros(256, dtype=bool)
_SCORE_BYTES[[0, *b"0123456789.+-eE"]] = True

# --- the ranking rule ------------------------------------------------------------------------
# trec_eval's: the rank column is ignored; each query's documents are sorted by score descending,
# and equal scores by docno descending (the larger docno first, as strcmp compares them; Python's
# str order is the same order for UTF-8 docnos). See trec_eval's form_res_rels.c, comp_sim_docno,
# and get_trec_results.c's header ("the rank field is ignored here").
# Precision: trec_eval reads a score with atof (a double) and, in 9.0.x, keeps it as a C float
# (trec_format.h: `float sim` in TEXT_RESULTS), so it compares scores as float32. pytrec_eval
# (pytrec_eval-terrier, which ir_measures runs for nDCG, AP, P, R ...) embeds trec_eval 9.0.8 and
# stores PyFloat_AsDouble into that float: scores that differ only beyond float32 precision tie
# there and go by docno. trec_eval 10.0 (2023) keeps doubles; judgeblender follows the evaluator
# it runs. ir_measures' own Judged provider differs (see evaluate/fast_measures.py).
RANK_SCORE_DTYPE = np.float32


def rank_scores(scores) -> np.ndarray:
    """Scores as the ranking rule compares them (float32; beyond its range, +-inf, as C's cast)."""
    with np.errstate(over="ignore"):
        return np.asarray(scores, dtype=np.float64).astype(RANK_SCORE_DTYPE)


def tied(a: float, b: float) -> bool:
    """Whether two scores tie under the ranking rule."""
    return bool(rank_scores(a) == rank_scores(b))


def trec_eval_ranking(entries: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """One query's (docid, score) entries in trec_eval's order (see RANK_SCORE_DTYPE), scores
    kept as given. The one function every ranking in judgeblender goes through."""
    entries = list(entries)
    if len(entries) < 2:
        return entries
    keys = rank_scores([s for _, s in entries]).tolist()
    order = sorted(range(len(entries)), key=lambda i: entries[i][0], reverse=True)
    order.sort(key=keys.__getitem__, reverse=True)  # stable: equal scores stay docid descending
    return [entries[i] for i in order]


@dataclass
class RunColumns:
    """A run as arrays: query q's documents are docs[offsets[i]:offsets[i + 1]] for
    qids[i], in trec_eval's order (trec_eval_ranking)."""

    qids: list[str]
    offsets: np.ndarray  # int64, len(qids) + 1
    docs: np.ndarray  # str (numpy "U")
    scores: np.ndarray  # float64

    def ranking(self) -> dict[str, list[tuple[str, float]]]:
        docs, scores, off = self.docs.tolist(), self.scores.tolist(), self.offsets.tolist()
        return {q: list(zip(docs[off[i]:off[i + 1]], scores[off[i]:off[i + 1]])) for i, q in enumerate(self.qids)}

    @classmethod
    def from_ranking(cls, ranking: dict[str, list[tuple[str, float]]]) -> RunColumns:
        qids = [q for q, docs in ranking.items()]
        offsets = np.zeros(len(qids) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(ranking[q]) for q in qids])
        docs = [d for q in qids for d, _ in ranking[q]]
        scores = [s for q in qids for _, s in ranking[q]]
        return cls(qids, offsets, np.array(docs, dtype=str), np.array(scores, dtype=np.float64))


class Run:
    """A ranked run: `ranking` maps qid -> [(docid, score)] in trec_eval's order
    (trec_eval_ranking), whatever order it was given in. Treat it as read-only."""

    def __init__(self, name: str, path: str | Path, ranking: dict[str, list[tuple[str, float]]] | None = None,
                 *, columns: RunColumns | None = None):
        self.name = name
        self.path = Path(path)
        self._columns = columns
        if ranking is not None:
            ranking = {q: trec_eval_ranking(docs) for q, docs in ranking.items()}
        self._ranking = ranking if ranking is not None or columns is not None else {}

    @property
    def ranking(self) -> dict[str, list[tuple[str, float]]]:
        if self._ranking is None:
            self._ranking = self._columns.ranking()  # type: ignore[union-attr]
        return self._ranking

    @ranking.setter
    def ranking(self, value: dict[str, list[tuple[str, float]]]) -> None:
        self._ranking = {q: trec_eval_ranking(docs) for q, docs in value.items()}
        self._columns = None

    def columns(self) -> RunColumns:
        """The columnar form (built from `ranking` once when the run was not read from a file)."""
        if self._columns is None:
            self._columns = RunColumns.from_ranking(self.ranking)
        return self._columns

    def queries(self) -> list[str]:
        """Query ids the run ranks documents for, in file order."""
        if self._ranking is not None:
            return [q for q, docs in self._ranking.items() if docs]
        return list(self._columns.qids)  # type: ignore[union-attr]

    def scores(self) -> dict[str, dict[str, float]]:
        """The {qid: {docid: score}} shape that ir-measures evaluates."""
        return {q: dict(docs) for q, docs in self.ranking.items()}

    def top(self, qid: str, depth: int | None) -> list[str]:
        docs = self.ranking.get(qid, [])
        return [d for d, _ in (docs if depth is None else docs[:depth])]

    def __repr__(self) -> str:
        return f"Run(name={self.name!r}, path={str(self.path)!r})"


def read_run(path: str | Path, name: str | None = None) -> Run:
    """A TREC run file, or `irds:ID`: an ir_datasets id's scoreddocs (named after the id)."""
    if irds.is_irds(path):
        return Run(name=name or str(path), path=str(path), ranking=irds.read_ranking(path))
    path = Path(path)
    name = name or _run_name(path)
    columns = _read_cached(path)
    if columns is None:
        columns = read_run_fast(path)
        if columns is None:
            return Run(name=name, path=path, ranking=_read_lines(path))
        _write_cache(path, columns)
    return Run(name=name, path=path, columns=columns)


def _read_lines(path: Path) -> dict[str, list[tuple[str, float]]]:
    """The line-by-line reader: slower, and the one that explains what is wrong."""

    def rows():
        for lineno, line in iter_lines(path):
            cols = line.split()
            if len(cols) != 6:
                if not cols:
                    continue
                raise InputError(path, lineno, "6 columns 'query_id Q0 doc_id rank score run_tag'", line)
            qid, _, docid, rank_s, score_s, _tag = cols
            check_id(path, lineno, qid, "query id")
            check_id(path, lineno, docid, "doc id")
            if not rank_s.isdigit():  # the fast test; the slow path says what is wrong
                _check_rank(path, lineno, rank_s)
            try:
                score = read_score(score_s)
            except ValueError as exc:
                raise InputError(path, lineno, f"{exc} in column 5", score_s) from None
            yield lineno, qid, docid, score, line

    ranking = each_document_once(rows(), lambda line, expected, got: InputError(path, line, expected, got))
    if not ranking:
        raise InputError(path, None, "at least one ranked document", "an empty run")
    return {qid: trec_eval_ranking(entries) for qid, entries in ranking.items()}


def read_run_fast(path: Path) -> RunColumns | None:
    """The run's columns, or None when the file needs the line-by-line reader (see the module doc)."""
    data = read_whole(path)
    return parse_run_bytes(data) if data is not None else None


def parse_run_bytes(data: bytes) -> RunColumns | None:
    """Vectorised parse of a run file's (decompressed) bytes; None if it is not the plain case."""
    a = np.frombuffer(data, dtype=np.uint8)
    # Non-ASCII (a byte-order mark, Unicode spaces) or NUL bytes: leave it to the line reader.
    if a.size == 0 or a.max() >= 0x80 or _ASCII_CONTROL[a].any():
        return None
    bounds = _six_tokens_per_line(a)
    if bounds is None:
        return None
    starts, ends = bounds
    longest = int((ends - starts).max())
    padded = np.concatenate((a, np.zeros(longest, dtype=np.uint8)))  # so every token can be read to `longest`
    rank_chars = _token_chars(padded, starts[:, 3], ends[:, 3])
    if not np.all((rank_chars == 0) | ((rank_chars >= 48) & (rank_chars <= 57))):
        return None  # a rank that is not all digits (0: the padding of shorter ranks)
    score_chars = _token_chars(padded, starts[:, 4], ends[:, 4])
    if not _SCORE_BYTES[score_chars].all():
        return None  # "1_0", "nan", "0x1p3": the line reader names the line
    try:  # rounded as Python's float() rounds
        scores = parse_decimal_chars(score_chars)
    except ValueError:
        return None
    if not np.isfinite(scores).all():
        return None
    qids = _as_bytes(_token_chars(padded, starts[:, 0], ends[:, 0]))
    doc_chars = _token_chars(padded, starts[:, 2], ends[:, 2])
    docs = np.ascontiguousarray(doc_chars.T, dtype=np.uint32).view(f"U{doc_chars.shape[0]}").ravel()
    n = len(qids)
    # Queries in order of first appearance (a query may come back in a later block of lines).
    bounds = [0, *(np.flatnonzero(qids[1:] != qids[:-1]) + 1).tolist(), n]
    group_of: dict[str, int] = {}
    g = np.empty(n, dtype=np.int64)
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        g[lo:hi] = group_of.setdefault(qids[lo].decode("ascii"), len(group_of))
    # d_inv orders docids as Python compares them (ASCII: bytes and text sort alike)
    n_docs, d_inv = _doc_codes(docs)
    if np.bincount(g * n_docs + d_inv).max() > 1:
        return None  # a document twice in a query: the line reader names it
    order = _trec_eval_order(g, rank_scores(scores), d_inv)
    if order is not None:
        g, docs, scores = g[order], docs[order], scores[order]
    offsets = np.zeros(len(group_of) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(np.bincount(g, minlength=len(group_of)))
    return RunColumns(list(group_of), offsets, docs, scores)


def _doc_codes(docs: np.ndarray) -> tuple[int, np.ndarray]:
    """How many distinct docids, and each row's docid as a number that sorts as the docid does."""
    packed, packable = pack_ids(docs)
    unique, inverse = np.unique(packed if packable.all() else docs, return_inverse=True)
    return len(unique), inverse


def pack_ids(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Docids as uint64 numbers that sort as the strings do (big-endian bytes, zero-padded), and
    which ones could be packed (at most 8 characters, all below U+0100): np.unique on numbers is
    far quicker than on text."""
    width = ids.dtype.itemsize // 4
    out = np.zeros(len(ids), dtype=np.uint64)
    if width == 0 or not len(ids):
        return out, np.ones(len(ids), dtype=bool)
    chars = np.ascontiguousarray(ids).view(np.uint32).reshape(len(ids), width)
    ok = chars.max(axis=1) <= 0xFF
    if width > 8:
        ok &= ~chars[:, 8:].any(axis=1)
    for i in range(min(width, 8)):
        out |= chars[:, i].astype(np.uint64) << np.uint64(8 * (7 - i))
    return out, ok


def _trec_eval_order(g: np.ndarray, scores: np.ndarray, d_inv: np.ndarray) -> np.ndarray | None:
    """The permutation that puts rows in trec_eval's order (query, then trec_eval_ranking's rule:
    `scores` are rank_scores), or None when they are in it already."""
    same = g[1:] == g[:-1]
    grouped = bool(np.all(g[1:] >= g[:-1]))
    descending = grouped and bool(np.all(~same | (scores[1:] <= scores[:-1])))
    tied = same & (scores[1:] == scores[:-1])
    if descending and bool(np.all(~tied | (d_inv[1:] < d_inv[:-1]))):
        return None
    if not descending:
        return np.lexsort((-d_inv, -scores, g))
    # Only ties are out of order (runs often list them by docid ascending): sort inside each tie.
    in_tie = np.zeros(len(g), dtype=bool)
    in_tie[:-1] |= tied
    in_tie[1:] |= tied
    rows = np.flatnonzero(in_tie)
    tie_id = np.cumsum(np.concatenate(([True], ~tied)))[rows]
    order = np.arange(len(g))
    order[rows] = rows[np.lexsort((-d_inv[rows], tie_id))]
    return order


def _six_tokens_per_line(a: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """[starts, ends) of the tokens as (lines x 6) arrays, or None unless every non-blank line
    has exactly 6 tokens."""
    # The usual file first: one tab or space between columns, "\n" after each line.
    delims = np.flatnonzero(a <= 32)
    if a[-1] != 10:
        delims = np.append(delims, a.size)  # no newline after the last line
    if delims.size and delims.size % 6 == 0 and delims[0] > 0 and np.all(np.diff(delims) > 1):
        d = delims.reshape(-1, 6)
        seps = a[d[:, :5]]
        if np.all((seps == 9) | (seps == 32)) and np.all(a[d[:-1, 5]] == 10):
            ends = d
            starts = np.empty_like(d)
            starts[0, 0], starts.flat[1:] = 0, d.ravel()[:-1] + 1
            return starts, ends
    # Any other whitespace: tokens are the runs of non-space bytes.
    edges = np.diff(np.concatenate(([0], (~_ASCII_SPACE[a]).view(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    line_end = np.concatenate((np.flatnonzero(a == 10), [a.size]))
    per_line = np.diff(np.searchsorted(starts, line_end), prepend=0)
    if not starts.size or not np.all((per_line == 6) | (per_line == 0)):
        return None
    return starts.reshape(-1, 6), ends.reshape(-1, 6)


def _token_chars(padded: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The tokens padded[starts[i]:ends[i]] as a (width x tokens) uint8 array, 0 past each
    token's end. Built a character position at a time: 1-D gathers beat one 2-D index here."""
    lengths = ends - starts
    width = int(lengths.max())
    out = np.empty((width, len(starts)), dtype=np.uint8)
    for j in range(width):
        np.multiply(padded[starts + j], lengths > j, out=out[j])
    return out


def _as_bytes(chars: np.ndarray) -> np.ndarray:
    """A (width x tokens) array from _token_chars as one numpy bytes ("S") array."""
    return np.ascontiguousarray(chars.T).view(f"S{chars.shape[0]}").ravel()


# --- parse cache ------------------------------------------------------------------------------

def _stamp(path: Path) -> tuple[str, np.ndarray] | None:
    try:
        resolved = path.resolve()
        st = resolved.stat()
    except OSError:
        return None
    if st.st_size < CACHE_MIN_BYTES:
        return None
    return str(resolved), np.array([_CACHE_VERSION, st.st_size, st.st_mtime_ns, st.st_ino], dtype=np.int64)


def _cache_file(resolved: str) -> Path:
    return runs_cache_dir() / (sha256_text(resolved)[:32] + ".npz")


def _read_cached(path: Path) -> RunColumns | None:
    stamp = _stamp(path)
    if stamp is None:
        return None
    resolved, key = stamp
    try:
        with np.load(_cache_file(resolved), allow_pickle=False) as z:
            if str(z["path"]) != resolved or not np.array_equal(z["stamp"], key):
                return None
            return RunColumns(z["qids"].tolist(), z["offsets"], z["docs"], z["scores"])
    except (OSError, KeyError, ValueError, zlib.error):
        return None  # absent, stale or damaged: parse again


def _write_cache(path: Path, columns: RunColumns) -> None:
    stamp = _stamp(path)
    if stamp is None:
        return
    resolved, key = stamp
    target = _cache_file(resolved)
    try:
        with atomic_writer(target, suffix=".npz") as fh:
            np.savez(fh, path=np.array(resolved), stamp=key, qids=np.array(columns.qids, dtype=str),
                     offsets=columns.offsets, docs=columns.docs, scores=columns.scores)
    except OSError:
        pass  # an unwritable cache folder only costs speed


def _check_rank(path: Path, lineno: int, rank_s: str) -> None:
    try:
        rank = int(rank_s)
    except ValueError:
        raise InputError(path, lineno, "an integer rank in column 4", rank_s) from None
    if rank < 0:
        raise InputError(path, lineno, "a rank >= 0 in column 4", rank_s)


def _run_name(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".run", ".trec", ".txt", ".tsv"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def read_runs_dir(directory: str | Path) -> list[Run]:
    """Every run file in a folder; `irds:ID` gives the one run of an ir_datasets id's scoreddocs."""
    if irds.is_irds(directory):
        return [read_run(directory)]
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(directory, None, "a directory of TREC run files", "not a directory")
    files = sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        raise InputError(directory, None, "at least one run file", "an empty directory")
    # numpy and zlib release the GIL for most of a parse: threads read a directory of runs
    # about 1.5x faster on 2 cores when the parse cache is cold. Errors come in file order.
    workers = min(len(files), os.cpu_count() or 1, 8)
    if workers > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            runs = list(pool.map(read_run, files))
    else:
        runs = [read_run(p) for p in files]
    names = [r.name for r in runs]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise InputError(directory, None, "distinct run names", ", ".join(sorted(dupes)))
    return runs

