"""The `judgeblender` command: nouns and verbs, each command in its own module.

Every module listed in COMMAND_MODULES defines `register(app)`, which adds its commands.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
from importlib import import_module

import typer
from rich.markup import escape

from .. import masking
from ..errors import EXIT_SIGINT, EXIT_SIGTERM, JudgeblenderError
from . import usage
from .checks import checked
from .console import err_console, output_width, print_error

COMMAND_MODULES = [
    "judge", "blend", "agree", "correlate", "pool", "label", "calibrate", "fill", "report", "compare",
    "grade", "cascade", "prompts", "store", "demo", "estimate", "experiment", "serve", "proxy", "data",
]


def build_app(commands: list[str] | None = None) -> typer.Typer:
    """The command group with the given command modules registered (all of them by default)."""
    group = typer.Typer(
        name="judgeblender",
        help="Relevance judgments with juries of LLM judges, and how far they can be trusted.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        # Help texts are plain text: read as rich markup, `[default: OUT.details.jsonl]` and
        # `[ray]` vanished and `NAME=MODEL[/PROMPT[/MODE]]` crashed `calibrate --help`. Set on the
        # root, it holds for every command and group under it (typer passes it down).
        rich_markup_mode=None,
        context_settings={"max_content_width": output_width()},  # as wide as tables (console.py), not 80
    )
    # A group, even with one command registered: `judgeblender correlate ...` keeps its name.
    group.callback()(lambda: None)
    for name in commands or COMMAND_MODULES:
        import_module(f"{__name__}.{name}").register(group)
    return checked(group)  # every command's paths and numbers are checked before it runs


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


# Commands that make model calls, keep every answer in a store, and so resume when run again.
MODEL_COMMANDS = frozenset({"judge", "cascade", "grade", "calibrate", "demo"})


class _Signals:
    """SIGTERM handled as Ctrl+C, remembering which of the two stopped the run.

    SIGINT keeps Python's own handler (KeyboardInterrupt; inside asyncio.run, the runner's,
    which cancels the work cleanly and then raises KeyboardInterrupt), and SIGTERM calls
    whichever SIGINT handler is in place at that moment, so both stop a run the same way:
    in-flight answers are committed, the store is closed, no output is written."""

    def __init__(self) -> None:
        self.received: int | None = None

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_term)

    def _on_term(self, signum, frame) -> None:
        self.received = signal.SIGTERM
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    @property
    def exit_code(self) -> int:
        return EXIT_SIGTERM if self.received == signal.SIGTERM else EXIT_SIGINT


def _program() -> str:
    """The command as it was typed, for the resume line and for the messages and help that name
    it (one rule: click's own guess reads the running `__main__`, "python -m pytest" in tests)."""
    return "python -m judgeblender" if os.path.basename(sys.argv[0]) == "__main__.py" else "judgeblender"


def _resume_command(argv: list[str]) -> str:
    return " ".join([_program(), *map(shlex.quote, argv)])


def _interrupted(signals: _Signals, command: str | None, argv: list[str]) -> None:
    name = "SIGTERM" if signals.exit_code == EXIT_SIGTERM else "SIGINT"
    if command in MODEL_COMMANDS:
        err_console.print(
            f"[bold red]interrupted[/] by {name}: every answer received so far is in the store; no output file "
            f"was written. To resume (stored answers are reused, only the missing calls are made), run the same "
            f"command again:\n  {escape(_resume_command(argv))}", highlight=False, soft_wrap=True)
    else:
        err_console.print(f"[bold red]interrupted[/] by {name}", highlight=False)
    sys.exit(signals.exit_code)


def main() -> None:
    """Entry point. Every exit status is one of those in errors.py (EXIT_*), and none is dropped:
    user errors exit 2 with one line on stderr, failed model calls 3, SIGINT 130, SIGTERM 143."""
    masking.guard_streams()  # an API key a server echoed is masked in all the command prints
    masking.register_url(os.environ.get("OPENAI_BASE_URL"))  # its user:password@, as --base-url's
    argv = sys.argv[1:]
    command = _requested_command(argv)
    signals = _Signals()
    signals.install()
    try:
        # Not standalone, so errors arrive here; the value returned is then the exit status
        # (typer returns the code of a typer.Exit, and turns Ctrl+C into 130) and must be kept.
        code = build_app([command] if command else None)(prog_name=_program(), standalone_mode=False)
    except KeyboardInterrupt:  # outside the command (start-up)
        _interrupted(signals, command, argv)
    except JudgeblenderError as exc:
        print_error(exc)
        sys.exit(exc.exit_code)
    except (typer.Exit, SystemExit) as exc:
        code = getattr(exc, "exit_code", getattr(exc, "code", 0))
        sys.exit(code or 0)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(EXIT_SIGINT)
    except Exception as exc:
        # The framework's usage errors (a bad option value, an unknown or missing option) arrive
        # here in non-standalone mode: the same one line as judgeblender's own (cli/usage.py),
        # never the framework's usage dump. A group run bare still shows its help.
        if usage.is_help_request(exc):
            exc.show()  # type: ignore[attr-defined]
            sys.exit(exc.exit_code)  # type: ignore[attr-defined]
        error = usage.as_error(exc)
        if error is None:
            raise
        print_error(error)
        sys.exit(error.exit_code)
    if code == EXIT_SIGINT or signals.received is not None:  # typer's answer to KeyboardInterrupt
        _interrupted(signals, command, argv)
    sys.exit(code if isinstance(code, int) and not isinstance(code, bool) else 0)
