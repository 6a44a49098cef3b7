"""`--ray` for the commands that run judges: join or start Ray, build the judge on it, stop after."""

from __future__ import annotations

import atexit

from ..errors import JudgeblenderError
from .console import err_console


def ray_judge_cli(spec, address: str, workers: int | None, batch: object = None):
    """The judge for `spec`, its calls run by Ray workers (see judges/ray_executor.py)."""
    from ..judges.ray_executor import connect, ray_judge

    if batch:
        raise JudgeblenderError("--ray and --batch-read/--batch-write cannot be combined")
    if workers is not None and workers < 1:
        raise JudgeblenderError(f"--ray-workers must be at least 1, got {workers}")
    connect(address)
    atexit.register(ray_done)  # the runtime (if ours) and the workers go, whatever happens
    judge = ray_judge(spec, workers)
    plan = judge.backend.plan
    nodes = len({w["node"] for w in judge.backend.workers_info})
    err_console.print(f"Ray: {plan.workers} worker{'s' if plan.workers != 1 else ''} of {spec.model} on {nodes} node(s), {plan.cpus:g} CPU "
                      f"and {plan.gpus:g} GPU each, at most {judge.backend.max_concurrency} calls outstanding",
                      highlight=False)
    return judge


def ray_done() -> None:
    """Leave the cluster; a runtime started by --ray local stops with it."""
    from ..judges.ray_executor import shutdown

    shutdown()
