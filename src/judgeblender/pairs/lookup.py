"""Passages looked up by id, many at a time: what the on-disk corpora share.

The engine asks for a window's passages in one `get_many` call (judges/stream.py
`window_texts`); an ir_datasets docs store (irds.LazyCorpus) and a JSONL file's offset index
(passage_index.PassageIndex) each answer it their own way, and are Mappings through it.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Mapping


class LookupById(Mapping[str, str]):
    """A Mapping whose lookups go through `get_many` (ids absent from the source are left out)."""

    @abstractmethod
    def get_many(self, ids: Iterable[str]) -> dict[str, str]:
        """{id: text} for the given ids the source holds."""

    def __getitem__(self, docid: str) -> str:
        found = self.get_many([docid])
        if docid not in found:
            raise KeyError(docid)
        return found[docid]

    def __contains__(self, docid: object) -> bool:
        return isinstance(docid, str) and bool(self.get_many([docid]))
