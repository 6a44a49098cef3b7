"""TREC run files: `query_id Q0 doc_id rank score run_tag`, plain or gzip."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from .textfile import iter_lines


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
    rows: dict[str, list[tuple[int, float, str]]] = {}
    tag = None
    for lineno, line in iter_lines(path):
        if not line.strip():
            continue
        cols = line.split()
        if len(cols) != 6:
            raise InputError(path, lineno, "6 columns 'query_id Q0 doc_id rank score run_tag'", line)
        qid, _, docid, rank_s, score_s, tag = cols
        try:
            rank = int(rank_s)
        except ValueError:
            raise InputError(path, lineno, "an integer rank in column 4", rank_s) from None
        if rank < 0:
            raise InputError(path, lineno, "a rank >= 0 in column 4", rank_s)
        try:
            score = float(score_s)
        except ValueError:
            raise InputError(path, lineno, "a number score in column 5", score_s) from None
        if not math.isfinite(score):
            raise InputError(path, lineno, "a finite score in column 5", score_s)
        rows.setdefault(qid, []).append((rank, score, docid))
    run = Run(name=name or _run_name(path), path=path)
    for qid, entries in rows.items():
        seen: set[str] = set()
        for _, _, docid in entries:
            if docid in seen:
                raise InputError(path, None, f"each document once per query (query {qid} lists {docid} twice)")
            seen.add(docid)
        # trec_eval ranks by score, ties by docid descending; follow it so depth-k pools match.
        entries.sort(key=lambda e: (-e[1], _neg_key(e[2])))
        run.ranking[qid] = [(d, s) for _, s, d in entries]
    if not run.ranking:
        raise InputError(path, None, "at least one ranked document", "an empty run")
    return run


def _neg_key(docid: str):
    return tuple(-ord(c) for c in docid)


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
