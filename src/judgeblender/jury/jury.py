"""A jury that grades any items (LLM answers, summaries ...) with rubric judges and pools them.

    jury = Jury([JudgeSpec("llamacpp:default", prompt="factual-accuracy"),
                 JudgeSpec("llamacpp:gemma-270m", prompt="factual-accuracy")], pooling="mean")
    results = jury.score([{"input": "...", "output": "...", "reference": "..."}])
    results[0].score, results[0].judges["llamacpp:default/factual-accuracy/generate"].reason

Items are dicts of the fields the rubric template declares as `inputs` (plus an optional
"id"). It uses the same backends, store and engine as relevance judging: a second run with
the same store makes no new calls. Judge ids are unique (a clash is an error, not an
overwrite) and a judge whose verdict is invalid abstains with its reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import arguments, asyncrun
from ..errors import ArgumentError, InputError, JudgeblenderError
from ..judges import Judge, JudgeSpec, build_judge
from ..judges.commit import declare_writer
from ..judges.engine import JudgeStats, Reporter, SilentReporter, run_judge
from ..pairs import Pair
from ..pairs.texts import text_problem
from ..store import CallStore
from .combine import Pooled, pool


@dataclass(frozen=True)
class JudgeVerdict:
    score: float | None
    reason: str | None
    invalid_reason: str | None
    raw_output: str | None


@dataclass
class ItemResult:
    item_id: str
    score: float | None
    verdict: bool | None
    judges: dict[str, JudgeVerdict]
    reason: str | None = None  # why the pooled score or verdict is missing

    @property
    def abstained(self) -> list[str]:
        return [j for j, v in self.judges.items() if v.score is None]


@dataclass
class JuryRun:
    results: list[ItemResult]
    stats: dict[str, JudgeStats] = field(default_factory=dict)


class Jury:
    def __init__(self, judges: Sequence[JudgeSpec | Judge], pooling: str = "mean", threshold: float = 0.5,
                 trim: float = 0.1, tie: str = "undecided", min_votes: int = 1,
                 store: CallStore | str | Path | None = None):
        given = judges
        judges = list(judges) if isinstance(judges, Iterable) and not isinstance(judges, (str, bytes)) else []
        if not judges:  # a jury of no member could decide nothing
            raise ArgumentError("judges", "a list of at least one JudgeSpec or Judge", given)
        arguments.bounded("min_votes", min_votes)
        self.judges = [j if isinstance(j, Judge) else build_judge(j) for j in judges]
        for judge in self.judges:
            if not isinstance(judge, Judge):
                raise JudgeblenderError(f"{judge.id}: a rubric jury needs prompt judges (LLMs)")
            if judge.mode == "logprobs" and any(s.output == "json" for s in judge.template.steps):
                raise JudgeblenderError(f"{judge.id}: a JSON verdict must be generated; "
                                        "logprobs scoring cannot give one (use mode generate)")
        arguments.distinct_ids("judges", (j.id for j in self.judges))
        pool([], pooling, threshold, trim, tie)  # validate the settings now
        self.pooling, self.threshold, self.trim, self.tie, self.min_votes = pooling, threshold, trim, tie, min_votes
        self.store = CallStore(store) if isinstance(store, (str, Path)) else store

    def _items(self, items: Sequence[dict[str, Any]]) -> list[tuple[Pair, dict[str, str]]]:
        needed = {name for j in self.judges for name in j.template.inputs}
        out, seen = [], set()
        for n, item in enumerate(items, start=1):
            item_id = str(item.get("id", n))
            if item_id in seen:
                raise InputError("items", n, "a unique id per item", item_id)
            seen.add(item_id)
            missing = sorted(needed - {k for k, v in item.items() if v is not None})
            if missing:
                raise InputError("items", n, f"the fields {sorted(needed)}", f"missing {', '.join(missing)}")
            unfit = [f"{k} {problem}" for k in sorted(needed) for problem in (text_problem(item[k]),) if problem]
            if unfit:  # the check the engine makes of queries and passages
                raise InputError("items", n, f"the fields {sorted(needed)} as non-blank strings (item {item_id})",
                                 "; ".join(unfit))
            out.append((Pair(item_id, ""), {k: str(v) for k, v in item.items() if k != "id"}))
        return out

    async def arun(self, items: Sequence[dict[str, Any]], reporter: Reporter | None = None) -> JuryRun:
        prepared = self._items(items)
        reporter = reporter or SilentReporter()
        per_judge, stats = {}, {}
        declare_writer(self.store, self.judges)
        for judge in self.judges:
            per_judge[judge.id], stats[judge.id] = await run_judge(judge, prepared, self.store, reporter)
        results = []
        for pair, _ in prepared:
            verdicts = {}
            for jid, judgments in per_judge.items():
                j = judgments[pair]
                verdicts[jid] = JudgeVerdict(j.score, j.reason, j.invalid_reason, j.raw_output)
            pooled: Pooled = pool([v.score for v in verdicts.values()], self.pooling, self.threshold, self.trim,
                                  self.tie, self.min_votes)
            results.append(ItemResult(pair.qid, pooled.score, pooled.verdict, verdicts, pooled.reason))
        return JuryRun(results, stats)

    async def ascore(self, items: Sequence[dict[str, Any]]) -> list[ItemResult]:
        return (await self.arun(items)).results

    def score(self, items: Sequence[dict[str, Any]]) -> list[ItemResult]:
        return asyncrun.run(self.ascore(items))

    def close(self) -> None:
        for judge in self.judges:
            judge.close()
        if self.store is not None:
            self.store.close()
