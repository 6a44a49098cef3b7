"""What the "human", "filled" and "llm" columns mean, and which queries count: one definition.

Why a module of its own: the same BM25 run under the same labels used to get three "filled
nDCG@10" values (`fill_qrels` with two systems, `jb.experiment` with three, `fill` then `compare`),
because each route chose its own pairs, and an "llm" column that used only the LLM labels of the
pool beside a "human" column that used every human label. Every route that scores systems under
these labels (jb.experiment and the `experiment` command, pyterrier.fill_qrels, `fill` then
`compare`, `report`, `estimate`) now builds its label sets with `scored_columns`, and every route
that scores queries (`agree`, `correlate`, `report`, `estimate`, `experiment`) chooses them with
`query_set`, so one input gives one number whichever way it is asked.

The scope: the (query, document) pairs P that the three columns are computed over.

* ``labels`` (the default): every pair a label covers, the human labels' pairs and the LLM labels'
  pairs, on the queries that count. It does not depend on which systems are in the table: adding a
  system changes no number of another. It is what a label file already made gives (the published
  labels of a collection) and what `fill` writes without `--runs`.
* ``pool``: the pooled pairs of the systems, each one's top `depth` on the queries that count, as
  TREC builds a collection's qrels. Labels outside the pool, human or LLM, are set aside. Adding a
  system adds its pooled pairs, so a system's numbers can change when another joins the table (two
  systems and three give different figures by design). `fill` takes `--runs` and `--depth` for it.

The default is ``labels`` because a figure meant for a paper should not move when a system is
added to the table, and because it needs nothing but the labels (`fill` and `estimate` have no
systems to pool unless told). With a jury (judges= instead of llm_labels=) the LLM labels are the
jury's judgments of the pool's holes, so the two scopes fill the same holes.

The columns, over P:

* human: the human label of each pair of P; a pair of P people did not label (a hole) counts as
  not relevant, as trec_eval counts it.
* llm: the LLM's label of each pair of P. Like-for-like with "human": the same pairs. It is NaN
  (and a note says why) when the LLM was not asked about every pair of P: a jury asked about the
  holes only, or (scope labels) human-labelled pairs the jury never saw.
* filled: the human label of each pair of P, and the LLM's label where people gave none; a pair
  neither labels counts as not relevant.

Which queries count (`query_set`): the queries the reference labels (the human labels; for
`estimate`, whose human labels are only a seed, the LLM labels of the collection) label at least
once, among the topics where topics are given. Where the human labels are the yardstick a
leaderboard is compared with (`correlate`, the report's leaderboards), a query also needs its
human labels to judge at least `min_judged` of the runs' top `depth` (default 90%, the report's
and `compare`'s threshold): below that, a leaderboard "under human labels" scores mostly
unlabelled documents as not relevant. One unlabelled passage in one run's top 10 does not drop a
query (DL19's 87181, where UNH_exDL_bm25 ranks the unjudged 8732212); a seed of a few pairs per
query does. `experiment` and `estimate` do not apply that test: they fill the holes or estimate
them from a seed, which is their point. Every route says which queries it dropped and why.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .. import arguments
from ..label.merge import HUMAN, Merged, merge_labels
from ..pairs.qrels import Qrels

SCOPES = ("labels", "pool")
DEFAULT_SCOPE = "labels"
DEFAULT_DEPTH = 10  # the pool's depth, and the depth the queries' coverage is judged at
DEFAULT_MIN_JUDGED = 0.9  # the report's and compare's --min-judged

SCOPE_HELP = ("The pairs the human, filled and llm figures are computed over: 'labels', every pair the human or LLM "
              "labels cover (the same whichever runs are given), or 'pool', the runs' pooled pairs at --depth.")
SCOPE_WORDS = {
    "labels": "every pair the human or LLM labels cover",
    "pool": "the pooled pairs of the systems' top {depth}",
}


def check_scope(scope: object, argument: str = "scope") -> str:
    """`scope` checked against SCOPES (an ArgumentError naming `argument`, e.g. --scope)."""
    return arguments.one_of(argument, scope, SCOPES, hint="'labels': every pair a label covers; 'pool': the "
                                                          "systems' pooled pairs")


def describe_scope(scope: str, depth: int | None = None) -> str:
    """The scope in words, for a table's title or a JSON summary."""
    return f"scope {scope}: " + SCOPE_WORDS[scope].format(depth=depth)


# -- which queries count ------------------------------------------------------------------------

NOT_A_TOPIC = "not among the topics"


@dataclass
class QuerySet:
    """The queries a route scores, and each one it left out with the reason."""

    queries: list[str]
    dropped: dict[str, str] = field(default_factory=dict)  # qid -> why it does not count

    def reasons(self) -> dict[str, list[str]]:
        """{reason: [qid, ...]}, in the order the reasons first occur."""
        out: dict[str, list[str]] = {}
        for q, why in self.dropped.items():
            out.setdefault(why, []).append(q)
        return out

    def note(self, shown: int = 5) -> str | None:
        """One line naming the dropped queries by reason (the first `shown` of each), or None."""
        return dropped_note(len(self.queries), self.dropped, shown)

    def to_dict(self) -> dict:
        return {"queries": len(self.queries), "dropped_queries": dict(self.dropped)}


def dropped_note(counted: int, dropped: Mapping[str, str], shown: int = 5) -> str | None:
    """'N queries count; M do not: q1, q2 (why); q3 (why)', or None when none was dropped: the line
    every route prints for `dropped_queries`."""
    if not dropped:
        return None
    reasons: dict[str, list[str]] = {}
    for q, why in dropped.items():
        reasons.setdefault(why, []).append(q)
    parts = [f"{', '.join(qids[:shown])}{f' and {len(qids) - shown} more' if len(qids) > shown else ''} ({why})"
             for why, qids in reasons.items()]
    n = len(dropped)
    return (f"{counted} quer{'y counts' if counted == 1 else 'ies count'}; {n} quer{'y does' if n == 1 else 'ies do'} "
            "not: " + "; ".join(parts))


def judged_share(labels: Qrels, runs: Sequence, qid: str, depth: int) -> float | None:
    """The share of the runs' top `depth` documents for `qid` that `labels` label (the mean of the
    runs' Judged@depth, weighted by how many documents each ranks); None where no run ranks any."""
    docs = labels.get(qid, {})
    ranked = [d for run in runs for d in run.top(qid, depth)]
    if not ranked:
        return None
    return sum(d in docs for d in ranked) / len(ranked)


def query_set(reference: Qrels, *, candidates: Iterable[str] | None = None, runs: Sequence | None = None,
              depth: int = DEFAULT_DEPTH, min_judged: float | None = None,
              reference_name: str = "the human labels", outside: str = NOT_A_TOPIC) -> QuerySet:
    """The queries that count, in the order of `candidates` (default: the reference's queries).

    A candidate counts when `reference` labels at least one of its pairs; with `runs` and
    `min_judged`, also when the reference labels at least `min_judged` of the runs' top `depth`
    there (a query no run ranks anything for keeps counting: every run scores 0 on it). Queries the
    reference labels that are not candidates are listed as dropped too, with the reason `outside`."""
    if min_judged is not None:
        arguments.bounded("min_judged", min_judged)
    order = list(dict.fromkeys(str(q) for q in candidates)) if candidates is not None else list(reference)
    kept: list[str] = []
    dropped: dict[str, str] = {}
    for q in order:
        if not reference.get(q):
            dropped[q] = f"no label in {reference_name}"
            continue
        if min_judged is not None and runs:
            share = judged_share(reference, runs, q, depth)
            if share is not None and share < min_judged:
                dropped[q] = f"{reference_name} label less than {min_judged:.0%} of the runs' top {depth} there"
                continue
        kept.append(q)
    if candidates is not None:
        chosen = set(order)
        for q, docs in reference.items():
            if docs and q not in chosen:
                dropped[q] = outside
    return QuerySet(kept, dropped)


# -- the three columns --------------------------------------------------------------------------

@dataclass
class Columns:
    """The label sets the human, filled and llm columns are scored with, over the scope's pairs."""

    scope: str
    depth: int | None  # the pool's depth (scope pool); None for scope labels
    queries: QuerySet
    pairs: dict[str, list[str]]  # P: the scope's documents per counted query, in order
    human: Qrels | None  # the human labels of P (None: no human labels were given)
    llm: Qrels  # the LLM labels of P
    merged: Merged  # filled, row by row with its source (human, or the LLM's name)
    holes: list[tuple[str, str]]  # pairs of P without a human label
    unlabelled: list[tuple[str, str]]  # holes without an LLM label either: not relevant in "filled"
    llm_complete: bool  # the LLM was asked about every pair of P: the llm column is defined
    notes: list[str] = field(default_factory=list)

    @property
    def filled(self) -> Qrels:
        return self.merged.qrels()

    @property
    def provenance(self) -> dict[tuple[str, str], str]:
        return {(q, d): src for q, d, _, src in self.merged.rows}

    @property
    def size(self) -> int:
        return sum(len(docs) for docs in self.pairs.values())

    def describe(self) -> str:
        """One line: the scope, its pairs and queries."""
        return (f"{describe_scope(self.scope, self.depth)} ({self.size:,} pairs on {len(self.pairs)} "
                f"quer{'y' if len(self.pairs) == 1 else 'ies'})")

    def summary(self) -> dict:
        """What every table's and JSON output's summary says about the scope."""
        return {"scope": self.scope, "depth": self.depth, "scope_pairs": self.size, **self.queries.to_dict()}


def restrict(labels: Qrels | None, pairs: Mapping[str, Collection[str]]) -> Qrels:
    """`labels` on `pairs` ({qid: docids}) only, queries left with no label dropped."""
    out: Qrels = {}
    for q, docs in pairs.items():
        mine = (labels or {}).get(q, {})
        kept = {d: mine[d] for d in docs if d in mine}
        if kept:
            out[q] = kept
    return out


def scope_pairs(scope: str, queries: Sequence[str], human: Qrels | None, llm: Qrels,
                pool: Iterable[tuple[str, str]] | None) -> dict[str, list[str]]:
    """P per query: the pooled pairs (scope pool) or every labelled pair (scope labels, human
    labels' documents first), on `queries` only."""
    wanted = set(queries)
    out: dict[str, dict[str, None]] = {q: {} for q in queries}
    if scope == "pool":
        if pool is None:
            raise ValueError("scope pool needs the pooled pairs")  # a caller's bug: the API checks first
        for q, d in pool:
            if q in wanted:
                out[q][d] = None
    else:
        for labels in (human or {}, llm):
            for q, docs in labels.items():
                if q in wanted:
                    out[q].update(dict.fromkeys(docs))
    return {q: list(docs) for q, docs in out.items() if docs}


def scored_columns(human: Qrels | None, llm: Qrels, *, scope: str = DEFAULT_SCOPE, queries: QuerySet,
                   pool: Iterable[tuple[str, str]] | None = None, depth: int | None = None,
                   llm_asked: Collection[tuple[str, str]] | None = None,
                   llm_source: str = "llm") -> Columns:
    """The human, llm and filled label sets of `scope` over the queries of `queries`.

    `human`: the human labels (None: none given, the LLM labels everything). `llm`: the LLM labels
    (a label file's, or a jury's). `pool`: the pooled (qid, docid) pairs, needed for scope pool;
    `depth` its depth. `llm_asked`: the pairs a jury was asked about (None: a label file, which
    answers for every pair: a pair it lacks is a pair it left unlabelled). `llm_source` names the
    LLM labels in `merged`'s provenance (a judge's id, a file's stem)."""
    scope = check_scope(scope)
    pairs = scope_pairs(scope, queries.queries, human, llm, pool)
    human_p = restrict(human, pairs) if human is not None else None
    llm_p = restrict(llm, pairs)
    merged = merge_labels(human_p or {}, llm_p)
    merged.rows = [(q, d, lab, src if src == HUMAN else llm_source) for q, d, lab, src in merged.rows]
    holes = [(q, d) for q, docs in pairs.items() for d in docs if d not in (human_p or {}).get(q, {})]
    unlabelled = [(q, d) for q, d in holes if d not in llm_p.get(q, {})]
    asked = None if llm_asked is None else set(llm_asked)
    complete = asked is None or all((q, d) in asked for q, docs in pairs.items() for d in docs)
    notes = []
    if not complete:
        missing = sum((q, d) not in asked for q, docs in pairs.items() for d in docs)
        notes.append(f"the llm column is not computed: {missing:,} of the scope's {sum(map(len, pairs.values())):,} "
                     f"pairs were never put to {llm_source}, so it would not be like-for-like with the human column"
                     + (" (scope 'pool' with the whole pool judged compares the two)" if scope == "labels" else ""))
    return Columns(scope, depth if scope == "pool" else None, queries, pairs, human_p, llm_p, merged, holes,
                   unlabelled, complete, notes)


def by_query(pairs: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    """{qid: {docid, ...}} of (qid, docid) pairs."""
    out: dict[str, set[str]] = {}
    for q, d in pairs:
        out.setdefault(q, set()).add(d)
    return out


def pool_of(runs: Sequence, depth: int, queries: Collection[str] | None = None) -> list[tuple[str, str]]:
    """The pooled (qid, docid) pairs of `runs` at `depth` (pairs/pool.py's order)."""
    from ..pairs.pool import pool_runs

    return [(p.qid, p.docid) for p in pool_runs(list(runs), depth, None if queries is None else set(queries))]


# -- a seed for PPI++ ---------------------------------------------------------------------------

def fit_seed(llm: Qrels, seed: Qrels, pool: Iterable[tuple[str, str]], depth: int,
             llm_name: str = "the LLM labels") -> tuple[Qrels, Qrels, str | None]:
    """The LLM labels and the human seed that a query-level PPI++ estimate can use together.

    Query-level PPI++ needs people to have labelled every pair the LLM labelled on each seed
    query. A seed drawn from the pool (`pool --sample-queries`) labels the pooled pairs only, while
    a published label file covers more: then both are restricted to the pool, which is what the
    seed was drawn from, and the returned note says so in one line. Otherwise (the seed covers the
    LLM's pairs, or restricting does not help) they come back as they were, for check_seed to judge."""
    def whole(l: Qrels, s: Qrels) -> bool:
        return all(set(l.get(q, {})) <= set(docs) for q, docs in s.items() if docs)

    if whole(llm, seed):
        return llm, seed, None
    pooled = by_query(pool)
    llm_p, seed_p = restrict(llm, pooled), restrict(seed, pooled)
    if not seed_p or not whole(llm_p, seed_p):
        return llm, seed, None
    size = lambda labels: sum(len(d) for d in labels.values())  # noqa: E731
    return llm_p, seed_p, (f"{llm_name}: its labels cover {size(llm):,} pairs, more than the pool the seed was drawn "
                           f"from; the seed estimates use its {size(llm_p):,} pooled pairs (the runs' top {depth})")
