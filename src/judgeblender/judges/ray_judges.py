"""Judges whose model calls run on a Ray cluster: the judges' side of backends/ray_executor.py.

The Ray backend is a backend like the others and builds no judge; here the judges are built
around it, checked before any runtime starts, and handed the store's own row functions
(`STORE_ROWS`), so that the workers make each answer's store row, byte for byte what the driver
would. The CLI's `--ray` and `jb.judge(..., ray=...)` both come here (`start`), and both leave
the cluster with `done`.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable, Sequence
from typing import Any

from .. import arguments
from ..backends.ray_executor import RayBackend, RowMaker, connect, shutdown
from ..backends.registry import check_options, is_scorer
from ..calls import canonical_json
from ..errors import ArgumentError
from ..store.compact import row_parts, text_id
from .factory import build_judge
from .judge import Judge, JudgeSpec, check_spec

STORE_ROWS = RowMaker(parts=row_parts, text_id=text_id)

__all__ = ["RayJudges", "STORE_ROWS", "check_judges", "done", "ray_judge", "start"]


def check_judges(specs: Sequence[JudgeSpec], scorers_on_driver: bool = True) -> None:
    """Every judge's declaration checked as a local run checks it (judge.check_spec: mode,
    prompt, model prefix, options), on the driver, before Ray is started or joined: a mistake
    is one error line, with no runtime started and no worker built. Scorers (`embed:`) run on
    the driver with a panel (RayJudges); a judge of its own on Ray must be an LLM judge."""
    for spec in specs:
        if not is_scorer(spec.model):
            check_spec(spec)
        elif scorers_on_driver:
            check_options(spec.model, spec.options, spec.id or spec.model)
        else:
            raise ArgumentError("ray", f"LLM judges only ({spec.model} is an embedding scorer: run it without Ray)",
                                spec.model)


def ray_judge(spec: JudgeSpec, workers: int | None = None) -> Judge:
    """A Judge for `spec` whose calls run on the Ray cluster this process has joined."""
    check_judges([spec], scorers_on_driver=False)  # here, not on each worker
    return Judge(spec, backend=RayBackend(spec.model, spec.options, workers, rows=STORE_ROWS))


def _backend_key(spec: JudgeSpec) -> tuple[str, str]:
    return spec.model, canonical_json(spec.options)


class RayJudges:
    """Builds the judges of a panel, a jury or a cascade with their calls on Ray: a drop-in for
    `build_judge` (`run_panel(..., make_judge=RayJudges(...))`).

    - Members with the same model and options (a prompt panel: one model, several prompts) share
      one set of workers, so the model is loaded once per worker, not once per member.
    - Distinct models each get their own workers, started as their first judge is built; each
      plans with an even share of the cluster's CPUs and GPUs (`specs` names the judges that hold
      workers at the same time, so the split is known before the first one starts). The engine
      runs the members one after another, so the calls outstanding stay bounded by one model's
      workers.
    - Embedding scorers (`embed:`, `cross:`) are cheap and run on the driver, as without Ray.
    """

    def __init__(self, specs: Sequence[JudgeSpec], workers: int | None = None,
                 on_start: Callable[[str, RayBackend], None] | None = None):
        """`on_start(model, backend)` is called each time a model's workers have started."""
        self.workers = workers
        self.on_start = on_start
        self._keys = {_backend_key(s) for s in specs if not is_scorer(s.model)}
        self.backends: dict[tuple[str, str], RayBackend] = {}

    def __call__(self, spec: JudgeSpec) -> Any:
        if is_scorer(spec.model):
            return build_judge(spec)
        key = _backend_key(spec)
        backend = self.backends.get(key)
        if backend is None or not backend.actors:  # new, or closed by a judge that used it before
            # the judges named up front hold workers together; one asked for later (a panel's
            # tie-breaker, after its members closed) shares with whatever still holds workers
            live = sum(1 for b in self.backends.values() if b.actors)
            share = len(self._keys) if key in self._keys else live + 1
            backend = self.backends[key] = RayBackend(spec.model, spec.options, self.workers, share=max(1, share),
                                                      rows=STORE_ROWS)
            if self.on_start is not None:
                self.on_start(spec.model, backend)
        return Judge(spec, backend=backend)

    def close(self) -> None:
        for backend in self.backends.values():
            backend.close()


def start(specs: Sequence[JudgeSpec], address: str, workers: int | None = None, batch: bool = False,
          on_start: Callable[[str, RayBackend], None] | None = None, scorers_on_driver: bool = True) -> RayJudges:
    """Join (or start, for "local") the Ray cluster at `address` and return the factory of the
    judges whose calls run there (close it, then call `done`, when the run ends). The judges'
    declarations and the options are checked first, before any runtime starts. `batch`: the run
    also reads or writes Batch API files, which answer the calls instead of any worker: an error.
    `scorers_on_driver`: False where the one judge of a run must itself be an LLM judge."""
    arguments.text("ray", address)
    if workers is not None:
        arguments.bounded("ray_workers", workers)
    if batch:
        raise ArgumentError("ray", "no Ray cluster when Batch API files (batch_read, batch_write) answer the calls",
                            address)
    check_judges(specs, scorers_on_driver)
    connect(address)
    atexit.register(done)  # the runtime (if ours) and the workers go, whatever happens
    return RayJudges(specs, workers, on_start=on_start)


def done() -> None:
    """Leave the cluster; a runtime started for "local" stops with it."""
    shutdown()
