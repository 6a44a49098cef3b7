"""Reading ballot tables: one qrels file per judge, or a JSONL details file with every judge.

Qrels: the judge id is the file name without `.gz` and one more suffix (`sun.qrels` ->
`sun`), or NAME when the argument is `NAME=PATH`. A pair that one judge's file lacks
means that judge abstained on it.

Details JSONL, one pair a line:
    {"qid": "q1", "docid": "d7", "judges": {"j1": {"label": 2, "probs": {"0": 0.1, ...}}, ...}}
`label` null means the judge's output was invalid (it abstains); `probs` may be null or
omitted. A label missing from `probs` has probability 0 (top-k logprobs leave out the
unlikely labels); the distribution is rescaled to sum to 1. Other keys are ignored. A line
with "skipped" and no "judges" (a pair the judge run skipped) is a pair nobody voted on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from .. import arguments
from ..errors import InputError
from ..pairs.qrels import INVALID_LABELS, read_qrels, read_qrels_abstaining
from ..pairs.textfile import iter_lines
from .votes import LABELS, N_LABELS, BallotTable, Pair, Vote, merge_tables


def judge_id_for(path: str | Path) -> str:
    """`runs/sun.qrels.gz` -> `sun`: drop `.gz`, then the remaining suffix."""
    name = Path(path).name
    if name.endswith(".gz"):
        name = name[:-3]
    stem = Path(name).stem
    return stem or name


def parse_judge_arg(arg: str) -> tuple[str, Path]:
    """`NAME=PATH` names the judge explicitly; a plain path is named after its file."""
    if "=" in arg and not Path(arg).exists():
        name, _, path = arg.partition("=")
        if not name or not path:
            raise InputError(arg, None, "PATH or NAME=PATH")
        return name, Path(path)
    return judge_id_for(arg), Path(arg)


def _named(args: Sequence[str | Path]) -> list[tuple[str, Path]]:
    named = [parse_judge_arg(str(a)) for a in args]
    by_name: dict[str, list[str]] = {}
    for name, path in named:
        by_name.setdefault(name, []).append(str(path))
    dupes = {n: ps for n, ps in by_name.items() if len(ps) > 1}
    if dupes:
        shown = "; ".join(f"{n}: {', '.join(ps)}" for n, ps in dupes.items())
        raise InputError(
            next(iter(dupes.values()))[1], None,
            f"one file per judge id (judge ids are file names; give NAME=PATH to rename) but two share an id ({shown})",
        )
    return named


def load_qrels_ballots(paths: Sequence[str | Path], *, invalid_labels: str = "error") -> BallotTable:
    """One judge per qrels file (argument `PATH` or `NAME=PATH`).

    invalid_labels: "error" (default) stops at a label outside 0..3 naming file:line;
    "abstain" treats such a label (e.g. `1.`) as the judge abstaining, and counts it in
    the table's `invalid`.
    """
    arguments.one_of("invalid_labels", invalid_labels, INVALID_LABELS)
    if not paths:
        raise InputError("<arguments>", None, "at least one qrels file")
    tables = []
    for judge, path in _named(paths):
        if invalid_labels == "error":
            pairs = {(q, d): lab for q, docs in read_qrels(path, allowed=LABELS).items() for d, lab in docs.items()}
            bad = 0
        else:
            pairs, bad = read_qrels_abstaining(path, allowed=LABELS)
        table = BallotTable.from_votes(((p, {judge: lab}) for p, lab in pairs.items()), judges=[judge])
        tables.append(BallotTable(table.pairs, table.judges, table.labels, None, {judge: bad}))
    return merge_tables(tables)


def _probs_from_json(raw: object, path: Path, lineno: int, judge: str) -> tuple[float, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InputError(path, lineno, f"judge {judge}: 'probs' as an object {{\"0\": p, ...}} or null", json.dumps(raw))
    dist = [0.0] * N_LABELS
    for key, value in raw.items():
        if key not in {str(lab) for lab in LABELS}:
            raise InputError(path, lineno, f"judge {judge}: probability keys among {[str(x) for x in LABELS]}", key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(path, lineno, f"judge {judge}: a number for probs[{key!r}]", json.dumps(value))
        dist[LABELS.index(int(key))] = float(value)
    try:
        return Vote(LABELS[0], dist).probs
    except ValueError as exc:
        raise InputError(path, lineno, f"judge {judge}: a probability distribution ({exc})") from None


def _pair_id(obj: dict, key: str, path: Path, lineno: int) -> str:
    value = obj.get(key)
    # numeric ids are common in TREC files; anything else is a malformed line
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise InputError(path, lineno, f"a string {key!r}", json.dumps(value))
    return str(value)


def load_details(path: str | Path) -> BallotTable:
    """Read a details JSONL file (format in the module docstring) into a ballot table."""
    path = Path(path)
    rows: list[tuple[Pair, dict[str, Vote]]] = []
    seen: dict[Pair, int] = {}
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(path, lineno, f"one JSON object per line ({exc.msg})", line) from None
        if not isinstance(obj, dict):
            raise InputError(path, lineno, "a JSON object", line)
        pair = (_pair_id(obj, "qid", path, lineno), _pair_id(obj, "docid", path, lineno))
        if pair in seen:
            raise InputError(path, lineno, f"each pair once ({pair[0]} {pair[1]} is also on line {seen[pair]})")
        seen[pair] = lineno
        judges = obj.get("judges")
        if judges is None and "skipped" in obj:
            judges = {}  # the judge run skipped this pair (e.g. passage missing): nobody voted
        if not isinstance(judges, dict):
            raise InputError(path, lineno, "'judges': {judge_id: {label, probs}}", json.dumps(judges))
        votes: dict[str, Vote] = {}
        for judge, entry in judges.items():
            if not isinstance(entry, dict) or "label" not in entry:
                raise InputError(path, lineno, f"judge {judge}: an object with 'label'", json.dumps(entry))
            label = entry["label"]
            if label is not None and (isinstance(label, bool) or label not in LABELS):
                raise InputError(path, lineno, f"judge {judge}: a label in {list(LABELS)} or null", json.dumps(label))
            dist = _probs_from_json(entry.get("probs"), path, lineno, judge)
            votes[judge] = Vote(label, dist if label is not None else None)
        rows.append((pair, votes))
    if not rows:
        raise InputError(path, None, "at least one pair", "an empty file")
    table = BallotTable.from_votes(rows)
    invalid = {
        j: sum(1 for _, votes in rows if j in votes and votes[j].label is None) for j in table.judges
    }
    return BallotTable(table.pairs, table.judges, table.labels, table.probs, invalid)


def load_ballots(qrels_paths: Sequence[str | Path] = (), details: Sequence[str | Path] = (),
                 *, invalid_labels: str = "error") -> BallotTable:
    """Qrels judges and details-file judges side by side (ids must not repeat)."""
    tables = []
    if qrels_paths:
        tables.append(load_qrels_ballots(qrels_paths, invalid_labels=invalid_labels))
    tables.extend(load_details(p) for p in details)
    if not tables:
        raise InputError("<arguments>", None, "qrels files or a details file")
    try:
        return merge_tables(tables)
    except ValueError as exc:
        raise InputError(", ".join(str(p) for p in (*qrels_paths, *details)), None, "distinct judge ids", str(exc)) from None

