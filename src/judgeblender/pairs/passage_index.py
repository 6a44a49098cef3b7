"""Passages looked up by id on disk: an index of byte offsets, not the texts.

`read_corpus` keeps every wanted passage in a dict: for a job of 10^7 pairs with a passage each
that is gigabytes (about 0.5 KB a 60-word passage, plus the dict). `PassageIndex` reads the JSONL
once, checks every line as `read_corpus` does (`passage_line.parse_line`), and keeps, per line,
two independent 64-bit hashes of its docid, the line's byte offset and its line number, in
four sorted numpy arrays: 28 bytes a passage, whatever the passage's length, and what is wrong
with the few texts a prompt could not show (blank ones). `get_many` hashes a window's docids
at once, finds them by binary search, and reads and parses their lines again. A line whose
docid is not the one asked (two ids with one hash) is passed over, so a hash collision never
hands back another passage's text. The validation pass before judging (`problems_many`) reads
no line: it finds each id by both its hashes and answers from what the build recorded.

What `read_corpus` refuses for a wanted passage is refused here when a pair asks for it, with
the same message naming the line: blank text, and one docid with two different texts (one id
with the same text twice is kept once and reported). Control characters become spaces on the
way out (reported once for the file). A gzip corpus cannot be sought in, so it is decompressed
once into a temporary file; messages still name the file the user gave.
"""

from __future__ import annotations

import gzip
from array import array
import hashlib
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from ..errors import InputError, OutputError
from .passage_line import parse_line
from .lookup import LookupById
from .textfile import GZIP_MAGIC, clean_text, report_repair
from .texts import text_problem

BOM = b"\xef\xbb\xbf"


def _unpack_failed(corpus: Path, tmp: str, exc: OSError) -> OutputError:
    """A gzip corpus that could not be unpacked for lack of room (or a read-only temporary folder)
    is the temporary file's failure, not damage in the corpus: named so, with where it went."""
    cause = OSError(exc.errno, f"{exc.strerror or exc}, unpacking {corpus}; set TMPDIR to a folder with room")
    return OutputError(tmp, cause)


def id_hash(docid: str) -> int:
    """A docid's 64-bit hash, as a signed integer (numpy int64): the index's order."""
    return int.from_bytes(hashlib.blake2b(docid.encode("utf-8"), digest_size=8).digest(), "little", signed=True)


def id_check(docid: str) -> int:
    """A second, independent 64-bit hash of a docid: two ids sharing id_hash are told apart by it
    without reading their lines (problems_many)."""
    return int.from_bytes(hashlib.blake2b(docid.encode("utf-8"), digest_size=8, person=b"jb-check").digest(),
                          "little", signed=True)


class PassageIndex(LookupById):
    """docid -> passage text, read from the file when asked. Close it (or use `with`) when done."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.exists():
            raise InputError(self.path, None, "an existing file", "no such file")
        if self.path.is_dir():
            raise InputError(self.path, None, "a file", "a directory")
        self._tmp = None
        source = self.path
        with open(self.path, "rb") as fh:
            gz = fh.read(2) == GZIP_MAGIC
        if gz:
            self._tmp = tempfile.NamedTemporaryFile(prefix="jb-corpus-", suffix=".jsonl")
            try:
                self._unpack()
            except BaseException:
                try:
                    self._tmp.close()  # removes it (closing retries what a full disk refused)
                except OSError:
                    pass
                raise
            source = Path(self._tmp.name)
        self._fh = open(source, "rb")
        # docid -> the first line that makes it unusable: (line, what was expected, the line)
        self._errors: dict[str, tuple[int, str, str]] = {}
        # docid -> what is wrong with its text as a prompt would show it (pairs.texts.text_problem
        # of the cleaned text), for the few passages with something wrong: `problems_many` answers
        # the validation pass from it without reading a line
        self._problems: dict[str, str] = {}
        # the ids and passages of the last get_many: a run's validation pass reads its last window,
        # and judging then reads its first, the same one when the run fits in one window
        self._last: tuple[list[str], dict[str, str]] | None = None
        self._build()

    def _unpack(self) -> None:
        """The gzip corpus, decompressed into the temporary file."""
        assert self._tmp is not None
        lines = 0
        try:
            with gzip.open(self.path, "rb") as src:
                while block := src.read(1 << 20):
                    try:
                        self._tmp.write(block)
                    except OSError as exc:  # the temporary folder's disk, not the corpus
                        raise _unpack_failed(self.path, self._tmp.name, exc) from None
                    lines += block.count(b"\n")
        except (EOFError, OSError, zlib.error) as exc:
            if isinstance(exc, OutputError):
                raise
            raise InputError(self.path, lines + 1, "a complete gzip stream",
                             f"truncated or corrupt ({exc})") from None
        try:
            self._tmp.flush()
        except OSError as exc:
            raise _unpack_failed(self.path, self._tmp.name, exc) from None

    # ------------------------------------------------------------------------------------ building
    def _build(self) -> None:
        hashes, checks, offsets, lines = array("q"), array("q"), array("q"), array("Q")  # 8 bytes an entry while building
        cleaned: list[int] = []
        offset = 0
        self._fh.seek(0)
        for lineno, data in enumerate(self._fh, start=1):
            start = offset
            offset += len(data)
            if lineno == 1 and data.startswith(BOM):
                data, start = data[3:], start + 3
                report_repair(self.path, "UTF-8 byte-order mark at the start of the file ignored", [1])
            line = self._decode(data, lineno)
            if not line.strip():
                continue
            docid, text = parse_line(self.path, lineno, line)
            shown, changed = clean_text(text)
            if changed:
                cleaned.append(lineno)
            if not text.strip() and docid not in self._errors:
                self._errors[docid] = (lineno, f"non-blank text for passage {docid}", line)
            problem = text_problem(shown)
            if problem is not None:
                self._problems.setdefault(docid, problem)
            hashes.append(id_hash(docid))
            checks.append(id_check(docid))
            offsets.append(start)
            lines.append(lineno)
        if not hashes:
            raise InputError(self.path, None, "at least one passage", "an empty file")
        h = np.frombuffer(hashes, dtype=np.int64).copy()
        c = np.frombuffer(checks, dtype=np.int64).copy()
        off = np.frombuffer(offsets, dtype=np.int64).copy()
        ln = np.frombuffer(lines, dtype=np.uint64).astype(np.uint32)  # over 4 billion lines would need more
        del hashes, checks, offsets, lines
        order = np.lexsort((ln, h))  # by hash, then by line: the first of an id's lines comes first
        self._hashes, self._checks, self._offsets, self._lines = h[order], c[order], off[order], ln[order]
        report_repair(self.path, "control characters in passage text replaced by spaces", cleaned)
        self._check_repeats()

    def _check_repeats(self) -> None:
        """Lines sharing a hash: the same id with the same text is kept once (reported); with
        another text it is an error for whoever asks for that id; different ids both stay."""
        same = np.flatnonzero(self._hashes[1:] == self._hashes[:-1]) + 1
        if not len(same):
            return
        drop: set[int] = set()
        repeated: list[int] = []
        for k in same:
            first = int(np.searchsorted(self._hashes, self._hashes[k], "left"))
            docid, text, lineno, line = self._read(k)
            for j in range(first, k):
                if j in drop:
                    continue
                other_id, other_text, other_line, _ = self._read(j)
                if other_id != docid:
                    continue
                if clean_text(other_text)[0] == clean_text(text)[0]:
                    repeated.append(lineno)
                elif docid not in self._errors or self._errors[docid][0] > lineno:
                    self._errors[docid] = (lineno, f"one text per doc id ({docid} appeared at line {other_line} "
                                           "with other text)", line)
                drop.add(int(k))
                break
        keep = np.ones(len(self._hashes), dtype=bool)
        keep[list(drop)] = False
        self._hashes, self._checks = self._hashes[keep], self._checks[keep]
        self._offsets, self._lines = self._offsets[keep], self._lines[keep]
        report_repair(self.path, "repeated identical passages kept once", sorted(repeated))

    def _decode(self, data: bytes, lineno: int) -> str:
        try:
            return data.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            raise InputError(self.path, lineno, "UTF-8 text", f"invalid byte at column {exc.start + 1}") from None

    def _read(self, k: int) -> tuple[str, str, int, str]:
        """(docid, text, line number, line) of the k-th indexed line."""
        self._fh.seek(int(self._offsets[k]))
        lineno = int(self._lines[k])
        line = self._decode(self._fh.readline(), lineno)
        docid, text = parse_line(self.path, lineno, line)
        return docid, text, lineno, line

    # ------------------------------------------------------------------------------------ lookups
    def get_many(self, docids: Iterable[str]) -> dict[str, str]:
        """{docid: text} for the given ids that the file holds (absent ones are left out), read
        in file order; an asked-for passage that is blank or has two texts is an InputError. The
        same ids asked twice in a row are read once: `judge` checks a window's passages, then
        judges them (a run of one window: half its reading, at the cost of holding one window's
        passages, which judging holds anyway)."""
        ids = list(dict.fromkeys(docids))
        if not ids:
            return {}
        if self._last is not None and self._last[0] == ids:
            return dict(self._last[1])
        lo, hi = self._find(ids)
        found: dict[str, str] = {}
        candidates = sorted((int(self._offsets[k]), k, d) for d, a, b in zip(ids, lo, hi) for k in range(a, b))
        for _, k, asked in candidates:
            if asked in found:
                continue
            docid, text, lineno, line = self._read(k)
            if docid != asked:
                continue  # another id with the same hash
            if asked in self._errors:
                at, expected, shown = self._errors[asked]
                raise InputError(self.path, at, expected, shown[:80])
            found[asked] = clean_text(text)[0]
        result = {d: found[d] for d in ids if d in found}
        self._last = (ids, dict(result))
        return result

    def _find(self, ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The index ranges [lo, hi) of the lines whose id_hash is each id's."""
        wanted = np.fromiter((id_hash(d) for d in ids), dtype=np.int64, count=len(ids))
        return np.searchsorted(self._hashes, wanted, "left"), np.searchsorted(self._hashes, wanted, "right")

    def problems_many(self, docids: Iterable[str]) -> dict[str, str | None]:
        """{docid: what is wrong with its text (pairs.texts.text_problem), None for nothing} for
        the given ids that the file holds, without reading a line: what the validation pass asks
        of each window before any model call, so that judging reads each passage once, not twice.
        An id is found by both its hashes (a line of another id is taken for it with probability
        2^-128 per pair of ids); an asked-for passage that get_many refuses is refused here with
        the same error, the first in file order as there."""
        ids = list(dict.fromkeys(docids))
        if not ids:
            return {}
        lo, hi = self._find(ids)
        found: dict[str, str | None] = {}
        refused: list[tuple[int, str]] = []
        for d, a, b in zip(ids, lo, hi):
            if a == b:
                continue
            check = id_check(d)
            at = [k for k in range(a, b) if self._checks[k] == check]
            if not at:
                continue
            if d in self._errors:
                refused.append((int(self._offsets[at[0]]), d))
            found[d] = self._problems.get(d)
        if refused:
            line, expected, shown = self._errors[min(refused)[1]]
            raise InputError(self.path, line, expected, shown[:80])
        return found

    def __iter__(self) -> Iterator[str]:
        for k in np.argsort(self._offsets, kind="stable"):
            yield self._read(int(k))[0]

    def __len__(self) -> int:
        return len(self._hashes)

    def nbytes(self) -> int:
        """What the index holds in memory (its arrays)."""
        return int(self._hashes.nbytes + self._checks.nbytes + self._offsets.nbytes + self._lines.nbytes)

    def close(self) -> None:
        self._last = None
        self._fh.close()
        if self._tmp is not None:
            self._tmp.close()

    def __enter__(self) -> "PassageIndex":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
