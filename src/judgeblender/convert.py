"""One converter for "a label per pair", in whatever shape it comes, as ir_measures' converters do.

The currency is the triple (qid, docid, label), label None where a judge's answer was invalid
(never 0). Everything that takes labels takes any of:
  - a pandas DataFrame with columns qid, docid, label, or the ecosystem's names for them:
    PyTerrier's (qid, docno, label; text for a passage) and ir_measures' (query_id, doc_id,
    relevance); a NaN/NA label is an invalid one. A frame that carries two names for one column
    (PyTerrier's result frames carry docid, Terrier's internal number, beside docno) is read by
    the first name of NAMES that it has, and a note on the `judgeblender.inputs` logger says so;
  - a qrels dict {qid: {docid: label}};
  - an iterable of ir_measures `Qrel` tuples or plain (qid, docid, label) tuples;
  - a path to a TREC qrels file (str or Path).
and gives back a DataFrame (`frame`) or a qrels dict (`qrels`). Runs likewise: a DataFrame with
qid, docid, score (ir_measures' query_id, doc_id, score; a PyTerrier result frame), a
{qid: {docid: score}} or {qid: [(docid, score)]} dict, ir_measures or ir_datasets `ScoredDoc`
tuples, or a TREC run file; every shape follows the run files' rule (pairs.runs: each document
once per query, finite scores). pandas is imported only when a frame is asked for.

Any of these may be a one-shot iterator (ir_measures' read_trec_qrels and read_trec_run,
ir_datasets' qrels_iter() and scoreddocs_iter() return generators): each is read here once, and
the callers pass on what came out (a list of triples, a qrels dict, a Run), never the input
again, which a second read would find empty. Where data is needed, the caller names its
argument (`argument=`) and an input that holds nothing is an error naming it, never a figure
computed on nothing.

Every reader of labels takes the scale it checks as a required keyword (`scale=SCALE`, TREC's
0-3, or `scale=None` for any integer), so no caller can forget it: a label of 7 or -1 is an
error naming its row, file and line, in every shape, never a gain.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .errors import ArgumentError, JudgeblenderError, shown
from .pairs.qrels import PAIRS_ONLY, SCALE  # noqa: F401 (callers name the scale as convert.SCALE)

Triple = tuple[str, str, "int | None"]
# The names each column goes by, the one read first when a frame has several: the project's own,
# PyTerrier's (docno is the document's name; a PyTerrier docid is Terrier's internal number, so
# docno wins) and ir_measures' (query_id, doc_id, relevance).
NAMES = {"qid": ("qid", "query_id"), "docid": ("docno", "docid", "doc_id"), "label": ("label", "relevance"),
         "passage": ("passage", "text")}


def is_frame(value: Any) -> bool:
    return type(value).__module__.partition(".")[0] == "pandas" and hasattr(value, "columns")


def project_columns(df, needed: tuple[str, ...], what: str):
    """`df` with the project's names (qid, docid, label, passage) for the columns in NAMES it has.
    Of two names for one column the first in NAMES is read, the other dropped, with a note."""
    rename, drop, had = {}, [], list(df.columns)
    for own, names in NAMES.items():
        present = [n for n in names if n in df.columns]
        if not present:
            continue
        rename[present[0]] = own
        drop += present[1:]
        if len(present) > 1:
            from .notes import note
            from .pairs.textfile import log

            note(log, f"{what}: columns {' and '.join(map(repr, present))} name the same thing; used {present[0]!r}")
    df = df.drop(columns=drop).rename(columns=rename)
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise JudgeblenderError(f"{what}: a DataFrame needs the columns {list(needed)} (or PyTerrier's or "
                                f"ir_measures' names for them); missing {missing} (it has {had})")
    return df


def _label(value: Any, where: str, scale: tuple[int, ...] | None, required: bool) -> int | None:
    """An integer label (a float column's 2.0 too), or None for an invalid (NaN/None/<NA>) one.
    Text, booleans, fractions, labels off `scale`, and with `required` a missing one, are errors.
    A numpy value is shown as the number it holds (7, not np.int64(7)): the user wrote 7."""
    from .pairs.texts import is_missing

    given = shown(value.item() if type(value).__module__ == "numpy" and hasattr(value, "item") else value)
    if is_missing(value):
        if required:
            raise JudgeblenderError(f"{where}: a label is required, got {given}")
        return None
    want = "a label must be an integer" if scale is None else f"a label must be an integer in {list(scale)}"
    if isinstance(value, (bool, str, bytes)) or type(value).__name__ in ("bool", "bool_", "str_", "bytes_"):
        raise JudgeblenderError(f"{where}: {want}, got {given}")
    try:
        as_int = int(value)
    except (TypeError, ValueError, OverflowError):
        raise JudgeblenderError(f"{where}: {want}, got {given}") from None
    if as_int != value or (scale is not None and as_int not in scale):
        raise JudgeblenderError(f"{where}: {want}, got {given}")
    return as_int


def _id(value: Any, where: str, column: str) -> str:
    """A qid or docid as text; a missing (NaN, None, <NA>) or blank one is an error naming its row."""
    from .pairs.texts import is_missing

    if is_missing(value) or (isinstance(value, str) and (not value or value.isspace())):
        raise JudgeblenderError(f"{where}: expected a {column}, got {value!r}")
    return str(value)


def _rows(given: Any, what: str, value: str = "label") -> tuple[Iterable[tuple[Any, Any, Any, Any]], str]:
    """(position, qid, docid, value) of labels (`value` "label") or of a run (`value` "score") in
    any shape, as a generator over the input (read once, as it comes), and what a position counts."""
    field, wanted = ("relevance", "(qid, docid, label)") if value == "label" else ("score", "(qid, docid, score)")
    if is_frame(given):
        df = project_columns(given, ("qid", "docid", value), what)
        return zip(df.index, df["qid"], df["docid"], df[value]), "row"
    if isinstance(given, Mapping):
        def nested():
            for qid, docs in given.items():
                if isinstance(docs, Mapping):
                    yield from ((f"{qid}/{d}", qid, d, v) for d, v in docs.items())
                elif value == "score" and isinstance(docs, (list, tuple)):  # Run.ranking's shape
                    for n, entry in enumerate(docs):
                        if not isinstance(entry, (list, tuple)) or len(entry) != 2:
                            raise JudgeblenderError(f"{what}: key {qid}[{n}] should be (docid, score), got {entry!r}")
                        yield (f"{qid}[{n}]", qid, *entry)
                else:
                    shapes = "a qrels dict maps qid -> {docid: label}" if value == "label" else \
                        "a run dict maps qid -> {docid: score} or [(docid, score)]"
                    raise JudgeblenderError(f"{what}: {shapes}; query {qid!r} maps to {type(docs).__name__}")
        return nested(), "key"
    if isinstance(given, Iterable) and not isinstance(given, (str, bytes)):
        def items():
            for n, row in enumerate(given, start=1):
                fields = (row.query_id, row.doc_id, getattr(row, field)) if hasattr(row, field) else tuple(row)
                if len(fields) != 3:
                    raise JudgeblenderError(f"{what}: row {n} should be {wanted}, got {row!r}")
                yield (n, *fields)
        return items(), "row"
    shapes = ("a DataFrame, a qrels dict, (qid, docid, label) tuples or a qrels file" if value == "label" else
              "a DataFrame, a {qid: {docid: score}} dict, ScoredDoc or (qid, docid, score) tuples or a run file")
    raise JudgeblenderError(f"{what}: expected {shapes}, got {type(given).__name__}")


def _nothing_in(argument: str, given: Any, expected: str) -> ArgumentError:
    """The error for an input that holds nothing where data is needed: a figure computed on
    nothing (n=0, NaN) would read as a result. The likeliest cause, an iterator read before,
    is named."""
    if isinstance(given, (str, Path)):
        return ArgumentError(argument, expected, described=f"the file {given}, which holds none")
    if isinstance(given, Iterator):
        return ArgumentError(argument, expected, described="an iterator that yielded none",
                             hint="an iterator is read once: was it read before?")
    return ArgumentError(argument, expected, described="none")


def triples(labels: Any, what: str = "labels", *, scale: Iterable[int] | None,
            required: bool = False, argument: str | None = None) -> list[Triple]:
    """(qid, docid, label) for every pair, in the order given; label None where invalid.

    The qrels files' rule holds for every shape (pairs.label_rules.one_label_per_pair): a pair given
    twice with the same label is kept once, with a warning that says how many; with another
    label it is an error. A label that is not an integer of `scale` (SCALE, TREC's 0-3; None:
    any integer) is an error naming its row, or its file and line; so is a missing one when
    `required` (gold labels). `scale` has no default: every caller says which it reads. With
    `argument` (the caller's name for `labels`) an input without a single pair is an error naming
    it. `labels` is read once: pass the list on, not `labels` again."""
    from .pairs.label_rules import one_label_per_pair
    from .pairs.qrels import read_qrels
    from .pairs.textfile import report_repair

    if isinstance(labels, (str, Path)):
        return _some(argument, labels, [(q, d, v) for q, docs in read_qrels(labels, allowed=scale).items()
                                         for d, v in docs.items()])
    rows, unit = _rows(labels, what)
    checked = ((where, _id(q, f"{what}: {unit} {where}", "qid"), _id(d, f"{what}: {unit} {where}", "docid"),
                _label(v, f"{what}: {unit} {where} ({q} {d})", scale, required), v) for where, q, d, v in rows)
    found, repeats = one_label_per_pair(checked, lambda where, expected, got: JudgeblenderError(
        f"{what}: {unit} {where}: expected {expected}, got {got!r}"))
    report_repair(what, f"{len(repeats)} repeated identical labels kept once", repeats, unit)
    return _some(argument, labels, [(q, d, v) for (q, d), v in found.items()])


def _some(argument: str | None, given: Any, found: list) -> list:
    """`found`, unless it is empty and `argument` names an input where data is needed."""
    if argument is not None and not found:
        raise _nothing_in(argument, given, "at least one (qid, docid, label)")
    return found


def qrels_of(found: Iterable[Triple]) -> dict[str, dict[str, int]]:
    """{qid: {docid: label}} of the valid labels among triples already read (`triples`)."""
    out: dict[str, dict[str, int]] = {}
    for q, d, v in found:
        if v is not None:
            out.setdefault(q, {})[d] = v
    return out


def qrels(labels: Any, what: str = "labels", *, scale: Iterable[int] | None, required: bool = False,
          argument: str | None = None) -> dict[str, dict[str, int]]:
    """{qid: {docid: label}} of the valid labels (each pair once, on `scale`: see `triples`)."""
    return qrels_of(triples(labels, what, scale=scale, required=required, argument=argument))


# The document column of every frame the API returns: PyTerrier's name, which pt.Experiment needs
# (a frame comes in with docno, docid or doc_id: NAMES). One vocabulary, so no notebook renames.
DOCNO = "docno"


def frame(labels: Any, what: str = "labels", *, scale: Iterable[int] | None):
    """A DataFrame qid, docno, label (pandas' nullable Int64: <NA> where invalid), labels on `scale`."""
    import pandas as pd

    rows = triples(labels, what, scale=scale)
    return pd.DataFrame({"qid": [r[0] for r in rows], DOCNO: [r[1] for r in rows],
                         "label": pd.array([r[2] for r in rows], dtype="Int64")})


def pairs(items: Any, what: str = "pairs", *, argument: str | None = None) -> list[tuple[str, str]]:
    """(qid, docid) of a DataFrame, a pairs/qrels/run file, Pair objects or tuples, in order, once.
    `items` is read once, as it comes; with `argument`, an input without a pair is an error naming it."""
    if isinstance(items, (str, Path)):
        from .pairs import read_pairs

        return [(p.qid, p.docid) for p in read_pairs(items)]  # an empty file is an error there

    def found():
        if is_frame(items):
            df = project_columns(items, ("qid", "docid"), what)
            for i, q, d in zip(df.index, df["qid"], df["docid"]):
                yield _id(q, f"{what}: row {i}", "qid"), _id(d, f"{what}: row {i}", "docid")
            return
        for n, item in enumerate(items, start=1):
            if hasattr(item, "qid") and hasattr(item, "docid"):
                yield str(item.qid), str(item.docid)
            elif hasattr(item, "query_id") and hasattr(item, "doc_id"):
                yield str(item.query_id), str(item.doc_id)
            elif isinstance(item, (tuple, list)) and len(item) >= 2:
                yield str(item[0]), str(item[1])
            else:
                raise JudgeblenderError(f"{what}: item {n} should be (qid, docid) or a Pair, got {item!r}")

    once = list(dict.fromkeys(found()))  # each pair once, without a list of the repeats first
    if argument is not None and not once:
        raise _nothing_in(argument, items, "at least one (qid, docid) pair")
    return once


def run_ranking(run: Any, what: str = "run") -> dict[str, list[tuple[str, float]]]:
    """{qid: [(docid, score)]}, in the order given, of a run in any shape but a file (a DataFrame,
    a PyTerrier result frame, a {qid: {docid: score}} or {qid: [(docid, score)]} dict, ScoredDoc
    or (qid, docid, score) tuples), read once. The run files' rule holds for every shape
    (pairs.runs.each_document_once, read_score): a document ranked twice for a query is an error
    naming the query, the document and both positions, never settled by row order or a dict's
    overwrite; a NaN, infinite or non-number score is an error naming its row; so is a run that
    ranks nothing, as an empty run file is. `what` names the run in errors (the caller's argument)."""
    import numpy as np

    from .pairs.runs import each_document_once, read_score

    rows, unit = _rows(run, what, "score")

    def checked():
        for where, q, d, s in rows:
            at = f"{what}: {unit} {where}"
            qid, docid = _id(q, at, "qid"), _id(d, at, "docid")
            try:
                score = read_score(s)
            except ValueError as exc:  # a frame's numpy value shown as the number it is
                raise ArgumentError(f"{at} ({qid} {docid})", str(exc), s.item() if isinstance(s, np.generic) else s
                                    ) from None
            yield where, qid, docid, score, (qid, docid, score)

    ranking = each_document_once(checked(), lambda where, expected, got: ArgumentError(
        f"{what}: {unit} {where}", expected, got), unit)
    if not ranking:
        raise _nothing_in(what, run, "at least one ranked document (qid, docid, score)")
    return ranking


def run_scores(run: Any, what: str = "run") -> dict[str, dict[str, float]]:
    """{qid: {docid: score}} of a run in any shape but a file (see `run_ranking`, whose rule it keeps)."""
    return {q: dict(docs) for q, docs in run_ranking(run, what).items()}


def run(given: Any, name: str | None = None, what: str = "run"):
    """One run (pairs.Run) from a TREC run file or `irds:` id, a Run, or any shape `run_ranking`
    reads (named `name`; a file keeps its own name without one). Read once."""
    from .pairs.runs import Run, read_run

    if isinstance(given, (str, Path)):
        return read_run(given, name=name)
    if isinstance(given, Run):
        return given if name is None or name == given.name else Run(name, given.path, columns=given.columns())
    name = what if name is None else name
    # Run ranks them by trec_eval's rule (pairs/runs.py, trec_eval_ranking)
    return Run(name, name, run_ranking(given, what))


def runs(given: Any, argument: str = "runs") -> list:
    """Runs (pairs.Run) from a folder of TREC runs (or an `irds:` id), a list of run files or Runs,
    or {name: run} where each run is any shape `run` reads; each run read once. Errors name
    `argument` and the run: `runs['bm25']: row 3 ...`."""
    from .pairs.runs import Run, read_run, read_runs_dir

    if isinstance(given, (str, Path)):
        return read_runs_dir(given) if Path(given).is_dir() else [read_run(given)]
    if isinstance(given, Mapping):
        return [run(r, str(name), f"{argument}[{name!r}]") for name, r in given.items()]
    out = []
    for i, r in enumerate(given):
        if isinstance(r, tuple):  # a ScoredDoc, or (qid, docid, score): a row, not a run
            raise ArgumentError(f"{argument}[{i}]", "a run (a run file, a Run, a DataFrame, a dict or ScoredDoc "
                                "tuples)", r, hint=f"{argument} looks like one run's rows: pass {{name: run}}")
        out.append(run(r, None if isinstance(r, (str, Path, Run)) else f"run {i + 1}", f"{argument}[{i}]"))
    return out
