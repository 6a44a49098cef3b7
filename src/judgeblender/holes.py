"""Evaluation with the holes of human labels filled: run the systems, pool, judge, fill, score.

`experiment` is `jb.experiment`, one call from systems and topics to a table: the systems (run
files, DataFrames, dicts or PyTerrier transformers) are pooled to depth k (pairs/pool.py), the
pooled pairs people did not label are judged by a jury (api.judge, through the call store) or
taken from existing LLM labels, evaluate/scope.py builds the human, filled and LLM label sets of
the chosen scope ('labels': every labelled pair; 'pool': the pooled pairs) on the topics that count
(those people labelled), and evaluate/experiment.py scores every system under them. `fill` is the
first half alone, which judgeblender.pyterrier.fill_qrels shapes as PyTerrier's qrels: the same
label sets, so pt.Experiment on them gives the experiment's filled column. PyTerrier is imported
only to run a transformer.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import arguments, convert
from .errors import ArgumentError, JudgeblenderError, require
from .evaluate.experiment import DEFAULT_CORRECTION, ExperimentInputs, Seed, experiment_table
from .evaluate.scope import DEFAULT_SCOPE, Columns, check_scope, query_set, scored_columns
from .label.merge import HUMAN
from .notes import note as say
from .pairs.pool import PoolPair, exclude_judged, pool_runs
from .pairs.qrels import Qrels
from .pairs.runs import Run
from .evaluate.intervals import CONFIDENCE

log = logging.getLogger("judgeblender.fill")


# -- systems and topics ---------------------------------------------------------------------

def topic_texts(topics: Any) -> dict[str, str]:
    """{qid: query text} of a DataFrame (qid, query; ir_measures' query_id), a queries TSV, an
    `irds:` id or a mapping."""
    from .pairs import read_queries

    if convert.is_frame(topics):
        df = convert.project_columns(topics, ("qid",), "topics")
        if "query" not in df.columns:
            raise JudgeblenderError(f"topics: a DataFrame needs the columns qid and query (it has {list(topics.columns)})")
        texts = dict(zip(df["qid"].astype(str), df["query"].astype(str)))
    elif isinstance(topics, (str, Path)):
        texts = read_queries(topics)
    elif isinstance(topics, Mapping):
        texts = {str(q): str(t) for q, t in topics.items()}
    else:
        raise ArgumentError("topics", "a DataFrame (qid, query), a queries file, an irds: id or {qid: text}", topics)
    # no topic would give a table of nothing: every score is a mean over the topics
    return arguments.non_empty("topics", texts, "one topic (a qid and its query text)")


def is_transformer(system: Any) -> bool:
    """A PyTerrier transformer (or anything with PyTerrier's `transform(topics)`), not a frame."""
    return not convert.is_frame(system) and callable(getattr(system, "transform", None))


def system_runs(systems: Any, topics: Any, names: Sequence[str] | None = None) -> list[Run]:
    """Runs of `systems`: {name: system} or a list (named by `names`, a run file's name, or
    system 1, 2, ...). A system is a run file, a DataFrame (qid, docid/docno, score), a
    {qid: {docid: score}} dict, ScoredDoc tuples (an ir_measures or ir_datasets iterator too), or a
    PyTerrier transformer, run on `topics`. Each system is read once (convert.run), and every
    shape, a transformer's output too, follows the run files' rule; errors name the system as
    `systems['name']` or `systems[i]`."""
    original = systems
    if isinstance(systems, Mapping):
        given = [(str(k), f"systems[{k!r}]", v) for k, v in systems.items()]
    else:
        if not isinstance(systems, (str, Path, Iterable)) and not convert.is_frame(systems) \
                and not is_transformer(systems):
            raise ArgumentError("systems", "{name: system} or a list of systems (run files, DataFrames, dicts, "
                                "PyTerrier transformers)", systems)
        systems = list(systems) if not (isinstance(systems, (str, Path)) or convert.is_frame(systems)
                                        or is_transformer(systems)) else [systems]
        if names is not None:
            names = arguments.sequence("names", names, "system names")
            if len(names) != len(systems):
                raise ArgumentError("names", f"one name for each of the {len(systems)} systems", names)
        rows = [i for i, s in enumerate(systems) if isinstance(s, tuple)]
        if rows:  # a ScoredDoc or (qid, docid, score) is a row of a run, never a system
            raise ArgumentError(f"systems[{rows[0]}]", "a system (a run file, a DataFrame, a dict, ScoredDoc "
                                "tuples or a PyTerrier transformer)", systems[rows[0]],
                                hint="systems looks like one run's rows: pass {name: run}")
        given = [(str(names[i]) if names is not None else None if isinstance(s, (str, Path, Run))
                  else f"system {i + 1}", f"systems[{i}]", s) for i, s in enumerate(systems)]
    if not given:  # no system: a table of nothing
        raise ArgumentError("systems", "at least one system", original)
    frame = None
    if any(is_transformer(s) for *_, s in given):
        require("pyterrier", "pyterrier", "running a PyTerrier transformer as a system")
        import pandas as pd

        texts = topic_texts(topics)
        frame = pd.DataFrame({"qid": list(texts), "query": list(texts.values())})
    runs: dict[str, Run] = {}
    for name, argument, system in given:
        if is_transformer(system):
            system = system.transform(frame)
        run = convert.run(system, name, argument)
        if run.name in runs:
            raise JudgeblenderError(f"two systems are named {run.name!r}: give names=")
        runs[run.name] = run
    return list(runs.values())


# -- filling ------------------------------------------------------------------------------

@dataclass
class Filled:
    """The pool, what the LLM labelled, and the scope's three label sets (evaluate/scope.py)."""

    columns: Columns  # human, llm and filled over the scope's pairs, and the queries that count
    pool: list[PoolPair]  # the systems' pooled pairs on the queries that count
    holes: list[PoolPair]  # pooled pairs without a human label
    invalid: list[tuple[str, str]]  # pairs the LLM was asked about and gave no valid label for
    pool_judged: bool  # the LLM labelled (or was asked about) every pooled pair: PPI++ can use it
    notes: list[str] = field(default_factory=list)

    @property
    def qrels(self) -> Qrels:
        """The filled labels: human labels, then LLM labels where people gave none."""
        return self.columns.filled

    @property
    def provenance(self) -> dict[tuple[str, str], str]:
        return self.columns.provenance

    @property
    def llm(self) -> Qrels:
        return self.columns.llm

    def counts(self) -> dict[str, int]:
        """pooled, holes, filled (pairs of the scope labelled by the LLM in the filled labels) and
        filled_holes (of them, holes of the pool): with the default scope, 'labels', filled counts
        every pair the LLM labels cover that people did not label, so it may exceed the holes."""
        holes = {(p.qid, p.docid) for p in self.holes}
        by_llm = [pair for pair, source in self.provenance.items() if source != HUMAN]
        return {"pooled": len(self.pool), "holes": len(holes), "filled": len(by_llm),
                "filled_holes": sum(pair in holes for pair in by_llm)}

    def counts_note(self, scope: str) -> str | None:
        """The note saying why more pairs were filled than the pool has holes, or None."""
        c = self.counts()
        if c["filled"] == c["filled_holes"]:
            return None
        return (f"{c['filled']} pairs filled by the LLM labels, {c['filled_holes']} of them among the {c['holes']} "
                f"holes of the {c['pooled']} pooled pairs: the scope {scope!r} fills every pair the LLM labels "
                "cover that people did not label, not only the pool's holes (the scope 'pool' fills those only)")

    def frame(self, docid: str = "docid"):
        """A DataFrame qid, `docid`, label (int), provenance, in the qrels' order; attrs hold the
        notes and the scope (scope, scope_pairs, queries, dropped_queries)."""
        import pandas as pd

        rows = [(q, d, lab, src) for q, d, lab, src in self.columns.merged.rows]
        df = pd.DataFrame(rows, columns=["qid", docid, "label", "provenance"])
        df["label"] = df["label"].astype(int)
        df.attrs["notes"] = list(self.notes)
        df.attrs.update(self.columns.summary())
        return df


def pooling(k: Any, blend: Any) -> int:
    """The pool's depth and the jury's blend, checked before any system runs or model is called
    (experiment, fill, pyterrier.fill_qrels): k=10.0, "10" or 0 would otherwise reach the pool as
    a slice or a comparison and fail there, or pool nothing."""
    from .blend import METHODS

    arguments.one_of("blend", blend, METHODS)
    return arguments.positive_int("k", k)


def _llm_source(llm_labels: Any) -> str:
    return Path(llm_labels).stem if isinstance(llm_labels, (str, Path)) else "llm_labels"


def _one_source(judges: Any, llm_labels: Any) -> None:
    if (judges is None) == (llm_labels is None):
        raise ArgumentError("judges", "judges= (to judge the holes) or llm_labels= (labels already made), one of "
                            "them", "neither" if judges is None else "both")


def given_labels(qrels: Any, judges: Any, llm_labels: Any, *,
                 human_needed: bool) -> tuple[Qrels | None, Qrels | None, str]:
    """The human labels and the LLM labels already made, each read once (an iterator has one
    read), before any system is run or model called: (human qrels, or None where not given and
    not `human_needed`; the LLM's qrels or None; what the LLM labels are called)."""
    _one_source(judges, llm_labels)
    human = convert.qrels(qrels, "qrels", scale=convert.SCALE, argument="qrels") if qrels is not None or human_needed else None
    if llm_labels is None:
        return human, None, ""
    return human, convert.qrels(llm_labels, "llm_labels", scale=convert.SCALE, argument="llm_labels"), _llm_source(llm_labels)


def fill(runs: Sequence[Run], queries: Mapping[str, str], *, qrels: Qrels | None = None, corpus: Any = None,
         judges: Any = None, llm_labels: Qrels | None = None, llm_source: str = "llm_labels",
         prompt: str = "umbrela", mode: str = "generate", options: Mapping[str, Any] | None = None,
         store: Any = None, blend: str = "mv", k: int = 10, judge_pool: bool = False,
         scope: str = DEFAULT_SCOPE) -> Filled:
    """Pool the runs' top k on the `queries` that count; label the pooled pairs the human `qrels`
    lack (all pooled pairs with `judge_pool`) with `judges` (through `store`), or take `llm_labels`
    (named `llm_source` in notes and provenance); then build the human, llm and filled label sets
    of `scope` (evaluate/scope.py: 'labels', every labelled pair, or 'pool', the pooled pairs).
    `qrels` and `llm_labels` are qrels dicts already read (`given_labels`): an input is read once,
    at the entry point. The queries that count are the topics people labelled (with no human
    labels: the topics the LLM labels)."""
    k = pooling(k, blend)
    scope = check_scope(scope)
    arguments.flag("judge_pool", judge_pool)
    _one_source(judges, llm_labels)
    human = qrels if qrels is not None else {}
    # which queries count is known before any model call when people labelled: no hole of a
    # topic that does not count is judged
    counted = query_set(qrels, candidates=queries) if qrels is not None else None
    if counted is not None and not counted.queries:
        raise JudgeblenderError("no topic has a label: the qrels and the topics share no query")
    pool = pool_runs(runs, k, set(counted.queries if counted is not None else queries))
    holes = exclude_judged(pool, human)
    # Labels already made cost nothing: take them for the whole pool (PPI++ needs it).
    asked = pool if judge_pool or llm_labels is not None else holes
    if llm_labels is not None:
        source = llm_source
        llm: Qrels = llm_labels
        what = f"have no valid label in {source}"
    elif not asked:  # people labelled every pooled pair: no model call (jb.judge refuses no pairs)
        from .api import panel

        jury = panel(judges, prompt=prompt, mode=mode, options=options)  # a bad jury still fails here
        llm, what, source = {}, "", ", ".join(j.id or j.model for j in jury.judges)
    else:
        import pandas as pd

        from .api import judge

        run = judge([(p.qid, p.docid) for p in asked], judges, queries=queries, corpus=corpus, prompt=prompt,
                    mode=mode, options=options, store=store)
        source = run.judges[0] if len(run.judges) == 1 else f"{blend} of {', '.join(run.judges)}"
        llm = {}
        for q, d, lab in run.blend(blend).itertuples(index=False):
            if not pd.isna(lab):
                llm.setdefault(q, {})[d] = int(lab)
        what = f"got no valid label from {source}"
    invalid = [(p.qid, p.docid) for p in asked if p.docid not in llm.get(p.qid, {})]
    notes: list[str] = []
    if invalid:
        in_holes = sum(d not in human.get(q, {}) for q, d in invalid)
        notes.append(f"{len(invalid)} of {len(asked)} pooled pairs {what} (first: {invalid[0][0]} {invalid[0][1]}); "
                     f"{in_holes} of them are holes, left unlabelled in the filled qrels")
    if counted is None:  # no human labels: the LLM labels everything, and decide which topics count
        counted = query_set(llm, candidates=queries, reference_name="the LLM labels")
        if not counted.queries:
            raise JudgeblenderError("no topic has a label: the LLM labels and the topics share no query")
    columns = scored_columns(qrels, llm, scope=scope, queries=counted, pool=[(p.qid, p.docid) for p in pool],
                             depth=k, llm_asked=None if llm_labels is not None else {(p.qid, p.docid) for p in asked},
                             llm_source=source)
    notes += columns.notes
    if counted.note():
        notes.append(counted.note())
    for note in notes:
        say(log, note)
    return Filled(columns, pool, holes, invalid, asked is pool or not human, notes)


# -- the experiment -----------------------------------------------------------------------

def experiment(systems: Any, topics: Any, *, qrels: Any = None, corpus: Any = None, judges: Any = None,
               llm_labels: Any = None, prompt: str = "umbrela", mode: str = "generate",
               options: Mapping[str, Any] | None = None, store: Any = None, measures: Sequence = ("nDCG@10",),
               k: int = 10, seed: Any = None, design: str | Path | None = None, baseline: str | None = None,
               correction: str | None = DEFAULT_CORRECTION, confidence: float = CONFIDENCE, blend: str = "mv",
               names: Sequence[str] | None = None, judge_pool: bool | None = None, scope: str = DEFAULT_SCOPE):
    """Systems compared on `topics`, with LLM labels where people did not judge: one row per system
    and measure (see evaluate/experiment.py for the columns).

    `systems`: {name: system} or a list (see system_runs). `qrels`: the human labels (any shape
    judgeblender.convert reads; None: the LLM labels everything). `judges` (with `corpus` for the
    passage texts, `prompt`, `mode`, `store`, `blend`) judge the pooled pairs people did not label,
    or `llm_labels` gives labels already made. `seed`: human labels of a seed drawn at random from
    the same pool with its `design` (the files `pool --sample-queries/--sample-pairs` write; the
    design is found beside a seed file): adds PPI++ estimates, for which the whole pool is judged
    (`judge_pool`, default: only with a seed; the LLM-only column is NaN when only holes were judged
    by a jury). Scores are means over the topics that have human labels.
    `scope`: the pairs the human, filled and llm columns are computed over (evaluate/scope.py):
    'labels' (default: every pair the human or LLM labels cover, the same whichever systems are
    in the table) or 'pool' (the systems' pooled pairs at depth k).
    `baseline`: a system's name; adds paired t-tests on the filled labels with `correction`
    (holm, bonferroni or none) and, with a seed, PPI++ differences with Holm's correction.
    The table's `attrs` hold the queries (and the dropped ones, with the reason), the scope, k,
    confidence, correction and the notes."""
    k = pooling(k, blend)
    scope = check_scope(scope)
    measures = arguments.sequence("measures", measures, "measures (ir_measures names such as nDCG@10)")
    arguments.confidence(confidence)
    if correction is not None and not isinstance(correction, str):  # the name is checked by experiment_table
        raise ArgumentError("correction", "holm, bonferroni or none", correction)
    if baseline is not None:
        arguments.text("baseline", baseline)
    if judge_pool is not None:
        arguments.flag("judge_pool", judge_pool)
    if judge_pool is None:
        judge_pool = seed is not None
    elif seed is not None and not judge_pool:
        raise JudgeblenderError("a seed needs LLM labels for the whole pool: leave judge_pool at its default")
    seed_arg = None
    if seed is not None:  # read, as every input, once and before any system runs or model is called
        seed_path = seed if isinstance(seed, (str, Path)) else "seed"
        if design is None and not isinstance(seed, (str, Path)):
            raise JudgeblenderError("a seed given as labels (not a file) needs design= (its design file)")
        seed_arg = Seed(convert.qrels(seed, "seed", scale=convert.SCALE, argument="seed"), seed_path, design)
    human, given, source = given_labels(qrels, judges, llm_labels, human_needed=False)
    queries = topic_texts(topics)
    runs = system_runs(systems, queries, names)
    filled = fill(runs, queries, qrels=human, corpus=corpus, judges=judges, llm_labels=given, llm_source=source,
                  prompt=prompt, mode=mode, options=options, store=store, blend=blend, k=k, judge_pool=judge_pool,
                  scope=scope)
    columns = filled.columns
    llm_sources = {pq: s for pq, s in columns.provenance.items() if s != HUMAN}
    inputs = ExperimentInputs(runs, columns.queries.queries, columns.human, columns.filled, columns.llm, llm_sources,
                              columns.llm_complete, pool_judged=filled.pool_judged, scope=scope)
    table = experiment_table(inputs, measures, k=k, baseline=baseline, correction=correction, seed=seed_arg,
                             confidence=confidence)
    counted = filled.counts_note(scope)
    for note in ([counted] if counted else []) + table.attrs.get("notes", []):  # fill logged its own
        say(log, note)
    table.attrs.update({**filled.counts(), "invalid": len(filled.invalid), **columns.summary(),
                        "notes": list(filled.notes) + ([counted] if counted else []) + table.attrs.get("notes", [])})
    return table
