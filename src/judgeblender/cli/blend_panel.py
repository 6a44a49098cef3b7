"""`blend --panel FILE` (a calibrated panel applied to label files) and `blend --tiebreaker NAME=PATH`.

A panel file's [tiebreaker] table applies too: its judge's labels come from `--tiebreaker
NAME=PATH`, or from a label file among the judges named after the tie-breaker's id (it then
sits out of the panel's blend); its spread or margin applies unless `--spread` or `--margin`
overrides it. A panel with a tie-breaker and no labels for it is an error naming both.
"""

from __future__ import annotations

from pathlib import Path

from ..blend import BallotTable, Blender
from ..blend.load import parse_judge_arg
from ..errors import InputError
from ..panels.panel_file import load_blend_panel
from ..pairs.qrels import read_qrels_abstaining


def panel_blender(path: Path, table: BallotTable) -> tuple[Blender, BallotTable, list[str]]:
    """The panel's blender and the table cut to its members; lines saying what was used and dropped."""
    panel = load_blend_panel(path)
    # a member's labels written under the id it had before (judges/judge.py `former_ids`) are its own
    table = table.renamed({old: j for j in panel.judges if j not in table.judges
                           for old in panel.aliases.get(j, ()) if old in table.judges})
    missing = [j for j in panel.judges if j not in table.judges]
    if missing:
        raise InputError(path, None, f"a label file for every member of panel {panel.name} (name files NAME=PATH)",
                         f"none for {', '.join(missing)}; given: {', '.join(table.judges)}")
    unused = [j for j in table.judges if j not in panel.judges]
    lines = [f"panel {panel.name} ({path}): members {', '.join(panel.judges)}; method {panel.method}, tie {panel.tie}"
             + (f", thresholds {panel.thresholds}" if panel.thresholds else "")]
    if unused:
        lines.append(f"not on the panel, left out: {', '.join(unused)}")
    if panel.warning:
        lines.append(f"warning: panel {path}: {panel.warning}")
    return panel.blender(), table.only_judges(panel.judges), lines


def read_tiebreaker(arg: str) -> tuple[str, dict[tuple[str, str], int | None]]:
    """`PATH` or `NAME=PATH` of the tie-breaker's qrels: pair -> label, None where unreadable."""
    name, path = parse_judge_arg(arg)
    answers, _ = read_qrels_abstaining(path, allowed=range(4))
    return name, answers


def blend_tiebreaker(panel: Path | None, judges: list[str], tiebreaker: str | None, spread: int | None,
                     margin: float | None) -> tuple[list[str], tuple | None, list[str]]:
    """Which tie-breaker `blend` applies and how: (the judge files left for the blend,
    (name, answers, spread, margin) or None, notes). See the module docstring."""
    from ..panels.panel_file import read_tiebreaker_table

    if spread is not None and margin is not None:
        raise InputError("--margin", None, "one disagreement measure at a time: --spread N or --margin T",
                         f"--spread {spread} and --margin {margin:g}")
    table = read_tiebreaker_table(panel, need_model=False) if panel is not None else None
    notes: list[str] = []
    if table is None and tiebreaker is None:
        if spread is not None or margin is not None:
            raise InputError("--spread" if spread is not None else "--margin", None,
                             "a tie-breaker to consult (--tiebreaker NAME=PATH, or a panel file with [tiebreaker])")
        return judges, None, notes
    if table is not None and spread is None and margin is None:
        spread, margin = table.spread, table.margin
    elif spread is None and margin is None:
        spread = 2
    if tiebreaker is not None:
        name, answers = read_tiebreaker(tiebreaker)
        if table is not None:
            notes.append(f"tie-breaker of panel {panel}: {table.id}, labels from {tiebreaker}")
    else:
        own = [j for j in judges if parse_judge_arg(j)[0] in (table.id, *table.aliases)]
        if not own:
            raise InputError(panel, None, f"the labels of the panel's tie-breaker {table.id}: give "
                                          f"--tiebreaker {table.id}=PATH (or a label file {table.id}=PATH)",
                             "none given")
        judges = [j for j in judges if j not in own]
        name, answers = read_tiebreaker(own[0])
        notes.append(f"tie-breaker of panel {panel}: {table.id}, labels from {parse_judge_arg(own[0])[1]}")
    return judges, (name, answers, spread, margin), notes
