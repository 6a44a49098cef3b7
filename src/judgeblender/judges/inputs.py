"""The one check of what a prompt will show, before any model call: every pair's query and
passage present and a non-blank string, for the CLI and the library alike."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import JudgeblenderError, MissingItemsError
from ..pairs import Pair
from ..pairs.texts import text_problem


def resolve_pairs(
    pairs: Sequence[Pair], queries: Mapping[str, Any], corpus: Mapping[str, Any], skip_missing: bool = False,
    queries_source: str = "the queries", corpus_source: str = "the corpus",
) -> tuple[list[Pair], list[tuple[Pair, str]]]:
    """Split pairs into judgeable ones and those missing a query or passage.

    A query or passage that is absent, NaN, None, <NA> or blank is an error naming the pair
    (with `skip_missing`, a skip with that reason); one that is not a string is always an error."""
    pairs = list(dict.fromkeys(pairs))
    unfit = Unfit()
    ok = unfit.sort(pairs, queries, window_problems(corpus, (p.docid for p in pairs)), skip_missing)
    if not skip_missing:
        unfit.raise_first(len(pairs), queries_source, corpus_source)
    return ok, unfit.skipped


def window_texts(corpus: Mapping[str, Any], docids: Iterable[str]) -> dict[str, Any]:
    """The passages of one window: one read of an on-disk index (`get_many`), or dict lookups."""
    get_many = getattr(corpus, "get_many", None)
    if get_many is not None:
        return get_many(list(docids))
    return {d: corpus[d] for d in dict.fromkeys(docids) if d in corpus}


def window_problems(corpus: Mapping[str, Any], docids: Iterable[str]) -> dict[str, str | None]:
    """What is wrong with each passage of one window that the corpus holds ({docid:
    text_problem}, None for nothing): asked of an index that recorded it as it was built
    (`problems_many`, no line read, so judging reads each passage once), else of the texts."""
    problems_many = getattr(corpus, "problems_many", None)
    if problems_many is not None:
        return problems_many(list(docids))
    return {d: text_problem(text) for d, text in window_texts(corpus, docids).items()}


class Unfit:
    """What makes pairs unjudgeable, gathered over one list or over a stream of windows, so the
    error a stream raises at its end is the one `resolve_pairs` raises for the whole list."""

    SHOWN = 1000  # missing docids kept for the message (it shows 5); the count is kept apart

    def __init__(self) -> None:
        self.skipped: list[tuple[Pair, str]] = []
        self.no_query: set[str] = set()
        self.no_passage: list[str] = []
        self.n_no_passage = 0
        self.text: tuple[Pair, str, str] | None = None  # the first pair with an unfit text
        self.n_text = 0

    def sort(self, pairs: list[Pair], queries: Mapping[str, Any], passages: Mapping[str, str | None],
             skip_missing: bool) -> list[Pair]:
        """The judgeable pairs of `pairs` (each once); the others are counted, and kept as skips.
        `passages`: what is wrong with each passage the corpus holds (window_problems)."""
        corpus = passages
        no_query = [p for p in pairs if p.qid not in queries]
        no_passage = [p for p in pairs if p.qid in queries and p.docid not in corpus]
        self.no_query.update(p.qid for p in no_query)
        self.no_passage.extend(p.docid for p in no_passage[:self.SHOWN - len(self.no_passage)])
        self.n_no_passage += len(no_passage)
        skipped = [(p, "query missing") for p in no_query] + [(p, "passage missing") for p in no_passage]
        missing = {p for p, _ in skipped}
        judged = [p for p in pairs if p not in missing]
        problems = {("query", q): text_problem(queries[q]) for q in {p.qid for p in judged}}  # each text once
        problems.update({("passage", d): corpus[d] for d in {p.docid for p in judged}})
        unfit = [(p, kind, problem) for p in judged for kind, key in (("query", p.qid), ("passage", p.docid))
                 for problem in (problems[kind, key],) if problem is not None]
        refused = [u for u in unfit if not skip_missing or u[2].startswith("not ")]  # a wrong type is never skipped
        if refused and self.text is None:
            self.text = refused[0]
        self.n_text += len(refused)
        if refused and skip_missing:  # a wrong type: an error even when skipping
            raise self._text_error(len(pairs))
        first_reason = {p: f"{kind} {problem}" for p, kind, problem in reversed(unfit)}  # the query's, if both
        skipped += [(p, first_reason[p]) for p in dict.fromkeys(p for p, _, _ in unfit)]
        missing |= set(first_reason)
        self.skipped.extend(skipped)
        return [p for p in pairs if p not in missing]

    def raise_first(self, total: int, queries_source: str, corpus_source: str) -> None:
        """The error for the first kind of problem found (queries, then passages, then texts)."""
        if self.no_query:
            raise MissingItemsError("query", sorted(self.no_query), total, queries_source)
        if self.n_no_passage:
            raise MissingItemsError("passage", self.no_passage, total, corpus_source, count=self.n_no_passage)
        if self.text is not None:
            raise self._text_error(total)

    def _text_error(self, total: int) -> JudgeblenderError:
        (qid, docid), kind, problem = self.text  # type: ignore[misc]
        hint = "" if problem.startswith("not ") else "; pass skip_missing=True to judge the rest and report them"
        return JudgeblenderError(f"pair ({qid}, {docid}): its {kind} is {problem}, expected a non-blank string "
                                 f"({self.n_text} of {total} pairs like this){hint}")
