"""ir_datasets ids where files go: `irds:ID` reads queries, passages, qrels and runs (scoreddocs).

    judgeblender judge --queries irds:msmarco-passage/trec-dl-2019/judged \\
        --corpus irds:msmarco-passage/trec-dl-2019/judged --pairs irds:msmarco-passage/trec-dl-2019/judged ...

Every reader of the `pairs` package takes such an id in place of a path (the [irds] extra
installs ir_datasets). Passages are looked up by id in the dataset's docs store
(`docs_store().get_many`), so a corpus of millions never enters memory: with the pair list
known only those passages are read, otherwise `read_corpus` gives a lazy mapping that looks
each id up when asked.

Downloads: judgeblender reads what ir_datasets already holds and does not start a download
(a corpus can be gigabytes, and without a network a download attempt hangs on retries). Data
that is not there yet is an error naming the id, the missing file and where ir_datasets would
fetch it from, with the command that fetches it. JUDGEBLENDER_IRDS_DOWNLOAD=1 lets
ir_datasets download while judgeblender reads, as ir_datasets itself would.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import JudgeblenderError, require
from .label_rules import one_label_per_pair
from .lookup import LookupById
from .textfile import clean_text, report_repair

PREFIX = "irds:"
DOWNLOAD_ENV = "JUDGEBLENDER_IRDS_DOWNLOAD"
# What judgeblender reads, by ir_datasets' entity names, and what it calls them in messages.
ENTITIES = {"queries": "queries", "docs": "passages", "qrels": "qrels", "scoreddocs": "a run (scoreddocs)"}


class DatasetError(JudgeblenderError):
    """An ir_datasets id that cannot be read: unknown, lacking what was asked, or not downloaded."""


def is_irds(source: Any) -> bool:
    """Whether a path-like argument is an ir_datasets id (`irds:ID`)."""
    return isinstance(source, (str, Path)) and str(source).startswith(PREFIX)


def dataset_id(source: str | Path) -> str:
    ident = str(source)[len(PREFIX):].strip()
    if not ident:
        raise DatasetError(f"{source}: expected irds:ID with an ir_datasets id, e.g. "
                           "irds:msmarco-passage/trec-dl-2019/judged")
    return ident


def _dataset(source: str | Path):
    ident = dataset_id(source)
    ir_datasets = require("ir_datasets", "irds", f"{PREFIX}{ident}")
    try:
        ds = ir_datasets.load(ident)
    except KeyError:
        raise DatasetError(f"{PREFIX}{ident}: ir_datasets knows no dataset {ident!r} "
                           "(see https://ir-datasets.com for the ids)") from None
    return ds


def has(source: str | Path, entity: str) -> bool:
    """Whether the dataset provides `entity` (queries, docs, qrels, scoreddocs)."""
    return bool(getattr(_dataset(source), f"has_{entity}")())


def load(source: str | Path, entity: str):
    """The ir_datasets dataset named by `irds:ID`, checked to provide `entity`."""
    ident = dataset_id(source)
    ds = _dataset(source)
    if not getattr(ds, f"has_{entity}")():
        has = [name for e, name in ENTITIES.items() if getattr(ds, f"has_{e}")()]
        raise DatasetError(f"{PREFIX}{ident}: the dataset has no {ENTITIES[entity]} "
                           f"(it has: {', '.join(has) or 'none of queries, passages, qrels, runs'})")
    return ds


def _download_allowed() -> bool:
    return os.environ.get(DOWNLOAD_ENV, "").strip().lower() in ("1", "true", "yes")


def _fetch_hint(ident: str, entity: str) -> str:
    if entity == "docs":
        return (f"python -c \"import ir_datasets; ir_datasets.load('{ident}').docs_store().build()\"")
    return f"python -m ir_datasets export {ident} {entity} > /dev/null"


def _sources(download) -> list[str]:
    """Where ir_datasets fetches a file from: its URLs, and a local copy it would take instead."""
    from ir_datasets.util.download import LocalDownload

    out = []
    for m in getattr(download, "mirrors", []):
        if isinstance(m, LocalDownload):
            out.append(f"a local copy at {m._path}")  # private of ir_datasets
        else:
            out.append(str(getattr(m, "url", None) or getattr(m, "uri", None) or type(m).__name__))
    return out


@contextlib.contextmanager
def reading(source: str | Path, entity: str) -> Iterator[None]:
    """Read from ir_datasets without starting a download (unless JUDGEBLENDER_IRDS_DOWNLOAD=1):
    a file that is not there becomes a DatasetError naming the id, the file and its source.

    ir_datasets fetches every remote file through `ir_datasets.util.download.Download` (a
    cache path and its mirrors); while reading, its `path` and `stream` refuse to fetch a file
    that is not in the cache. Written against ir_datasets 0.6 (the [irds] extra's floor)."""
    ident = dataset_id(source)
    what = ENTITIES[entity]
    if _download_allowed():
        yield
        return
    from ir_datasets.util import download as dl

    def refuse(download) -> None:
        cached = getattr(download, "_cache_path", None)
        sources = _sources(download)
        raise DatasetError(
            f"{PREFIX}{ident}: reading its {what} needs a file that is not downloaded"
            + (f" ({cached})" if cached else "")
            + (f"; ir_datasets fetches it from {' or '.join(sources)}" if sources else "")
            + f". Fetch it first with: {_fetch_hint(ident, entity)} "
            f"(or set {DOWNLOAD_ENV}=1 to let judgeblender download while reading)")

    original_path, original_stream = dl.Download.path, dl.Download.stream

    def path(self, force=True):
        cached = getattr(self, "_cache_path", None)
        local_only = all(isinstance(m, dl.LocalDownload) for m in getattr(self, "mirrors", []))
        if force and getattr(self, "_path", None) is None and not local_only and not (cached and os.path.exists(cached)):
            refuse(self)
        return original_path(self, force)

    @contextlib.contextmanager
    def stream(self):
        if getattr(self, "_stream", False) and not all(isinstance(m, dl.LocalDownload)
                                                       for m in getattr(self, "mirrors", [])):
            refuse(self)
        with original_stream(self) as s:
            yield s

    dl.Download.path, dl.Download.stream = path, stream
    try:
        yield
    except FileNotFoundError as exc:  # a LocalDownload: data ir_datasets cannot fetch itself
        raise DatasetError(f"{PREFIX}{ident}: the {what} are not there ({exc.filename or exc}); this "
                           "dataset's files must be obtained by hand: see its page on https://ir-datasets.com"
                           ) from None
    finally:
        dl.Download.path, dl.Download.stream = original_path, original_stream


def read_queries(source: str | Path) -> dict[str, str]:
    """{qid: text} of the dataset's queries (each query's default text)."""
    ds = load(source, "queries")
    queries: dict[str, str] = {}
    with reading(source, "queries"):
        for q in ds.queries_iter():
            queries[str(q.query_id)] = clean_text(q.default_text())[0]
    if not queries:
        raise DatasetError(f"{source}: no queries")
    return queries


def read_qrels(source: str | Path, *, allowed: Iterable[int] | None) -> dict[str, dict[str, int]]:
    """{qid: {docid: label}} of the dataset's qrels; a label outside `allowed` (None: any) is an error.
    `allowed` has no default: every caller says which scale it reads (pairs/qrels.py, SCALE)."""
    ds = load(source, "qrels")
    allowed_set = set(allowed) if allowed is not None else None

    def rows():
        for n, r in enumerate(ds.qrels_iter(), start=1):
            label = int(r.relevance)
            if allowed_set is not None and label not in allowed_set:
                raise DatasetError(f"{source}: qrels label {label} for {r.query_id} {r.doc_id}, expected "
                                   f"a label in {sorted(allowed_set)}")
            yield n, str(r.query_id), str(r.doc_id), label, label

    def fail(where: Any, expected: str, got: Any) -> DatasetError:
        return DatasetError(f"{source}: qrels row {where}: expected {expected}, got {got!r}")

    with reading(source, "qrels"):  # the qrels files' rule: a pair labelled twice differently is an error
        pairs, repeats = one_label_per_pair(rows(), fail)
    qrels: dict[str, dict[str, int]] = {}
    for (qid, docid), label in pairs.items():
        qrels.setdefault(qid, {})[docid] = label  # type: ignore[assignment]
    report_repair(source, "repeated identical qrels rows kept once", repeats, unit="row")
    return qrels


def read_ranking(source: str | Path) -> dict[str, list[tuple[str, float]]]:
    """The dataset's scoreddocs as {qid: [(docid, score)]}, for a Run (which puts them in trec_eval's order)."""
    from .run_rules import each_document_once, read_score

    ds = load(source, "scoreddocs")

    def rows():
        for n, s in enumerate(ds.scoreddocs_iter(), start=1):
            qid, docid = str(s.query_id), str(s.doc_id)
            try:
                score = read_score(s.score)
            except ValueError as exc:
                raise fail(f"{n} ({qid} {docid})", str(exc), s.score) from None
            yield n, qid, docid, score, tuple(s)

    def fail(where: Any, expected: str, got: Any) -> DatasetError:
        return DatasetError(f"{source}: scoreddoc {where}: expected {expected}, got {got!r}")

    with reading(source, "scoreddocs"):  # the run files' rule: each document once per query, finite scores
        ranking = each_document_once(rows(), fail, "scoreddoc")  # Run orders them (trec_eval_ranking)
    if not ranking:
        raise DatasetError(f"{source}: no scored documents")
    return ranking


def _text(doc) -> str:
    return clean_text(doc.default_text())[0]


class LazyCorpus(LookupById):
    """Passages looked up by id in the dataset's docs store when asked, never all loaded.

    `get_many` fetches a batch (the judge engine asks for the passages of its pairs); looked-up
    texts are kept, up to HELD of them (past that they are dropped and looked up again when
    asked: a streamed run of 10^7 pairs asks for each window's passages once). len() and
    iteration are over the ids held: the corpus itself may hold millions."""

    HELD = 100_000

    def __init__(self, source: str | Path):
        self.source = str(source)
        self._ds = load(source, "docs")
        self._store = None
        self._texts: dict[str, str] = {}
        self._absent: set[str] = set()

    def _docs_store(self):
        if self._store is None:
            with reading(self.source, "docs"):
                self._store = self._ds.docs_store()
        return self._store

    def get_many(self, ids: Iterable[str]) -> dict[str, str]:
        ids = list(map(str, ids))
        want = [i for i in dict.fromkeys(ids) if i not in self._texts and i not in self._absent]
        if want and len(self._texts) + len(self._absent) + len(want) > self.HELD:
            self._texts, self._absent = {}, set()  # a stream: keep this batch, not every one before
            want = list(dict.fromkeys(ids))
        if want:
            with reading(self.source, "docs"):
                found = self._docs_store().get_many(want)
            for docid, doc in found.items():
                self._texts[str(docid)] = _text(doc)
            self._absent.update(i for i in want if i not in self._texts)
        return {i: self._texts[i] for i in ids if i in self._texts}

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._texts))

    def __len__(self) -> int:
        return len(self._texts)

    def __repr__(self) -> str:
        return f"LazyCorpus({self.source!r}, {len(self._texts)} passages looked up)"


def read_corpus(source: str | Path, wanted: set[str] | None = None) -> Mapping[str, str]:
    """With `wanted`: a dict of just those passages (the ones the dataset has), fetched by id
    from its docs store. Without: a LazyCorpus that looks ids up when asked."""
    corpus = LazyCorpus(source)
    if wanted is None:
        return corpus
    return corpus.get_many(sorted(wanted))
