"""Everything the report shows, computed from its inputs (no HTML here).

The inputs are read in one step (`read_labels`, from the command's files), apart from the
computing (`collect`), so that the Python API (workflow.write_report) hands over labels and
systems it read from DataFrames, dicts or PyTerrier transformers and gets the same report
from the same code.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import arguments
from ..arguments import spoken
from ..errors import ArgumentError, InputError, JudgeblenderError
from ..evaluate.agreement import LEVELS, AgreementReport, agreement
from ..evaluate.bias import GroupBias, read_groups, report_bias
from ..evaluate.estimate import EstimateResult, estimate_with_seed
from ..evaluate.intervals import CONFIDENCE
from ..evaluate.leaderboard import (
    CorrelationReport, RunSet, compare_scores, correlate, evaluate_runs, fully_judged_queries, parse_measures,
)
from ..evaluate.seed_overlap import AGREEMENT, ESTIMATION, seed_overlap
from ..pairs.qrels import Qrels, qrels_size, read_qrels
from ..pairs.runs import Run, read_runs_dir
from ..evaluate.scope import (
    DEFAULT_DEPTH, DEFAULT_MIN_JUDGED, DEFAULT_SCOPE, QuerySet, by_query, check_scope, describe_scope, pool_of,
    query_set, restrict,
)
from .costs import StoreSummary, read_store_summary
from .families import derive_families
from .methods import MethodTable, method_table

LEADERBOARD_MEASURES = ("nDCG@10", "AP(rel=2)", "R@10")
JUDGED = "Judged@10"
DEPTH = 10  # a query's human labels are judged on every run's top DEPTH: the leaderboard measures' cutoff

COMPLETE, JUDGED_QUERIES, PPI, NO_BASIS = "complete", "judged", "ppi", "none"


@dataclass
class HumanBasis:
    """What the human side of the leaderboards, their correlations and the family bias is computed on.

    complete: every query the human labels cover is judged enough (they label at least
    --min-judged of every run's top 10 there: evaluate/scope.py's query_set, as `correlate` decides),
    so they are scored on all of them; ppi: fewer queries are judged enough than the --seed-qrels
    seed has, whose PPI++ estimates of the human scores on every query are used instead; judged:
    only some are, and only those count; none: no query qualifies and there is no seed.
    """

    kind: str
    queries: list[str]  # the queries the human leaderboard is scored on (complete, judged)
    gold_queries: int
    statement: str  # "Computed on ...", shown in each section it governs
    short: str  # the same in a few words, for the report's header
    dropped: dict[str, str] = field(default_factory=dict)  # qid -> why it is not among `queries`
    # the queries judged enough (the rest are `dropped`): `queries` unless the seed stands in (ppi)
    judged: list[str] = field(default_factory=list)


@dataclass
class ReportInputs:
    gold: Path  # or, from Python, what the labels are called on the page
    preds: list[Path]  # or, from Python, the predictions' names
    runs_dir: Path  # or, from Python, what the systems are called on the page
    groups: Path | dict[str, str] | None = None  # a `run<TAB>group` file, or from Python {run: group}
    store: Path | None = None
    bootstrap: int = 1000
    seed: int = 0
    min_judged: float = 0.9  # Judged@10 below this flags a run's scores as resting on holes
    title: str = "How far can the LLM labels be trusted?"
    seed_qrels: Path | None = None  # a human seed set: adds the PPI++ leaderboard (evaluate/estimate.py)
    design: Path | None = None  # the seed's design file [default: SEED.design.json when it exists]
    confidence: float = CONFIDENCE  # of the bootstrap intervals and of the seed's PPI++ intervals
    calibration_seed: Path | None = None  # the seed the panel was calibrated on: overlaps are warned about
    scope: str = DEFAULT_SCOPE  # the pairs every label file is read on (evaluate/scope.py)
    depth: int = DEFAULT_DEPTH  # the pool's depth, for scope pool and for a seed drawn from the pool
    cli: bool = True  # written by the command (the page names its flags), else by jb.write_report (its arguments)

    def spoken(self, argument: str) -> str:
        """How the page names one of its inputs: `--seed-qrels` for the command, `seed_qrels=` from Python."""
        return spoken(argument, self.cli)



@dataclass
class ReportLabels:
    """The report's labels and runs, read: each prediction named, with where it came from (a file,
    or a Python argument) for messages."""

    gold: Qrels
    preds: dict[str, Qrels]
    sources: dict[str, str | Path]
    runs: list[Run]
    seed: Qrels | None = None  # the human seed (inputs.seed_qrels), read


def read_labels(inputs: ReportInputs) -> ReportLabels:
    """The command's files, read: the gold and predicted qrels, the runs folder and the seed."""
    gold = read_qrels(inputs.gold, allowed=LEVELS)
    names = _names(inputs.preds)
    preds = {name: read_qrels(p, allowed=LEVELS) for name, p in zip(names, inputs.preds)}
    if "human" in preds:
        raise ArgumentError("predictions", "labels not named 'human' (the report's name for gold)",
                            str(inputs.preds[list(preds).index("human")]))
    return ReportLabels(gold, preds, dict(zip(names, inputs.preds)), read_runs_dir(inputs.runs_dir),
                        read_qrels(inputs.seed_qrels, allowed=LEVELS) if inputs.seed_qrels else None)


@dataclass
class ReportData:
    inputs: ReportInputs
    gold_pairs: int
    gold_queries: int
    pred_pairs: dict[str, int]
    runs: list[str]
    groups: dict[str, str]
    groups_note: str
    groups_guessed: bool  # no groups were given: the families are guessed from the run names
    agreements: list[AgreementReport]
    correlations: list[CorrelationReport]  # predictions outermost, then LEADERBOARD_MEASURES
    judged: dict[str, list[float]]  # "human" and each prediction -> Judged@10 per run (basis queries)
    basis: HumanBasis
    biases: list[tuple[CorrelationReport, list[GroupBias]]]
    methods: dict[str, MethodTable]  # prediction -> comparison on the prediction's own queries
    store: StoreSummary | None
    notes: list[str] = field(default_factory=list)
    # with a seed: prediction -> its PPI++ estimate (or the reason there is none, a str)
    estimates: dict[str, EstimateResult | str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # `warning:` lines for stderr (seed overlaps)
    scope_notes: list[str] = field(default_factory=list)  # `note:` lines for stderr: scope, restriction, queries


def _names(paths: list[Path]) -> list[str]:
    names = [p.stem for p in paths]
    if len(set(names)) != len(names):
        raise ArgumentError("predictions", "files with distinct stems (each prediction is named by its stem)",
                            described=", ".join(str(p) for p in paths), hint="rename one")
    return names


def collect(inputs: ReportInputs, labels: ReportLabels | None = None) -> ReportData:
    """What the report shows, from `labels` (read from the files of `inputs` when None)."""
    arguments.bounded("min_judged", inputs.min_judged)
    if not inputs.preds:
        raise ArgumentError("predictions", "at least one file of LLM labels", described="none")
    if inputs.design is not None and inputs.seed_qrels is None:
        raise ArgumentError("design", "a design with its seed (seed_qrels=) to describe", str(inputs.design))
    check_scope(inputs.scope, "scope")
    labels = labels if labels is not None else read_labels(inputs)
    gold, preds, runs = labels.gold, labels.preds, labels.runs
    run_names = [r.name for r in runs]

    notes: list[str] = []
    scoped: list[str] = []  # the scope, what was read on it, and the queries that do not count
    if inputs.scope == "pool":  # every file on the runs' pooled pairs: the scope's pairs (evaluate/scope.py)
        pooled = by_query(pool_of(runs, inputs.depth))
        gold, preds = restrict(gold, pooled), {name: restrict(p, pooled) for name, p in preds.items()}
        scoped.append(f"{describe_scope('pool', inputs.depth)}: every label file is read on those "
                     f"{sum(map(len, pooled.values())):,} pairs only")
    # which pair-level queries count: the gold's (a prediction's other queries have no human label)
    agreed_candidates = [*gold, *(q for p in preds.values() for q in p)]
    agreed = query_set(gold, candidates=agreed_candidates)
    if agreed.note():
        scoped.append(f"agreement: {agreed.note()}")
    if inputs.groups:
        from_file = isinstance(inputs.groups, (str, Path))
        groups = read_groups(inputs.groups) if from_file else dict(inputs.groups)
        named_in = inputs.groups if from_file else "groups"
        unknown = sorted(set(groups) - set(run_names))
        if unknown:
            notes.append(f"{len(unknown)} run(s) named in {named_in} are not in {inputs.runs_dir}: "
                         + ", ".join(unknown[:5]))
        groups_note = f"System families from {named_in}."
        guessed = False
    else:
        groups, folded = derive_families(run_names)
        guessed = True
        groups_note = (f"No {inputs.spoken('groups')} was given, so each run's family is guessed from its name: the text "
                       "before the first '-', '_' or '.', trailing digits dropped.")
        if folded:
            groups_note += f" To keep colours distinct, the smaller families {', '.join(folded)} are shown as 'other'."

    agreements = [agreement(gold, pred, name=name) for name, pred in preds.items()]
    estimates = seed_estimates(inputs, replace(labels, gold=gold, preds=preds)) if labels.seed is not None else {}
    restricted = sorted({r.method["restricted"] for r in estimates.values()
                         if not isinstance(r, str) and r.method.get("restricted")})
    scoped += restricted  # one line each: a label file read on the pool the seed was drawn from
    basis = human_basis(gold, runs, estimates, inputs.min_judged, candidates=agreed_candidates,
                         cli=inputs.cli)
    if basis.dropped:  # counted as the sections count them: the queries judged enough, and the others
        instead = f"; the human leaderboards are PPI++ estimates on all {basis.gold_queries} queries instead" \
            if basis.kind == PPI else ""
        scoped.append(f"human leaderboards: {QuerySet(basis.judged, basis.dropped).note()}{instead}")
    if basis.kind == PPI:
        correlations = ppi_correlations(estimates)
    elif basis.kind == NO_BASIS:
        correlations = []
    else:
        correlations = correlate({q: gold[q] for q in basis.queries}, preds, runs, LEADERBOARD_MEASURES,
                                 bootstrap=inputs.bootstrap, seed=inputs.seed, confidence=inputs.confidence)
    runset = RunSet(runs, basis.queries or sorted(gold))
    judged_measure = parse_measures([JUDGED])
    judged = {name: evaluate_runs(runset, q, judged_measure)[JUDGED].mean(axis=1).tolist()
              for name, q in {"human": gold, **preds}.items()}
    warnings = overlap_warnings(inputs, gold, labels.seed) if inputs.calibration_seed else []
    notes += scoped + [w.removeprefix("warning: ") for w in warnings]
    return ReportData(
        inputs=inputs, gold_pairs=qrels_size(gold), gold_queries=len(gold),
        pred_pairs={name: qrels_size(q) for name, q in preds.items()}, runs=run_names, groups=groups,
        groups_note=groups_note, groups_guessed=guessed, agreements=agreements, correlations=correlations,
        judged=judged, basis=basis,
        biases=[(r, report_bias(r, groups)) for r in correlations],
        methods={name: method_table(runs, q) for name, q in preds.items()},
        store=read_store_summary(inputs.store) if inputs.store else None, notes=notes,
        estimates=estimates, warnings=warnings, scope_notes=scoped,
    )


def human_basis(gold: dict, runs: list, estimates: dict[str, EstimateResult | str],
                min_judged: float = DEFAULT_MIN_JUDGED, candidates: list[str] | None = None,
                cli: bool = True) -> HumanBasis:
    """Where the human-side figures mean something: the queries whose human labels judge at least
    `min_judged` of the runs' top 10 (evaluate/scope.py's query_set, as `correlate` chooses them),
    else the seed's PPI++ estimates, else nowhere (see HumanBasis). `cli`: the page names the seed by
    the command's flag, else by jb.write_report's argument."""
    seed_flag = spoken("seed_qrels", cli)
    drawing = "pool --sample-queries" if cli else "jb.sample_seed(queries=...)"
    queries = sorted(q for q, docs in gold.items() if docs)
    counted = query_set(gold, candidates=candidates, runs=runs, depth=DEPTH, min_judged=min_judged)
    judged = sorted(counted.queries)
    dropped = counted.dropped
    fully = set(fully_judged_queries(runs, gold, DEPTH))
    every = all(q in fully for q in judged)
    n = len(queries)
    fitted = [r for r in estimates.values() if not isinstance(r, str)]
    enough = f"with at least {min_judged:.0%} of the runs' top {DEPTH} labelled"
    few = f"only {len(judged)} of the {n}" if judged else f"none of the {n}"
    if len(judged) == n:
        if every:
            return HumanBasis(COMPLETE, judged, n, f"Computed on all {n} queries the human labels cover, each fully "
                              f"judged (every document in every run's top {DEPTH} labelled).",
                              f"on all {n} queries, each fully judged.", dropped, judged)
        holes = [q for q in judged if q not in fully]
        return HumanBasis(COMPLETE, judged, n, f"Computed on all {n} queries the human labels cover, each {enough}; "
                          f"on {len(holes)} of them ({', '.join(holes[:5])}{' ...' if len(holes) > 5 else ''}) a "
                          f"run's top {DEPTH} has an unlabelled document, scored as not relevant.",
                          f"on all {n} queries, each {enough}.", dropped, judged)
    if fitted and len(judged) < fitted[0].method["seed_queries"]:
        m = fitted[0].method
        seed = (f"{m['seed_pairs']} seed pairs over {m['seed_queries']} queries" if "seed_pairs" in m
                else f"{m['seed_queries']} seed queries")
        return HumanBasis(PPI, [], n, f"Computed from the PPI++ estimates of the human scores ({seed_flag}: {seed} "
                          f"of {m['queries']}; LLM labels on every query), since {few} queries the human labels "
                          f"cover have at least {min_judged:.0%} of the runs' top {DEPTH} labelled.",
                          f"PPI++ estimates from the {seed_flag} seed (too few judged queries).", dropped, judged)
    if judged:
        kind = (f"{len(judged)} fully judged queries of {n} (every document in every run's top {DEPTH} labelled)"
                if every else f"{len(judged)} queries of {n}, each {enough}")
        return HumanBasis(JUDGED_QUERIES, judged, n, f"Computed on {kind}; "
                          + ("the other query has" if n - len(judged) == 1 else f"the other {n - len(judged)} have")
                          + " fewer labels there, and a leaderboard would score the unlabelled documents as "
                            "irrelevant.",
                          f"on the {len(judged)} {'fully judged' if every else 'judged'} queries of {n}.", dropped, judged)
    return HumanBasis(NO_BASIS, [], n, f"Not computed: none of the {n} queries the human labels cover has at least "
                      f"{min_judged:.0%} of the runs' top {DEPTH} labelled, "
                      "so a human leaderboard would score unlabelled documents as irrelevant and every difference "
                      f"from it would be an artefact of the holes. Give {seed_flag} (a seed of whole queries drawn "
                      f"at random: {drawing}, then label it) for PPI++ estimates of the human "
                      "leaderboard.",
                      "not computed: no query is judged enough (see below).", dropped, judged)


def ppi_correlations(estimates: dict[str, EstimateResult | str]) -> list[CorrelationReport]:
    """Each prediction's leaderboard (LLM labels alone) against the PPI++ estimate of the human one."""
    out = []
    for name, result in estimates.items():
        if isinstance(result, str):
            continue
        for measure in dict.fromkeys(r.measure for r in result.runs):
            rows = [r for r in result.runs if r.measure == measure]
            out.append(compare_scores(name, measure, [r.run for r in rows], [r.estimate for r in rows],
                                      [r.llm_only for r in rows], result.method["queries"],
                                      confidence=result.method["confidence"]))
    return out


def overlap_warnings(inputs: ReportInputs, gold: dict, seed: Qrels | None) -> list[str]:
    """`warning:` lines for the human labels the panel was calibrated on: the gold (agreement) and
    the seed (PPI++)."""
    checks = [(gold, AGREEMENT)]
    if seed is not None:
        checks.append((seed, ESTIMATION))
    found = (seed_overlap(labels, inputs.calibration_seed, kind).warning() for labels, kind in checks)
    return [w for w in found if w]


def seed_estimates(inputs: ReportInputs, labels: ReportLabels) -> dict[str, EstimateResult | str]:
    """Each prediction's leaderboard corrected by the human seed (query-level PPI++, or the design
    estimator for a seed of pairs), from evaluate/estimate.py. A prediction the seed does not fit
    (a seed pair it never labelled, say) gets the reason instead; if none fits, the first error."""
    seed, preds, runs = labels.seed, labels.preds, labels.runs
    out: dict[str, EstimateResult | str] = {}
    errors = []
    for name, pred in preds.items():
        path = labels.sources[name]
        try:
            out[name] = estimate_with_seed(pred, seed, runs, None, confidence=inputs.confidence, llm_path=path,
                                           human_path=inputs.seed_qrels, design_path=inputs.design,
                                           scope=inputs.scope, depth=inputs.depth)
        except InputError as exc:
            errors.append(exc)
            out[name] = str(exc)
    if len(errors) == len(preds):
        raise errors[0]
    return out

