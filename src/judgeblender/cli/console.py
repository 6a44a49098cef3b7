"""Shared consoles: results go to stdout, progress and errors to stderr.

Width: rich lays tables out to the console's width and shortens what does not fit with "…"
(a piped `agree` once showed "alp…" for "alpha"). Piped or redirected output has no width
of its own, so it gets a wide one (WIDE, or $COLUMNS when set) and nothing is cut; a terminal
gets its own width, but never under FLOOR columns (a narrower one wraps lines rather than cut
headers). Tables meant for a terminal keep to 80 columns with deliberately short headers.
"""

import os
import shutil
import sys

from rich.console import Console

FLOOR = 80
WIDE = 160


def output_width(stream=None) -> int:
    stream = stream or sys.stdout
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit():
        return max(FLOOR, int(columns))
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty:
        return WIDE
    return max(FLOOR, shutil.get_terminal_size((FLOOR, 24)).columns)


console = Console(highlight=False, soft_wrap=True, width=output_width())
err_console = Console(stderr=True, highlight=False, soft_wrap=True, width=output_width(sys.stderr))  # lines stay whole for grep and logs
