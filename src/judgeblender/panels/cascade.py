"""Cascade: a cheap judge labels every pair; LLM judges see only the pairs where it is unsure.

1. Every pair is judged by the cheap judge(s) (embedding or cross-encoder scorers).
2. A pair is uncertain when the first cheap judge's score lies in the policy's band
   (lo <= score <= hi), when the cheap judges give it different labels, or when a cheap
   judge could not label it. Without a band but with a budget, every pair is a candidate.
3. Candidates are ranked, most doubtful first: no cheap label, then cheap judges disagreeing,
   then by the first judge's distance from its nearest cut point (a small distance means a
   small change of score flips the label). The top `budget // len(llm_judges)` go to the LLM
   judges, so at most `budget` LLM judgments are asked for.
4. An escalated pair takes the LLM verdict: the one LLM judge's label, or the blend (default
   majority vote) of several. The rest keep the first cheap judge's label.

The budget counts judgments (one LLM judge on one pair). A multi-step prompt, or a retry of an
invalid answer, makes more than one call per judgment: the result reports the calls actually
made. An escalated pair on which every LLM judge failed keeps its cheap label, and says so.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..blend import Blender
from ..errors import JudgeblenderError
from ..pairs import Pair
from ..pairs.qrels import Qrels
from ..store import CallStore
from ..judges.engine import JudgeRun, PairJudge, Reporter, judge_pairs_async, run_then_close
from ..judges.judge import Judge

CHEAP = "cheap"
LLM = "llm"
CHEAP_LLM_FAILED = "cheap (llm unjudged)"  # escalated, but no LLM judge gave a label


@dataclass(frozen=True)
class CascadePolicy:
    budget: int | None = None  # most LLM judgments (one judge on one pair); None: no cap
    band: tuple[float, float] | None = None  # first cheap judge's scores lo..hi are uncertain
    disagreement: bool = True  # cheap judges giving different labels make a pair uncertain

    def __post_init__(self) -> None:
        if self.budget is not None and self.budget < 0:
            raise JudgeblenderError(f"the LLM budget must be 0 or more, got {self.budget}")
        if self.band is not None and (len(self.band) != 2 or not self.band[0] <= self.band[1]):
            raise JudgeblenderError(f"the uncertain band must be (low, high) with low <= high, got {self.band}")


@dataclass
class CascadeResult:
    pairs: list[Pair]
    labels: dict[Pair, int | None]
    provenance: dict[Pair, str]  # CHEAP, LLM or CHEAP_LLM_FAILED
    cheap: JudgeRun
    llm: JudgeRun | None
    uncertain: int  # pairs the policy found uncertain, before the budget
    escalated: list[Pair]  # sent to the LLM judges, most doubtful first
    llm_judges: int
    seconds_cheap: float
    seconds_llm: float
    skipped: list[tuple[Pair, str]] = field(default_factory=list)

    @property
    def llm_calls(self) -> int:
        return sum(s.calls_made for s in self.llm.stats.values()) if self.llm else 0

    @property
    def llm_cache_hits(self) -> int:
        return sum(s.cache_hits for s in self.llm.stats.values()) if self.llm else 0

    def qrels(self) -> Qrels:
        out: Qrels = {}
        for p in self.pairs:
            if self.labels[p] is not None:
                out.setdefault(p.qid, {})[p.docid] = self.labels[p]
        return out

    def counts(self) -> dict[str, object]:
        by = Counter(self.provenance.values())
        n = len(self.pairs)
        judgments = len(self.escalated) * self.llm_judges
        return {
            "pairs": n, "uncertain": self.uncertain, "escalated": len(self.escalated),
            "llm_judgments": judgments, "all_llm_judgments": n * self.llm_judges,
            "llm_share": judgments / (n * self.llm_judges) if n and self.llm_judges else 0.0,
            "llm_calls": self.llm_calls, "llm_cache_hits": self.llm_cache_hits,
            "labels_from": {k: by.get(k, 0) for k in (CHEAP, LLM, CHEAP_LLM_FAILED)},
            "seconds_cheap": round(self.seconds_cheap, 2), "seconds_llm": round(self.seconds_llm, 2),
            "skipped": len(self.skipped),
        }


def rank_uncertain(cheap: JudgeRun, primary: PairJudge, policy: CascadePolicy) -> list[Pair]:
    """The uncertain pairs, most doubtful first."""
    first = cheap.judgments[primary.id]
    cuts = getattr(primary, "cuts", None)
    if cuts is None and policy.band is None:
        raise JudgeblenderError(f"cheap judge {primary.id} has no cut points to measure doubt by; give a band")
    mid = sum(policy.band) / 2 if policy.band else None
    ranked = []
    for i, p in enumerate(cheap.pairs):
        labels = [cheap.judgments[jid][p].label for jid in cheap.judgments]
        failed = any(label is None for label in labels)
        disagree = policy.disagreement and len(set(labels)) > 1
        score = first[p].score
        if policy.band is not None:
            in_band = score is not None and policy.band[0] <= score <= policy.band[1]
        else:  # no band: every pair competes for the budget; no budget either: disagreements only
            in_band = policy.budget is not None
        if not (failed or disagree or in_band):
            continue
        margin = (cuts.margin(score) if cuts is not None else abs(score - mid)) if score is not None else 0.0
        ranked.append(((not failed, not disagree, margin, i), p))  # i keeps equal doubts in input order
    return [p for _, p in sorted(ranked, key=lambda r: r[0])]


async def cascade_async(
    cheap: PairJudge | Sequence[PairJudge], llm_judges: Sequence[Judge], pairs: Sequence[Pair],
    queries: dict[str, str], corpus: dict[str, str], store: CallStore | None = None,
    policy: CascadePolicy = CascadePolicy(), reporter: Reporter | None = None, blend: str = "mv",
    skip_missing: bool = False,
) -> CascadeResult:
    cheap_judges = [cheap] if hasattr(cheap, "run") else list(cheap)
    llm_judges = list(llm_judges)
    if not cheap_judges or not llm_judges:
        raise JudgeblenderError("a cascade needs at least one cheap judge and one LLM judge")
    if policy.budget is None and policy.band is None and not (policy.disagreement and len(cheap_judges) > 1):
        raise JudgeblenderError("give the cascade a budget or an uncertain band: without either, every pair "
                                "would go to the LLM (judge them all with the LLM instead)")
    try:
        blender = Blender(blend) if len(llm_judges) > 1 else None
    except (KeyError, ValueError) as exc:
        raise JudgeblenderError(f"cascade blend {blend!r}: {exc}") from None
    started = time.perf_counter()
    cheap_run = await judge_pairs_async(cheap_judges, pairs, queries, corpus, store, reporter, skip_missing)
    seconds_cheap = time.perf_counter() - started
    ranked = rank_uncertain(cheap_run, cheap_judges[0], policy)
    escalated = ranked if policy.budget is None else ranked[:policy.budget // len(llm_judges)]

    first = cheap_run.judgments[cheap_judges[0].id]
    labels = {p: first[p].label for p in cheap_run.pairs}
    provenance = dict.fromkeys(cheap_run.pairs, CHEAP)
    llm_run = None
    started = time.perf_counter()
    if escalated:
        llm_run = await judge_pairs_async(llm_judges, escalated, queries, corpus, store, reporter)
        verdicts = _llm_verdicts(llm_run, blender)
        for p in escalated:
            if verdicts[p] is None:
                provenance[p] = CHEAP_LLM_FAILED
            else:
                labels[p], provenance[p] = verdicts[p], LLM
    return CascadeResult(
        pairs=cheap_run.pairs, labels=labels, provenance=provenance, cheap=cheap_run, llm=llm_run,
        uncertain=len(ranked), escalated=escalated, llm_judges=len(llm_judges), seconds_cheap=seconds_cheap,
        seconds_llm=time.perf_counter() - started, skipped=cheap_run.skipped,
    )


def _llm_verdicts(run: JudgeRun, blender: Blender | None) -> dict[Pair, int | None]:
    if blender is None:
        (only,) = run.judgments.values()
        return {p: only[p].label for p in run.pairs}
    from .panel import ballots_from_run

    result = blender.blend(ballots_from_run(run))
    return dict(zip(run.pairs, result.labels))


def cascade(
    cheap: PairJudge | Sequence[PairJudge], llm_judges: Sequence[Judge], pairs: Sequence[Pair],
    queries: dict[str, str], corpus: dict[str, str], store: CallStore | None = None,
    policy: CascadePolicy = CascadePolicy(), reporter: Reporter | None = None, blend: str = "mv",
    skip_missing: bool = False,
) -> CascadeResult:
    """Synchronous entry point (scripts, the CLI)."""
    llm_judges = list(llm_judges)
    return run_then_close(llm_judges, cascade_async(cheap, llm_judges, pairs, queries, corpus, store, policy,
                                                    reporter, blend, skip_missing))
