"""Panel files that run as written: writing the calibrated panel, and reading one to blend label files.

`calibrate` writes every member as `judge --panel` needs it: model string, prompt, mode and
options (from the panel that judged the seed set, or parsed from a MODEL/PROMPT/MODE judge
id). A judge that came from a label file has no model: `--judge-model NAME=MODEL[/PROMPT[/MODE]]`
names one; without it the judge is written with its id only, `blend --panel` still applies
the panel to label files, and `judge --panel` refuses it with that hint.

`blend --panel` reads the same file without needing models: the members are matched to
label files by judge id, and the method, tie rule, seed, weights and thresholds come from
the file.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import arguments
from ..errors import InputError, JudgeblenderError
from ..judges.judge import MODES, JudgeSpec, former_ids, judge_id

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

JUDGE_MODEL_HINT = "--judge-model NAME=MODEL[/PROMPT[/MODE]]"


def parse_judge_model(arg: str) -> tuple[str, str, str | None, str | None]:
    """`NAME=MODEL[/PROMPT[/MODE]]` -> (name, model, prompt or None, mode or None).

    A model string may hold slashes (hf:org/model), so PROMPT and MODE are read from the
    right: the last part is a MODE only if it is `generate` or `logprobs`, and then the part
    before it is the PROMPT; otherwise the last part is a PROMPT only if it names a known
    prompt template; the rest is the model string.
    """
    from ..errors import TemplateError
    from ..prompts import get_template

    name, sep, rest = arg.partition("=")
    if not sep or not name or not rest or ":" not in rest:
        raise JudgeblenderError(f"{JUDGE_MODEL_HINT}: expected NAME=PREFIX:MODEL[/PROMPT[/MODE]], got {arg!r}")
    parts = rest.split("/")
    mode = prompt = None
    if len(parts) >= 3 and parts[-1] in MODES:
        mode, prompt, parts = parts[-1], parts[-2], parts[:-2]
    elif len(parts) >= 2:
        try:
            get_template(parts[-1])
            prompt, parts = parts[-1], parts[:-1]
        except (TemplateError, OSError, ValueError):
            pass
    model = "/".join(parts)
    if ":" not in model:
        raise JudgeblenderError(f"{JUDGE_MODEL_HINT}: the model of {name} must be PREFIX:MODEL, got {model!r}")
    return name, model, prompt, mode


def judge_id_fields(judge_id: str) -> tuple[str, str, str] | None:
    """Judge ids written by `judge --panel` are MODEL/PROMPT/MODE; None for any other id."""
    parts = judge_id.rsplit("/", 2)
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 and ":" in parts[0] and parts[2] in MODES else None


def _span(name: str) -> str:
    """LOW..HIGH of a bound declared in arguments.BOUNDS, as a panel file's errors say it."""
    bound = arguments.BOUNDS[name]
    return f"{bound.low:g}..{bound.high:g}"


def _q(text: str) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _q(key)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        if isinstance(v, float) and not math.isfinite(v):
            raise JudgeblenderError(f"cannot write the option value {v!r} to a panel file")
        return repr(v)
    if isinstance(v, str):
        return _q(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{_key(str(k))} = {_value(x)}" for k, x in v.items()) + " }"
    if v is None:
        raise JudgeblenderError("cannot write an option whose value is None to a panel file")
    return _q(str(v))


@dataclass
class PanelChoice:
    """What a panel file's [aggregator] and member list hold."""

    judges: tuple[str, ...]
    method: str = "mv"
    tie: str = "avg"
    seed: int = 0
    weights: Mapping[str, float] | None = None
    thresholds: Sequence[float] | None = None


def specs_for(judges: Sequence[str], panel_specs: Sequence[JudgeSpec] = (), judge_models: Sequence[str] = (),
              mode: str = "generate") -> dict[str, JudgeSpec | None]:
    """How each judge id is run: from the panel that judged (by id), a --judge-model mapping, or
    the id itself when it is MODEL/PROMPT/MODE; None when nothing says (a label-file judge)."""
    mapped: dict[str, JudgeSpec] = {}
    for arg in judge_models:
        name, model, prompt, jmode = parse_judge_model(arg)
        if name in mapped:
            raise JudgeblenderError(f"{JUDGE_MODEL_HINT}: {name} given twice")
        mapped[name] = JudgeSpec(model=model, prompt=prompt or "umbrela", mode=jmode or mode, id=name)
    unknown = sorted(set(mapped) - set(judges))
    if unknown:
        raise JudgeblenderError(f"{JUDGE_MODEL_HINT}: no judge named {', '.join(unknown)} "
                                f"(judges: {', '.join(judges)})")
    by_id = {s.id: s for s in panel_specs}
    for s in panel_specs:  # labels written under a member's former id are that member's
        for old in former_ids(s.model, s.prompt, s.mode):
            by_id.setdefault(old, s)
    out: dict[str, JudgeSpec | None] = {}
    for j in judges:
        if j in mapped:
            out[j] = mapped[j]
        elif j in by_id:
            out[j] = by_id[j]
        elif (fields := judge_id_fields(j)) is not None:
            out[j] = JudgeSpec(model=fields[0], prompt=fields[1], mode=fields[2], id=j)
        else:
            out[j] = None
    return out


def _record_value(v: Any) -> str:
    """A recorded figure as TOML: floats to 6 decimals, and NaN (an undefined statistic) as TOML's
    own `nan`, so a record never fails to be written because a figure is undefined."""
    if isinstance(v, float) and not isinstance(v, bool):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(round(v, 6))
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_record_value(x) for x in v) + "]"
    return _value(v)


def _record_lines(name: str, table: Mapping[str, Any]) -> list[str]:
    """`[name]` with its plain keys, then each sub-table as `[name.key]`."""
    lines = ["", f"[{name}]"]
    subs = [(k, v) for k, v in table.items() if isinstance(v, Mapping)]
    lines += [f"{_key(str(k))} = {_record_value(v)}" for k, v in table.items() if not isinstance(v, Mapping)]
    for k, v in subs:
        lines += _record_lines(f"{name}.{_key(str(k))}", v)
    return lines


def panel_file_text(choice: PanelChoice, specs: Mapping[str, JudgeSpec | None], comments: Sequence[str] = (),
                    name: str = "calibrated", base_options: Mapping[str, Any] | None = None,
                    warning: str | None = None, tables: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """The TOML text: comments first, then name, [aggregator] and one [[judges]] per member.
    A `warning` (calibrate: no judge beats chance) is written as a comment and as the key
    `warning`, which `judge --panel` and `blend --panel` repeat when they use the file.
    `tables` are records written last (`calibrate --select`'s [selection]: how the panel was chosen
    and its held-out figures), readable by any TOML reader and ignored by the panel loaders.

    Options equal to `base_options` (the command line's, which `judge --panel` adds itself)
    are still written: the file must run as written, whatever the next command line says.
    """
    lines = [f"# {c}" if c else "#" for c in comments]
    if warning:
        lines += [f"# WARNING: {warning}", f"warning = {_q(warning)}"]
    lines += [f"name = {_q(name)}", "", "[aggregator]", f"method = {_q(choice.method)}", f"tie = {_q(choice.tie)}",
              f"seed = {int(choice.seed)}"]
    if choice.thresholds:
        lines.append("thresholds = [" + ", ".join(repr(round(float(t), 6)) for t in choice.thresholds) + "]")
    for judge in choice.judges:
        spec = specs.get(judge)
        lines.append("")
        if spec is None:
            lines += [f"# {judge!r} came from a label file: `judge --panel` needs its model; re-run calibrate with",
                      f"# {JUDGE_MODEL_HINT} (e.g. {judge}=openai:MODEL/umbrela/generate) or add model/prompt/mode here.",
                      "[[judges]]", f"id = {_q(judge)}"]
        else:
            lines += ["[[judges]]", f"id = {_q(judge)}", f"model = {_q(spec.model)}", f"prompt = {_q(spec.prompt)}",
                      f"mode = {_q(spec.mode)}"]
            options = {**(base_options or {}), **(spec.options or {})}
            if options:
                lines.append(f"options = {_value(options)}")
        if choice.weights is not None:
            lines.append(f"weight = {float(choice.weights[judge])!r}")
    for table_name, table in (tables or {}).items():
        lines += _record_lines(table_name, table)
    return "\n".join(lines) + "\n"


@dataclass
class BlendPanel:
    """A panel file read for blending label files: member ids and the aggregator's settings."""

    name: str
    judges: list[str]
    method: str = "mv"
    tie: str = "avg"
    seed: int = 0
    weights: dict[str, float] | None = None
    thresholds: list[float] | None = None
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    warning: str | None = None
    # member id -> the ids the same member had in files written before judges/judge.py named
    # every judge (`former_ids`): label files named so are this member's too
    aliases: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def blender(self):
        from ..blend import Blender

        kwargs: dict[str, Any] = {"tie": self.tie, "seed": self.seed}
        if self.method == "weighted":
            kwargs["weights"] = self.weights
        if self.thresholds:
            kwargs["thresholds"] = self.thresholds
        try:
            return Blender(self.method, **kwargs)
        except (KeyError, ValueError) as exc:
            raise InputError(self.source, None, "a valid [aggregator]", str(exc)) from None


def load_blend_panel(path: str | Path) -> BlendPanel:
    """Read a panel file for `blend --panel`: models are not needed, ids are (see the module docstring)."""
    from .panel import AGGREGATOR_KEYS, JUDGE_KEYS, PANEL_KEYS, TomlLines, panel_warning

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except FileNotFoundError:
        raise InputError(path, None, "a panel file", "no such file") from None
    except tomllib.TOMLDecodeError as exc:
        at = re.search(r"at line (\d+)", str(exc))
        raise InputError(path, int(at.group(1)) if at else None, "valid TOML", str(exc)) from None
    where = TomlLines(text)
    unknown = sorted(set(data) - PANEL_KEYS)
    if unknown:
        raise InputError(path, where.key(unknown[0]) or where.table(unknown[0]), f"only the keys {sorted(PANEL_KEYS)}",
                         ", ".join(unknown))
    judges = data.get("judges")
    if not isinstance(judges, list) or not judges:
        raise InputError(path, None, "at least one [[judges]] table")
    ids, weights, aliases, headers = [], {}, {}, []
    for n, j in enumerate(judges, start=1):
        header = where.table("judges", n)
        headers.append(header)
        bad = sorted(set(j) - JUDGE_KEYS)
        if bad:
            raise InputError(path, where.key(bad[0], header), f"judge {n}: only the keys {sorted(JUDGE_KEYS)}",
                             ", ".join(bad))
        jid = j.get("id")
        if jid is None and isinstance(j.get("model"), str):
            fields = (j["model"], str(j.get("prompt", "umbrela")), str(j.get("mode", "generate")))
            jid = judge_id(*fields)
            aliases[jid] = former_ids(*fields)
        if not isinstance(jid, str) or not jid:
            raise InputError(path, header, f"judge {n}: an id (the label file's judge name) or a model")
        ids.append(jid)
        try:
            weights[jid] = float(j.get("weight", 1.0))
        except (TypeError, ValueError):
            raise InputError(path, where.key("weight", header), f"judge {n}: a number for weight",
                             str(j.get("weight"))) from None
    arguments.distinct_ids("judges", ids, refuse=lambda i, jid: InputError(
        path, where.key("id", headers[i]), f"judge {i + 1}: a distinct id", jid))
    agg = data.get("aggregator", {})
    bad = sorted(set(agg) - AGGREGATOR_KEYS)
    if bad:
        raise InputError(path, where.key(bad[0], where.table("aggregator")),
                         f"[aggregator]: only the keys {sorted(AGGREGATOR_KEYS)}", ", ".join(bad))
    panel = BlendPanel(name=str(data.get("name", path.stem)), judges=ids, method=str(agg.get("method", "mv")),
                       tie=str(agg.get("tie", "avg")), seed=int(agg.get("seed", 0)), weights=weights,
                       thresholds=agg.get("thresholds"), source=str(path), warning=panel_warning(path, where, data),
                       aliases={k: v for k, v in aliases.items() if v})
    panel.blender()
    return panel


TIEBREAKER_KEYS = {"model", "prompt", "mode", "options", "id", "spread", "margin"}


@dataclass
class TiebreakerTable:
    """A panel file's [tiebreaker] table, read: who it is and when it is consulted (exactly one
    of spread and margin is set; blend/tiebreak.py defines both)."""

    id: str
    model: str | None
    prompt: str
    mode: str
    options: dict[str, Any]
    spread: int | None
    margin: float | None
    aliases: tuple[str, ...] = ()  # the ids it had before (judges/judge.py `former_ids`)

    def measure(self) -> str:
        return f"margin {self.margin:g}" if self.margin is not None else f"spread {self.spread}"


def read_tiebreaker_table(path: str | Path, mode: str = "generate", need_model: bool = True) -> TiebreakerTable | None:
    """The panel file's optional [tiebreaker] table; None when there is none. `judge --panel`
    needs its model; `blend --panel` only its id (the label file's judge name) and measure.

        [tiebreaker]
        model = "openai:llama-3-70b"
        prompt = "umbrela"
        mode = "generate"
        spread = 2          # or: margin = 0.34 (not both; neither: spread 2)
    """
    from ..blend.tiebreak import DEFAULT_SPREAD
    from .panel import TomlLines

    path = Path(path)
    text = path.read_text(encoding="utf-8")
    table = tomllib.loads(text).get("tiebreaker")
    if table is None:
        return None
    where = TomlLines(text)
    header = where.table("tiebreaker")
    if not isinstance(table, dict):
        raise InputError(path, header, "[tiebreaker] as a table")
    bad = sorted(set(table) - TIEBREAKER_KEYS)
    if bad:
        raise InputError(path, where.key(bad[0], header), f"[tiebreaker]: only the keys {sorted(TIEBREAKER_KEYS)}",
                         ", ".join(bad))
    model = table.get("model")
    if (need_model or model is not None) and (not isinstance(model, str) or ":" not in model):
        raise InputError(path, where.key("model", header) or header, "[tiebreaker]: a model string PREFIX:MODEL",
                         str(model))
    if "spread" in table and "margin" in table:
        raise InputError(path, where.key("margin", header), "[tiebreaker]: spread or margin, not both",
                         f"spread = {table['spread']}, margin = {table['margin']}")
    spread, margin = table.get("spread", DEFAULT_SPREAD), table.get("margin")
    if margin is not None:
        spread = None
        if not arguments.in_bounds("margin", margin):
            raise InputError(path, where.key("margin", header), "[tiebreaker]: margin, a number "
                             f"{_span('margin')}", str(margin))
        margin = float(margin)
    elif not arguments.in_bounds("spread", spread):
        raise InputError(path, where.key("spread", header), f"[tiebreaker]: spread, an integer {_span('spread')}",
                         str(spread))
    prompt, jmode = table.get("prompt", "umbrela"), table.get("mode", mode)
    tid, aliases = table.get("id"), ()
    if not tid and model:
        tid, aliases = judge_id(model, str(prompt), jmode), former_ids(model, str(prompt), jmode)
    if not isinstance(tid, str) or not tid:
        raise InputError(path, header, "[tiebreaker]: an id (the label file's judge name) or a model")
    return TiebreakerTable(tid, model, prompt, jmode, dict(table.get("options", {})), spread, margin, aliases)


def load_tiebreaker(path: str | Path, mode: str, options: Mapping[str, Any],
                    **spec_kw) -> tuple[JudgeSpec, int | None, float | None] | None:
    """The [tiebreaker] table as `judge --panel` runs it: (spec, spread, margin), one of the two
    None; None when the panel has no tie-breaker."""
    from ..backends.registry import command_options

    table = read_tiebreaker_table(path, mode)
    if table is None:
        return None
    spec = JudgeSpec(model=table.model, prompt=table.prompt, mode=table.mode, options={**command_options(table.model, options), **table.options},
                     id=table.id, **spec_kw)
    return spec, table.spread, table.margin
