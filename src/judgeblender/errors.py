"""Errors that users see. Each names what was wrong and where, never a bare traceback."""

from __future__ import annotations

import errno
from pathlib import Path


# Exit statuses of the `judgeblender` command (README.md and docs/reliability.md list them).
EXIT_OK = 0  # done: every pair judged, or unjudged for a model-answer reason (invalid answer)
EXIT_INTERNAL = 1  # a bug: an unexpected exception, with its traceback
EXIT_USAGE = 2  # a user error (input file, option, path), before or instead of the work; also an output
#                (qrels, details, report, export, merged store, panel or batch file) or a store that cannot be
#                written, for a full disk or a read-only medium (OutputError, store.StoreError): one line naming
#                the file, no partial or temporary file left, every answer committed to the store kept
EXIT_CALLS_FAILED = 3  # model calls failed (transport, server errors): what was judged is written
EXIT_SIGINT = 130  # interrupted by Ctrl+C (SIGINT): answers so far are in the store, no --out
EXIT_SIGTERM = 143  # stopped by SIGTERM: the same


class JudgeblenderError(Exception):
    """Base class: the CLI prints these as one clean message and exits with `exit_code`."""

    exit_code = EXIT_USAGE


class InputError(JudgeblenderError):
    """Malformed input: names the file, the line (1-based), what was expected and what was given.

    `got` is quoted user input: `shown` may cut it, visibly and with its length. What the user can
    do about it goes in `hint`, after it, and is never cut (a long `got` used to swallow the
    advice that followed it)."""

    def __init__(self, path: str | Path, line: int | None, expected: str, got: str | None = None, *,
                 hint: str = ""):
        self.path = str(path)
        self.line = line
        self.expected = expected
        self.got = got
        self.hint = hint
        where = f"{self.path}:{line}" if line else self.path
        msg = f"{where}: expected {expected}"
        if got is not None:
            msg += f", got {shown(got)}"
        if hint:
            msg += f"; {hint}"
        super().__init__(msg)


_NOTHING = object()


def shown(value: object, limit: int = 120) -> str:
    """`repr(value)`, shortened past `limit` characters with a visible marker and the full length,
    so a quoted input can be cut but the message around it never is."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit - 20]}... [{len(text)} characters]"


class ArgumentError(JudgeblenderError, ValueError):
    """A bad argument to a Python call (or a CLI option): names the argument, what was expected
    and what was given. The argument form of `InputError`; a `ValueError` too, so code that caught
    the bare `ValueError` raised before keeps working."""

    def __init__(self, argument: str, expected: str, got: object = _NOTHING, *, hint: str = "",
                 described: str = ""):
        """`got` is shown as its repr (cut visibly when long); `described` says in words what was
        given where no value can be shown (an iterator that yielded nothing, say)."""
        self.argument = argument
        self.expected = expected
        self.got = None if got is _NOTHING else got
        msg = f"{argument}: expected {expected}"
        if described:
            msg += f", got {described}"
        elif got is not _NOTHING:
            msg += f", got {shown(got)}"
        if hint:
            msg += f"; {hint}"
        super().__init__(msg)

    def renamed(self, argument: str) -> ArgumentError:
        """The same error told of `argument` (the CLI's flag for a library argument): the rest of
        the message, and every field but the name, stay as they are."""
        message = str(self)
        other = type(self).__new__(type(self))  # not copy.copy: it would call __init__ with the message alone
        other.__dict__.update(self.__dict__)
        other.argument = argument
        Exception.__init__(other, argument + message[len(self.argument):] if message.startswith(self.argument)
                           else message)
        return other


_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_READ_ONLY = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


class OutputError(JudgeblenderError, OSError):
    """An output file could not be written (a full disk, a read-only medium, an I/O error): names
    the file and the system's reason, and says the file is as it was (fileio.atomic_writer leaves
    no partial or temporary file). Also an OSError carrying the cause's errno and strerror, so code
    that caught the bare OSError raised before (an optional cache, the labeling page's warning)
    keeps working."""

    def __init__(self, path: str | Path, cause: OSError, existed: bool = False):
        self.path = str(path)
        reason = cause.strerror or str(cause) or type(cause).__name__
        if cause.errno in _NO_ROOM:
            hint = "free some space, or write it elsewhere, and run again"
        elif cause.errno in _READ_ONLY:
            hint = "write it to a writable folder"
        else:
            hint = "check the disk, or write it elsewhere, and run again"
        kept = "its earlier content is kept" if existed else "no file was made"
        self.message = (f"{self.path}: cannot write this output ({reason}); {kept}, no partial or temporary file "
                        f"is left; {hint}")
        super().__init__(self.message)
        self.errno, self.strerror, self.filename = cause.errno, cause.strerror, self.path

    def __str__(self) -> str:  # OSError's own would show "[Errno 28] ..." without the file's story
        return self.message


class MissingItemsError(JudgeblenderError):
    """Pairs reference queries or passages that the inputs do not contain."""

    def __init__(self, kind: str, missing: list[str], total: int, source: str, count: int | None = None):
        self.kind = kind
        self.missing = missing
        count = len(missing) if count is None else count  # `missing` may hold only the first ones
        shown = ", ".join(missing[:5]) + (" ..." if count > 5 else "")
        super().__init__(
            f"{count} of {total} pairs reference a {kind} missing from {source} "
            f"(first: {shown}); pass skip_missing=True to judge the rest and report them"
        )


class MissingExtraError(JudgeblenderError):
    """An optional dependency is not installed: names the extra that provides it."""

    def __init__(self, module: str, extra: str, what: str):
        super().__init__(
            f"{what} needs the Python package '{module}', which is not installed. "
            f"Install it with: pip install 'judgeblender[{extra}]'"
        )


class TemplateError(JudgeblenderError):
    """A prompt template file is malformed, or rendering lacks a variable."""


class BackendError(JudgeblenderError):
    """A model backend failed in a way retries did not fix."""


class CallDeferred(BackendError):
    """A call handed on to be answered later (queued for the Batch API): its pair stays unjudged
    for now, and that is what was asked for, not a failure (no exit 3)."""


class CallsFailed(JudgeblenderError):
    """Model calls failed (after their retries), so some pairs are unjudged for no fault of the
    model's answers. Raised by the CLI after it has written what was judged: exit status 3."""

    exit_code = EXIT_CALLS_FAILED


def require(module: str, extra: str, what: str):
    """Import an optional module or raise an error naming the extra to install."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError(module, extra, what) from exc
