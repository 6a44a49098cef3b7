"""Whether a store's write-ahead log holds commits that SQLite would read.

A store in WAL mode keeps its newest commits in `STORE-wal` until a checkpoint copies them into
the store file; a full disk stops that copy (the store file is then left short), and so does a
process killed before it closes the store. SQLite reads such a store whole: the file, then the
log's committed frames. It needs the shared-memory file `STORE-shm` to do so, and on a read-only
medium that file may be missing and impossible to make; SQLite then refuses to open the store
at all (SQLITE_CANTOPEN). Whether reading the store file alone (`immutable=1`) would give what
SQLite gives depends on the log: with no committed frame in it, it does; with one, it would read
the store in part, which judgeblender never does (store.calls.open_read_only).

This module answers that question the way SQLite's own recovery does (the WAL format of
https://www.sqlite.org/fileformat2.html#walformat): a log counts only if its header's magic,
version, page size and checksum hold, and a frame only if its salts match the header's and its
cumulative checksum holds; a frame with a non-zero "database size" field ends a transaction.
The first frame that fails ends the log. Imports nothing of the project.
"""

from __future__ import annotations

import struct
from pathlib import Path

MAGIC_LITTLE, MAGIC_BIG = 0x377F0682, 0x377F0683  # the low bit: the byte order of the checksum words
VERSION = 3007000
HEADER = struct.Struct(">IIIIIIII")  # magic, version, page size, checkpoint seq, salt-1, salt-2, cksum-1, cksum-2
FRAME = struct.Struct(">IIIIII")  # page number, database size after a commit (else 0), salt-1, salt-2, cksum-1, cksum-2


def _checksum(data: bytes, big: bool, s1: int, s2: int) -> tuple[int, int]:
    """SQLite's WAL checksum of `data` (a multiple of 8 bytes), continued from (s1, s2)."""
    words = struct.unpack(f"{'>' if big else '<'}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s1 = (s1 + words[i] + s2) & 0xFFFFFFFF
        s2 = (s2 + words[i + 1] + s1) & 0xFFFFFFFF
    return s1, s2


def holds_commits(wal: str | Path) -> bool:
    """Whether the log at `wal` holds a committed transaction, as SQLite's recovery finds them:
    False for a missing, empty or torn log, or one whose header or first frame is not valid
    (SQLite ignores all of it, as it ignores the frames after the last commit). It reads up to the
    first commit, so a log of many transactions costs no more than its first."""
    try:
        fh = open(wal, "rb")
    except FileNotFoundError:
        return False
    with fh:
        head = fh.read(HEADER.size)
        if len(head) < HEADER.size:
            return False
        magic, version, page_size, _, salt1, salt2, c1, c2 = HEADER.unpack(head)
        if magic not in (MAGIC_LITTLE, MAGIC_BIG) or version != VERSION:
            return False
        if page_size < 512 or page_size > 65536 or page_size & (page_size - 1):
            return False
        big = magic == MAGIC_BIG
        s1, s2 = _checksum(head[:24], big, 0, 0)
        if (s1, s2) != (c1, c2):
            return False
        while True:
            frame = fh.read(FRAME.size + page_size)
            if len(frame) < FRAME.size + page_size:
                return False
            page, size, f_salt1, f_salt2, f_c1, f_c2 = FRAME.unpack_from(frame)
            if page == 0 or (f_salt1, f_salt2) != (salt1, salt2):
                return False
            s1, s2 = _checksum(frame[:8], big, s1, s2)
            s1, s2 = _checksum(frame[FRAME.size:], big, s1, s2)
            if (s1, s2) != (f_c1, f_c2):
                return False
            if size:  # a commit frame: the transaction it ends is one SQLite would read
                return True
