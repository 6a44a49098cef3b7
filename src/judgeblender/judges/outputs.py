"""Write a judging run: TREC qrels of the judged pairs, and a JSONL of per-pair details.

`RunFiles` writes them window by window as a streamed run completes (judges/stream.py
`judge_stream`): each window's lines are appended in input order to temporary files beside the
outputs, which replace the outputs only when the run ends without an exception, both together
(fileio.outputs_together). The bytes are those `write_qrels_file` and `write_details` write for
the whole run at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import IO

from ..errors import ArgumentError
from ..fileio import atomic_write_text, atomic_writer, outputs_together
from ..pairs import Pair
from ..pairs.qrels import format_qrels
from .stats import JudgeRun


def final_labels(run: JudgeRun, judge_id: str | None = None) -> dict[Pair, int | None]:
    """One judge's labels (the only judge when None). Blends come from the blend stage."""
    if judge_id is None:
        if len(run.judgments) != 1:
            raise ArgumentError("judge_id", "the judge whose labels are wanted", None,
                                hint=f"the run has several judges ({', '.join(run.judgments)}): name one, or blend them")
        judge_id = next(iter(run.judgments))
    return {p: j.label for p, j in run.judgments[judge_id].items()}


def qrels_rows(run: JudgeRun, labels: dict[Pair, int | None]) -> list[tuple[str, str, int]]:
    """The judged pairs' rows in the run's order; unjudged pairs are left out (and reported)."""
    return [(p.qid, p.docid, labels[p]) for p in run.pairs if labels.get(p) is not None]  # type: ignore[misc]


def write_qrels_file(path: str | Path, run: JudgeRun, labels: dict[Pair, int | None]) -> int:
    """Qrels for the pairs that have a label; unjudged pairs are left out (and reported)."""
    rows = qrels_rows(run, labels)
    atomic_write_text(path, format_qrels(rows))
    return len(rows)


def detail_record(run: JudgeRun, p: Pair, labels: dict[Pair, int | None], blend: dict | None = None,
                  extra: dict[Pair, dict] | None = None) -> dict:
    """One judged pair's details: the record the details file holds as a JSON line, and what
    `judgeblender serve` answers for the pair (one function, so the two never differ)."""
    judges = {jid: run.judgments[jid][p].record() for jid in run.judgments}
    rec = {"qid": p.qid, "docid": p.docid, "label": labels.get(p)}
    if len(judges) == 1:
        only = next(iter(judges.values()))
        rec.update(expected=only["expected"], probs=only["probs"], invalid_reason=only["invalid_reason"])
    if blend:
        rec["blend"] = blend
    if extra and p in extra:
        rec.update(extra[p])
    rec["judges"] = judges
    return rec


def detail_lines(run: JudgeRun, labels: dict[Pair, int | None], blend: dict | None = None,
                 extra: dict[Pair, dict] | None = None) -> Iterator[str]:
    """One JSON line per judged pair, in the run's order."""
    for p in run.pairs:
        yield json.dumps(detail_record(run, p, labels, blend, extra), ensure_ascii=False) + "\n"


def skipped_lines(skipped: list[tuple[Pair, str]]) -> Iterator[str]:
    for p, reason in skipped:
        yield json.dumps({"qid": p.qid, "docid": p.docid, "label": None, "skipped": reason}) + "\n"


def write_details(path: str | Path, run: JudgeRun, labels: dict[Pair, int | None],
                  blend: dict | None = None, extra: dict[Pair, dict] | None = None) -> None:
    atomic_write_text(path, "".join([*detail_lines(run, labels, blend, extra), *skipped_lines(run.skipped)]))


class RunFiles:
    """The qrels and details of a streamed run, written as its windows complete.

        with RunFiles(out, details) as files:
            judge_stream(..., on_window=lambda run: files.write(run, final_labels(run)))
            files.finish(totals.skipped)

    Without `finish` (an exception, an interrupt) neither output is replaced."""

    def __init__(self, out: str | Path, details: str | Path):
        self.out, self.details = Path(out), Path(details)
        self.judged = 0
        self._stack = ExitStack()
        self._finished = False

    def __enter__(self) -> "RunFiles":
        # both files are synced before either is renamed: a full disk on the second leaves both as they were
        self._stack.enter_context(outputs_together())
        self._qrels: IO[str] = self._stack.enter_context(
            atomic_writer(self.out, "w", encoding="utf-8", newline="\n"))
        self._lines: IO[str] = self._stack.enter_context(
            atomic_writer(self.details, "w", encoding="utf-8", newline="\n"))
        return self

    def write(self, run: JudgeRun, labels: dict[Pair, int | None], blend: dict | None = None,
              extra: dict[Pair, dict] | None = None) -> None:
        rows = qrels_rows(run, labels)
        self._qrels.write(format_qrels(rows))
        self._lines.writelines(detail_lines(run, labels, blend, extra))
        self.judged += len(rows)

    def finish(self, skipped: list[tuple[Pair, str]]) -> None:
        """The skipped pairs go last, as write_details puts them; then the files may replace the outputs."""
        self._lines.writelines(skipped_lines(skipped))
        self._finished = True

    def __exit__(self, kind, exc, tb) -> bool:
        if kind is None and not self._finished:
            error = RuntimeError("RunFiles closed without finish(): outputs left as they were")
            self._stack.__exit__(RuntimeError, error, None)
            raise error
        return bool(self._stack.__exit__(kind, exc, tb))
