"""What may be rendered into a prompt: a query, a passage or a rubric field is a non-blank string.

Files cannot hold anything else (their readers refuse blank texts line by line), but a notebook
hands over whatever its DataFrame holds: NaN for an empty cell, None, pandas' <NA>, numbers,
bytes. Rendered as they are, those become prompts about "nan" or "5" and labels that look
real. One check, shared by the engine's pair resolution (the CLI and `jb.judge` alike) and the
rubric jury, says what is wrong, so the same input gives the same error text everywhere.
"""

from __future__ import annotations

import math
import re
from typing import Any

SURROGATE = re.compile("[\ud800-\udfff]")


def is_missing(value: Any) -> bool:
    """None, a float NaN (pandas' empty cell) or pandas' <NA> (checked without importing pandas)."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    return isinstance(value, float) and math.isnan(value)


# Characters that show nothing and that str.isspace() does not count: zero-width space, non-joiner
# and joiner, word joiner, the byte-order mark. A text of only these (and white space) is blank.
_INVISIBLE_CHARS = "\u200b\u200c\u200d\u2060\ufeff"
_INVISIBLE = dict.fromkeys(map(ord, _INVISIBLE_CHARS))


def text_problem(value: Any) -> str | None:
    """None for a non-blank string; else what the value is instead ("missing (NaN)", "blank",
    "not text (int 5)"), for an error or a skip reason."""
    if isinstance(value, str):
        if value.isascii():  # the usual case, checked fast: no invisible characters, no surrogates
            return None if value.strip() else "blank"
        stripped = value.strip()
        # blank: nothing but white space and invisible characters. A first visible character
        # settles it without rewriting the text (translate cost 25 us on a DL19 passage)
        if not stripped or (stripped[0] in _INVISIBLE_CHARS and not stripped.translate(_INVISIBLE).strip()):
            return "blank"
        # a lone surrogate (from a JSON \u escape) is text no UTF-8 writer or tokenizer can take
        return "not Unicode text (a lone surrogate)" if SURROGATE.search(value) else None
    if is_missing(value):
        shown = "None" if value is None else "NaN" if isinstance(value, float) else "<NA>"
        return f"missing ({shown})"
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return f"not text ({type(value).__name__} {shown})"
