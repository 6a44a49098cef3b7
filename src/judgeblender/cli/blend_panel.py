"""`blend --panel FILE` (a calibrated panel applied to label files) and `blend --tiebreaker NAME=PATH`."""

from __future__ import annotations

from pathlib import Path

from ..blend import BallotTable, Blender
from ..blend.load import parse_judge_arg
from ..errors import InputError
from ..judges.panel_file import load_blend_panel
from ..pairs.qrels import read_qrels_abstaining


def panel_blender(path: Path, table: BallotTable) -> tuple[Blender, BallotTable, list[str]]:
    """The panel's blender and the table cut to its members; lines saying what was used and dropped."""
    panel = load_blend_panel(path)
    missing = [j for j in panel.judges if j not in table.judges]
    if missing:
        raise InputError(path, None, f"a label file for every member of panel {panel.name} (name files NAME=PATH)",
                         f"none for {', '.join(missing)}; given: {', '.join(table.judges)}")
    unused = [j for j in table.judges if j not in panel.judges]
    lines = [f"panel {panel.name} ({path}): members {', '.join(panel.judges)}; method {panel.method}, tie {panel.tie}"
             + (f", thresholds {panel.thresholds}" if panel.thresholds else "")]
    if unused:
        lines.append(f"not on the panel, left out: {', '.join(unused)}")
    return panel.blender(), table.only_judges(panel.judges), lines


def read_tiebreaker(arg: str) -> tuple[str, dict[tuple[str, str], int | None]]:
    """`PATH` or `NAME=PATH` of the tie-breaker's qrels: pair -> label, None where unreadable."""
    name, path = parse_judge_arg(arg)
    answers, _ = read_qrels_abstaining(path, range(4))
    return name, answers
