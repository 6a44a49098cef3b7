"""The `judgeblender` command: nouns and verbs, each command in its own module.

Every module listed in COMMAND_MODULES defines `register(app)`, which adds its commands.
"""

from __future__ import annotations

import sys
from importlib import import_module

import typer
from rich.markup import escape

from ..errors import JudgeblenderError
from .console import err_console

app = typer.Typer(
    name="judgeblender",
    help="Relevance judgments with juries of LLM judges, and how far they can be trusted.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

COMMAND_MODULES = [
    "judge", "blend", "agree", "correlate", "pool", "label", "calibrate", "fill", "report", "compare",
    "grade", "cascade", "prompts", "store", "demo",
]

for _name in COMMAND_MODULES:
    import_module(f"{__name__}.{_name}").register(app)


def main() -> None:
    """Entry point: user-facing errors become one line on stderr and exit code 2."""
    try:
        app(standalone_mode=False)
    except JudgeblenderError as exc:
        # Messages quote user input (file lines, ids): escape it so "[x]" is shown, not parsed as markup.
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except (typer.Exit, SystemExit) as exc:
        code = getattr(exc, "exit_code", getattr(exc, "code", 0))
        sys.exit(code or 0)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except Exception as exc:
        # Usage errors (unknown command, bad option value) arrive here in non-standalone mode.
        # typer vendors its own click, so test for the click exception interface, not a class.
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):
            exc.show()
            sys.exit(exc.exit_code)
        raise
