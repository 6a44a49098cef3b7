"""Panels: several judges and the aggregator that pools their labels into one.

A panel file (TOML) lists the judges and the aggregator:

    name = "my-panel"
    [aggregator]
    method = "mv"          # see `judgeblender blend --methods`
    tie = "avg"
    seed = 0
    [[judges]]
    model = "llamacpp:default"
    prompt = "thomas"
    mode = "logprobs"      # optional; else the command's --mode
    weight = 1.0           # used by the `weighted` method
    id = "qwen-thomas"     # optional, must be unique
    options = { n_threads = 2 }

Presets mirror the papers: `promptblender` (one model, prompts Thomas / MultiCriteria / Sun
two-step), `llmblender` (three models, each with its own prompt), `umbrela` (one judge).
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import arguments, validate
from ..blend import BallotTable, Blender, BlendResult, Vote
from ..errors import ArgumentError, InputError, JudgeblenderError, TemplateError
from ..prompts import get_template
from ..judges.engine import JudgeRun
from ..judges.judge import JudgeSpec, spec_id

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PROMPTBLENDER_PROMPTS = ("thomas", "multicriteria", "sun-two-step")
# Offline, only two embedded models exist: the third LLMBlender seat reuses Qwen with its own prompt.
LLMBLENDER_DEFAULT = (("llamacpp:default", "multicriteria"), ("llamacpp:gemma-270m", "thomas"),
                      ("llamacpp:default", "sun-two-step"))


@dataclass
class Panel:
    name: str
    judges: list[JudgeSpec]
    method: str = "mv"
    tie: str = "avg"
    seed: int = 0
    thresholds: list[float] | None = None
    source: str = "preset"
    warning: str | None = None  # written by calibrate when nothing could be learned (see the `warning` key)

    def weights(self) -> dict[str, float] | None:
        return {s.id: s.weight for s in self.judges} if self.method == "weighted" else None

    def blender(self) -> Blender:
        kwargs: dict[str, Any] = {"tie": self.tie, "seed": self.seed, "weights": self.weights()}
        if self.thresholds:
            kwargs["thresholds"] = self.thresholds
        try:
            return Blender(self.method, **kwargs)
        except (KeyError, ValueError) as exc:
            raise JudgeblenderError(f"panel {self.name} ({self.source}): {exc}") from None


def _assign_ids(specs: list[JudgeSpec], panel: str) -> None:
    """Every member's id (its own, else MODEL/PROMPT/MODE: judges/judge.py `spec_id`), distinct."""
    for spec in specs:
        spec.id = spec_id(spec)
    arguments.distinct_ids(f"panel {panel}", (s.id for s in specs))


def preset(name: str, models: list[str] | None, mode: str, options: dict[str, Any], **spec_kw) -> Panel:
    from ..backends.registry import command_options

    if name == "promptblender":
        model = (models or ["llamacpp:default"])[0]
        specs = [JudgeSpec(model=model, prompt=p, mode=mode, options=command_options(model, options), **spec_kw)
                 for p in PROMPTBLENDER_PROMPTS]
    elif name == "llmblender":
        seats = LLMBLENDER_DEFAULT
        if models:
            if len(models) != 3:
                raise ArgumentError("models", "three models for the llmblender preset", models)
            seats = tuple(zip(models, (p for _, p in LLMBLENDER_DEFAULT)))
        specs = [JudgeSpec(model=m, prompt=p, mode=mode, options=command_options(m, options), **spec_kw)
                 for m, p in seats]
    elif name == "umbrela":
        specs = [JudgeSpec(model=(models or ["llamacpp:default"])[0], prompt="umbrela", mode=mode,
                           options=dict(options), **spec_kw)]
    else:
        raise ArgumentError("panel", "a panel preset (promptblender, llmblender, umbrela) or a panel .toml file",
                            described=f"unknown panel preset {name!r}")
    _assign_ids(specs, name)
    return Panel(name=name, judges=specs, method="mv", tie="avg")


# [tiebreaker]: panels/panel_file.py; [selection]: what `calibrate --select` measured (a record, not read)
PANEL_KEYS = {"name", "aggregator", "judges", "tiebreaker", "warning", "selection"}
JUDGE_KEYS = {"model", "prompt", "mode", "weight", "id", "options"}
AGGREGATOR_KEYS = {"method", "tie", "seed", "thresholds"}


class TomlLines:
    """Where things stand in a TOML file's text, for errors: tomllib gives values, not lines."""

    def __init__(self, text: str):
        self.lines = text.splitlines()

    def table(self, name: str, n: int = 1) -> int | None:
        """Line of the n-th `[name]` or `[[name]]` header (None when the table is written inline)."""
        header = re.compile(rf"\s*\[\[?\s*{re.escape(name)}\s*\]\]?\s*(#.*)?$")
        found = [i for i, line in enumerate(self.lines, start=1) if header.match(line)]
        return found[n - 1] if len(found) >= n else None

    def key(self, key: str, table_line: int | None = 0) -> int | None:
        """Line of `key = ...` in the table whose header is at table_line (0: the top level), else
        the header's line."""
        if table_line is None:
            return None
        assignment = re.compile(rf"\s*(\"{re.escape(key)}\"|'{re.escape(key)}'|{re.escape(key)})\s*=")
        for i in range(table_line, len(self.lines)):
            if self.lines[i].lstrip().startswith("["):
                break
            if assignment.match(self.lines[i]):
                return i + 1
        return table_line or None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_judge_fields(path: Path, where_is: TomlLines, header: int | None, where: str, j: dict) -> None:
    """Types and ranges of one [[judges]] table's fields (a string where a table belongs is an error
    naming its line, not a TypeError after the calls)."""
    checks = {
        "prompt": (lambda v: isinstance(v, str) and v != "", "a prompt name or .toml path (a string)"),
        "mode": (lambda v: v in ("generate", "logprobs"), "mode 'generate' or 'logprobs'"),
        "weight": (lambda v: _is_number(v) and v >= 0, "a finite number >= 0 for weight"),
        "id": (lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string id"),
        "options": (lambda v: isinstance(v, dict), "options as a table ({ key = value, ... })"),
    }
    for key, (ok, expected) in checks.items():
        if key in j and not ok(j[key]):
            raise InputError(path, where_is.key(key, header), f"{where}: {expected}", repr(j[key]))


def _check_aggregator_fields(path: Path, where_is: TomlLines, data: dict) -> None:
    """Types and ranges of the panel's name and [aggregator] fields."""
    if "name" in data and not isinstance(data["name"], str):
        raise InputError(path, where_is.key("name"), "name as a string", repr(data["name"]))
    agg = data.get("aggregator", {})
    if not isinstance(agg, dict):
        raise InputError(path, where_is.key("aggregator"), "[aggregator] as a table", repr(agg))
    line = where_is.table("aggregator")
    checks = {
        "method": (lambda v: isinstance(v, str), "[aggregator]: method as a string"),
        "tie": (lambda v: isinstance(v, str), "[aggregator]: tie as a string"),
        "seed": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
                 "[aggregator]: seed, an integer >= 0"),
        "thresholds": (lambda v: isinstance(v, list) and all(_is_number(x) for x in v),
                       "[aggregator]: thresholds, a list of finite numbers"),
    }
    for key, (ok, expected) in checks.items():
        if key in agg and not ok(agg[key]):
            raise InputError(path, where_is.key(key, line), expected, repr(agg[key]))


def load_panel(path: str | Path, mode: str, options: dict[str, Any], **spec_kw) -> Panel:
    """Read and check a panel file: unknown keys, prompts or model prefixes are errors naming it."""
    from ..backends.registry import check_options, command_options, is_scorer, known_prefixes

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except FileNotFoundError:
        raise InputError(path, None, "a panel file", "no such file") from None
    except tomllib.TOMLDecodeError as exc:
        at = re.search(r"at line (\d+)", str(exc))  # tomllib has `lineno` only from Python 3.14
        raise InputError(path, getattr(exc, "lineno", None) or (int(at.group(1)) if at else None), "valid TOML",
                         str(exc)) from None
    where_is = TomlLines(text)
    unknown = sorted(set(data) - PANEL_KEYS)
    if unknown:
        line = where_is.key(unknown[0]) or where_is.table(unknown[0])
        raise InputError(path, line, f"only the keys {sorted(PANEL_KEYS)}", ", ".join(unknown))
    judges = data.get("judges")
    if not isinstance(judges, list) or not judges:
        raise InputError(path, None, "at least one [[judges]] table")
    prefixes = set(known_prefixes())
    specs = []
    for n, j in enumerate(judges, start=1):
        where = f"judge {n}"
        header = where_is.table("judges", n)
        bad = sorted(set(j) - JUDGE_KEYS)
        if bad:
            raise InputError(path, where_is.key(bad[0], header), f"{where}: only the keys {sorted(JUDGE_KEYS)}",
                             ", ".join(bad))
        model = j.get("model")
        if model is None or model == "":  # a label-file judge written by `calibrate`: say how to name its model
            raise InputError(path, header, f"{where} ({j.get('id', '?')}): a model; it came from a label file: "
                             "re-run `calibrate --judge-model NAME=MODEL[/PROMPT[/MODE]]` or set model here")
        if not isinstance(model, str) or model.partition(":")[0] not in prefixes or ":" not in model:
            raise InputError(path, where_is.key("model", header),
                             f"{where}: a model string PREFIX:MODEL with PREFIX in {sorted(prefixes)}", str(model))
        _check_judge_fields(path, where_is, header, where, j)
        validate.model_string(model)
        prompt = j.get("prompt", "umbrela")
        if not is_scorer(model):
            try:
                validate.prompt_ref(prompt)
                get_template(prompt)
            except TemplateError as exc:
                raise InputError(path, where_is.key("prompt", header), f"{where}: a known prompt",
                                 f"{prompt} ({exc})") from None
        judge_options = {**command_options(model, options), **j.get("options", {})}
        try:  # now, naming the line, not when the judge is built
            check_options(model, judge_options, j.get("id") or model)
        except JudgeblenderError as exc:
            raise InputError(path, where_is.key("options", header), f"{where}: options its backend declares",
                             str(exc)) from None
        specs.append(JudgeSpec(model=model, prompt=prompt, mode=j.get("mode", mode), options=judge_options,
                               weight=float(j.get("weight", 1.0)), id=j.get("id"), **spec_kw))
    _assign_ids(specs, str(path))
    agg = data.get("aggregator", {})
    _check_aggregator_fields(path, where_is, data)
    bad = sorted(set(agg) - AGGREGATOR_KEYS)
    if bad:
        raise InputError(path, where_is.key(bad[0], where_is.table("aggregator")),
                         f"[aggregator]: only the keys {sorted(AGGREGATOR_KEYS)}", ", ".join(bad))
    panel = Panel(name=data.get("name", path.stem), judges=specs, method=agg.get("method", "mv"),
                  tie=agg.get("tie", "avg"), seed=int(agg.get("seed", 0)), thresholds=agg.get("thresholds"),
                  source=str(path), warning=panel_warning(path, where_is, data))
    panel.blender()  # fail now on an unknown method, tie rule or missing weight, not after judging
    return panel


def panel_warning(path: Path, where_is: TomlLines, data: dict) -> str | None:
    """The file's `warning` key (calibrate marks a panel no better than chance with it), checked."""
    warning = data.get("warning")
    if warning is not None and not isinstance(warning, str):
        raise InputError(path, where_is.key("warning"), "warning: a string", repr(warning))
    return warning


def get_panel(name_or_path: str, models: list[str] | None, mode: str, options: dict[str, Any], **spec_kw) -> Panel:
    if name_or_path.endswith(".toml") or Path(name_or_path).exists():
        return load_panel(name_or_path, mode, options, **spec_kw)
    return preset(name_or_path, models, mode, options, **spec_kw)


def ballots_from_run(run: JudgeRun) -> BallotTable:
    """Every judge's label (and distribution, if any) per pair; an invalid judgment abstains."""
    judges = list(run.judgments)
    rows = []
    for pair in run.pairs:
        votes = {}
        for jid in judges:
            j = run.judgments[jid][pair]
            probs = tuple(j.probs[str(k)] for k in range(4)) if j.probs and j.label is not None else None
            votes[jid] = Vote(j.label, probs)
        rows.append((pair, votes))
    table = BallotTable.from_votes(rows, judges)
    invalid = {jid: sum(j.label is None for j in run.judgments[jid].values()) for jid in judges}
    return BallotTable(table.pairs, table.judges, table.labels, table.probs, invalid)


def blend_run(run: JudgeRun, panel: Panel) -> BlendResult:
    return panel.blender().blend(ballots_from_run(run))
