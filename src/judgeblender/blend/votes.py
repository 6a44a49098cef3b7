"""The ballot table: for each (query, passage) pair, what each judge of the jury said.

A judge either voted a label 0..3, possibly with a probability distribution over the
labels (from logprob scoring), or abstained (its output was invalid or missing). An
abstention is kept as such and never becomes a label.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import arguments
from ..errors import ArgumentError

LABELS: tuple[int, ...] = (0, 1, 2, 3)
N_LABELS = len(LABELS)
ABSTAIN = -1  # the cell value of an abstention in BallotTable.labels

Pair = tuple[str, str]  # (query id, document id): pairs.Pair, a named tuple, is one


@dataclass(frozen=True)
class Vote:
    """One judge's output for one pair: a label, or None when the judge abstained."""

    label: int | None
    probs: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.label is not None and (isinstance(self.label, bool) or self.label not in LABELS):
            raise ArgumentError("label", f"one of {list(LABELS)} or None (a vote's label)", self.label)
        if self.probs is not None:
            object.__setattr__(self, "probs", normalize_probs(self.probs))


def normalize_probs(probs: Sequence[float]) -> tuple[float, ...]:
    """Check a distribution over LABELS and rescale it to sum to 1.

    Rescaling is needed because logprob scoring only sees the label tokens, whose mass
    is usually below 1; the relative weights are what the judge said.
    """
    values = [float(p) for p in probs]
    if len(values) != N_LABELS:
        raise ArgumentError("probs", f"{N_LABELS} probabilities (labels {list(LABELS)})", described=str(len(values)))
    if not all(np.isfinite(p) and p >= 0 for p in values):
        raise ArgumentError("probs", "finite and non-negative probabilities", values)
    total = sum(values)
    if total <= 0:
        raise ArgumentError("probs", "a distribution with some mass on a label", described="all zeros")
    return tuple(p / total for p in values)


def as_vote(value: Vote | int | None) -> Vote:
    """Accept a bare label (or None) wherever a Vote is expected."""
    return value if isinstance(value, Vote) else Vote(value)


@dataclass(frozen=True)
class BallotTable:
    """Pairs x judges. `labels[i, j]` is judge j's label for pair i, ABSTAIN when it did not vote.

    `probs[i, j]` is judge j's distribution over LABELS for pair i, NaN where the judge gave
    none (it abstained, or only produced a label). `invalid` counts, per judge, the cells
    that were abstentions because the judge's output was unreadable (as opposed to absent).
    """

    pairs: tuple[Pair, ...]
    judges: tuple[str, ...]
    labels: np.ndarray
    probs: np.ndarray | None = None
    invalid: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        arguments.distinct_ids("judges", self.judges)
        if len(set(self.pairs)) != len(self.pairs):
            raise ArgumentError("pairs", "each pair once in a ballot table", described="a pair twice")
        if self.labels.shape != (len(self.pairs), len(self.judges)):
            raise ArgumentError("labels", f"{len(self.pairs)} x {len(self.judges)} labels (pairs x judges)",
                                described=f"the shape {self.labels.shape}")
        ok = np.isin(self.labels, (ABSTAIN, *LABELS))
        if not ok.all():
            raise ArgumentError("labels", f"labels in {list(LABELS)} or ABSTAIN", sorted(set(self.labels[~ok].tolist())))
        if self.probs is not None and self.probs.shape != (*self.labels.shape, N_LABELS):
            raise ArgumentError("probs", f"probabilities of the shape {(*self.labels.shape, N_LABELS)}",
                                described=f"the shape {self.probs.shape}")

    @classmethod
    def from_votes(cls, rows: Iterable[tuple[Pair, Mapping[str, Vote | int | None]]],
                   judges: Sequence[str] | None = None) -> BallotTable:
        """Build a table from (pair, {judge: vote}) rows; a judge missing from a row abstained.

        The judges are `judges` in that order, or else every judge named in some row, in
        order of first appearance.
        """
        rows = [(pair, {j: as_vote(v) for j, v in votes.items()}) for pair, votes in rows]
        if judges is None:
            seen: dict[str, None] = {}
            for _, votes in rows:
                seen.update(dict.fromkeys(votes))
            judges = list(seen)
        index = {j: k for k, j in enumerate(judges)}
        labels = np.full((len(rows), len(judges)), ABSTAIN, dtype=np.int8)
        has_probs = any(v.probs is not None for _, votes in rows for v in votes.values())
        probs = np.full((len(rows), len(judges), N_LABELS), np.nan) if has_probs else None
        for i, (_, votes) in enumerate(rows):
            for judge, vote in votes.items():
                if judge not in index:
                    raise ArgumentError("rows", f"votes of the judges {list(judges)}",
                                        described=f"a vote from {judge!r}, who is not among them")
                if vote.label is None:
                    continue  # an abstainer's distribution, if any, is not a vote either
                labels[i, index[judge]] = vote.label
                if vote.probs is not None:
                    probs[i, index[judge]] = vote.probs
        return cls(tuple(p for p, _ in rows), tuple(judges), labels, probs)

    @property
    def n_pairs(self) -> int:
        return len(self.pairs)

    @property
    def voted(self) -> np.ndarray:
        """Boolean pairs x judges: True where the judge gave a label."""
        return self.labels != ABSTAIN

    def votes(self, i: int) -> dict[str, Vote]:
        """Pair i's valid votes, judge id -> Vote (abstainers left out)."""
        out = {}
        for j, judge in enumerate(self.judges):
            label = int(self.labels[i, j])
            if label == ABSTAIN:
                continue
            dist = None
            if self.probs is not None and not np.isnan(self.probs[i, j]).any():
                dist = tuple(float(p) for p in self.probs[i, j])
            out[judge] = Vote(label, dist)
        return out

    def abstentions(self) -> dict[str, int]:
        """Per judge, the pairs it did not vote on."""
        return {judge: int((~self.voted[:, j]).sum()) for j, judge in enumerate(self.judges)}

    def select(self, rows: Sequence[int] | np.ndarray) -> BallotTable:
        """The sub-table of the given pair indices (used to split by query)."""
        rows = np.asarray(rows, dtype=int)
        return BallotTable(
            tuple(self.pairs[i] for i in rows), self.judges, self.labels[rows],
            None if self.probs is None else self.probs[rows], dict(self.invalid),
        )

    def only_pairs(self, pairs: Iterable[Pair]) -> tuple[BallotTable, int]:
        """The rows of the given pairs (e.g. a pool), in table order, and how many of those pairs
        the table has no row for (no judge labelled them; they are not invented)."""
        wanted = set(pairs)
        rows = [i for i, p in enumerate(self.pairs) if p in wanted]
        return self.select(rows), len(wanted) - len(rows)

    def only_judges(self, judges: Sequence[str]) -> BallotTable:
        """The table restricted to some judges, in the order given."""
        missing = [j for j in judges if j not in self.judges]
        if missing:
            raise ArgumentError("judges", f"judges of the table ({', '.join(self.judges)})",
                                described=f"unknown judges {missing}")
        cols = [self.judges.index(j) for j in judges]
        return BallotTable(
            self.pairs, tuple(judges), self.labels[:, cols],
            None if self.probs is None else self.probs[:, cols],
            {j: n for j, n in self.invalid.items() if j in judges},
        )

    def renamed(self, names: Mapping[str, str]) -> BallotTable:
        """The same table with some judges renamed (old id -> new id), the rest as they were."""
        return BallotTable(self.pairs, tuple(names.get(j, j) for j in self.judges), self.labels, self.probs,
                           {names.get(j, j): n for j, n in self.invalid.items()})

    def query_ids(self) -> np.ndarray:
        """The query id of every pair, as an array (the groups for splitting by query)."""
        return np.array([q for q, _ in self.pairs], dtype=object)


def merge_tables(tables: Sequence[BallotTable]) -> BallotTable:
    """Put the judges of several tables side by side; a pair one table lacks is abstained there.

    Judge ids must not repeat across tables. Pairs keep their order of first appearance.
    """
    if len(tables) == 1:
        return tables[0]
    judges = arguments.distinct_ids("tables", (j for t in tables for j in t.judges))
    order: dict[Pair, int] = {}
    for t in tables:
        for pair in t.pairs:
            order.setdefault(pair, len(order))
    labels = np.full((len(order), len(judges)), ABSTAIN, dtype=np.int8)
    with_probs = any(t.probs is not None for t in tables)
    probs = np.full((len(order), len(judges), N_LABELS), np.nan) if with_probs else None
    col = 0
    invalid: dict[str, int] = {}
    for t in tables:
        rows = np.array([order[p] for p in t.pairs], dtype=int)
        width = len(t.judges)
        labels[rows, col:col + width] = t.labels
        if t.probs is not None:
            probs[rows, col:col + width] = t.probs
        invalid.update(t.invalid)
        col += width
    return BallotTable(tuple(order), tuple(judges), labels, probs, invalid)
