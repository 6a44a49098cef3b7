"""Which option of which command is what: every command's inputs are checked before it runs.

The checks themselves are in `judgeblender.validate`; this table only says, per command and
parameter, which check applies (a `--details` is an input of `blend` and an output of
`judge`), and which files a command writes beside its outputs without an option naming them
(DERIVED: `OUT.details.jsonl`, a seed's `.design.json`, the label journal). `checked(app)` runs
them ahead of each command's body, so a bad path or number, or two outputs that are one file
(one would overwrite the other), is one `error:` line and exit 2 before any file is read in
full, any model loaded or called. Around the body, a library error about a Python argument is
told of the command's flag for it, and so is every other argument it names (cli/usage.py `told`).

Before any of that, the command line itself: an option that takes one value is given at most
once (`OnceCommand`). The framework keeps the last of a repeated option and drops the others
without a word (`judge -j A -j B` judged with B alone); every command here is built with this
check instead, so a repeat is one `error:` line naming the option, exit 2. Options declared as a
list (`--judge` of grade, cascade, experiment; `--panel-model`; `--weights`) take every value
given and are left alone. A flag counts as a value: `--redact --redact` is refused like
`--seed 1 --seed 2`, and so is `--progress --no-progress`, whose two forms contradict each other.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand

from .. import arguments, paths, validate
from ..errors import ArgumentError, JudgeblenderError
from ..pairs.irds import is_irds
from . import usage

# Numbers, by parameter name (the same meaning wherever they appear): (low, high, low_open, high_open).
# A number the library checks too takes its range from the library's one declaration
# (arguments.BOUNDS); the rest are the command line's own.
NUMBERS: dict[str, tuple[float | None, float | None, bool, bool]] = {
    **{name: bound[:4] for name, bound in arguments.BOUNDS.items()},
    "timeout": (0, None, True, False), "concurrency": (1, None, False, False), "threads": (1, None, False, False),
    "limit": (1, None, False, False), "context_tokens": (1, None, False, False),
    "outer_folds": (0, None, False, False), "exhaustive_max": (1, None, False, False),
    "time_limit": (0, None, True, False), "trim": (0, 0.5, False, True),
    "budget": (0, None, False, False), "sample_queries": (1, None, False, False),
    "sample_pairs": (0, None, True, False),
    "max_body": (1, None, False, False), "max_pairs": (1, None, False, False), "max_queue": (1, None, False, False),
    "max_reading": (1, None, False, False), "read_timeout": (0, None, True, False),
    # score thresholds and bands: scales differ by scorer (cosine, 0-3, probabilities), so only finite
    "threshold": (None, None, False, False), "band": (None, None, False, False),
}

INPUT, INPUTS, DIR, OUTPUT, STORE, STORE_READ, MODEL, MODELS, PROMPT, PROMPTS, PANEL, NAMED_INPUTS, JUDGE_MODELS = (
    "input", "inputs", "dir", "output", "store", "store-read", "model", "models", "prompt", "prompts", "panel",
    "named-inputs", "judge-models")


def _calibrate_store(args: dict[str, Any]) -> str | None:
    """calibrate writes to --store only when it judges the seed pairs (--panel with --queries and
    --corpus); --cost-from-store only reads it, so a store on a read-only medium serves; else it is
    not opened at all."""
    if args.get("panel") and args.get("queries") and args.get("corpus") and not args.get("details") \
            and not args.get("labels"):
        return STORE
    return STORE_READ if args.get("cost_from_store") else None


# Per command: parameter name -> what it is, or a function of the arguments that says (None: not
# used this time). Outputs are checked against every input of the command.
ROLES: dict[str, dict[str, str | Callable[[dict[str, Any]], str | None]]] = {
    "judge": {"queries": INPUT, "corpus": INPUT, "pairs": INPUT, "out": OUTPUT, "details": OUTPUT, "model": MODEL,
              "prompt": PROMPT, "store_path": STORE, "panel": PANEL, "models": MODELS, "batch_read": INPUT,
              "batch_write": OUTPUT},
    "blend": {"judges": NAMED_INPUTS, "details": INPUTS, "out": OUTPUT, "panel": INPUT, "tiebreaker": NAMED_INPUTS,
              "pairs": INPUT},
    "agree": {"predictions": INPUTS, "gold": INPUT},
    "correlate": {"predictions": INPUTS, "gold": INPUT, "runs_dir": DIR, "groups_file": INPUT, "plot": OUTPUT},
    "pool": {"runs_dir": DIR, "out": OUTPUT, "exclude": INPUT, "queries_from": INPUT, "corpus": INPUT,
             "duplicates_out": OUTPUT, "sample_out": OUTPUT, "design_out": OUTPUT},
    "label": {"queries": INPUT, "corpus": INPUT, "pairs": INPUT, "out": OUTPUT, "journal": OUTPUT},
    "calibrate": {"gold": INPUT, "details": INPUT, "labels": INPUTS, "panel": PANEL, "queries": INPUT,
                  "corpus": INPUT, "runs": DIR, "out": OUTPUT, "judge_model": JUDGE_MODELS,
                  "store_path": _calibrate_store},
    "fill": {"gold": INPUT, "llm": INPUT, "out": OUTPUT, "provenance": OUTPUT, "pairs": INPUT, "runs_dir": DIR},
    "report": {"gold": INPUT, "preds": INPUTS, "runs_dir": DIR, "out": OUTPUT, "groups": INPUT,
               "store": STORE_READ, "seed_qrels": INPUT, "design": INPUT, "calibration_seed": INPUT},
    "compare": {"qrels": INPUT, "runs_dir": DIR},
    "grade": {"items_path": INPUT, "models": MODELS, "prompts": PROMPTS, "out": OUTPUT, "store_path": STORE},
    "cascade": {"queries": INPUT, "corpus": INPUT, "pairs": INPUT, "out": OUTPUT, "seed_qrels": INPUT,
                "models": MODELS, "prompt": PROMPT, "store_path": STORE, "details": OUTPUT},
    "demo": {"store_path": STORE},
    "serve": {"model": MODEL, "panel": PANEL, "models": MODELS, "prompt": PROMPT, "store_path": STORE,
              "token_file": INPUT, "queries": INPUT, "corpus": INPUT, "port_file": OUTPUT},
    "estimate": {"llm": INPUT, "human": INPUT, "runs_dir": DIR, "design": INPUT, "calibration_seed": INPUT},
    "experiment": {"runs_dir": DIR, "topics": INPUT, "qrels": INPUT, "llm": INPUT, "judge_models": MODELS,
                   "corpus": INPUT, "prompt": PROMPT, "store_path": STORE, "seed": INPUT, "design": INPUT},
    "prompts show": {"name": PROMPT},
    "prompts render": {"name": PROMPT},
    "store stats": {"store": STORE_READ},
    "store check": {"store": STORE_READ},
    "store export": {"store": STORE_READ, "out": OUTPUT},
    "store judgments": {"store": STORE_READ, "out": OUTPUT},
    "store merge": {"inputs": STORE_READ, "out": OUTPUT},
    "proxy": {"store": STORE, "token_file": INPUT},
}


def _unless(option: str | None, derive: Callable[[Path], Path], source: str = "out") -> Callable[[dict[str, Any]], Path | None]:
    """The file `derive` names beside the `source` output, written when `option` is not given."""
    return lambda args: None if args.get(option) or not args.get(source) else derive(Path(args[source]))


def _store_schema() -> int:
    """The newest store schema this judgeblender reads: a later store is refused before the run."""
    from ..store.migrations import MIGRATIONS  # only the commands with a store pay for store/

    return len(MIGRATIONS)


def _store_opener():
    """How a store is read, write-ahead log included (store.calls.open_read_only)."""
    from ..store.calls import open_read_only  # only the commands with a store pay for store/

    return open_read_only


def _design_path(sample_out: Path) -> Path:
    from ..pairs.design import design_path_for  # only pool pays for the design module

    return design_path_for(sample_out)


# Per command: files it writes beside its outputs, by what an error calls them and how they are
# derived from the arguments (None: not written this time). Checked as outputs, like the options.
DERIVED: dict[str, list[tuple[str, Callable[[dict[str, Any]], Path | None]]]] = {
    "judge": [("the details file beside --out", _unless("details", paths.details_path))],
    "cascade": [("the details file beside --out", _unless("details", paths.details_path))],
    "pool": [("the design file beside --sample-out", _unless("design_out", _design_path, "sample_out"))],
    "label": [("the journal beside --out", _unless("journal", paths.journal_path)),
              ("the lock file of --out", _unless(None, paths.lock_path))],
    "fill": [("the provenance file beside --out", _unless("provenance", paths.provenance_path))],
}


def _many(value: Any) -> list:
    return [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]


def check_arguments(command: str, args: dict[str, Any]) -> None:
    """Check a command's arguments (by parameter name) before it runs; raises InputError."""
    for name, value in args.items():
        for one in (value if isinstance(value, tuple) else (value,)):  # a tuple: an option of several numbers
            if name in NUMBERS and isinstance(one, (int, float)) and not isinstance(one, bool):
                low, high, low_open, high_open = NUMBERS[name]
                validate.number("--" + name.replace("_", "-"), one, low=low, high=high, low_open=low_open,
                                high_open=high_open)
            elif isinstance(one, float):
                validate.number("--" + name.replace("_", "-"), one)
    roles = {name: role for name, given in ROLES.get(command, {}).items()
             if (role := given(args) if callable(given) else given) is not None}
    inputs: list[Path] = []
    for name, role in roles.items():
        for value in _many(args.get(name)):
            if role in (INPUT, INPUTS, NAMED_INPUTS, DIR) and is_irds(str(value).partition("=")[2] or value):
                continue  # an ir_datasets id: its reader says what is missing (pairs/irds.py)
            if role in (INPUT, INPUTS):
                inputs.append(validate.input_file(value))
            elif role == NAMED_INPUTS:  # NAME=PATH or PATH
                inputs.append(validate.input_file(str(value).partition("=")[2] or value))
            elif role == DIR:
                validate.input_dir(value)
            elif role == STORE:
                validate.sqlite_store(value, write=True, newest=_store_schema(), opener=_store_opener())
            elif role == STORE_READ:
                validate.sqlite_store(value, write=False, read_only=True, newest=_store_schema(),
                                      opener=_store_opener())
            elif role in (MODEL, MODELS):
                validate.model_string(str(value).partition("=")[2] if "=" in str(value) else str(value))
            elif role == JUDGE_MODELS:  # NAME=MODEL[/PROMPT[/MODE]]
                from ..panels.panel_file import parse_judge_model  # only calibrate pays for the judges package

                _, model, prompt, _ = parse_judge_model(str(value))
                validate.model_string(model)
                if prompt:
                    validate.prompt_ref(prompt)
            elif role in (PROMPT, PROMPTS):
                validate.prompt_ref(str(value))
            elif role == PANEL and str(value).endswith(".toml"):
                inputs.append(validate.input_file(value, "an existing panel file (.toml)"))
    stores = [Path(v) for n, r in roles.items() if r in (STORE, STORE_READ) for v in _many(args.get(n))]
    written = [("--" + name.replace("_", "-"), Path(value)) for name, role in roles.items() if role == OUTPUT
               for value in _many(args.get(name))]
    written += [(what, path) for what, derive in DERIVED.get(command, ()) if (path := derive(args)) is not None]
    for _, path in written:  # only `store merge --out X --force` replaces a store
        validate.output_file(path, [*inputs, *stores], sqlite_ok=command == "store merge")
    validate.distinct_outputs(written)


def _checked_callback(command: str, callback: Callable) -> Callable:
    if getattr(callback, "_judgeblender_checked", False):
        return callback

    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        check_arguments(command, kwargs)
        try:
            return callback(*args, **kwargs)
        except JudgeblenderError as exc:  # the library names its arguments; the command line, its flags
            raise usage.told(exc, usage.flags_of(callback)) from None

    run._judgeblender_checked = True  # type: ignore[attr-defined]
    return run


def single_valued(params: list) -> list:
    """The options among `params` that keep one value (a flag included): all but those declared
    as a list (`multiple`), which keep every value given, and the eager ones (`--help`)."""
    return [p for p in params if getattr(p, "param_type_name", "") == "option" and not p.multiple
            and not p.is_eager]


class OnceCommand(TyperCommand):
    """A command whose single-valued options may each be given once (see the module doc).

    The command line is parsed once more ahead of the framework's own parse, only to count the
    options in it: the parser reports every option in the order given, repeats included, before
    any value is converted or a required option is missed. A flag counts as one use each time
    it appears, whichever of its forms (`--progress`, `--no-progress`)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing:  # shell completion parses half-typed lines: nothing to refuse
            _, _, order = self.make_parser(ctx).parse_args(args=list(args))
            once = single_valued(self.get_params(ctx))
            for option in once:
                uses = sum(1 for given in order if given is option)
                if uses > 1:
                    kind = "a flag" if option.is_flag else "an option of one value"
                    raise ArgumentError(
                        usage.param_name(option), f"it at most once ({kind}: the framework would keep the "
                        "last and silently drop the others)", described=f"it {uses} times")
        return super().parse_args(ctx, args)


def checked(app: typer.Typer, prefix: str = "") -> typer.Typer:
    """Put the argument checks in front of every command registered on `app` (and its groups),
    and build each as a OnceCommand (no option of one value given twice)."""
    for info in app.registered_commands:
        name = info.name or info.callback.__name__.replace("_", "-")
        info.callback = _checked_callback(f"{prefix}{name}", info.callback)
        kind = info.cls or TyperCommand  # typer's own unless the command asked for another
        if not issubclass(kind, OnceCommand):
            info.cls = OnceCommand if kind is TyperCommand else type(kind.__name__, (OnceCommand, kind), {})
    for group in app.registered_groups:
        checked(group.typer_instance, f"{prefix}{group.name} ")
    return app
