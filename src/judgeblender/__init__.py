"""judgeblender: relevance judgments with juries of LLM judges, and how far to trust them.

The notebook API (api.py) is exported here: `judge`, then `Judged.labels` / `.blend()`,
`blend_labels`, `calibrate`, `agreement`, `correlate`, `panel`, `Jury`; labels go in as
DataFrames, qrels dicts, ir_measures Qrel tuples or files (convert.py). The evaluation path
(workflow.py) too: `pool`, `find_holes`, `sample_seed`, `fill`, `experiment`, `estimate`,
`write_report`, taking run files, frames, dicts or PyTerrier transformers. No exported name
equals a sub-package's or module's name: importing `judgeblender.report` would replace a
function `report` (tests/test_exports.py imports every module and checks).

The flow reads off the sub-packages: pairs -> judges (prompts, backends, parse, store) ->
blend -> panels (judges and their blend) -> evaluate, report. Under them, ground-floor modules
that import nothing of the project but each other: errors, calls (call types and keys), hashing,
fileio (atomic writes), paths (caches) and kappa. Nothing here imports the command line (cli/).
docs/architecture.md says what each package does and may import (a test holds the code to it).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

__version__ = "0.1.0"

# The public names, each from its sub-package, imported on first use: `import judgeblender`
# stays cheap for commands that need none of the judging machinery (asyncio, pydantic).
_EXPORTS = {
    # the notebook API (api.py): judge, blend, calibrate and measure with DataFrames
    "judge": "api", "Judged": "api", "panel": "api", "ballots": "api", "blend_labels": "api",
    "calibrate": "api", "Calibrated": "api", "agreement": "api", "correlate": "api", "labels_frame": "api",
    "qrels": "api",
    # the evaluation path from systems to a table and a report, holes in the human labels filled
    "experiment": "workflow", "pool": "workflow", "find_holes": "workflow", "sample_seed": "workflow",
    "fill": "workflow", "estimate": "workflow", "write_report": "workflow",
    "AgreementReport": "evaluate", "BallotTable": "blend", "Blender": "blend", "Panel": "panels.panel",
    "Jury": "jury", "JudgeblenderError": "errors",
    "CallRequest": "calls", "CallResult": "calls", "Message": "calls",
    "create_backend": "backends.registry", "register": "backends.registry",
    "Judge": "judges", "JudgeRun": "judges", "JudgeSpec": "judges", "judge_pairs": "judges",
    "Pair": "pairs", "read_corpus": "pairs", "read_pairs": "pairs", "read_qrels": "pairs",
    "read_queries": "pairs", "read_run": "pairs",
    "get_template": "prompts", "list_templates": "prompts",
    "CallStore": "store",
    # judgeblender serve from Python (issue 33): the same Judged as `judge`, judged by the service
    "Client": "serve.client",
    # example data built from its public sources (data/manifest.toml), or JUDGEBLENDER_DATA's copy
    "load_dataset": "datasets",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from .api import (Calibrated, Judged, agreement, ballots, blend_labels, calibrate, correlate, judge,
                      labels_frame, panel, qrels)
    from .blend import BallotTable, Blender
    from .workflow import estimate, experiment, fill, find_holes, pool, sample_seed, write_report
    from .evaluate import AgreementReport
    from .panels.panel import Panel
    from .jury import Jury
    from .errors import JudgeblenderError
    from .calls import CallRequest, CallResult, Message
    from .backends.registry import create_backend, register
    from .judges import Judge, JudgeRun, JudgeSpec, judge_pairs
    from .pairs import Pair, read_corpus, read_pairs, read_qrels, read_queries, read_run
    from .serve.client import Client
    from .datasets import load_dataset
    from .prompts import get_template, list_templates
    from .store import CallStore


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
