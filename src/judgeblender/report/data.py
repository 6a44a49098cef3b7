"""Everything the report shows, computed from the input files (no HTML here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError, JudgeblenderError
from ..evaluate.agreement import LEVELS, AgreementReport, agreement
from ..evaluate.bias import GroupBias, read_groups, report_bias
from ..evaluate.estimate import EstimateResult, estimate_with_seed
from ..evaluate.leaderboard import CorrelationReport, RunSet, correlate, evaluate_runs, parse_measures
from ..pairs.qrels import qrels_size, read_qrels
from ..pairs.runs import read_runs_dir
from .costs import StoreSummary, read_store_summary
from .families import derive_families
from .methods import MethodTable, method_table

LEADERBOARD_MEASURES = ("nDCG@10", "AP(rel=2)", "R@10")
JUDGED = "Judged@10"


@dataclass
class ReportInputs:
    gold: Path
    preds: list[Path]
    runs_dir: Path
    groups: Path | None = None
    store: Path | None = None
    bootstrap: int = 1000
    seed: int = 0
    min_judged: float = 0.9  # Judged@10 below this flags a run's scores as resting on holes
    title: str = "How far can the LLM labels be trusted?"
    seed_qrels: Path | None = None  # a human seed set: adds the PPI++ leaderboard (evaluate/estimate.py)
    design: Path | None = None  # the seed's design file [default: SEED.design.json when it exists]
    confidence: float = 0.95  # of the bootstrap intervals and of the seed's PPI++ intervals


@dataclass
class ReportData:
    inputs: ReportInputs
    gold_pairs: int
    gold_queries: int
    pred_pairs: dict[str, int]
    runs: list[str]
    groups: dict[str, str]
    groups_note: str
    agreements: list[AgreementReport]
    correlations: list[CorrelationReport]  # predictions outermost, then LEADERBOARD_MEASURES
    judged: dict[str, list[float]]  # "human" and each prediction -> Judged@10 per run (gold queries)
    biases: list[tuple[CorrelationReport, list[GroupBias]]]
    methods: dict[str, MethodTable]  # prediction -> comparison on the prediction's own queries
    store: StoreSummary | None
    notes: list[str] = field(default_factory=list)
    # with a seed: prediction -> its PPI++ estimate (or the reason there is none, a str)
    estimates: dict[str, EstimateResult | str] = field(default_factory=dict)


def _names(paths: list[Path]) -> list[str]:
    names = [p.stem for p in paths]
    if len(set(names)) != len(names):
        raise JudgeblenderError("two --pred files share a file name stem: " + ", ".join(str(p) for p in paths)
                                + "; each prediction is named by its stem, so rename one")
    return names


def collect(inputs: ReportInputs) -> ReportData:
    if not 0 <= inputs.min_judged <= 1:
        raise JudgeblenderError(f"--min-judged is a share between 0 and 1, got {inputs.min_judged}")
    if not inputs.preds:
        raise JudgeblenderError("the report needs at least one --pred qrels")
    if inputs.design is not None and inputs.seed_qrels is None:
        raise JudgeblenderError("--design describes a --seed-qrels file: give both")
    gold = read_qrels(inputs.gold, allowed=LEVELS)
    preds = {name: read_qrels(p, allowed=LEVELS) for name, p in zip(_names(inputs.preds), inputs.preds)}
    if "human" in preds:
        raise JudgeblenderError("a --pred file may not be named 'human' (the report's name for --gold)")
    runs = read_runs_dir(inputs.runs_dir)
    run_names = [r.name for r in runs]

    notes: list[str] = []
    if inputs.groups:
        groups = read_groups(inputs.groups)
        unknown = sorted(set(groups) - set(run_names))
        if unknown:
            notes.append(f"{len(unknown)} run(s) named in {inputs.groups} are not in {inputs.runs_dir}: "
                         + ", ".join(unknown[:5]))
        groups_note = f"System families from {inputs.groups}."
    else:
        groups, folded = derive_families(run_names)
        groups_note = ("No --groups file was given, so each run's family is derived from its name: the text "
                       "before the first '-', '_' or '.', trailing digits dropped.")
        if folded:
            groups_note += f" To keep colours distinct, the smaller families {', '.join(folded)} are shown as 'other'."

    agreements = [agreement(gold, pred, name=name) for name, pred in preds.items()]
    correlations = correlate(gold, preds, runs, LEADERBOARD_MEASURES, bootstrap=inputs.bootstrap, seed=inputs.seed,
                             confidence=inputs.confidence)
    runset = RunSet(runs, sorted(gold))
    judged_measure = parse_measures([JUDGED])
    judged = {name: evaluate_runs(runset, q, judged_measure)[JUDGED].mean(axis=1).tolist()
              for name, q in {"human": gold, **preds}.items()}
    human_cover = float(np.mean(judged["human"]))
    if human_cover < inputs.min_judged:
        notes.append(f"The human labels cover only {human_cover:.1%} of the runs' top 10 on average: the human "
                     "leaderboard itself rests on unlabelled documents, so its correlations compare two incomplete "
                     "leaderboards. Label agreement does not suffer from this.")
    return ReportData(
        inputs=inputs, gold_pairs=qrels_size(gold), gold_queries=len(gold),
        pred_pairs={name: qrels_size(q) for name, q in preds.items()}, runs=run_names, groups=groups,
        groups_note=groups_note, agreements=agreements, correlations=correlations, judged=judged,
        biases=[(r, report_bias(r, groups)) for r in correlations],
        methods={name: method_table(runs, q) for name, q in preds.items()},
        store=read_store_summary(inputs.store) if inputs.store else None, notes=notes,
        estimates=seed_estimates(inputs, preds, runs) if inputs.seed_qrels else {},
    )


def seed_estimates(inputs: ReportInputs, preds: dict[str, dict], runs: list) -> dict[str, EstimateResult | str]:
    """Each prediction's leaderboard corrected by the human seed (query-level PPI++, or the design
    estimator for a seed of pairs), from evaluate/estimate.py. A prediction the seed does not fit
    (a seed pair it never labelled, say) gets the reason instead; if none fits, the first error."""
    seed = read_qrels(inputs.seed_qrels, allowed=LEVELS)
    out: dict[str, EstimateResult | str] = {}
    errors = []
    for name, pred in preds.items():
        path = next(p for p in inputs.preds if p.stem == name)
        try:
            out[name] = estimate_with_seed(pred, seed, runs, None, confidence=inputs.confidence, llm_path=path,
                                           human_path=inputs.seed_qrels, design_path=inputs.design)
        except InputError as exc:
            errors.append(exc)
            out[name] = str(exc)
    if len(errors) == len(preds):
        raise errors[0]
    return out

