"""The report's HTML: sections in the order a reader checks trust, plots as inline SVG."""

from __future__ import annotations

from collections import Counter
from html import escape

from .. import __version__
from ..evaluate.agreement import LEVELS
from ..evaluate.bias import leaderboard_ranks, leaderboard_scatter
from ..evaluate.experiment import NOT_TESTED
from ..evaluate.intervals import difference_range, measure_range
from ..evaluate.svgplot import grid_svg
from .data import NO_BASIS, PPI, ReportData
from .heatmap import confusion_svg
from ..evaluate.scope import describe_scope
from .html import bar, basis, ci, notes, num, page, table

SCATTER_MEASURES = ("nDCG@10", "AP(rel=2)")
SECTIONS = (
    ("agreement", "Label agreement"),
    ("confusion", "Confusion matrices and per-level accuracy"),
    ("correlation", "Leaderboard correlation"),
    ("leaderboard", "Leaderboard under human and LLM labels"),
    ("estimate", "Leaderboard with intervals from the human seed (PPI++)"),
    ("scatter", "Human vs LLM score per run, by system family"),
    ("methods", "Retrieval-method comparison: where the judgments have holes"),
    ("judges", "Judges: invalid outputs, cost and time"),
)


CORRELATION_RANGE = (-1.0, 1.0)  # tau, rho and tau_AP


def _sections(d: ReportData) -> list[tuple[str, str]]:
    """The sections this report has: the seed's leaderboard only when a seed set was given."""
    return [(k, t) for k, t in SECTIONS if k != "estimate" or d.estimates]


def render(d: ReportData) -> str:
    body = [_header(d)]
    for key, title in _sections(d):
        body.append(f'<h2 id="{key}">{escape(title)}</h2>')
        body.append(globals()[f"_{key}"](d))
    return page(d.inputs.title, "".join(body))


def _header(d: ReportData) -> str:
    i = d.inputs
    preds = ", ".join(f"{escape(n)} ({p:,} pairs)" for n, p in d.pred_pairs.items())
    toc = "".join(f'<li><a href="#{k}">{escape(t)}</a></li>' for k, t in _sections(d))
    return (f"<h1>{escape(i.title)}</h1>"
            f'<p class="lead">Human labels <code>{escape(str(i.gold))}</code>: {d.gold_pairs:,} pairs on '
            f"{d.gold_queries} queries. LLM labels: {preds}. Runs: {len(d.runs)} from "
            f"<code>{escape(str(i.runs_dir))}</code>. The label files are read on the "
            f"{escape(describe_scope(i.scope, i.depth))}. Human leaderboards: {escape(d.basis.short)} "
            f"Made by judgeblender {escape(__version__)}.</p>"
            + notes(d.notes) + f"<nav><ol>{toc}</ol></nav>")


def _agreement(d: ReportData) -> str:
    rows = [[a.name, f"{a.n:,}", num(a.coverage, pct=True), num(a.accuracy), num(a.kappa), num(a.kappa_binary),
             num(a.weighted_kappa_linear), num(a.weighted_kappa_quadratic), num(a.alpha_ordinal)]
            for a in d.agreements]
    caption = ("Only pairs labelled in both files count. pairs: labelled in both; coverage: of the human pairs; "
               "kappa: Cohen's on 0-3; kappa bin: on 0-1 vs 2-3; wk: linearly / quadratically weighted kappa; "
               "alpha: Krippendorff's, ordinal.")
    out = table(["prediction", "pairs", "coverage", "accuracy", "kappa", "kappa bin", "wk linear", "wk quadratic",
                 "alpha"], rows, caption)
    return _on_pairs(d) + out + notes(f"{a.name}: {n}" for a in d.agreements for n in a.notes)


def _on_pairs(d: ReportData) -> str:
    shared = "; ".join(f"{a.name}: {a.n:,} pairs" for a in d.agreements)
    return basis(f"Computed on the pairs labelled both by people and by the LLM file ({shared}), of the "
                 f"{d.gold_pairs:,} human labels on {d.gold_queries} queries.")


def _confusion(d: ReportData) -> str:
    svgs = "".join(confusion_svg(a.confusion, f"{a.name} ({a.n:,} pairs)", "human", "LLM") for a in d.agreements)
    rows = [[a.name, *(num(x, pct=True) for x in a.per_level_accuracy), num(a.accuracy, pct=True)]
            for a in d.agreements]
    acc = table(["prediction", *(f"level {lvl}" for lvl in LEVELS), "all"], rows,
                "Per-level accuracy: of the pairs people gave a level, the share the LLM gave the same level.")
    return (_on_pairs(d) + '<p>Rows are the human label, columns the LLM label; a cell\'s shade is its share of '
            f'the row.</p><div class="plots">{svgs}</div>{acc}')


def _family_head(d: ReportData) -> str:
    """A family column's heading: said to be guessed when no groups were given (report/families.py)."""
    return "family (guessed from the name)" if d.groups_guessed else "family"


def _human_basis(d: ReportData) -> str:
    """The statement of what a human-side section is computed on (a warning when nothing)."""
    return basis(d.basis.statement, warn=d.basis.kind == NO_BASIS)


def _correlation(d: ReportData) -> str:
    if not d.correlations:
        return _human_basis(d)
    first = d.correlations[0]
    level = f"{first.confidence:.0%}"
    rows = [[escape(r.name), escape(r.measure), ci(r.kendall_tau, r.kendall_tau_ci, CORRELATION_RANGE),
             ci(r.spearman_rho, r.spearman_rho_ci, CORRELATION_RANGE), ci(r.tau_ap, r.tau_ap_ci, CORRELATION_RANGE)]
            for r in d.correlations]
    if d.basis.kind == PPI:
        ci_note = ("No intervals: the human leaderboard is itself an estimate (its intervals and the pairs of runs "
                   "it orders are in the PPI++ section).")
    else:
        ci_note = (f"[lo, hi]: {level} bootstrap interval over queries ({first.bootstrap} samples, "
                   f"seed {d.inputs.seed})." if first.bootstrap else f"No bootstrap intervals ({d.inputs.spoken('bootstrap')} 0).")
    cap = (f"{first.n_runs} runs, {first.n_queries} queries. tau: Kendall's tau-b; rho: Spearman's; tau_AP: "
           f"top-weighted, the human leaderboard as reference. {ci_note} R@10 is ir_measures' recall with a label "
           ">= 1 counting as relevant; AP uses label >= 2.")
    seen: set[str] = set()
    extra = [f"{r.name}: {n}" for r in d.correlations for n in r.notes
             if f"{r.name}: {n}" not in seen and not seen.add(f"{r.name}: {n}")]
    heads = ["tau", "rho", "tau_AP"] if d.basis.kind == PPI else [f"{h} [{level} CI]" for h in ("tau", "rho", "tau_AP")]
    return (_human_basis(d) + table(["prediction", "measure", *heads], rows, cap, left=2, raw_cells=True)
            + notes(extra))


def _leaderboard(d: ReportData) -> str:
    if not d.correlations:
        return _human_basis(d)
    out = [_human_basis(d)]
    ppi = d.basis.kind == PPI
    human = "human (PPI++)" if ppi else "human"
    for name in d.pred_pairs:
        by_measure = {r.measure: r for r in d.correlations if r.name == name}
        if not by_measure:
            continue
        measures = list(by_measure)
        first = by_measure[measures[0]]
        judged = [] if ppi else ["Judged@10"]
        head = ('<thead><tr><th class="l" rowspan="2">run</th>'
                f'<th class="l" rowspan="2">{_family_head(d)}</th>'
                + "".join(f'<th colspan="2">{escape(m)}</th>' for m in measures + judged)
                + f'<th colspan="2">rank by {escape(measures[0])}</th></tr><tr>'
                + f"<th>{human}</th><th>LLM</th>" * (len(measures) + len(judged) + 1) + "</tr></thead>")
        ranks_h, ranks_l = leaderboard_ranks(first.gold_scores), leaderboard_ranks(first.pred_scores)
        order = sorted(range(len(first.runs)), key=lambda k: (ranks_h[k], first.runs[k]))
        rows = []
        for k in order:
            run = first.runs[k]
            cells = [escape(run), escape(d.groups.get(run, "(ungrouped)"))]
            for m in measures:
                cells += [num(by_measure[m].gold_scores[k]), num(by_measure[m].pred_scores[k])]
            if not ppi:
                cells += [num(d.judged["human"][k], pct=True), num(d.judged[name][k], pct=True)]
            cells += [f"{ranks_h[k]:g}", f"{ranks_l[k]:g}"]
            rows.append(cells)
        taus = ", ".join(f"{m}: tau {num(by_measure[m].kendall_tau)}, rho {num(by_measure[m].spearman_rho)}"
                         for m in measures)
        what = ("the PPI++ estimate of each run's human score (intervals in the PPI++ section) beside its score "
                "under the LLM labels alone" if ppi else "Judged@10: share of a run's top 10 that the labels cover")
        out.append(f"<h3>{escape(name)}</h3>")
        out.append(table([], rows, f"Runs in the order of the human {measures[0]} leaderboard. {taus}. {what}.",
                         left=2, raw_cells=True, head_html=head))
    return "".join(out)


def _seed_words(method: dict) -> str:
    return (f"{method['seed_pairs']} human seed pairs over {method['seed_queries']} queries" if "seed_pairs" in method
            else f"{method['seed_queries']} human seed queries")


def _estimate(d: ReportData) -> str:
    fitted = [r for r in d.estimates.values() if not isinstance(r, str)]
    out = []
    if fitted:
        m = fitted[0].method
        out.append(basis(f"Computed on {_seed_words(m)} of {m['queries']} ({d.inputs.spoken('seed_qrels')}) and the LLM labels on "
                         f"all {m['queries']} queries."))
    out.append(f"<p>The human seed <code>{escape(str(d.inputs.seed_qrels))}</code> corrects each LLM label file's "
               "leaderboard (prediction-powered inference, as <code>judgeblender estimate</code>; docs/estimation.md): "
               "the estimate is unbiased for the human score and its interval holds even when the judge is lenient "
               "or favours a family of systems. Runs are in the order of the estimate. Intervals are clipped to the "
               "measure's range (a score in [0, 1], a difference in [-1, 1]).</p>")
    for name, result in d.estimates.items():
        out.append(f"<h3>{escape(name)}</h3>")
        if isinstance(result, str):
            out.append(f'<p class="warn">No estimate from these labels: {escape(result)}</p>')
            continue
        m = result.method
        conf = m["confidence"]
        for measure in dict.fromkeys(r.measure for r in result.runs):
            runs = sorted((r for r in result.runs if r.measure == measure), key=lambda r: -r.estimate)
            bounds = measure_range(measure)
            rows = [[escape(r.run + ("" if r.normal_ok else " *")), escape(d.groups.get(r.run, "(ungrouped)")),
                     ci(r.estimate, (r.ci_low, r.ci_high), bounds),
                     ci(r.human_only, (r.human_only_low, r.human_only_high), bounds),
                     num(r.llm_only), num(r.lam, 2)] for r in runs]
            cap = (f"{measure}, {conf:.0%} intervals [lo, hi], {_seed_words(m)} of {m['queries']}. PPI++: LLM labels "
                   "on every query, corrected by the seed; human-only: the seed alone; LLM-only: no correction "
                   "(biased when the judge is); lambda: the weight of the LLM scores. *: fails Cochran's rule on the "
                   f"seed, a less trustworthy interval. Estimated: {m['estimand']}. Method: {m['estimator']}. "
                   f"Design: {m['design']}.")
            out.append(table(["run", _family_head(d), f"PPI++ {measure} [{conf:.0%} CI]", f"human-only [{conf:.0%} CI]",
                              "LLM-only", "lambda"], rows, cap, left=2, raw_cells=True))
            out.append(_orderings([r.run for r in runs], [p for p in result.pairs if p.measure == measure], measure,
                                  conf))
        out.append(notes(result.notes))
    return "".join(out)


def _orderings(runs: list[str], pairs: list, measure: str, conf: float) -> str:
    """The pairs of runs the seed orders significantly (Holm), as a runs x runs matrix: row above
    column (▲), below (▼) or not ordered (·); each cell's title has the difference and its
    Bonferroni interval."""
    if not pairs:
        return ""
    by_pair = {(p.run_a, p.run_b): p for p in pairs}
    bounds = difference_range(measure_range(measure))
    sig = sum(p.significant for p in pairs)
    head = ('<thead><tr><th class="l">run</th>' + "".join(f'<th title="{escape(r)}">{k}</th>'
                                                          for k, r in enumerate(runs, start=1)) + "</tr></thead>")
    rows = []
    for i, a in enumerate(runs, start=1):
        cells = [f'<th class="l">{i} {escape(a)}</th>']
        for b in runs:
            if a == b:
                cells.append('<td class="self"></td>')
                continue
            p = by_pair.get((a, b))
            sign = 1.0
            if p is None:
                p, sign = by_pair[(b, a)], -1.0
            diff = sign * p.difference
            lo, hi = sorted((sign * p.ci_low_bonferroni, sign * p.ci_high_bonferroni))
            mark, cls = ("&#9650;", "up") if p.significant and diff > 0 else (
                ("&#9660;", "down") if p.significant else ("?", "untested") if not p.normal_ok
                else ("&middot;", "none"))
            title = (f"{a} - {b}: {diff:+.3f}, {conf:.0%} Bonferroni interval (all pairs at once) "
                     f"[{lo:.3f}, {hi:.3f}], Holm p {p.p_holm:.2g}")
            lo_b, hi_b = bounds or ("", "")
            cells.append(f'<td class="{cls}" title="{escape(title)}" data-lo="{lo!r}" data-hi="{hi!r}" '
                         f'data-min="{lo_b}" data-max="{hi_b}">{mark}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    legend = (f'<p class="legend"><span class="up">&#9650;</span> the row\'s run scores significantly higher than '
              f'the column\'s, <span class="down">&#9660;</span> lower, <span class="none">&middot;</span> not '
              f"significant (Holm's step-down over all {len(pairs)} pairs, family-wise error {1 - conf:.2g}), "
              f'<span class="untested">?</span> {NOT_TESTED}: the seed\'s per-query differences of the pair are '
              "too skewed for its size (n > 25 g1^2 fails), so the test is not made whatever its p. Columns are "
              "numbered as the rows, in the order of the "
              f"estimate. Hover a cell for the difference and its {conf:.0%} Bonferroni interval (all pairs at "
              "once); <code>judgeblender estimate --json</code> lists every pair.</p>")
    untested = sum(not p.normal_ok for p in pairs)
    return (f'<p class="orderings">{escape(measure)}: <b>{sig} of {len(pairs)}</b> pairs of runs significantly '
            f'ordered; {untested} {NOT_TESTED}.</p><table class="matrix">{head}<tbody>{"".join(rows)}</tbody>'
            f"</table>{legend}")


def _scatter(d: ReportData) -> str:
    if not d.correlations:
        return _human_basis(d)
    shown = [m for m in SCATTER_MEASURES if any(r.measure == m for r in d.correlations)] or [d.correlations[0].measure]
    gold_name = "human labels, PPI++ estimate" if d.basis.kind == PPI else "human labels"
    panels = [leaderboard_scatter(r, d.groups, gold_name) for r in d.correlations if r.measure in shown]
    svg = grid_svg(panels, columns=len(shown)).replace("<svg ", '<svg class="wide" ', 1)
    rows = []
    for report, groups in d.biases:
        if report.measure != shown[0]:
            continue
        for g in groups:
            rows.append([report.name, g.group, str(g.n_runs), f"{g.mean_score_diff:+.4f}", f"{g.mean_rank_shift:+.2f}"])
    human = "the PPI++ estimate of the human score" if d.basis.kind == PPI else "human score"
    sizes = Counter(d.groups.get(r, "(ungrouped)") for r in d.runs)
    if max(sizes.values(), default=0) < 2:  # a family of one run is that run: its "bias" is its own error
        bias = (f'<p class="bias-omitted">No table of bias by family: no family has two runs '
                f"({len(sizes)} families{', guessed from the run names' if d.groups_guessed else ''}). Give "
                f"{escape(d.inputs.spoken('groups'))} to group the runs.</p>")
    else:
        bias = table(["prediction", _family_head(d), "runs", "score diff", "rank shift"], rows,
                     f"{shown[0]}. score diff: mean of (LLM score - {human}); rank shift: mean of (LLM rank - human "
                     "rank), rank 1 = best, so > 0 means the LLM labels rank the family lower.", left=2)
    x = "the PPI++ estimate of its score under human labels" if d.basis.kind == PPI else "its score under human labels"
    return (f"{_human_basis(d)}<p>Each point is a run at ({x}, its score under LLM labels); points on the dashed line "
            f"score the same under both. {escape(d.groups_note)}</p>{svg}{bias}")


def _methods(d: ReportData) -> str:
    out = [basis("Computed on each LLM label file alone, over the queries it labels; no human label is used."),
           "<p>As in Vespa's LLM-as-a-judge workflow: each retrieval method's nDCG@10 and Recall@10 under the LLM "
           "labels, beside its Judged@10. Unjudged documents count as irrelevant, so a method with a low Judged@10 "
           "is scored on holes; judge its unlabelled top-10 documents before trusting its number "
           "(<code>judgeblender pool --exclude</code> lists them).</p>"]
    low = d.inputs.min_judged
    for name, mt in d.methods.items():
        rows = []
        for run in mt.runs:
            s = mt.scores[run]
            cells = [escape(run)]
            for m in mt.measures:
                cells.append(num(s[m], pct=True) + bar(s[m], low) if m == "Judged@10" else num(s[m]))
            rows.append(cells)
        out.append(f"<h3>{escape(name)}</h3>")
        out.append(table(["run", *mt.measures], rows,
                         f"Means over the {mt.n_queries} queries these labels cover, best nDCG@10 first. R@10: "
                         f"label >= 1 counts as relevant. Red bars: Judged@10 below {low:.0%}.",
                         raw_cells=True))
        holes = mt.holes(low)
        if holes:
            out.append(f'<p class="warn">{len(holes)} run(s) have Judged@10 below {low:.0%} under {escape(name)}: '
                       f"{escape(', '.join(holes))}. Their scores rest on unlabelled documents.</p>")
        else:
            out.append(f"<p>Every run has Judged@10 of at least {low:.0%} under {escape(name)}.</p>")
    return "".join(out)


def _judges(d: ReportData) -> str:
    if d.store is None:
        return basis("Not computed: no call store was given.") + f"<p>No call store was given (<code>{d.inputs.spoken('store')}</code>), so invalid-output rates, cost and time are not shown.</p>"
    s = d.store
    judges = table(
        ["judge", "pairs", "invalid", "invalid rate", "most common reasons"],
        [[j.judge, f"{j.pairs:,}", f"{j.invalid:,}", num(j.rate, pct=True),
          "; ".join(f"{r} ({n})" for r, n in j.reasons)] for j in s.judges],
        "invalid: pairs for which the judge produced neither a label nor a score (after its retries).")
    models = table(
        ["model", "calls", "tokens in", "tokens out", "model seconds", "seconds per call"],
        [[m, f"{v['calls']:,}", f"{v['tokens_in']:,}", f"{v['tokens_out']:,}", f"{v['seconds']:.1f}",
          f"{v['seconds'] / v['calls']:.2f}" if v["calls"] else "n/a"] for m, v in s.models.items()],
        "Every call in the store, including ones other runs reused from it. Seconds are the model's own time per "
        "call, summed; concurrent calls overlap in wall time.")
    return basis(f"Computed from the call store {s.path}.") + f"<p>From <code>{escape(s.path)}</code>.</p><h3>Invalid outputs per judge</h3>{judges}<h3>Cost and time per model</h3>{models}"
