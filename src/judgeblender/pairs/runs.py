"""TREC run files: `query_id Q0 doc_id rank score run_tag`, plain or gzip."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from .textfile import check_id, iter_lines


@dataclass
class Run:
    name: str
    path: Path
    # qid -> [(docid, score)] in ranked order (score descending, as trec_eval orders them)
    ranking: dict[str, list[tuple[str, float]]] = field(default_factory=dict)

    def scores(self) -> dict[str, dict[str, float]]:
        """The {qid: {docid: score}} shape that ir-measures evaluates."""
        return {q: dict(docs) for q, docs in self.ranking.items()}

    def top(self, qid: str, depth: int | None) -> list[str]:
        docs = self.ranking.get(qid, [])
        return [d for d, _ in (docs if depth is None else docs[:depth])]


def read_run(path: str | Path, name: str | None = None) -> Run:
    path = Path(path)
    rows: dict[str, list[tuple[str, float]]] = {}
    for lineno, line in iter_lines(path):
        cols = line.split()
        if len(cols) != 6:
            if not cols:
                continue
            raise InputError(path, lineno, "6 columns 'query_id Q0 doc_id rank score run_tag'", line)
        qid, _, docid, rank_s, score_s, _tag = cols
        if not rank_s.isdigit():  # the fast test; the slow path says what is wrong
            _check_rank(path, lineno, rank_s)
        try:
            score = float(score_s)
        except ValueError:
            raise InputError(path, lineno, "a number score in column 5", score_s) from None
        if not math.isfinite(score):
            raise InputError(path, lineno, "a finite score in column 5", score_s)
        rows.setdefault(qid, []).append((docid, score))
    run = Run(name=name or _run_name(path), path=path)
    for qid, entries in rows.items():
        if len({d for d, _ in entries}) != len(entries):
            seen: set[str] = set()
            dupe = next(d for d, _ in entries if d in seen or seen.add(d))
            raise InputError(path, None, f"each document once per query (query {qid} lists {dupe} twice)")
        # trec_eval ranks by score, ties by docid descending; follow it so depth-k pools match.
        # Two stable sorts do that without a per-character key.
        entries.sort(key=lambda e: e[0], reverse=True)
        entries.sort(key=lambda e: e[1], reverse=True)
        run.ranking[qid] = entries
    if not run.ranking:
        raise InputError(path, None, "at least one ranked document", "an empty run")
    return run


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
    directory = Path(directory)
    if not directory.is_dir():
        raise InputError(directory, None, "a directory of TREC run files", "not a directory")
    files = sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        raise InputError(directory, None, "at least one run file", "an empty directory")
    runs = [read_run(p) for p in files]
    names = [r.name for r in runs]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise InputError(directory, None, "distinct run names", ", ".join(sorted(dupes)))
    return runs
