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

COMMAND_MODULES = [
    "judge", "blend", "agree", "correlate", "pool", "label", "calibrate", "fill", "report", "compare",
    "grade", "cascade", "prompts", "store", "demo", "estimate",
]


def build_app(commands: list[str] | None = None) -> typer.Typer:
    """The command group with the given command modules registered (all of them by default)."""
    group = typer.Typer(
        name="judgeblender",
        help="Relevance judgments with juries of LLM judges, and how far they can be trusted.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    # A group, even with one command registered: `judgeblender correlate ...` keeps its name.
    group.callback()(lambda: None)
    for name in commands or COMMAND_MODULES:
        import_module(f"{__name__}.{name}").register(group)
    return group


def _requested_command(argv: list[str]) -> str | None:
    """The command module named on the command line, when there is one (no option before it)."""
    if argv and argv[0] in COMMAND_MODULES:
        return argv[0]
    return None


def __getattr__(name: str):
    # `app`, every command registered, is built on first use (tests, `python -m`); the
    # `judgeblender` command itself imports only the module of the command it runs, since
    # some pull in seconds of imports (scipy, torch) that others never need.
    if name == "app":
        value = globals()["app"] = build_app()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Entry point: user-facing errors become one line on stderr and exit code 2."""
    command = _requested_command(sys.argv[1:])
    try:
        build_app([command] if command else None)(standalone_mode=False)
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
