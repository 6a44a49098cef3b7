"""Shared consoles: results go to stdout, progress and errors to stderr."""

from rich.console import Console

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False)
