"""The judging engine: judge many pairs with one or more judges, and the names it offers.

The entry points are `judge_pairs` (synchronous: notebooks, scripts, the CLI) and
`judge_pairs_async`; `judge_stream` (stream.py) judges pairs of any length window by window. The
engine's jobs each have a module of their own, named here so a reader finds them in the order a
pair meets them:

- inputs.py: the check of every pair's query and passage before any call (`resolve_pairs`);
- run.py: one judge over the items, wave by wave (`run_judge`, the per-pair state machine);
- callpool.py: one wave's calls, taken in prompt order by a pool of workers (`CallPool`);
- requests.py: the call a judge makes for a step of a pair (`build_request`);
- answers.py: reading an answer into a label, or invalid with the reason (`interpret`);
- commit.py: a judge's answers and judgments committed to the store in groups (`GroupCommit`);
- stats.py: what a run counts and reports (`JudgeStats`, `JudgeRun`, `Reporter`);
- stream.py: windows of a stream of pairs, with bounded memory (`judge_stream`).

What other packages use of the engine is named here (`__all__`); none of it is a private name.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .. import arguments
from ..errors import ArgumentError
from ..flight import SingleFlight
from ..pairs import Pair
from ..store import CallStore
from .answers import interpret, step_examples
from .commit import FLUSH_EVERY_S
from .inputs import resolve_pairs, window_texts
from .judge import Judge, JudgeSpec, PairJudge
from .requests import build_request
from .run import judge_items, run_judge, run_then_close
from .stats import JudgeRun, JudgeStats, Reporter, SilentReporter, summary_rows
from .stream import WINDOW, StreamTotals, check_stream, judge_stream

__all__ = [
    "FLUSH_EVERY_S", "JudgeRun", "JudgeStats", "PairJudge", "Reporter", "SilentReporter", "StreamTotals", "WINDOW",
    "build_request", "check_stream", "interpret", "judge_pairs", "judge_pairs_async", "judge_stream",
    "resolve_pairs", "run_judge", "run_then_close", "step_examples", "summary_rows", "window_texts",
]


async def judge_pairs_async(
    judges: Iterable[Judge | PairJudge], pairs: Sequence[Pair], queries: dict[str, str], corpus: dict[str, str],
    store: CallStore | None = None, reporter: Reporter | None = None, skip_missing: bool = False,
    flight: SingleFlight | None = None,
) -> JudgeRun:
    """Judge `pairs` with every judge, one after another, in the running event loop (pairs may be
    (qid, docid) tuples); the judgments come back in input order, each pair once. `flight`: shared
    by the runs of one loop (a server's requests), a call one of them is making is waited for by
    the others that need it, not made again (callpool.CallPool)."""
    judges = list(judges)
    arguments.distinct_ids("judges", (j.id for j in judges))
    pairs = [p if isinstance(p, Pair) else Pair(*map(str, p)) for p in pairs]  # (qid, docid) tuples too
    ok, skipped = resolve_pairs(pairs, queries, corpus, skip_missing)
    items = [(p, {"query": queries[p.qid], "passage": corpus[p.docid]}) for p in ok]
    judgments, stats = await judge_items(judges, items, store, reporter or SilentReporter(), flight)
    return JudgeRun(pairs=ok, judgments=judgments, stats=stats, skipped=skipped)


def judge_pairs(
    judges: Iterable[Judge | PairJudge | JudgeSpec | str], pairs: Sequence[Pair | tuple[str, str]],
    queries: dict[str, str], corpus: dict[str, str], store: CallStore | None = None,
    reporter: Reporter | None = None, skip_missing: bool = False,
) -> JudgeRun:
    """Synchronous entry point (notebooks, scripts, the CLI). Judges may be given as JudgeSpecs or
    model strings: those are built here and closed afterwards; pairs as (qid, docid) tuples."""
    from .factory import build_judge  # factory imports this module

    given = list(judges)
    if not given:  # no judge would make a run that judged nothing
        raise ArgumentError("judges", "at least one judge", judges)
    built = [build_judge(JudgeSpec(model=j) if isinstance(j, str) else j)
             for j in given if isinstance(j, (JudgeSpec, str))]
    made = iter(built)
    judges = [next(made) if isinstance(j, (JudgeSpec, str)) else j for j in given]
    try:
        return run_then_close(judges, judge_pairs_async(judges, pairs, queries, corpus, store, reporter,
                                                        skip_missing))
    finally:
        for judge in built:
            judge.close()
