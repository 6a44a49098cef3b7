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
and gives back a DataFrame (`frame`) or a qrels dict (`qrels`). Every reader of labels takes
the scale it checks as a required keyword (`scale=SCALE`, TREC's 0-3, or `scale=None` for any
integer), so no caller can forget it: a label of 7 or -1 is an error naming its row, file and
line, in every shape, never a gain. Runs likewise: a DataFrame with
qid, docid, score (ir_measures' query_id, doc_id, score), a {qid: {docid: score}} dict, ir_measures
`ScoredDoc` tuples, or a TREC run file. pandas is imported only when a frame is asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .errors import JudgeblenderError, shown
from .pairs.qrels import PAIRS_ONLY, SCALE  # noqa: F401 (callers name the scale as convert.SCALE)

Triple = tuple[str, str, "int | None"]
# The names each column goes by, the one read first when a frame has several: the project's own,
# PyTerrier's (docno is the document's name; a PyTerrier docid is Terrier's internal number, so
# docno wins) and ir_measures' (query_id, doc_id, relevance).
NAMES = {"qid": ("qid", "query_id"), "docid": ("docno", "docid", "doc_id"), "label": ("label", "relevance"),
         "passage": ("passage", "text")}


def is_frame(value: Any) -> bool:
    return type(value).__module__.partition(".")[0] == "pandas" and hasattr(value, "columns")


def _columns(df, needed: tuple[str, ...], what: str):
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
            from .pairs.textfile import log

            log.warning("note: %s: columns %s name the same thing; used %r", what,
                        " and ".join(map(repr, present)), present[0])
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


def _rows(labels: Any, what: str) -> tuple[Iterable[tuple[Any, Any, Any, Any]], str]:
    """(position, qid, docid, label) of labels in any shape, and what a position counts."""
    if is_frame(labels):
        df = _columns(labels, ("qid", "docid", "label"), what)
        return zip(df.index, df["qid"], df["docid"], df["label"]), "row"
    if isinstance(labels, Mapping):
        def nested():
            for qid, docs in labels.items():
                if not isinstance(docs, Mapping):
                    raise JudgeblenderError(f"{what}: a qrels dict maps qid -> {{docid: label}}; "
                                            f"query {qid!r} maps to {type(docs).__name__}")
                yield from ((f"{qid}/{d}", qid, d, v) for d, v in docs.items())
        return nested(), "key"
    if isinstance(labels, Iterable):
        def items():
            for n, row in enumerate(labels, start=1):
                fields = (row.query_id, row.doc_id, row.relevance) if hasattr(row, "relevance") else tuple(row)
                if len(fields) != 3:
                    raise JudgeblenderError(f"{what}: row {n} should be (qid, docid, label), got {row!r}")
                yield (n, *fields)
        return items(), "row"
    raise JudgeblenderError(f"{what}: expected a DataFrame, a qrels dict, (qid, docid, label) tuples or a "
                            f"qrels file, got {type(labels).__name__}")


def triples(labels: Any, what: str = "labels", *, scale: Iterable[int] | None,
            required: bool = False) -> list[Triple]:
    """(qid, docid, label) for every pair, in the order given; label None where invalid.

    The qrels files' rule holds for every shape (pairs.qrels.one_label_per_pair): a pair given
    twice with the same label is kept once, with a warning that says how many; with another
    label it is an error. A label that is not an integer of `scale` (SCALE, TREC's 0-3; None:
    any integer) is an error naming its row, or its file and line; so is a missing one when
    `required` (gold labels). `scale` has no default: every caller says which it reads."""
    from .pairs.qrels import one_label_per_pair, read_qrels
    from .pairs.textfile import report_repair

    if isinstance(labels, (str, Path)):
        return [(q, d, v) for q, docs in read_qrels(labels, allowed=scale).items() for d, v in docs.items()]
    rows, unit = _rows(labels, what)
    checked = ((where, _id(q, f"{what}: {unit} {where}", "qid"), _id(d, f"{what}: {unit} {where}", "docid"),
                _label(v, f"{what}: {unit} {where} ({q} {d})", scale, required), v) for where, q, d, v in rows)
    found, repeats = one_label_per_pair(checked, lambda where, expected, got: JudgeblenderError(
        f"{what}: {unit} {where}: expected {expected}, got {got!r}"))
    report_repair(what, f"{len(repeats)} repeated identical labels kept once", repeats, unit)
    return [(q, d, v) for (q, d), v in found.items()]


def qrels(labels: Any, what: str = "labels", *, scale: Iterable[int] | None,
          required: bool = False) -> dict[str, dict[str, int]]:
    """{qid: {docid: label}} of the valid labels (each pair once, on `scale`: see `triples`)."""
    out: dict[str, dict[str, int]] = {}
    for q, d, v in triples(labels, what, scale=scale, required=required):
        if v is not None:
            out.setdefault(q, {})[d] = v
    return out


def invalid_count(labels: Any, *, scale: Iterable[int] | None) -> int:
    """How many pairs carry an invalid (missing) label; a label off `scale` is an error (`triples`)."""
    return 0 if isinstance(labels, (str, Path, Mapping)) else sum(v is None for *_, v in triples(labels, scale=scale))


def frame(labels: Any, what: str = "labels", *, scale: Iterable[int] | None):
    """A DataFrame qid, docid, label (pandas' nullable Int64: <NA> where invalid), labels on `scale`."""
    import pandas as pd

    rows = triples(labels, what, scale=scale)
    return pd.DataFrame({"qid": [r[0] for r in rows], "docid": [r[1] for r in rows],
                         "label": pd.array([r[2] for r in rows], dtype="Int64")})


def pairs(items: Any, what: str = "pairs") -> list[tuple[str, str]]:
    """(qid, docid) of a DataFrame, a pairs/qrels/run file, Pair objects or tuples, in order, once."""
    if isinstance(items, (str, Path)):
        from .pairs import read_pairs

        return [(p.qid, p.docid) for p in read_pairs(items)]
    if is_frame(items):
        df = _columns(items, ("qid", "docid"), what)
        found = [(_id(q, f"{what}: row {i}", "qid"), _id(d, f"{what}: row {i}", "docid"))
                 for i, q, d in zip(df.index, df["qid"], df["docid"])]
    else:
        found = []
        for n, item in enumerate(items, start=1):
            if hasattr(item, "qid") and hasattr(item, "docid"):
                found.append((str(item.qid), str(item.docid)))
            elif hasattr(item, "query_id") and hasattr(item, "doc_id"):
                found.append((str(item.query_id), str(item.doc_id)))
            elif isinstance(item, (tuple, list)) and len(item) >= 2:
                found.append((str(item[0]), str(item[1])))
            else:
                raise JudgeblenderError(f"{what}: item {n} should be (qid, docid) or a Pair, got {item!r}")
    return list(dict.fromkeys(found))


def run_scores(run: Any, what: str = "run") -> dict[str, dict[str, float]]:
    """{qid: {docid: score}} of a run given as a DataFrame, a dict or ScoredDoc tuples."""
    if is_frame(run):
        df = _columns(run, ("qid", "docid", "score"), what)
        rows = zip(df["qid"], df["docid"], df["score"])
    elif isinstance(run, Mapping):
        rows = ((q, d, s) for q, docs in run.items() for d, s in docs.items())
    else:
        rows = ((r.query_id, r.doc_id, r.score) if hasattr(r, "score") else tuple(r) for r in run)
    out: dict[str, dict[str, float]] = {}
    for q, d, s in rows:
        out.setdefault(str(q), {})[str(d)] = float(s)
    return out


def runs(given: Any) -> list:
    """Runs (pairs.Run) from a folder of TREC runs, a list of run files, or {name: run} where each
    run is a file, a DataFrame, a dict or ScoredDoc tuples."""
    from .pairs.runs import Run, read_run, read_runs_dir

    if isinstance(given, (str, Path)):
        return read_runs_dir(given) if Path(given).is_dir() else [read_run(given)]
    if isinstance(given, Mapping):
        out = []
        for name, run in given.items():
            if isinstance(run, (str, Path)):
                out.append(read_run(run, name=str(name)))
                continue
            scores = run_scores(run, f"run {name}")
            # Run ranks them by trec_eval's rule (pairs/runs.py, trec_eval_ranking)
            out.append(Run(str(name), str(name), {q: list(docs.items()) for q, docs in scores.items()}))
        return out
    return [r if isinstance(r, Run) else read_run(r) for r in given]
