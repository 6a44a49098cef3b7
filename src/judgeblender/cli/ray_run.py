"""`--ray` for the commands that run judges: join or start Ray, build the judge on it, stop after.

The command's own inputs (pairs, queries, passages) are checked before these are called; here
the judges' declarations and the Ray options are, before Ray is started or joined."""

from __future__ import annotations

import atexit

from ..errors import JudgeblenderError
from .console import err_console


def ray_judge_cli(spec, address: str, workers: int | None, batch: object = None):
    """The judge for `spec`, its calls run by Ray workers (see judges/ray_executor.py)."""
    from ..judges.ray_executor import check_judges, connect, ray_judge

    _check_options(batch, workers)
    check_judges([spec], scorers_on_driver=False)  # before Ray starts
    connect(address)
    atexit.register(ray_done)  # the runtime (if ours) and the workers go, whatever happens
    judge = ray_judge(spec, workers)
    _say_started(spec.model, judge.backend)
    return judge


def ray_judges_cli(specs, address: str, workers: int | None, batch: object = None):
    """For the commands that run several judges (judge --panel, grade, cascade): a judge factory
    (judges/ray_executor.py's RayJudges) whose LLM judges' calls run on Ray workers; call its
    `close()` at the end."""
    from ..judges.ray_executor import RayJudges, check_judges, connect

    _check_options(batch, workers)
    check_judges(specs)  # before Ray starts
    connect(address)
    atexit.register(ray_done)
    return RayJudges(specs, workers, on_start=_say_started)


def _check_options(batch: object, workers: int | None) -> None:
    if batch:
        raise JudgeblenderError("--ray and --batch-read/--batch-write cannot be combined")
    if workers is not None and workers < 1:
        raise JudgeblenderError(f"--ray-workers must be at least 1, got {workers}")


def _say_started(model: str, backend) -> None:
    plan = backend.plan
    nodes = len({w["node"] for w in backend.workers_info})
    err_console.print(f"Ray: {plan.workers} worker{'s' if plan.workers != 1 else ''} of {model} on {nodes} node(s), "
                      f"{plan.cpus:g} CPU and {plan.gpus:g} GPU each, at most {backend.max_concurrency} calls "
                      "outstanding", highlight=False, soft_wrap=True)


def ray_done() -> None:
    """Leave the cluster; a runtime started by --ray local stops with it."""
    from ..judges.ray_executor import shutdown

    shutdown()
