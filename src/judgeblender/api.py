"""The notebook API: judge, blend, calibrate and measure in a few calls, with DataFrames.

    import judgeblender as jb
    run = jb.judge(df, judges=["llamacpp:default", "embed:default"], prompt="umbrela", mode="logprobs",
                   store="j.sqlite")
    run.labels                        # qid, docno, judge, label, expected, valid, reason
    run.blend("mv", tie="avg")        # qid, docno, label
    jb.agreement(gold, run.blend("mv")).kappa

Labels go in as anything `judgeblender.convert` reads (DataFrames, ir_measures Qrel tuples, qrels
dicts, (qid, docid, label) tuples, qrels files) and come out as DataFrames with pandas' nullable
Int64 labels: an invalid answer is <NA> with valid=False and its reason, never 0. The document
column is PyTerrier's `docno` in every frame returned (a frame given may name it docno, docid or
doc_id). This module
only assembles the library's parts; the CLI's commands do the same with files.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import arguments, convert
from .blend import LABELS, METHODS, TIE_RULES, BallotTable, Blender, BlendResult, Vote
from .blend.calibrate import LEARNERS, CalibrationReport, LearnedBlend, cross_validate, fit_blend
from .errors import ArgumentError, JudgeblenderError
from .evaluate import AgreementReport, correlate as correlate_reports
from .evaluate import agreement as agreement_report
from .evaluate.intervals import CONFIDENCE
from .evaluate.leaderboard import DEFAULT_MEASURES
from .evaluate.scope import DEFAULT_MIN_JUDGED
from .judges import JudgeRun, JudgeSpec, resolve_pairs, summary_rows
from .judges.engine import WINDOW
from .judges.judge import DEFAULT_MIN_CHOICE_MASS, check_mode, spec_id
from .backends.registry import command_options, is_scorer
from .panels.judging import JudgedFiles, RunOptions, judge_in_memory, judge_to_files
from .panels.panel import Panel, ballots_from_run, get_panel
from .pairs import Pair
from .pairs.texts import is_missing

# -- panels ---------------------------------------------------------------------------------

def _spec(judge: Any, prompt: str, run: RunOptions) -> JudgeSpec:
    """A JudgeSpec from a model string, a dict of JudgeSpec fields, or a JudgeSpec (kept as is).
    `prompt` and the run's mode are defaults for LLM judges only: a scorer (embed:, cross:) has
    neither; the run's seed, fallback, invalid-answer policy and least choice mass are defaults
    for every judge given as a string or a dict."""
    if isinstance(judge, JudgeSpec):
        return judge
    if isinstance(judge, str):
        judge = {"model": judge}
    if not isinstance(judge, Mapping) or "model" not in judge:
        raise ArgumentError("judges", "each judge a model string, a JudgeSpec or a dict with a 'model'", judge)
    fields = {**run.spec_fields(), **judge}
    fields["options"] = {**command_options(fields["model"], run.backend), **fields.get("options", {})}
    if not is_scorer(fields["model"]):  # a scorer's id is its model (judges/judge.py judge_id)
        fields.setdefault("prompt", prompt)
        fields.setdefault("mode", run.mode)
    return JudgeSpec(**fields)


def _backend_options(options: Any) -> dict[str, Any]:
    if options is not None and not isinstance(options, Mapping):
        raise ArgumentError("options", "a dict of backend options, or None", options)
    return dict(options or {})


def panel(judges: Any, *, prompt: str = "umbrela", mode: str = "generate",
          options: Mapping[str, Any] | None = None, models: Sequence[str] | None = None) -> Panel:
    """A panel from a preset name (promptblender, llmblender, umbrela), a panel TOML file, a Panel,
    or a list of judges (model strings, JudgeSpecs, dicts of JudgeSpec fields)."""
    if isinstance(judges, Panel):
        return judges
    return _panel(judges, prompt, RunOptions(mode=check_mode(mode), backend=_backend_options(options)), models)


def _panel(judges: Any, prompt: str, run: RunOptions, models: Sequence[str] | None = None) -> Panel:
    """`panel`, its judges declared with the run's options (`judge` passes its own)."""
    if isinstance(judges, Panel):
        return judges
    arguments.text("prompt", prompt)
    if isinstance(judges, (str, Path)):
        try:
            return get_panel(str(judges), list(models) if models else None, run.mode, dict(run.backend),
                             **run.spec_fields())
        except ArgumentError as exc:  # the preset's name is what this function calls `judges`
            raise exc.renamed("judges") if exc.argument == "panel" else exc from None
    if isinstance(judges, (bytes, Mapping)) or not isinstance(judges, Iterable):
        raise ArgumentError("judges", "a panel preset, a panel TOML file, a Panel or a list of judges", judges)
    specs = [_spec(j, prompt, run) for j in judges]
    if not specs:
        raise ArgumentError("judges", "at least one judge", judges)
    specs = [replace(s, id=spec_id(s)) for s in specs]
    arguments.distinct_ids("judges", (s.id for s in specs))
    return Panel(name="judges", judges=specs, source="a list of judges")


# -- judging ----------------------------------------------------------------------------------

def _same_text(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return a is b or (is_missing(a) and is_missing(b)) or (type(a) is type(b) and repr(a) == repr(b))


def _texts(df, column: str, key: str) -> dict[str, Any]:
    """{id: text} from a DataFrame's key and text columns, the texts as given (resolve_pairs
    checks them); one id with two different texts is an error naming both pairs."""
    out: dict[str, Any] = {}
    first: dict[str, tuple[str, str]] = {}
    for k, pair, text in zip(df[key].astype(str), zip(df["qid"].astype(str), df["docid"].astype(str)), df[column]):
        if k not in out:
            out[k], first[k] = text, pair
        elif not _same_text(out[k], text):
            raise JudgeblenderError(f"pairs ({', '.join(first[k])}) and ({', '.join(pair)}): the {key} {k!r} comes "
                                    f"with two different {column} texts")
    return out


def judge_inputs(pairs: Any, queries: Any, corpus: Any, texts_required: bool = True
                 ) -> tuple[list[tuple[str, str]], dict[str, str] | None, dict[str, str] | None]:
    """`judge`'s inputs read as `judge` reads them: the (qid, docid) keys, and the query and
    passage texts by id (from a DataFrame's columns, mappings or files). `jb.Client.judge` reads
    its inputs here too, so the two take the same shapes; without `texts_required` (a service
    started with --queries/--corpus looks the texts up) a text source left out stays None."""
    from .pairs import read_corpus, read_queries

    if convert.is_frame(pairs):  # PyTerrier's (qid, docno, query, text) too
        pairs = convert.project_columns(pairs, ("qid", "docid"), "pairs")
        if queries is None and "query" in pairs.columns:
            queries = _texts(pairs, "query", "qid")
        if corpus is None and "passage" in pairs.columns:
            corpus = _texts(pairs, "passage", "docid")
    keys = convert.pairs(pairs, argument="pairs")
    if texts_required and (queries is None or corpus is None):
        raise JudgeblenderError("judge needs the query and passage texts: give a DataFrame with columns qid, "
                                "docid, query, passage, or queries= and corpus= (mappings or files)")
    if isinstance(queries, (str, Path)):
        queries = read_queries(queries)
    if isinstance(corpus, (str, Path)):
        corpus = read_corpus(corpus, wanted={d for _, d in keys})
    return keys, None if queries is None else dict(queries), None if corpus is None else dict(corpus)


def _optional_path(name: str, value: Any) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, (str, Path)) or not str(value).strip():
        raise ArgumentError(name, "a file path, or None", value)
    return Path(value)


def judge(pairs: Any, judges: Any = ("llamacpp:default",), *, queries: Any = None, corpus: Any = None,
          prompt: str = "umbrela", mode: str = "generate", options: Mapping[str, Any] | None = None,
          store: Any = None, skip_missing: bool = False, progress: bool | None = None, seed: int = 0,
          allow_fallback: bool = False, invalid_policy: str = "retry-once",
          min_choice_mass: float = DEFAULT_MIN_CHOICE_MASS, redact: bool = False, batch_read: Any = None,
          batch_write: Any = None, ray: str | None = None, ray_workers: int | None = None, out: Any = None,
          details: Any = None, window: int = WINDOW) -> Judged | JudgedFiles:
    """Judge every pair with every judge; calls are cached in `store` (a path or a CallStore).

    `pairs`: a DataFrame (qid, docid, query, passage, or PyTerrier's qid, docno, query, text; or
    qid, docid with queries= and corpus=), a
    pairs/qrels/run file, or (qid, docid) tuples. `judges`: a panel preset, a panel TOML file, or a
    list of model strings, JudgeSpecs or dicts. `prompt`, `mode` and `options` are defaults for
    the judges given as strings or dicts (prompt and mode for LLM judges only); `mode` defaults
    to "generate", as `judgeblender judge --mode` does. `store=None` keeps nothing (the CLI
    writes judgments.sqlite): pass a path to make re-runs free. `progress`: the CLI's progress
    bar on stderr or in the notebook cell; None shows it in a terminal or a notebook only.

    Everything `judgeblender judge` does is here, through the same code (panels/judging.py):
    `seed`, `allow_fallback`, `invalid_policy` and `min_choice_mass` are every judge's defaults
    (its flags --seed, --allow-fallback, --invalid, --min-choice-mass); `redact` keeps no passage
    in a store opened from a path; `batch_read`/`batch_write` answer the calls from a Batch API
    output file or write the unanswered ones to a requests file; `ray` (local, auto, HOST:PORT,
    ray://HOST:PORT) runs the calls on a Ray cluster with `ray_workers` workers. Possible prompt
    injections are flagged in the result's `flagged` (labels stay as judged). With `out`, the
    run writes the qrels to `out` and every pair's details beside it (or to `details`) as the
    CLI does, `window` pairs at a time, blended when `judges` is a panel or several judges, and
    returns what was written (a JudgedFiles: out, details, judged, flagged, summary())."""
    from .progress import RichReporter, default_enabled

    arguments.flag("skip_missing", skip_missing)
    if progress is not None:
        arguments.flag("progress", progress)
    run = RunOptions(mode=check_mode(mode), seed=seed, allow_fallback=allow_fallback, invalid_policy=invalid_policy,
                     min_choice_mass=min_choice_mass, backend=_backend_options(options), skip_missing=skip_missing,
                     redact=redact, batch_read=_optional_path("batch_read", batch_read),
                     batch_write=_optional_path("batch_write", batch_write), ray=ray, ray_workers=ray_workers,
                     window=window).check()
    out_path, details_path = _optional_path("out", out), _optional_path("details", details)
    if details_path is not None and out_path is None:
        raise ArgumentError("details", "None unless out is given (the details file sits beside the qrels)", details)
    the_panel = _panel(judges, prompt, run)
    keys, query_texts, passages = judge_inputs(pairs, queries, corpus)
    if not keys:  # an empty table would look like a judged run
        raise ArgumentError("pairs", "at least one (qid, docid) pair to judge", pairs)
    # the engine checks again; here it runs before a store file is made or a model loaded
    listed = [Pair(*k) for k in keys]
    resolve_pairs(listed, query_texts, passages, skip_missing)
    reporter = RichReporter(default_enabled() if progress is None else progress)
    if out_path is not None:  # the CLI's outputs: one judge's labels, or a panel's blend
        one = the_panel.source == "a list of judges" and len(the_panel.judges) == 1
        return judge_to_files(the_panel.judges[0] if one else the_panel, listed, query_texts, passages, out_path,
                              details_path, store, run, reporter)
    done = judge_in_memory(the_panel.judges, listed, query_texts, passages, store, run, reporter)
    return Judged(done.run, the_panel, done.flagged, done.batch_written)


@dataclass
class Judged:
    """Every judge's judgment of every pair, from `judge`."""

    run: JudgeRun
    panel: Panel
    # pairs whose passage may hold a prompt injection, with what was found (labels stay as judged)
    flagged: dict[Pair, list] = field(default_factory=dict)
    # the Batch API requests written with batch_write, per file (None without it)
    batch_written: dict[Path, int] | None = None

    @property
    def judges(self) -> list[str]:
        return list(self.run.judgments)

    @property
    def labels(self):
        """One row per (pair, judge): qid, docno, judge, label, expected, score, valid, reason.
        `reason` is why an invalid answer is invalid, or a rubric judge's stated reason."""
        import pandas as pd

        rows = [(p.qid, p.docid, jid, j.label, j.expected, j.score, j.valid, j.invalid_reason or j.reason)
                for jid, judgments in self.run.judgments.items() for p, j in judgments.items()]
        df = pd.DataFrame(rows, columns=["qid", convert.DOCNO, "judge", "label", "expected", "score", "valid",
                                         "reason"])
        df["label"] = pd.array(df["label"].tolist(), dtype="Int64")
        df["expected"] = df["expected"].astype(float)
        df["score"] = df["score"].astype(float)
        return df

    def ballots(self) -> BallotTable:
        return ballots_from_run(self.run)

    def blend(self, method: str = "mv", *, tie: str = "avg", seed: int | None = 0,
              weights: Mapping[str, float] | None = None, thresholds: Sequence[float] | None = None):
        """One label per pair (qid, docno, label; <NA> where no judge gave a valid label)."""
        return _blend_table(self.ballots(), method, tie=tie, seed=seed, weights=weights, thresholds=thresholds)

    def summary(self):
        """Per judge: pairs, judged, invalid outputs, calls made, cache hits, seconds ..."""
        import pandas as pd

        return pd.DataFrame(summary_rows(self.run))

    def agreement(self, gold: Any, *, bootstrap: int = 1000, seed: int = 0, confidence: float = CONFIDENCE):
        """Per judge, its agreement with `gold` (one row per judge: n, kappa, kappa_binary, ...,
        kappa_ci, ...: bootstrap intervals over the gold queries, see `agreement`)."""
        import pandas as pd

        _measuring(bootstrap, seed, confidence)
        rows, labels = [], self.labels
        # gold is read once, for every judge
        gold_qrels = convert.qrels(gold, "gold", scale=convert.SCALE, required=True, argument="gold")
        for jid, mine in labels.groupby("judge", sort=False):
            found = convert.triples(mine, jid, scale=convert.SCALE)
            report = _agreement(gold_qrels, found, jid, None, bootstrap=bootstrap, seed=seed, confidence=confidence)
            rows.append({k: v for k, v in report.__dict__.items() if k not in ("confusion", "notes")})
        return pd.DataFrame(rows)


# -- blending ---------------------------------------------------------------------------------

def ballots(labels: Any) -> BallotTable:
    """A jury's labels as a ballot table: a Judged run, a BallotTable, a DataFrame with a judge
    column (qid, docid, judge, label), or {judge: labels} with labels in any converter shape."""
    if isinstance(labels, Judged):
        return labels.ballots()
    if isinstance(labels, BallotTable):
        return labels
    if convert.is_frame(labels):
        if "judge" not in labels.columns:
            raise JudgeblenderError("a jury's labels need a judge column (qid, docid, judge, label)")
        no_judge = labels.index[labels["judge"].isna()]
        if len(no_judge):  # groupby would drop these rows
            raise JudgeblenderError(f"a jury's labels: row {no_judge[0]} has no judge ({len(no_judge)} rows like it)")
        labels = {j: group for j, group in labels.groupby("judge", sort=False)}
    if not isinstance(labels, Mapping):
        raise ArgumentError("labels", "a jury's labels: a Judged run, a BallotTable, a DataFrame with a judge "
                            "column or {judge: labels}", labels)
    arguments.non_empty("labels", labels, "one judge's labels")
    rows: dict[tuple[str, str], dict[str, Vote]] = {}
    invalid = {}
    for jid, given in labels.items():
        found = convert.triples(given, f"judge {jid}", scale=LABELS, argument=f"labels[{jid!r}]")
        invalid[str(jid)] = sum(v is None for *_, v in found)
        for q, d, v in found:
            rows.setdefault((q, d), {})[str(jid)] = Vote(v)
    table = BallotTable.from_votes(rows.items(), [str(j) for j in labels])
    return replace(table, invalid=invalid)


def _blend_settings(method: Any, tie: Any, seed: Any) -> None:
    """The blend's method, tie rule and seed, checked before any label is read (Judged.blend,
    blend_labels): Blender's own ValueError would come after the work, without the argument's name."""
    arguments.one_of("method", method, METHODS, hint=f"there is no blend {method}; `judgeblender blend --methods` "
                                                     "describes each")
    arguments.one_of("tie", tie, TIE_RULES)
    arguments.optional_seed("seed", seed)


def _blend_table(table: BallotTable, method: str, **settings):
    _blend_settings(method, settings.get("tie", "avg"), settings.get("seed"))
    settings = {k: v for k, v in settings.items() if v is not None or k == "seed"}
    try:
        result = Blender(method, **settings).blend(table)
    except (KeyError, ValueError) as exc:
        raise JudgeblenderError(f"blend {method}: {exc}") from None
    return _result_frame(result)


def _result_frame(result: BlendResult):
    return convert.frame([(q, d, lab) for (q, d), lab in zip(result.table.pairs, result.labels)], "blend",
                         scale=convert.SCALE)


def blend_labels(labels: Any, method: str = "mv", *, tie: str = "avg", seed: int | None = 0,
                 weights: Mapping[str, float] | None = None, thresholds: Sequence[float] | None = None):
    """Blend a jury's labels (see `ballots` for the shapes) into one label per pair (a DataFrame
    qid, docno, label). Methods: `judgeblender blend --methods`, or judgeblender.blend.METHODS."""
    _blend_settings(method, tie, seed)  # before the labels are read
    return _blend_table(ballots(labels), method, tie=tie, seed=seed, weights=weights, thresholds=thresholds)


@dataclass
class Calibrated:
    """A blend learned on gold labels: its cross-validated report and the blend fitted on all pairs."""

    report: CalibrationReport
    learned: LearnedBlend
    warnings: list[str] = field(default_factory=list)

    def apply(self, labels: Any):
        """The learned blend's label per pair of another jury run (same judges)."""
        table = ballots(labels)
        predicted = self.learned.predict(table)
        return convert.frame([(q, d, lab) for (q, d), lab in zip(table.pairs, predicted)], "calibrated blend",
                             scale=convert.SCALE)


def calibrate(labels: Any, gold: Any, learner: str = "thresholds", *, folds: int = 5, seed: int | None = 0,
              tie: str = "avg") -> Calibrated:
    """Learn how to blend a jury (learner: thresholds, weights or logistic) on gold labels, scored
    on held-out queries (k folds by query). A warning says when a single member beats the blend."""
    arguments.one_of("learner", learner, LEARNERS)
    arguments.bounded("folds", folds)
    arguments.one_of("tie", tie, TIE_RULES)
    arguments.optional_seed("seed", seed)
    table, gold_qrels = ballots(labels), convert.qrels(gold, "gold", scale=convert.SCALE, required=True, argument="gold")
    try:
        report = cross_validate(table, gold_qrels, learner, folds=folds, seed=seed, tie=tie)
        learned = fit_blend(table, gold_qrels, learner, tie=tie, seed=seed)
    except ValueError as exc:
        raise JudgeblenderError(f"calibrate: {exc}") from None
    return Calibrated(report, learned, list(report.warnings))


# -- measuring --------------------------------------------------------------------------------

def agreement(gold: Any, pred: Any, *, name: str = "prediction", invalid: int | None = None, bootstrap: int = 1000,
              seed: int = 0, confidence: float = CONFIDENCE) -> AgreementReport:
    """Agreement of `pred` with `gold` on the pairs both label: kappa, weighted kappas, alpha,
    accuracy, confusion. Invalid labels in `pred` are counted, not scored. Undefined statistics
    (constant labels, no shared pair) are NaN, with a note. kappa_ci, kappa_binary_ci,
    weighted_kappa_*_ci and alpha_ordinal_ci: `confidence` percentile intervals from `bootstrap`
    samples of whole gold queries drawn with replacement (seeded by `seed`; 0 samples: NaN)."""
    arguments.text("name", name)
    if invalid is not None:
        arguments.non_negative_int("invalid", invalid)
    _measuring(bootstrap, seed, confidence)
    if convert.is_frame(pred) and "judge" in pred.columns and pred["judge"].nunique() > 1:
        raise JudgeblenderError("agreement compares one set of labels with gold; these are several judges': "
                                "pass a blend (run.blend()), one judge's rows, or use run.agreement(gold)")
    gold_qrels = convert.qrels(gold, "gold", scale=convert.SCALE, required=True, argument="gold")
    pred_triples = convert.triples(pred, name, scale=convert.SCALE, argument="pred")
    return _agreement(gold_qrels, pred_triples, name, invalid, bootstrap=bootstrap, seed=seed, confidence=confidence)


def _agreement(gold: dict[str, dict[str, int]], pred: list, name: str, invalid: int | None,
               **settings) -> AgreementReport:
    """`agreement` on labels already read (gold's qrels, the prediction's triples): an input is
    read once, so its invalid labels are counted from the same triples its qrels come from."""
    count = sum(label is None for *_, label in pred) if invalid is None else invalid
    return agreement_report(gold, convert.qrels_of(pred), name, count, **settings)


def _measuring(bootstrap: Any, seed: Any, confidence: Any) -> None:
    """The bootstrap's settings, shared by agreement, Judged.agreement and correlate: 0 samples
    disables the intervals (documented), a negative or fractional count is an error."""
    arguments.bounded("bootstrap", bootstrap)
    arguments.non_negative_int("seed", seed)
    arguments.confidence(confidence)


def named_labels(predictions: Any) -> list[tuple[str, str, Any]]:
    """(name, argument, labels) of a mapping of names to labels, or of one labels value (named
    'prediction'); `argument` is how errors name it (predictions['name'] or predictions)."""
    if isinstance(predictions, Mapping) and predictions:
        first = next(iter(predictions.values()))
        nested_qrels = isinstance(first, Mapping) and first and isinstance(next(iter(first.values())), Mapping)
        if nested_qrels or not isinstance(first, Mapping):
            return [(str(k), f"predictions[{k!r}]", v) for k, v in predictions.items()]
    return [("prediction", "predictions", predictions)]


def correlate(gold: Any, predictions: Any, runs: Any, *, measures: Sequence[str] = DEFAULT_MEASURES,
              bootstrap: int = 1000, seed: int = 0, confidence: float = CONFIDENCE,
              min_judged: float = DEFAULT_MIN_JUDGED):
    """How well the leaderboard of `runs` under each prediction's labels matches the one under
    `gold`: one row per (prediction, measure) with Kendall's tau, Spearman's rho, tau_ap and
    their bootstrap intervals. `predictions`: labels, or {name: labels}; `runs`: a folder of TREC
    runs, a list of run files, or {name: run} (a file, a DataFrame qid/docid/score or a dict).
    The queries are the `correlate` command's and the report's (evaluate/scope.py's query_set):
    the gold's, less those whose gold labels judge under `min_judged` of the runs' top 10; each
    row's dropped_queries and notes say which were left out and why."""
    import pandas as pd

    measures = arguments.sequence("measures", measures, "measures (ir_measures names such as nDCG@10)")
    _measuring(bootstrap, seed, confidence)
    arguments.bounded("min_judged", min_judged)
    arguments.non_empty("predictions", predictions, "one set of labels")
    arguments.non_empty("runs", runs, "one run")
    gold_qrels = convert.qrels(gold, "gold", scale=convert.SCALE, required=True, argument="gold")
    preds = {name: convert.qrels(p, name, scale=convert.SCALE, argument=argument)
             for name, argument, p in named_labels(predictions)}
    reports = correlate_reports(gold_qrels, preds, convert.runs(runs, "runs"), measures, bootstrap, seed, confidence,
                                min_judged)
    return pd.DataFrame([r.to_dict() for r in reports])


def labels_frame(labels: Any, *, scale: Any = convert.SCALE):
    """Any labels (see judgeblender.convert) as a DataFrame qid, docno, label. A label off
    `scale` (TREC's 0-3 unless told another, e.g. `scale=range(5)`; None: any integer) is an
    error naming its row: this is how labels on another scale are read, to be mapped onto 0-3
    before judgeblender measures or blends them."""
    return convert.frame(labels, scale=arguments.scale("scale", scale))


def qrels(labels: Any, *, scale: Any = convert.SCALE) -> dict[str, dict[str, int]]:
    """Any labels as a qrels dict {qid: {docid: label}} (invalid labels left out), each label
    on `scale` (see `labels_frame`)."""
    return convert.qrels(labels, scale=arguments.scale("scale", scale))
