"""The researcher's whole path in Python: pool, find the holes, draw a seed, fill, estimate, report.

Why a module of its own: a researcher in a notebook had `jb.experiment` and `fill_qrels`, but
pooling, listing the holes and drawing a seed had no Python call, so they wrote run files and
shelled out to `judgeblender pool`. Each function here takes the systems `jb.experiment` takes
(run files, result frames, {qid: {docid: score}} dicts, ScoredDoc tuples, PyTerrier transformers
run on `topics`; holes.system_runs reads them all) and calls the code the command calls:

    jb.pool / jb.find_holes / jb.sample_seed   pairs.pool_pairs and pairs.design.draw_seed (`pool`)
    jb.fill                                    holes.fill, as pyterrier.fill_qrels (`fill`)
    jb.estimate                                evaluate.estimate.estimate_with_seed (`estimate`)
    jb.write_report                            report.build_report (`report`)
    jb.experiment(perquery=True)               holes.fill and the evaluation of evaluate/experiment.py

Frames come out with PyTerrier's column names (qid, docno, label; name, qid, measure, value),
which ir_measures' and PyTerrier's own functions read. No name here equals a module's:
`holes` and `report` are modules, so the functions are `find_holes` and `write_report`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import arguments, convert
from .errors import ArgumentError
from .evaluate.intervals import CONFIDENCE
from .holes import experiment as _experiment
from .holes import fill as _fill
from .evaluate.scope import DEFAULT_SCOPE, check_scope
from .holes import given_labels, pooling, system_runs, topic_texts
from .notes import note as say
from .pairs import pool_pairs, write_pairs
from .pairs.design import design_path_for, draw_seed, write_design

log = logging.getLogger("judgeblender.workflow")

# How the Python arguments of the seed's draw are named in its errors (the command names its options).
# -- pooling --------------------------------------------------------------------------------

def _runs_and_queries(systems: Any, topics: Any, names: Sequence[str] | None):
    """The systems' runs and the topics' query ids (None: every query a system ranks)."""
    queries = set(topic_texts(topics)) if topics is not None else None
    return system_runs(systems, topics, names), queries


def _pool_frame(pairs: Sequence, attrs: Mapping[str, Any]):
    """Pooled pairs as PyTerrier names them (qid, docno), with the best rank any system gave the
    document and the systems that pooled it, in the pool's order (query, best rank, docno)."""
    import pandas as pd

    df = pd.DataFrame({"qid": [p.qid for p in pairs], "docno": [p.docid for p in pairs],
                       "best_rank": [p.best_rank for p in pairs], "systems": [tuple(p.runs) for p in pairs]})
    df.attrs.update(attrs)
    return df


def _pooled(systems: Any, topics: Any, k: Any, judged: Mapping | None, names: Sequence[str] | None,
            corpus: Any = None, drop_duplicates: bool = False, skip_missing: bool = False):
    """pool_pairs on the systems, after every argument is checked and every input read."""
    from .pairs import read_corpus

    k = arguments.bounded("depth", k, "k")
    arguments.flag("drop_duplicates", drop_duplicates)
    arguments.flag("skip_missing", skip_missing)
    if drop_duplicates and corpus is None:
        raise ArgumentError("corpus", "the passage texts (a passages file or {docno: text}) with drop_duplicates=True",
                            corpus)
    runs, queries = _runs_and_queries(systems, topics, names)
    texts = None
    if drop_duplicates:
        if isinstance(corpus, (str, Path)):
            texts = lambda wanted: read_corpus(corpus, wanted=wanted)  # noqa: E731 (read only what the pool needs)
        elif isinstance(corpus, Mapping):
            texts = lambda wanted: {str(d): str(t) for d, t in corpus.items()}  # noqa: E731
        else:
            raise ArgumentError("corpus", "a passages file or {docno: text}", corpus)
    made = pool_pairs(runs, k, queries, judged=judged, texts=texts, corpus_name=str(corpus) if drop_duplicates else "",
                      skip_missing=skip_missing, queries_source="topics")
    attrs = {"k": k, "systems": len(runs), "queries": len({p.qid for p in made.pooled}), "pooled": len(made.pooled),
             "duplicates": len(made.duplicates), "judged": len(made.kept) - len(made.holes), "holes": len(made.holes),
             "duplicate_pairs": [vars(d) for d in made.duplicates], "without_text": list(made.without_text)}
    return made, attrs


def pool(systems: Any, topics: Any = None, *, k: int = 10, exclude: Any = None, corpus: Any = None,
         drop_duplicates: bool = False, skip_missing: bool = False, names: Sequence[str] | None = None):
    """The pairs the systems ask to have judged, as `judgeblender pool` makes them: the union of
    every system's top `k` on the `topics` (every query a system ranks when None), one row per
    (qid, docno) with `best_rank` and the `systems` that pooled it. `exclude`: labels of pairs
    already judged (any shape, any integer label: only the pairs count), left out as `pool
    --exclude` does. `drop_duplicates` keeps one document per identical text per query (the
    texts from `corpus`, a passages file or {docno: text}). `attrs` holds the counts `pool --json`
    prints (pooled, duplicates, judged, holes). The frame goes straight into `jb.judge` (with
    `queries=` and `corpus=`)."""
    judged = convert.qrels(exclude, "exclude", scale=None, argument="exclude") if exclude is not None else None
    made, attrs = _pooled(systems, topics, k, judged, names, corpus, drop_duplicates, skip_missing)
    return _pool_frame(made.holes, attrs)


def find_holes(systems: Any, topics: Any = None, *, qrels: Any, k: int = 10, names: Sequence[str] | None = None):
    """The holes: the pooled pairs (the systems' top `k` on `topics`) that the human `qrels` give
    no valid label, which `jb.fill` and `jb.experiment` fill (their `attrs["holes"]` counts the
    same pairs). `qrels` is read on TREC's 0-3 scale, as those functions read it. The frame is
    `jb.pool`'s shape: qid, docno, best_rank, systems."""
    human = convert.qrels(qrels, "qrels", scale=convert.SCALE, argument="qrels")
    made, attrs = _pooled(systems, topics, k, human, names)
    return _pool_frame(made.holes, attrs)


def sample_seed(systems: Any, topics: Any = None, *, queries: int | None = None, pairs: float | None = None,
                k: int = 10, exclude: Any = None, weights: str = "runs", random_seed: int = 0, out: Any = None,
                design_out: Any = None, names: Sequence[str] | None = None):
    """A human seed drawn at random from the pool, with its design, as `pool --sample-queries`
    (`queries`: that many whole queries, every pooled pair of each) or `pool --sample-pairs`
    (`pairs`: every pooled pair drawn independently, that many expected; `weights` "runs" or
    "uniform") draws it, seeded by `random_seed`. Returns the drawn pairs (`jb.pool`'s shape) with
    the design in `attrs["design"]`, as the design file holds it. With `out`, writes the pairs
    there (qid<TAB>docno, for `judgeblender label`) and the design beside it (OUT-STEM.design.json,
    or `design_out`), where `jb.experiment(seed=...)`, `jb.estimate` and `judgeblender estimate`
    find it for the seed's labels (label `seed.tsv` into `seed.qrels`); `attrs["design_file"]` says
    where it went. The draw needs the design file to be used, so a seed worth labelling is written."""
    arguments.non_negative_int("random_seed", random_seed)
    if design_out is not None and out is None:
        raise ArgumentError("design_out", "None unless out= is given (the design sits beside the seed's pairs)",
                            design_out)
    for name, path in (("out", out), ("design_out", design_out)):
        if path is not None and not isinstance(path, (str, Path)):
            raise ArgumentError(name, "a file path", path)
    judged = convert.qrels(exclude, "exclude", scale=None, argument="exclude") if exclude is not None else None
    made, attrs = _pooled(systems, topics, k, judged, names)
    drawn, design = draw_seed(made.holes, attrs["k"], queries=queries, pairs=pairs, weights=weights,
                              random_seed=random_seed, pairs_file=out or "the seed's pairs")
    attrs = {**attrs, "sampled": len(drawn), "design": design.to_dict()}
    if out is not None:
        design_file = Path(design_out) if design_out is not None else design_path_for(out)
        write_pairs(out, drawn)
        write_design(design_file, design)
        attrs["design_file"] = str(design_file)
    return _pool_frame(drawn, attrs)


# -- filling and the experiment ---------------------------------------------------------------

def _filled(systems: Any, topics: Any, *, qrels: Any, corpus: Any, judges: Any, llm_labels: Any, prompt: str,
            mode: str, options: Mapping[str, Any] | None, store: Any, blend: str, k: Any,
            names: Sequence[str] | None, human_needed: bool, judge_pool: bool = False,
            scope: str = DEFAULT_SCOPE):
    """The runs, the topics' texts, the human qrels and holes.fill's Filled: the one place the
    Python surface fills holes (jb.fill, and the per-query rows of jb.experiment), in the order
    jb.experiment reads its inputs: settings, then labels, then topics, then systems."""
    k = pooling(k, blend)
    scope = check_scope(scope)
    human, given, source = given_labels(qrels, judges, llm_labels, human_needed=human_needed)
    queries = topic_texts(topics)
    runs = system_runs(systems, queries, names)
    filled = _fill(runs, queries, qrels=human, corpus=corpus, judges=judges, llm_labels=given, llm_source=source,
                   prompt=prompt, mode=mode, options=options, store=store, blend=blend, k=k, judge_pool=judge_pool,
                   scope=scope)
    return runs, queries, human, filled


def fill(systems: Any, topics: Any, *, qrels: Any, corpus: Any = None, judges: Any = None, llm_labels: Any = None,
         prompt: str = "umbrela", mode: str = "generate", options: Mapping[str, Any] | None = None,
         store: Any = None, k: int = 10, blend: str = "mv", names: Sequence[str] | None = None,
         scope: str = DEFAULT_SCOPE):
    """Human qrels with their holes filled: qid, docno, label (int), provenance ("human" or the
    judge or label source). The holes are the pairs in the systems' top `k` that `qrels` lack
    (`jb.find_holes`); `judges` label them (through `store`), or `llm_labels` gives labels already
    made. A human label always wins, as `judgeblender fill` merges. Pairs left without a valid
    label stay out, counted in a note (logged, and in `attrs["notes"]`). `scope` (evaluate/scope.py):
    'labels' (default) keeps every labelled pair, so it fills every pair the LLM labels cover that
    people did not label, not only the pool's holes; 'pool' the systems' pooled pairs only, so it
    fills the holes alone. attrs say the scope, the topics that did not count, and the counts:
    pooled, holes, filled (pairs labelled by the LLM in the frame) and filled_holes (of them, holes),
    with a note where filled is not filled_holes. This is `judgeblender.pyterrier.fill_qrels`
    without PyTerrier: `pt.Experiment` runs on the frame and gives jb.experiment's filled column."""
    *_, filled = _filled(systems, topics, qrels=qrels, corpus=corpus, judges=judges, llm_labels=llm_labels,
                         prompt=prompt, mode=mode, options=options, store=store, blend=blend, k=k, names=names,
                         human_needed=True, scope=scope)
    frame = filled.frame(docid="docno")
    note = filled.counts_note(scope)
    if note:  # more filled than holes: the default says why, once, in words
        frame.attrs["notes"].append(note)
        say(log, note)
    frame.attrs.update(filled.counts())
    return frame


# the experiment's settings that a per-query row cannot carry: each is about a whole system
_PER_SYSTEM = ("seed", "design", "baseline", "correction", "confidence")


def _perquery(systems: Any, topics: Any, *, qrels: Any = None, corpus: Any = None, judges: Any = None,
              llm_labels: Any = None, prompt: str = "umbrela", mode: str = "generate",
              options: Mapping[str, Any] | None = None, store: Any = None, measures: Sequence = ("nDCG@10",),
              k: int = 10, blend: str = "mv", names: Sequence[str] | None = None, judge_pool: bool | None = None,
              scope: str = DEFAULT_SCOPE, **per_system: Any):
    """Per-query rows of the experiment (see `experiment`)."""
    import numpy as np
    import pandas as pd

    from .evaluate.leaderboard import RunSet, evaluate_runs, parse_measures

    for key, value in per_system.items():
        if key not in _PER_SYSTEM:
            raise TypeError(f"experiment() got an unexpected keyword argument {key!r}")
        if value is not None:
            raise ArgumentError(key, "None with perquery=True: per-query rows carry no test or interval (ask for "
                                "the table, perquery=False)", value)
    k = pooling(k, blend)
    measures = arguments.sequence("measures", measures, "measures (ir_measures names such as nDCG@10)")
    judge_pool = False if judge_pool is None else arguments.flag("judge_pool", judge_pool)
    runs, queries, human, filled = _filled(systems, topics, qrels=qrels, corpus=corpus, judges=judges,
                                           llm_labels=llm_labels, prompt=prompt, mode=mode, options=options,
                                           store=store, blend=blend, k=k, names=names, human_needed=False,
                                           judge_pool=judge_pool, scope=scope)
    # the queries and label sets jb.experiment's table is computed from (evaluate/scope.py)
    columns = filled.columns
    population = list(columns.queries.queries)
    parsed = parse_measures(measures)
    runset = RunSet(runs, population)
    filled_pq = evaluate_runs(runset, columns.filled, parsed)
    human_pq = evaluate_runs(runset, columns.human, parsed) if columns.human is not None else None
    llm_pq = evaluate_runs(runset, columns.llm, parsed) if columns.llm_complete else None
    rows = []
    for m in map(str, parsed):
        nan = np.full(filled_pq[m].shape, np.nan)
        for i, run in enumerate(runs):
            for j, qid in enumerate(population):
                rows.append((run.name, qid, m, float(filled_pq[m][i, j]),
                             float((human_pq[m] if human_pq is not None else nan)[i, j]),
                             float((llm_pq[m] if llm_pq is not None else nan)[i, j])))
    table = pd.DataFrame(rows, columns=["name", "qid", "measure", "value", "human", "llm"])
    table.attrs.update({"k": k, **filled.counts(), "invalid": len(filled.invalid), **columns.summary(),
                        "notes": list(filled.notes)})
    return table


def experiment(systems: Any, topics: Any, *, perquery: bool = False, **settings: Any):
    arguments.flag("perquery", perquery)
    if perquery:
        return _perquery(systems, topics, **settings)
    return _experiment(systems, topics, **settings)


experiment.__doc__ = (_experiment.__doc__ or "") + """
    `perquery=True`: one row per system, query and measure, shaped as `pt.Experiment(perquery=True)`
    gives them (name, qid, measure, value), where `value` is the score under the filled labels, with
    `human` and `llm` beside it (NaN where the table's column is); the mean of each over a system's
    queries is the table's filled, human and llm. No seed, baseline or design then: those are
    figures about whole systems."""
experiment.__signature__ = inspect.signature(_experiment).replace(parameters=[
    *inspect.signature(_experiment).parameters.values(),
    inspect.Parameter("perquery", inspect.Parameter.KEYWORD_ONLY, default=False, annotation="bool")])


# -- estimates and the report -----------------------------------------------------------------

def _labels_name(labels: Any, argument: str) -> str | Path:
    """How messages name labels: their file, or the Python argument they came in."""
    return labels if isinstance(labels, (str, Path)) else argument


def _seed(seed: Any, design: Any, argument: str) -> tuple[Any, str | Path]:
    """The seed's labels read, and the name its design is found by: a seed file finds its design
    beside it (SEED.design.json), as the commands do; labels given otherwise need `design`."""
    if design is not None and not isinstance(design, (str, Path)):
        raise ArgumentError("design", "the seed's design file (a path: what jb.sample_seed(out=...) writes)", design)
    if not isinstance(seed, (str, Path)) and design is None:
        raise ArgumentError("design", "the seed's design file when the seed is not a file (its design is found "
                            "beside a seed file)", described="none")
    return convert.qrels(seed, argument, scale=convert.SCALE, argument=argument), _labels_name(seed, argument)


def estimate(systems: Any, topics: Any = None, *, llm_labels: Any, seed: Any, design: Any = None,
             measures: Sequence | None = None, confidence: float = CONFIDENCE, target: str = "collection",
             differences: bool = True, names: Sequence[str] | None = None, scope: str = DEFAULT_SCOPE,
             depth: int = 10):
    """Each system's score under human labels, estimated with an interval from LLM labels on every
    query corrected by a human `seed` drawn at random (PPI++), as `judgeblender estimate` computes it
    (docs/estimation.md): one row per system and measure with name, measure, estimate, ci_low,
    ci_high, se, lam, llm_only, human_only (and its interval), n_seed, n_queries, confidence,
    target, normal_ok (Cochran's rule on the seed). `llm_labels`: a label for every pooled pair of
    every query; `seed`: human labels of the seed, a file (its design found beside it) or labels
    with `design=` (the design file `jb.sample_seed(out=...)` wrote). `topics` runs a PyTerrier
    transformer among the systems. `measures`: None for nDCG@10
    (P(rel=2)@10 for a seed of pairs). `attrs` hold the method (what is estimated, how, the
    assumptions), the notes, and with `differences` every pair of systems' difference, Holm's
    p-value and whether it is significant, as `estimate --json` prints them (pd.DataFrame(
    table.attrs["differences"])). `scope` (evaluate/scope.py), as `estimate --scope`: 'labels'
    takes the LLM labels as given, 'pool' only those of the systems' top `depth`."""
    import pandas as pd

    from .evaluate.estimate import TARGETS, estimate_with_seed

    arguments.confidence(confidence)
    arguments.one_of("target", target, TARGETS)
    arguments.flag("differences", differences)
    scope = check_scope(scope)
    depth = arguments.bounded("depth", depth)
    if measures is not None:
        measures = arguments.sequence("measures", measures, "measures (ir_measures names such as nDCG@10)")
    human, human_path = _seed(seed, design, "seed")
    llm = convert.qrels(llm_labels, "llm_labels", scale=convert.SCALE, argument="llm_labels")
    runs = system_runs(systems, topics, names)
    result = estimate_with_seed(llm, human, runs, measures, confidence=confidence, target=target,
                                llm_path=_labels_name(llm_labels, "llm_labels"), human_path=human_path,
                                design_path=design, pairs=differences, scope=scope, depth=depth)
    rows = [{"name": r.pop("run"), **r} for r in (e.to_dict() for e in result.runs)]
    table = pd.DataFrame(rows)
    table.attrs.update({"method": dict(result.method), "notes": list(result.notes),
                        "differences": [p.to_dict() for p in result.pairs]})
    for note in result.notes:
        say(log, note)
    return table


def write_report(gold: Any, predictions: Any, systems: Any, out: Any, *, topics: Any = None,
                 names: Sequence[str] | None = None, groups: Any = None, store: Any = None, bootstrap: int = 1000,
                 seed: int = 0, min_judged: float = 0.9, title: str = "How far can the LLM labels be trusted?",
                 seed_qrels: Any = None, design: Any = None, confidence: float = CONFIDENCE,
                 calibration_seed: Any = None, scope: str = DEFAULT_SCOPE, depth: int = 10) -> Path:
    """Write the trust report (one self-contained HTML page: agreement, confusion matrices,
    leaderboards and their correlation, bias by system family, holes, cost) to `out`, as
    `judgeblender report` does, and return its path. `gold`: the human labels; `predictions`:
    labels, {name: labels} (any shape; not named "human"), or a list of label files, each named by
    its stem as `--pred` names them; `systems`: what `jb.experiment` takes (`topics` runs a
    PyTerrier transformer). `groups`: a `run<TAB>group` file or {system: family}; `store`: a call store file
    (invalid-output rates, tokens, time); `bootstrap`, `seed`: the bootstrap's samples and seed;
    `seed_qrels` (and `design`, found beside a seed file): a human seed, for the PPI++
    leaderboards; `calibration_seed`: the file of the seed the panel was calibrated on (overlaps
    are warned about); `scope` and `depth`: the pairs every label set is read on, as `report
    --scope/--depth` (evaluate/scope.py). The `warning:` lines the command prints are logged."""
    from .api import named_labels
    from .report import ReportInputs, ReportLabels, build_report

    if not isinstance(out, (str, Path)):
        raise ArgumentError("out", "the HTML file to write (a path)", out)
    arguments.bounded("bootstrap", bootstrap)
    arguments.non_negative_int("seed", seed)
    arguments.confidence(confidence)
    arguments.text("title", title)
    scope = check_scope(scope)
    depth = arguments.bounded("depth", depth)
    arguments.bounded("min_judged", min_judged)
    for name, path in (("store", store), ("calibration_seed", calibration_seed)):
        if path is not None and not isinstance(path, (str, Path)):
            raise ArgumentError(name, "a file path", path)
    if groups is not None and not isinstance(groups, (str, Path, Mapping)):
        raise ArgumentError("groups", "a run<TAB>group file or {system: family}", groups)
    if design is not None and seed_qrels is None:
        raise ArgumentError("design", "None unless seed_qrels= is given (it is the seed's design)", design)
    arguments.non_empty("predictions", predictions, "one set of labels")
    if isinstance(predictions, (list, tuple)) and all(isinstance(p, (str, Path)) for p in predictions):
        stems = [Path(p).stem for p in predictions]
        if len(set(stems)) != len(stems):
            raise ArgumentError("predictions", "label files with distinct stems (each names its labels)", predictions)
        predictions = dict(zip(stems, predictions))
    gold_qrels = convert.qrels(gold, "gold", scale=convert.SCALE, argument="gold")
    preds, sources = {}, {}
    for name, argument, labels in named_labels(predictions):
        if name == "human":
            raise ArgumentError("predictions", "names other than 'human' (the report's name for gold)", name)
        preds[name] = convert.qrels(labels, name, scale=convert.SCALE, argument=argument)
        sources[name] = _labels_name(labels, argument)
    human_seed, seed_name = _seed(seed_qrels, design, "seed_qrels") if seed_qrels is not None else (None, None)
    runs = system_runs(systems, topics, names)
    inputs = ReportInputs(gold=_labels_name(gold, "gold="), preds=list(preds), runs_dir="systems=", groups=groups,
                          store=store, bootstrap=bootstrap, seed=seed, min_judged=min_judged, title=title,
                          seed_qrels=seed_name, design=design, confidence=confidence,
                          calibration_seed=calibration_seed, scope=scope, depth=depth, cli=False)
    data = build_report(inputs, out, ReportLabels(gold_qrels, preds, sources, runs, human_seed))
    for warning in data.warnings:
        log.warning("%s", warning)
    for name, result in data.estimates.items():
        if isinstance(result, str):
            say(log, f"{name}: no seed estimate: {result}")
    return Path(out)
