"""The ballot table: for each (query, passage) pair, what each judge of the jury said.

A judge either voted a label 0..3, possibly with a probability distribution over the
labels (from logprob scoring), or abstained (its output was invalid or missing). An
abstention is kept as such and never becomes a label.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

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
            raise ValueError(f"a vote's label must be one of {list(LABELS)} or None, got {self.label!r}")
        if self.probs is not None:
            object.__setattr__(self, "probs", normalize_probs(self.probs))


def normalize_probs(probs: Sequence[float]) -> tuple[float, ...]:
    """Check a distribution over LABELS and rescale it to sum to 1.

    Rescaling is needed because logprob scoring only sees the label tokens, whose mass
    is usually below 1; the relative weights are what the judge said.
    """
    values = [float(p) for p in probs]
    if len(values) != N_LABELS:
        raise ValueError(f"a distribution needs {N_LABELS} probabilities (labels {list(LABELS)}), got {len(values)}")
    if not all(np.isfinite(p) and p >= 0 for p in values):
        raise ValueError(f"probabilities must be finite and non-negative, got {values}")
    total = sum(values)
    if total <= 0:
        raise ValueError("a distribution must put some mass on a label, got all zeros")
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
        if len(set(self.judges)) != len(self.judges):
            raise ValueError(f"judge ids must be unique, got {list(self.judges)}")
        if len(set(self.pairs)) != len(self.pairs):
            raise ValueError("each pair may appear once in a ballot table")
        if self.labels.shape != (len(self.pairs), len(self.judges)):
            raise ValueError(f"labels must be {len(self.pairs)} x {len(self.judges)}, got {self.labels.shape}")
        ok = np.isin(self.labels, (ABSTAIN, *LABELS))
        if not ok.all():
            raise ValueError(f"labels must be in {list(LABELS)} or ABSTAIN, got {sorted(set(self.labels[~ok].tolist()))}")
        if self.probs is not None and self.probs.shape != (*self.labels.shape, N_LABELS):
            raise ValueError(f"probs must be {(*self.labels.shape, N_LABELS)}, got {self.probs.shape}")

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
                    raise ValueError(f"vote from {judge!r}, who is not among the judges {list(judges)}")
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
            raise ValueError(f"unknown judges {missing}; the table has {list(self.judges)}")
        cols = [self.judges.index(j) for j in judges]
        return BallotTable(
            self.pairs, tuple(judges), self.labels[:, cols],
            None if self.probs is None else self.probs[:, cols],
            {j: n for j, n in self.invalid.items() if j in judges},
        )

    def query_ids(self) -> np.ndarray:
        """The query id of every pair, as an array (the groups for splitting by query)."""
        return np.array([q for q, _ in self.pairs], dtype=object)


def merge_tables(tables: Sequence[BallotTable]) -> BallotTable:
    """Put the judges of several tables side by side; a pair one table lacks is abstained there.

    Judge ids must not repeat across tables. Pairs keep their order of first appearance.
    """
    if len(tables) == 1:
        return tables[0]
    judges = [j for t in tables for j in t.judges]
    dupes = sorted({j for j in judges if judges.count(j) > 1})
    if dupes:
        raise ValueError(f"the same judge id comes from two inputs: {', '.join(dupes)}")
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
