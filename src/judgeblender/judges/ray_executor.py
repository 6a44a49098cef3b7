"""Judge on a Ray cluster (`judgeblender judge --ray ADDRESS`): the calls run in Ray actors.

The driver keeps the contract: prompts are rendered, keyed and looked up in the store there,
exactly as in a local run, by the same engine (judges/engine.py). Only the model calls leave it:
the judge's backend is a `RayBackend`, whose `aexecute` sends the call to one of N actors and
awaits its ObjectRef (Ray's asyncio integration: each answer resumes its caller as it arrives,
as a `ray.wait` loop would, and the engine commits it to the store before it counts).

- Each actor (`JudgeWorker`) builds the backend from the judge's spec (model string + options)
  once, in its own process, and keeps it: an embedded model is loaded once per worker; a served
  endpoint is called by every worker with its share of the judge's concurrency.
- The calls outstanding at once are bounded: `workers x per-worker concurrency` (the backend's
  own concurrency, 1 for an embedded model; for a served model the judge's `concurrency` split
  over the workers). A killed driver loses at most those.
- A killed worker loses nothing: actors restart (`MAX_RESTARTS`) and Ray re-runs their calls in
  flight (`MAX_TASK_RETRIES`); a call the model answered but whose answer died with the worker
  is asked again, so the model sees at most the calls in flight at the kill a second time.
  A worker killed more often than it may restart is gone for good: its calls go to the live
  workers; with none left, every call still to make fails (exit status 3, answers kept).
- The driver keeps its own SIGTERM handler (Ray's would exit 1 or 15, without the resume line)
  and raylets' messages go to stderr, off `--json`'s stdout.
- Every answer carries the worker that gave it (`extra["worker"]`: Ray node id and pid); it is
  stored with the call and shown in the judgment's details (`workers`).
- Resources per worker come from the judge's options: `ray_cpus` (default: `n_threads`, else 1,
  for embedded models; 0.5 for a served client), `ray_gpus` (default: 1 when an `hf` judge's
  `device` is cuda, else 0).

Ray is imported only here, and only when `--ray` is given.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from ..backends.base import Backend, LogprobsUnsupported
from ..backends.registry import command_options
from ..calls import CallRequest, CallResult
from ..errors import BackendError, JudgeblenderError, MissingExtraError

MAX_RESTARTS = 3  # per actor: a worker killed (OOM, node loss, kill -9) comes back this often
MAX_TASK_RETRIES = 3  # per call: re-run on the restarted (or another) worker
LOCAL_OBJECT_STORE_BYTES = 256 * 1024**2  # --ray local: a 2-core, 24 GB machine stays usable
CONNECT_TIMEOUT_S = 8.0  # a dead address is an error within 10 s, not a hang
START_TIMEOUT_S = 600.0  # workers loading their model (an embedded model may take minutes)
SERVED_CPUS_PER_WORKER = 0.5
RAY_OPTION_KEYS = ("ray_cpus", "ray_gpus")
EMBEDDED_PREFIXES = ("llamacpp", "hf")


def import_ray():
    """Ray, or an error naming the extra that installs it."""
    try:
        import ray
    except ImportError as exc:
        raise MissingExtraError("ray", "ray", "--ray (judging on a Ray cluster)") from exc
    return ray


def _probe(host: str, port: int, what: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise JudgeblenderError(f"no Ray cluster answers at {what} ({exc.strerror or exc}); "
                                "start one (`ray start --head`) or use --ray local") from None


def _host_port(address: str, default_port: int) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep:
        return address, default_port
    try:
        return host.strip("[]") or "127.0.0.1", int(port)
    except ValueError:
        raise JudgeblenderError(f"--ray {address!r}: expected local, auto, HOST:PORT or ray://HOST:PORT") from None


def connect(address: str) -> bool:
    """Start or join a Ray runtime; True when this call started it (so it is ours to stop).

    local: a new runtime on this machine, bound to 127.0.0.1, object store capped at
    LOCAL_OBJECT_STORE_BYTES, this machine's CPUs; auto: the cluster named by $RAY_ADDRESS;
    HOST:PORT (a head's GCS port) or ray://HOST:PORT (Ray client). The address is probed with a
    plain socket first: ray.init on a dead address hangs for minutes."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray = import_ray()
    if ray.is_initialized():  # a notebook or a test already joined a cluster: use it
        return False
    _raylet_messages_to_stderr()
    if address == "local":
        _init_keeping_signal_handlers(
            ray, address="local", num_cpus=os.cpu_count() or 1, object_store_memory=LOCAL_OBJECT_STORE_BYTES,
            include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False, configure_logging=False)
        return True
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS", "").strip()
        if not address or address == "auto":
            raise JudgeblenderError("--ray auto joins the cluster named by RAY_ADDRESS, which is not set; "
                                    "set it to HOST:PORT or ray://HOST:10001, or use --ray local")
    if address.startswith("ray://"):
        _probe(*_host_port(address[len("ray://"):], 10001), address)
    else:
        _probe(*_host_port(address, 6379), address)
    try:
        _init_keeping_signal_handlers(ray, address=address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, TimeoutError, RuntimeError) as exc:
        hint = ""
        if not os.environ.get("RAY_AUTH_MODE"):  # Ray never turns token auth on for an explicit address
            hint = ("; a cluster with token authentication (what `ray start` turns on by default) answers only a "
                    "driver with RAY_AUTH_MODE=token and the cluster's token (RAY_AUTH_TOKEN or ~/.ray/auth_token)")
        raise JudgeblenderError(f"could not join the Ray cluster at {address}: {exc}{hint}") from None
    return False


def _raylet_messages_to_stderr() -> None:
    """Ray's driver prints the errors raylets publish ("A worker died or was killed ...") on
    stdout, whatever log_to_driver says (ray/_private/worker.py: listen_error_messages calls
    print_to_stdstream with is_err False), where `--json` writes its summary. They go to stderr,
    with the rest of the run's messages. print_to_stdstream is looked up at each message, so
    wrapping it once per process is enough; a Ray without it is left alone."""
    try:
        from ray._private import worker as ray_worker
    except ImportError:
        return
    original = getattr(ray_worker, "print_to_stdstream", None)
    if original is None or getattr(original, "judgeblender_stderr", False):
        return

    def to_stderr(data, *args, **kwargs):
        if isinstance(data, dict) and data.get("pid") == "raylet":
            data = {**data, "is_err": True}
        return original(data, *args, **kwargs)

    to_stderr.judgeblender_stderr = True  # type: ignore[attr-defined]
    ray_worker.print_to_stdstream = to_stderr


def _init_keeping_signal_handlers(ray, **kwargs: Any) -> None:
    """ray.init, leaving the caller's own SIGTERM and SIGINT handlers in place.

    ray.init sets a SIGTERM handler of its own on every driver (ray/_private/worker.py, init:
    sys.exit(signum)) and, starting a head (--ray local), another that stops Ray's processes
    and exits with status 1 (ray/_private/node.py, Node._register_shutdown_hooks; both through
    ray._private.utils.set_sigterm_handler). Either would take over the CLI's, which stops the run
    as Ctrl+C does, keeps every answer and exits 143 with the resume line (cli/__init__.py).
    A handler the caller installed (a Python callable) is put back after init; where the
    caller kept the default, Ray's stays. Ray's processes still stop at exit: shutdown() runs
    at exit (cli/ray_run.py), and so does Ray's own atexit hook."""
    saved = {}
    if threading.current_thread() is threading.main_thread():
        saved = {s: h for s in (signal.SIGTERM, signal.SIGINT) if callable(h := signal.getsignal(s))}
    try:
        ray.init(**kwargs)
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def shutdown() -> None:
    ray = import_ray()
    if ray.is_initialized():
        ray.shutdown()


class JudgeWorker:
    """A Ray actor holding one backend, built from the judge's spec once, in the worker."""

    def __init__(self, model: str, options: dict[str, Any]):
        import ray

        from ..backends.registry import create_backend

        ctx = ray.get_runtime_context()
        self.worker = {"node": ctx.get_node_id(), "pid": os.getpid()}
        self.error: str | None = None
        self.backend: Backend | None = None
        try:
            self.backend = create_backend(model, **options)
        except Exception as exc:  # reported by info(), with the node, instead of a dead actor
            self.error = f"{type(exc).__name__}: {exc}"

    def info(self) -> dict[str, Any]:
        import judgeblender

        out: dict[str, Any] = {**self.worker, "ip": socket.gethostbyname(socket.gethostname()),
                               "judgeblender": judgeblender.__file__, "error": self.error}
        if self.backend is not None:
            out.update(identity=self.backend.identity(), kind=self.backend.kind,
                       supports_logprobs=self.backend.supports_logprobs,
                       max_concurrency=self.backend.max_concurrency, context_tokens=self.backend.context_tokens())
        return out

    async def execute(self, request: CallRequest) -> tuple[str, Any]:
        """("ok", result) or (error class name, message): the driver re-raises, so no exception
        object (nor a traceback) travels, and Ray does not retry an answer the model gave."""
        try:
            result = await self.backend.aexecute(request)  # type: ignore[union-attr]
        except LogprobsUnsupported as exc:
            return "LogprobsUnsupported", str(exc)
        except BackendError as exc:
            return "BackendError", str(exc)
        result.extra = {**result.extra, "worker": self.worker}
        return "ok", result

    def count_tokens(self, text: str) -> int | None:
        return self.backend.count_tokens(text)  # type: ignore[union-attr]

    def token_prefix(self, text: str, n: int) -> tuple[int, int] | None:
        return self.backend.token_prefix(text, n)  # type: ignore[union-attr]

    def max_token_chars(self) -> int | None:
        return self.backend.max_token_chars()  # type: ignore[union-attr]

    def retries_total(self) -> int:
        return int(getattr(self.backend, "retries_total", 0))

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()


@dataclass(frozen=True)
class WorkerPlan:
    workers: int
    cpus: float
    gpus: float
    concurrency: int  # per worker


def plan_workers(model: str, options: dict[str, Any], workers: int | None, resources: dict[str, float],
                 nodes: int) -> WorkerPlan:
    """How many workers, each with what resources and concurrency, for this judge on this cluster."""
    prefix = model.partition(":")[0]
    embedded = prefix in EMBEDDED_PREFIXES
    cuda = prefix == "hf" and str(options.get("device", "cpu")).startswith("cuda")
    cpus = float(options.get("ray_cpus", options.get("n_threads") or 1 if embedded else SERVED_CPUS_PER_WORKER))
    gpus = float(options.get("ray_gpus", 1 if cuda else 0))
    have_cpus, have_gpus = resources.get("CPU", 0.0), resources.get("GPU", 0.0)
    fits = int(have_cpus // cpus) if cpus else 10**6
    if gpus:
        fits = min(fits, int(have_gpus // gpus))
    total_concurrency = int(options.get("concurrency", 8)) if not embedded else None
    if workers is None:  # what the cluster offers: embedded, as many as fit; served, one per node
        workers = fits if embedded else min(nodes, fits)
        if total_concurrency is not None:
            workers = min(workers, total_concurrency)
    if workers < 1 or workers > fits:
        raise JudgeblenderError(
            f"{workers} Ray workers of {model} need {workers * cpus:g} CPUs and {workers * gpus:g} GPUs; "
            f"the cluster has {have_cpus:g} CPUs and {have_gpus:g} GPUs (set ray_cpus / ray_gpus in the judge's "
            "options, or fewer --ray-workers)")
    concurrency = 1 if total_concurrency is None else max(1, math.ceil(total_concurrency / workers))
    return WorkerPlan(workers, cpus, gpus, concurrency)


class RayBackend(Backend):
    """The driver's view of a judge's backend: identity and limits from the workers, calls sent
    to them. `max_concurrency` is the bound on calls outstanding (the engine's pool size)."""

    def __init__(self, model: str, options: dict[str, Any], workers: int | None = None, share: int = 1):
        """`share`: how many models will hold workers at once (RayJudges): each plans with that
        share of the cluster's CPUs and GPUs."""
        ray = import_ray()
        self._ray = ray
        backend_options = {k: v for k, v in options.items() if k not in RAY_OPTION_KEYS}
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        resources = {k: v / share for k, v in ray.cluster_resources().items()}
        try:
            self.plan = plan_workers(model, options, workers, resources, nodes)
        except JudgeblenderError as exc:
            if share == 1:
                raise
            raise JudgeblenderError(f"{exc}; {share} models hold Ray workers at once here, each planned on "
                                    f"1/{share} of the cluster") from None
        # each worker's share of a served model's concurrency (an embedded model declares none)
        backend_options.update(command_options(model, {"concurrency": self.plan.concurrency}))
        actor = ray.remote(JudgeWorker).options(
            num_cpus=self.plan.cpus, num_gpus=self.plan.gpus, max_restarts=MAX_RESTARTS,
            max_task_retries=MAX_TASK_RETRIES, max_concurrency=self.plan.concurrency)
        self.model = model
        self.actors = [actor.remote(model, backend_options) for _ in range(self.plan.workers)]
        self._outstanding = [0] * len(self.actors)
        self._dead: dict[int, str] = {}  # worker slot -> why Ray gave it up (died more often than it may restart)
        try:
            infos = ray.get([a.info.remote() for a in self.actors], timeout=START_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise JudgeblenderError(f"{self.plan.workers} Ray workers of {model} did not start within "
                                    f"{START_TIMEOUT_S:g} s (pending resources?)") from None
        failed = [i for i in infos if i["error"]]
        if failed:
            self.close()
            i = failed[0]
            raise JudgeblenderError(f"a Ray worker on node {i['node']} ({i['ip']}) cannot build {model}: {i['error']} "
                                    "(an embedded model's file must be reachable at the same path on every node)")
        first = infos[0]
        for i in infos[1:]:
            if i["identity"] != first["identity"]:
                self.close()
                raise JudgeblenderError(
                    f"Ray workers disagree on {model}: node {i['node']} ({i['ip']}) has {i['identity']}, node "
                    f"{first['node']} has {first['identity']} (a model file differs between nodes)")
        self.workers_info = infos
        self._identity = first["identity"]
        self.kind = first["kind"]
        self.supports_logprobs = first["supports_logprobs"]
        # each worker takes what its backend can run at once (1 for an embedded or scripted model)
        self._capacity = [max(1, min(self.plan.concurrency, i["max_concurrency"])) for i in infos]
        self.max_concurrency = sum(self._capacity)
        self._context_tokens = first["context_tokens"]
        self._max_token_chars: list[int | None] = []  # asked of a worker when first needed

    def identity(self) -> dict[str, Any]:
        return self._identity

    def context_tokens(self) -> int | None:
        return self._context_tokens

    def count_tokens(self, text: str) -> int | None:
        live = self._live()
        try:
            if not live:
                raise BackendError(f"every Ray worker of {self.model} is gone")
            return self._ray.get(self.actors[live[0]].count_tokens.remote(text))
        except self._ray.exceptions.RayError as exc:
            raise BackendError(f"Ray worker failed: {_first_line(exc)}") from None

    def _live(self) -> list[int]:
        return [i for i in range(len(self.actors)) if i not in self._dead]

    def token_prefix(self, text: str, n: int) -> tuple[int, int] | None:
        return self._ray.get(self.actors[0].token_prefix.remote(text, n))

    def max_token_chars(self) -> int | None:
        if not self._max_token_chars:  # a vocabulary scan in the worker, once
            self._max_token_chars.append(self._ray.get(self.actors[0].max_token_chars.remote()))
        return self._max_token_chars[0]

    @property
    def retries_total(self) -> int:
        """Transport retries of the live workers (a dead worker's count died with it)."""
        total = 0
        for i in self._live():
            try:
                total += self._ray.get(self.actors[i].retries_total.remote())
            except self._ray.exceptions.RayActorError as exc:
                self._dead[i] = _first_line(exc)
        return total

    def worker_pids(self) -> list[int]:
        """The live workers' current pids (they change when a worker restarts)."""
        return [i["pid"] for i in self._ray.get([self.actors[i].info.remote() for i in self._live()])]

    def execute(self, request: CallRequest) -> CallResult:
        """One call from synchronous code (the engine uses aexecute): the same worker choice,
        run to completion on an event loop of its own."""
        return asyncio.run(self.aexecute(request))

    async def aexecute(self, request: CallRequest) -> CallResult:
        while True:
            live = self._live()
            if not live:  # a failed call: counted, not stored, asked again on a re-run (exit status 3)
                raise BackendError(f"every Ray worker of {self.model} died more often than its {MAX_RESTARTS} "
                                   f"restarts allow ({next(iter(self._dead.values()))})")
            # the least loaded live worker (by its share of its capacity); the engine never has more
            # than max_concurrency calls out, so no worker gets more than its capacity while all live
            slot = min(live, key=lambda i: self._outstanding[i] / self._capacity[i])
            self._outstanding[slot] += 1
            try:
                status, value = await self.actors[slot].execute.remote(request)
                break
            except self._ray.exceptions.ActorDiedError as exc:
                # restarts spent: the worker is gone for good; its call goes to a live one, if any
                self._dead.setdefault(slot, _first_line(exc))
            except self._ray.exceptions.RayError as exc:
                raise BackendError(f"Ray worker failed: {type(exc).__name__}: {_first_line(exc)}") from None
            finally:
                self._outstanding[slot] -= 1
        if status == "ok":
            return value
        if status == "LogprobsUnsupported":
            raise LogprobsUnsupported(value)
        raise BackendError(value)

    def close(self) -> None:
        for a in getattr(self, "actors", []):
            try:
                self._ray.kill(a)
            except Exception:  # already gone
                pass
        self.actors = []


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"


def check_judges(specs, scorers_on_driver: bool = True) -> None:
    """Every judge's declaration checked as a local run checks it (judge.check_spec: mode,
    prompt, model prefix, options), on the driver, before Ray is started or joined: a mistake
    is one error line, with no runtime started and no worker built. Scorers (`embed:`) run on
    the driver with a panel (RayJudges); a judge of its own on Ray must be an LLM judge."""
    from ..backends.registry import check_options, is_scorer
    from .judge import check_spec

    for spec in specs:
        if not is_scorer(spec.model):
            check_spec(spec)
        elif scorers_on_driver:
            check_options(spec.model, spec.options, spec.id or spec.model)
        else:
            raise JudgeblenderError(f"--ray runs LLM judges; {spec.model} is an embedding scorer: run it without --ray")


def ray_judge(spec, workers: int | None = None):
    """A Judge for `spec` whose calls run on the Ray cluster this process has joined."""
    from .judge import Judge

    check_judges([spec], scorers_on_driver=False)  # here, not on each worker
    return Judge(spec, backend=RayBackend(spec.model, spec.options, workers))


def _backend_key(spec) -> tuple[str, str]:
    from ..calls import canonical_json

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

    def __init__(self, specs, workers: int | None = None, on_start=None):
        """`on_start(model, backend)` is called each time a model's workers have started."""
        from .factory import PAIR_JUDGES

        self.workers = workers
        self.on_start = on_start
        self._pair_judges = PAIR_JUDGES
        self._keys = {_backend_key(s) for s in specs if s.model.partition(":")[0] not in PAIR_JUDGES}
        self.backends: dict[tuple[str, str], RayBackend] = {}

    def __call__(self, spec):
        from .factory import build_judge
        from .judge import Judge

        if spec.model.partition(":")[0] in self._pair_judges:
            return build_judge(spec)
        key = _backend_key(spec)
        backend = self.backends.get(key)
        if backend is None or not backend.actors:  # new, or closed by a judge that used it before
            # the judges named up front hold workers together; one asked for later (a panel's
            # tie-breaker, after its members closed) shares with whatever still holds workers
            live = sum(1 for b in self.backends.values() if b.actors)
            share = len(self._keys) if key in self._keys else live + 1
            backend = self.backends[key] = RayBackend(spec.model, spec.options, self.workers, share=max(1, share))
            if self.on_start is not None:
                self.on_start(spec.model, backend)
        return Judge(spec, backend=backend)

    def close(self) -> None:
        for backend in self.backends.values():
            backend.close()
