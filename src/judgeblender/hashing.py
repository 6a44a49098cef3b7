"""sha256 of strings and files: the one place the project hashes content.

Model identities (a GGUF's or a weights folder's hash), call keys and the store's text keys
all rest on these. Hashing a multi-gigabyte model takes seconds, so a file's digest is kept
for the life of the process, keyed by its resolved path, size and mtime (the store adds a
persistent cache on top, `CallStore.file_sha256`). Imports nothing of the project.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
from pathlib import Path

CHUNK_BYTES = 1 << 22

# (resolved path, size, mtime_ns) -> sha256 of that file, so reloading a model does not rehash it.
_FILE_HASHES: dict[tuple[str, int, int], str] = {}
_FILE_HASHES_LOCK = threading.Lock()


def sha256_text(text: str) -> str:
    """Hex sha256 of a string's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def hmac_sha256_text(secret: bytes, text: str) -> str:
    """Hex HMAC-SHA256 of a string's UTF-8 bytes under `secret`: a keyed hash, for a value that
    must be told apart from others without being kept in any form a reader of the result could
    test a guess against (a client's API key in the proxy's cache key)."""
    return hmac.new(secret, text.encode("utf-8"), hashlib.sha256).hexdigest()


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of bytes (a downloaded file, checked before it is used)."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file's bytes (what `sha256sum` prints), read in 4 MiB blocks and
    remembered while the file's size and mtime are unchanged."""
    path = Path(path)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    with _FILE_HASHES_LOCK:
        cached = _FILE_HASHES.get(key)
    if cached is not None:
        return cached
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK_BYTES):
            h.update(block)
    digest = h.hexdigest()
    with _FILE_HASHES_LOCK:
        _FILE_HASHES[key] = digest
    return digest
