"""Keys and identity for `openai:` backends: where the API key comes from, and the public URL.

The key comes from an environment variable (OPENAI_API_KEY unless `api_key_env` names
another) or from a key file readable by its owner only, and is held in a Secret whose repr
never shows it. `public_base_url` (from `masking`, where every rule about secrets in text lives)
is the endpoint as it may appear in a model's identity, the store and messages: no
user:password@, query string or fragment.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import BackendError
from ..masking import public_base_url

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Stands in for the key on local servers that need none: the SDK insists on some string.
NO_KEY_PLACEHOLDER = "unused"


class Secret:
    """Holds the API key; its repr and str never show it."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


def read_key_file(path: str | os.PathLike[str]) -> str:
    """The key in `path`, which must be a regular file that only its owner can read (0600 or 0400)."""
    p = Path(path).expanduser()
    try:
        st = p.stat()
    except FileNotFoundError:
        raise BackendError(f"API key file {p} does not exist") from None
    except OSError as exc:
        raise BackendError(f"cannot read API key file {p}: {exc.strerror or type(exc).__name__}") from None
    if not stat.S_ISREG(st.st_mode):
        raise BackendError(f"API key file {p} is not a regular file")
    if os.name == "posix" and st.st_mode & 0o077:
        raise BackendError(
            f"API key file {p} has permissions {stat.S_IMODE(st.st_mode):04o}, so other users can read it; "
            f"it must be readable by its owner only: run `chmod 600 {p}`"
        )
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BackendError(f"cannot read API key file {p}: {type(exc).__name__}") from None
    key = text.strip()
    if not key:
        raise BackendError(f"API key file {p} is empty")
    if any(ch.isspace() for ch in key):
        raise BackendError(f"API key file {p} should hold only the key, on one line")
    return key


def resolve_api_key(api_key_env: str | None, api_key_file: str | os.PathLike[str] | None, base_url: str) -> str | None:
    """The key to send: from the key file when given, else from the environment; None when there is none.

    The default OpenAI endpoint always needs a key, so its absence there is an error.
    """
    if api_key_file:
        return read_key_file(api_key_file)
    if api_key_env:
        value = os.environ.get(api_key_env, "").strip()
        if value:
            return value
    if public_base_url(base_url) == DEFAULT_BASE_URL:
        # one message for Python and a panel file; the command line tells api_key_env= as its flag
        where = f"the environment variable {api_key_env}" if api_key_env else "an environment variable"
        raise BackendError(
            f"no API key for {DEFAULT_BASE_URL}: set {where} (api_key_env= names another), or give "
            f"api_key_file= (a file readable by its owner only; in Python or a panel file)"
        )
    return None
