"""The CLI framework's usage errors in judgeblender's own form: one `error:` line, exit 2.

typer (through click, or the copy of click it vendors since 0.2x) reports a bad command line
with its own form: the usage line, a "Try ... --help" line and "Error: Invalid value for
'--bootstrap': Input should be a valid integer", which names neither the value given nor, in
judgeblender's words, what was expected. Every other user error of the tool is one line that
names the argument, what was expected and what was given (errors.ArgumentError), so `main`
turns the framework's errors into that form here, once, for every command: a word where a
number is wanted, a number out of a declared range, a choice not offered, an unknown option,
a missing option or argument, an option given without its value.

What was expected is said from the option's declared type (so it stays the same whatever
wording the framework uses); what was given comes from the framework's validation error where
it keeps it. The framework is recognised by its interface and class names, not imported
classes: typer vendors click under another module, and older typer uses click itself.
"""

from __future__ import annotations

import enum
import inspect
import re
import types
import typing
from pathlib import Path
from typing import Any

from ..arguments import spoken
from ..errors import ArgumentError, JudgeblenderError

_NOT_GIVEN = object()


def _kinds(exc: BaseException) -> set[str]:
    """The names of the exception's classes (click's and typer's copies share them)."""
    return {cls.__name__ for cls in type(exc).__mro__}


def is_framework_error(exc: BaseException) -> bool:
    """An error of the CLI framework about the command line (click's ClickException interface)."""
    return "ClickException" in _kinds(exc) and hasattr(exc, "format_message") and hasattr(exc, "exit_code")


def is_help_request(exc: BaseException) -> bool:
    """A command group run with nothing after it: its help is the answer, not an error line."""
    return "NoArgsIsHelpError" in _kinds(exc)


def param_name(param: Any) -> str:
    """How an error names a parameter: its first long option (`--out`, not `-o`), or an
    argument's name in capitals (`PREDICTIONS`), as the help shows them."""
    opts = list(getattr(param, "opts", None) or ())
    if getattr(param, "param_type_name", "") == "argument" or not opts:
        return str(param.name).upper()
    return next((o for o in opts if o.startswith("--")), opts[0])


def _annotation(param: Any) -> Any:
    """The parameter's declared Python type, Optional and list (a repeated option) taken off."""
    descriptor = getattr(param, "type_descriptor", None)
    annotation = getattr(descriptor, "annotation", None)
    while True:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        origin = typing.get_origin(annotation)
        if origin in (list, typing.Union, types.UnionType) and len(args) == 1:
            annotation = args[0]
            continue
        return annotation


def _range(low: Any, high: Any, low_open: bool = False, high_open: bool = False) -> str:
    """A range in the words `validate.number` uses: 'in [0, 1]', '>= 1', '< 2'."""
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {low:g}"
    return f"{'<' if high_open else '<='} {high:g}"


_PLURALS = {"an integer": "integers", "a number": "numbers", "a path": "paths", "a value": "values"}


def _one_of(values: Any) -> str:
    shown = [repr(v.value if isinstance(v, enum.Enum) else v) for v in values]
    return "one of " + ", ".join(shown)


def _scalar(annotation: Any) -> str:
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _one_of(list(annotation))
    if typing.get_origin(annotation) is typing.Literal:
        return _one_of(typing.get_args(annotation))
    if annotation is bool:
        return "true or false"
    if annotation is int:
        return "an integer"
    if annotation is float:
        return "a number"
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "a path"
    return "a value"


def _click_type(kind: Any) -> str:
    """What a click parameter type (typer on click) accepts, in the same words."""
    name = type(kind).__name__
    if hasattr(kind, "choices"):
        return _one_of(kind.choices)
    if name in ("IntRange", "FloatRange"):
        what = "an integer" if name == "IntRange" else "a number"
        if kind.min is None and kind.max is None:
            return what
        return f"{what} {_range(kind.min, kind.max, kind.min_open, kind.max_open)}"
    if name == "Tuple":
        return " and ".join(_click_type(t) for t in kind.types)
    if name == "Path" and getattr(kind, "exists", False):
        return "an existing " + ("directory" if not kind.file_okay else "file" if not kind.dir_okay else "path")
    return {"IntParamType": "an integer", "FloatParamType": "a number", "BoolParamType": "true or false",
            "Path": "a path"}.get(name, "a value")


def expected_value(param: Any) -> str:
    """What the parameter accepts, from its declared type: 'an integer', 'a number in [0, 1]',
    '2 numbers', "one of 'a', 'b'" (the same words for typer's types and click's)."""
    if getattr(param, "type_descriptor", None) is None:  # typer on click
        return _click_type(getattr(param, "type", None))
    descriptor = param.type_descriptor
    choices = getattr(descriptor, "choices", None)
    if choices:
        return _one_of(choices)
    annotation = _annotation(param)
    if typing.get_origin(annotation) is tuple:
        items = [_scalar(a) for a in typing.get_args(annotation)]
        if len(set(items)) == 1 and items[0] in _PLURALS:
            return f"{len(items)} {_PLURALS[items[0]]}"
        return " and ".join(items)
    what = _scalar(annotation)
    info = getattr(descriptor, "parameter_info", None)
    if what == "a path" and getattr(info, "exists", False):
        what = "an existing " + ("directory" if not info.file_okay else "file" if not info.dir_okay else "path")
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    if what in ("an integer", "a number") and (low is not None or high is not None):
        what = f"{what} {_range(low, high)}"
    return what


def _given(exc: BaseException) -> Any:
    """The value the framework refused, where its validation error kept it (pydantic's)."""
    cause = exc.__cause__
    errors = getattr(cause, "errors", None)
    if callable(errors):
        try:
            found = errors()
        except Exception:  # noqa: BLE001 - not pydantic's after all: say what was expected only
            return _NOT_GIVEN
        if found and isinstance(found[0], dict) and "input" in found[0]:
            return found[0]["input"]
    return _NOT_GIVEN


def _sentence(text: str) -> str:
    """The framework's own sentence as a part of one line: no line breaks, no closing period."""
    text = " ".join(str(text).split())
    return text[:-1] if text.endswith(".") and not text.endswith("..") else text


def _bad_parameter(exc: Any) -> JudgeblenderError:
    param = getattr(exc, "param", None)
    hint = getattr(exc, "param_hint", None)
    if hint is not None:
        # raised by a command's own check, whose message already says what was wrong
        # (commands word it as "expected ..., got ..." where a value was refused)
        name = hint if isinstance(hint, str) else " / ".join(hint)
        return JudgeblenderError(f"{name}: {_sentence(exc.message)}")
    if param is None:  # a command's own check that names no option: say which command refused
        return _in_command(exc, exc.message)
    given = _given(exc)
    if given is _NOT_GIVEN:  # the framework kept no value: its sentence says which
        return ArgumentError(param_name(param), expected_value(param), hint=_sentence(exc.message))
    return ArgumentError(param_name(param), expected_value(param), given)


def _missing(exc: Any) -> JudgeblenderError:
    param = getattr(exc, "param", None)
    if param is None:
        return _in_command(exc, exc.format_message())
    what = expected_value(param)
    many = getattr(param, "multiple", False) or getattr(param, "nargs", 1) == -1
    if many:
        what = f"one or more {_PLURALS[what]}" if what in _PLURALS else f"one or more values, each {what}"
    kind = "argument" if getattr(param, "param_type_name", "") == "argument" else "option"
    return ArgumentError(param_name(param), what, hint=f"this {kind} is required and was not given")


def _unknown(name: str, kind: str, command: str, possible: list[str]) -> JudgeblenderError:
    """An unknown option or command: what was asked for, and the nearest known ones (the
    framework's "did you mean" suggestions) on the same line, or where the known ones are listed."""
    where = f"did you mean {' or '.join(possible)}?" if possible else f"see {command} --help"
    return JudgeblenderError(f"{name}: expected {kind} of {command}, got an unknown one; {where}")


def _no_such_option(exc: Any) -> JudgeblenderError:
    command = getattr(getattr(exc, "ctx", None), "command_path", None) or "the command"
    possible = sorted(getattr(exc, "possibilities", None) or ())
    return _unknown(getattr(exc, "option_name", "") or "", "an option", command, possible)


def _no_such_command(exc: Any) -> JudgeblenderError | None:
    """An unknown command: click keeps only its sentence ("No such command 'x'. Did you mean
    'a', 'b'?"), so the name and the suggestions are read back from it; None where it reads
    otherwise (another framework version), and the sentence is shown as it is."""
    found = re.fullmatch(r"No such command '(.*?)'(?:\. Did you mean (.*)\?)?", _sentence(exc.format_message()))
    if not found:
        return None
    command = getattr(getattr(exc, "ctx", None), "command_path", None) or "the command"
    possible = re.findall(r"'([^']*)'", found.group(2) or "")
    return _unknown(found.group(1), "a command", command, possible)


def _bad_option_usage(exc: Any) -> JudgeblenderError:
    """An option given without its value(s), or a flag given one (`--json=3`)."""
    option = getattr(exc, "option_name", "") or ""
    message = str(getattr(exc, "message", ""))
    needs = re.search(r"requires (?:an argument|(\d+) arguments)", message)
    if needs:
        count = needs.group(1)
        return ArgumentError(option, f"{count} values after it" if count else "a value after it",
                             hint="fewer were given" if count else "none was given")
    if "does not take a value" in message:
        return ArgumentError(option, "no value (it is a flag)", hint="a value was given with '='")
    return JudgeblenderError(f"{option}: {_sentence(message)}" if option else _sentence(message))


def _in_command(exc: Any, message: str) -> JudgeblenderError:
    """The framework's (or a command's) sentence after the command it is about."""
    where = getattr(getattr(exc, "ctx", None), "command_path", None)
    return JudgeblenderError(f"{where}: {_sentence(message)}" if where else _sentence(message))


def as_error(exc: BaseException) -> JudgeblenderError | None:
    """judgeblender's own error for an error of the CLI framework (None for any other
    exception): one line naming the option or argument, what was expected and what was given.
    Its exit status is a user error's (EXIT_USAGE, 2), for every framework error alike: each is
    about the command line, and 1 is kept for bugs."""
    if not is_framework_error(exc) or is_help_request(exc):
        return None
    kinds = _kinds(exc)
    if "MissingParameter" in kinds:
        return _missing(exc)
    if "BadParameter" in kinds:
        return _bad_parameter(exc)
    if "NoSuchOption" in kinds:
        return _no_such_option(exc)
    if "BadOptionUsage" in kinds:
        return _bad_option_usage(exc)
    # an unknown command; an extra argument: the framework's sentence, after the command
    return _no_such_command(exc) or _in_command(exc, exc.format_message())


# -- the library's argument errors in the command's own words -------------------------------------

def flags_of(command: Any) -> dict[str, str]:
    """A command function's parameters by Python name -> how the command line spells each: its
    first long option (`invalid_policy` -> `--invalid`) or, for an argument, its name in capitals.
    Read from the typer declaration (a default `typer.Option(..., "--invalid")`, or the same in
    `Annotated[...]`), where a parameter's options are declared once."""
    try:
        hints = typing.get_type_hints(command, include_extras=True)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: defaults alone still say
        hints = {}
    out: dict[str, str] = {}
    for name, param in inspect.signature(command).parameters.items():
        infos = [param.default, *getattr(hints.get(name), "__metadata__", ())]
        info = next((i for i in infos if hasattr(i, "param_decls")), None)
        if info is None:
            continue
        if type(info).__name__ == "ArgumentInfo":
            out[name] = name.upper()
            continue
        decls = list(info.param_decls or ())
        if isinstance(info.default, str) and info.default.startswith("-"):  # Annotated: typer reads it as a decl
            decls.insert(0, info.default)
        names = [d.split("/")[0] for d in decls]
        out[name] = next((d for d in names if d.startswith("--")), "--" + name.replace("_", "-"))
    return out


def _flag(argument: str, flags: dict[str, str]) -> str | None:
    """The command's flag for a library argument: the command's own parameter of that name, else
    the flag the one map gives it (arguments.spoken: CLI_FLAGS, or the name spelled as a flag)
    where the command has that flag; None where the command has neither."""
    flag = flags.get(argument)
    if flag is None and (said := spoken(argument, cli=True)) in flags.values():
        flag = said
    return flag


def as_option(exc: ArgumentError, flags: dict[str, str]) -> ArgumentError:
    """A library error about a Python argument, told of the command's flag for it: the library
    names `min_choice_mass`, the command line `--min-choice-mass`. An argument the command has
    under that name, or whose flag the one map gives (`ray` -> `--ray`, `systems` -> `--runs`), is
    renamed, an item of one too (`weights['b']` -> `--weights['b']`); any other (a file,
    `labels['a']` where the command has no `labels`) is left as the library said it."""
    name, bracket, index = exc.argument.partition("[")  # weights['b']: the flag, then the item
    flag = _flag(name, flags)
    return exc if flag is None else exc.renamed(flag + bracket + index)


# Another argument named in a library message, as Python spells it (arguments.spoken):
# `skip_missing=True`, `depth=10`, `seed_qrels=`.
_MENTION = re.compile(r"(?<![\w.\-'\"])([a-z][a-z0-9_]*)=(True\b|(?=[\w'\"\[(-]))?")


def told(exc: JudgeblenderError, flags: dict[str, str]) -> JudgeblenderError:
    """A library error as the command line tells it: the argument it is about (`as_option`) and
    every other argument it names (`skip_missing=True` -> `--skip-missing`, `depth=10` ->
    `--depth 10`) in the command's flags. The one place the CLI maps them; an error whose text is
    not its first argument (an OutputError's) is left as it is."""
    if isinstance(exc, ArgumentError):
        exc = as_option(exc, flags)
    text = str(exc)

    def flag_of(found: re.Match) -> str:
        flag = _flag(found.group(1), flags)
        if flag is None:
            return found.group(0)
        return flag + " " if found.group(2) == "" else flag  # a value follows: `--depth 10`

    reworded = _MENTION.sub(flag_of, text)
    if reworded == text or exc.args[:1] != (text,):
        return exc
    other = type(exc).__new__(type(exc))  # as ArgumentError.renamed: every field kept, the text told anew
    other.__dict__.update(exc.__dict__)
    Exception.__init__(other, reworded)
    return other


def option_error(exc: ArgumentError, flags: dict[str, str]):
    """`as_option` as the framework's own usage error, for a command that must refuse an option
    with it (exit status 2 even where `main` does not run, as under typer's test runner)."""
    import typer

    mapped = as_option(exc, flags)
    message = str(mapped)
    head = mapped.argument + ": "
    return typer.BadParameter(message[len(head):] if message.startswith(head) else message,
                              param_hint=mapped.argument)
