"""`--ray` for the commands that run judges (judge --panel, grade, cascade): the library's Ray
start (judges/ray_judges.py: the declarations checked, the cluster joined, the judges built on
it), with a line on stderr as each model's workers start."""

from __future__ import annotations

from ..judges.ray_judges import RayJudges, done, start
from .console import err_console


def ray_judges_cli(specs, address: str, workers: int | None, batch: object = None) -> RayJudges:
    """A judge factory whose LLM judges' calls run on Ray workers; call its `close()`, then
    `ray_done()`, at the end."""
    return start(specs, address, workers, bool(batch), on_start=say_started)


def say_started(model: str, backend) -> None:
    plan = backend.plan
    nodes = len({w["node"] for w in backend.workers_info})
    err_console.print(f"Ray: {plan.workers} worker{'s' if plan.workers != 1 else ''} of {model} on {nodes} node(s), "
                      f"{plan.cpus:g} CPU and {plan.gpus:g} GPU each, at most {backend.max_concurrency} calls "
                      "outstanding", highlight=False, soft_wrap=True)


def ray_done() -> None:
    """Leave the cluster; a runtime started by --ray local stops with it."""
    done()
