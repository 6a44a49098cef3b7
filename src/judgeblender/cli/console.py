"""Shared consoles: results go to stdout, progress and errors to stderr.

Width: rich lays tables out to the console's width and shortens what does not fit with "…"
(a piped `agree` once showed "alp…" for "alpha"). Piped or redirected output has no width
of its own, so it gets a wide one (WIDE, or $COLUMNS when set) and nothing is cut; a terminal
gets its own width, but never under FLOOR columns (a narrower one wraps lines rather than cut
headers). Tables meant for a terminal keep to 80 columns with deliberately short headers.
The rule lives in judgeblender/progress.py, so that `jb.judge`'s progress bar follows it too.
"""

from rich.console import Console
from rich.markup import escape

from ..progress import output_width, stderr_console  # the one width rule, shared with jb.judge

console = Console(highlight=False, soft_wrap=True, width=output_width())
err_console = stderr_console()  # lines stay whole for grep and logs


def print_error(error: BaseException) -> None:
    """The one form every user error takes on stderr: `error: MESSAGE`, a single line that
    scripts can grep. Messages quote user input (file lines, ids, option values), so it is
    escaped: "[x]" is shown, not read as rich markup."""
    err_console.print(f"[bold red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
