"""One labeling session: the pairs to label, the labels so far, and the qrels they export to.

Every action goes to the journal first (fsynced), then the qrels file is rewritten
atomically, so the qrels on disk always match the journal's confirmed labels.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import JudgeblenderError
from ..pairs.pairs import Pair
from ..pairs.qrels import write_qrels
from .journal import Journal


class LabelSession:
    def __init__(self, pairs: Sequence[Pair], queries: Mapping[str, str], corpus: Mapping[str, str],
                 journal: Journal, out: str | Path):
        missing_q = sorted({p.qid for p in pairs if p.qid not in queries})
        missing_d = sorted({p.docid for p in pairs if p.docid not in corpus})
        if missing_q or missing_d:
            what = [f"{len(missing_q)} query id(s) not in the queries file (first: {', '.join(missing_q[:5])})"] if missing_q else []
            what += [f"{len(missing_d)} docid(s) not in the corpus (first: {', '.join(missing_d[:5])})"] if missing_d else []
            raise JudgeblenderError("cannot show every pair: " + "; ".join(what))
        self.pairs = list(dict.fromkeys(pairs))
        self.index = {p: i for i, p in enumerate(self.pairs)}
        self.queries, self.corpus = queries, corpus
        self.journal = journal
        self.out = Path(out)
        self.labels: dict[Pair, int] = {}
        self.skipped: set[Pair] = set()
        for e in journal.entries:
            self._apply(Pair(e.qid, e.docid), e.label)
        self._lock = threading.Lock()  # the server answers requests on several threads
        self.export()  # a crash after a journal write but before the export is repaired here

    def _apply(self, pair: Pair, label: int | None) -> None:
        if label is None:
            if pair not in self.labels:  # skipping a labelled pair keeps its label
                self.skipped.add(pair)
        else:
            self.labels[pair] = label
            self.skipped.discard(pair)

    # -- reading -----------------------------------------------------------------------
    @property
    def labelled(self) -> int:
        return sum(p in self.labels for p in self.pairs)

    @property
    def foreign(self) -> list[Pair]:
        """Labelled pairs of the journal that the pairs file does not list (kept in the export)."""
        return [p for p in self.labels if p not in self.index]

    def resume_index(self) -> int | None:
        """The first pair neither labelled nor skipped; then the first skipped one; None when done."""
        for want_skipped in (False, True):
            for i, p in enumerate(self.pairs):
                if p not in self.labels and (p in self.skipped) == want_skipped:
                    return i
        return None

    def state(self) -> dict:
        return {"total": len(self.pairs), "labelled": self.labelled, "skipped": len(self.skipped & set(self.pairs)),
                "resume": self.resume_index(), "out": str(self.out)}

    def item(self, i: int) -> dict:
        p = self._pair(i)
        return {"i": i, "qid": p.qid, "docid": p.docid, "query": self.queries[p.qid], "passage": self.corpus[p.docid],
                "label": self.labels.get(p), "skipped": p in self.skipped}

    def _pair(self, i: int) -> Pair:
        if not 0 <= i < len(self.pairs):
            raise IndexError(f"pair index {i} is outside 0..{len(self.pairs) - 1}")
        return self.pairs[i]

    # -- writing -----------------------------------------------------------------------
    def record(self, i: int, qid: str, docid: str, label: int | None) -> dict:
        """Save a label (0-3) or a skip (None) for pair i; answers the new state and the next pair.

        The next pair is the first after i that is neither labelled nor skipped, so a correction
        made after going back returns to where labeling stood; None when there is none (the
        page then offers the skipped pairs).
        """
        with self._lock:
            pair = self._pair(i)
            if (qid, docid) != (pair.qid, pair.docid):
                raise LookupError(f"pair {i} is {pair.qid}/{pair.docid}, not {qid}/{docid}: reload the page")
            self.journal.append(pair.qid, pair.docid, label)  # JournalWriteError: not saved, nothing changed
            self._apply(pair, label)
            try:
                self.export()
                warning = None
            except OSError as exc:  # saved in the journal; the qrels catch up on the next save or start
                warning = (f"{self.out} could not be rewritten ({exc.strerror or exc}); the label is saved in "
                           f"the journal and {self.out} is rewritten on the next save or restart")
            state = self.state()
            if warning:
                state["warning"] = warning
            state["next"] = next((j for j in range(i + 1, len(self.pairs))
                                  if self.pairs[j] not in self.labels and self.pairs[j] not in self.skipped), None)
        return state

    def qrels(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for p in self.pairs + self.foreign:
            if p in self.labels:
                out.setdefault(p.qid, {})[p.docid] = self.labels[p]
        return out

    def export(self) -> None:
        write_qrels(self.out, self.qrels())

    def close(self) -> None:
        self.journal.close()
