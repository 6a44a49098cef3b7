"""Judge on a Ray cluster (`judgeblender judge --ray ADDRESS`): the calls run in Ray actors.

The driver keeps the contract: prompts are rendered, keyed and looked up in the store there,
exactly as in a local run, by the same engine (judges/engine.py). Only the model calls leave it:
the judge's backend is a `RayBackend`, whose `aexecute` hands the call to one of N actors and
waits for its answer, which the engine commits to the store before it counts. This module is a
backend like the others and knows nothing of judges or stores: the judges whose calls run here
are built by judges/ray_judges.py, which also hands in the store's row functions (`RowMaker`).

- Calls travel in batches, not one Ray task each (a Ray task costs the driver about 0.5 ms of
  CPU, more than the rest of a call): the calls the engine asks for in the same turn of its
  event loop go out together, one message per worker, each worker taking calls up to its share
  of the concurrency. A worker's answers come back in exchanges (`JudgeWorker.exchange`): one
  waits on each busy worker, returns with every answer given since the last (waiting GATHER_S
  at most for the calls still running, so that answers ending together share one message), and
  carries the calls asked for meanwhile. So an answer never waits long for a slower call of its
  batch, and the busier the driver, the more calls and answers each message carries. Both ways a
  batch travels as one bytes object made by the standard pickler (`pack`).
- Each actor (`JudgeWorker`) builds the backend from the judge's spec (model string + options)
  once, in its own process, and keeps it: an embedded model is loaded once per worker; a served
  endpoint is called by every worker with its share of the judge's concurrency.
- The calls outstanding at once are bounded: `workers x per-worker concurrency` (the backend's
  own concurrency, 1 for an embedded model; for a served model the judge's `concurrency` split
  over the workers). A killed driver loses at most those.
- A killed worker loses nothing: actors restart (`MAX_RESTARTS`); the driver sends the calls
  that worker had open (not the answered ones of their batch) again once it is back, each at
  most `MAX_TASK_RETRIES` times (Ray itself never re-runs an exchange, which would ask its
  answered calls again). A call the model answered but whose answer died with the worker is
  asked again, so the model sees at most the calls in flight at the kill a second time.
  A worker killed more often than it may restart is gone for good: its calls go to the live
  workers; with none left, every call still to make fails (exit status 3, answers kept).
- The driver keeps its own SIGTERM handler (Ray's would exit 1 or 15, without the resume line)
  and raylets' messages go to stderr, off `--json`'s stdout.
- With a store, the worker that gets an answer also makes the costly parts of its store row
  (the `RowMaker` given, store.compact.row_parts in a run: the messages and the answer's metadata compressed against the
  store's dictionaries, each sent to a worker with the first call that needs it; the
  probabilities' JSON), so the driver, whose CPU bounds how many calls one driver feeds, checks
  and inserts ready rows. The store checks each part against its own choice of dictionary and
  makes any that differs itself: the rows are what the driver would have made, byte for byte.
- Every answer carries the worker that gave it (`extra["worker"]`: Ray node id and pid); it is
  stored with the call and shown in the judgment's details (`workers`).
- Resources per worker come from the judge's options: `ray_cpus` (default: `n_threads`, else 1,
  for embedded models; 0.5 for a served client), `ray_gpus` (default: 1 when an `hf` judge's
  `device` is cuda, else 0).

Ray is imported only here, and only when a run asks for it (`--ray`, `jb.judge(..., ray=...)`).
"""

from __future__ import annotations

import asyncio
import heapq
import math
import os
import pickle
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..calls import CallRequest, CallResult, canonical_json
from ..errors import ArgumentError, BackendError, JudgeblenderError, MissingExtraError
from .base import Backend, LogprobsUnsupported, RowStore
from .registry import command_options

MAX_RESTARTS = 3  # per actor: a worker killed (OOM, node loss, kill -9) comes back this often
MAX_TASK_RETRIES = 3  # per call: re-run on the restarted (or another) worker
LOCAL_OBJECT_STORE_BYTES = 256 * 1024**2  # --ray local: a 2-core, 24 GB machine stays usable
CONNECT_TIMEOUT_S = 8.0  # a dead address is an error within 10 s, not a hang
START_TIMEOUT_S = 600.0  # workers loading their model (an embedded model may take minutes)
SERVED_CPUS_PER_WORKER = 0.5
# turns of the driver's event loop between a worker's answers and its next exchange: an answer
# resumes the engine's worker, which commits it (one turn for the group commit) and asks for its
# next call; that call then goes out in the exchange instead of a submit of its own
EXCHANGE_TURNS = 6
# how long an exchange with answers waits for the worker's other running calls, so that answers
# ending together travel back in one message (each message costs the driver's CPU, whatever it
# carries); against a model's own latency (0.1 s and more a call) it is nothing
GATHER_S = 0.002
RESTART_POLL_S = 0.5  # how often a restarting worker that Ray cannot reach yet is asked again
RAY_OPTION_KEYS = ("ray_cpus", "ray_gpus")
EMBEDDED_PREFIXES = ("llamacpp", "hf")


@dataclass(frozen=True)
class RowMaker:
    """How the store makes a call's row, handed in by whoever builds the backend with a store in
    mind (judges/ray_judges.py gives store.compact's own functions), so that backends/ need not
    import store/: `parts(request, result, dictionary id, extra id, dictionaries)` makes a row's
    costly parts in a worker (it travels to the workers, so it is a module-level function), and
    `text_id(text)` is the store's id of a text (the model's identity, on the driver)."""

    parts: Callable[..., Any]
    text_id: Callable[[str], int]


def import_ray():
    """Ray, or an error naming the extra that installs it."""
    try:
        import ray
    except ImportError as exc:
        raise MissingExtraError("ray", "ray", "judging on a Ray cluster (ray=)") from exc
    return ray


def _probe(host: str, port: int, what: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise JudgeblenderError(f"no Ray cluster answers at {what} ({exc.strerror or exc}); "
                                "start one (`ray start --head`) or use ray=local") from None


def _host_port(address: str, default_port: int) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep:
        return address, default_port
    try:
        return host.strip("[]") or "127.0.0.1", int(port)
    except ValueError:
        raise ArgumentError("ray", "local, auto, HOST:PORT or ray://HOST:PORT", address) from None


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
            raise JudgeblenderError("ray=auto joins the cluster named by RAY_ADDRESS, which is not set; "
                                    "set it to HOST:PORT or ray://HOST:10001, or use ray=local")
    if address.startswith("ray://"):
        _probe(*_host_port(address[len("ray://"):], 10001), address)
    else:
        _probe(*_host_port(address, 6379), address)
    try:
        _join(ray, address)
    except (ConnectionError, TimeoutError, RuntimeError) as exc:
        hint = ""
        if not os.environ.get("RAY_AUTH_MODE"):  # Ray never turns token auth on for an explicit address
            hint = ("; a cluster with token authentication (what `ray start` turns on by default) answers only a "
                    "driver with RAY_AUTH_MODE=token and the cluster's token (RAY_AUTH_TOKEN or ~/.ray/auth_token)")
        raise JudgeblenderError(f"could not join the Ray cluster at {address}: {exc}{hint}") from None
    return False


# Ray's client proxy starts one server process per client (ray/util/client/server/proxier.py).
# That start sometimes fails at once, with "Starting Ray client server failed" and an empty log;
# the proxy frees the port and starts the next client's server normally. Seen in 1 of 2 runs of
# tests/test_ray.py's client test on a 2-core machine; Ray issues 28091 and 29852 show the same
# message. When the server dies between the proxy's two looks at it (poll, then psutil's
# cmdline), the proxy sends its own traceback instead, ending in psutil.ZombieProcess (seen once
# in CI). Either way a new client id gets a new server, so joining again is the remedy.
CLIENT_SERVER_FAILED = "Starting Ray client server failed"
CLIENT_SERVER_START = "in start_specific_server"  # a line of the proxy's traceback when the start itself raised
CLIENT_JOIN_ATTEMPTS = 3


def client_server_failure(message: str) -> str | None:
    """Why Ray's client proxy could not start this driver's server, in one line, or None when
    the message says something else (a refused token, a wrong address: nothing to retry)."""
    if CLIENT_SERVER_FAILED in message:
        return CLIENT_SERVER_FAILED
    if CLIENT_SERVER_START in message:  # the traceback's last line names what was raised
        return message.strip().splitlines()[-1].strip()
    return None


def _join(ray, address: str) -> None:
    """ray.init on an explicit address. Through Ray client, a failed start of the client's own
    server is tried again (CLIENT_JOIN_ATTEMPTS in all), each retry said on stderr with its cause."""
    for attempt in range(1, CLIENT_JOIN_ATTEMPTS + 1):
        try:
            _init_keeping_signal_handlers(ray, address=address, log_to_driver=False, configure_logging=False)
            return
        except (ConnectionError, RuntimeError) as exc:  # Ray says ConnectionError("Initialization failure ...")
            cause = client_server_failure(str(exc)) if address.startswith("ray://") else None
            if cause is None or attempt == CLIENT_JOIN_ATTEMPTS:
                raise
            print(f"warning: Ray's client server at {address} failed to start for this driver "
                  f"({cause}; attempt {attempt} of {CLIENT_JOIN_ATTEMPTS}); joining again", file=sys.stderr)


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
    at exit (judges/ray_judges.py `start`), and so does Ray's own atexit hook."""
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

    def __init__(self, model: str, options: dict[str, Any], row_parts: Callable[..., Any] | None = None):
        import ray

        from .registry import create_backend

        ctx = ray.get_runtime_context()
        self.worker = {"node": ctx.get_node_id(), "pid": os.getpid()}
        self.error: str | None = None
        self.backend: Backend | None = None
        self._calls: dict[int, asyncio.Future] = {}  # by call id: running, or finished and not yet returned
        self._finished: list[tuple[int, str, Any]] = []  # finished, not yet returned by an exchange
        self._wake = asyncio.Event()
        self._exchanges = 0
        self._slots: asyncio.Semaphore | None = None  # made in the actor's event loop
        self._zdicts: dict[int, bytes] = {}  # the store's dictionaries the driver has sent, by id
        self._traffic = {"messages": 0, "calls": 0, "largest_batch": 0, "answers": 0}
        self._row_parts = row_parts  # RowMaker.parts; None: the driver makes every row itself
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

    async def exchange(self, calls: bytes) -> bytes:
        """Takes new calls (`submit`), then waits until at least one call has finished, and at most
        GATHER_S more for the calls still running, and returns every call finished since the last
        exchange: (call id, "ok", result) or (call id, error class name, message). So no finished
        call waits long for a slower one, and calls that finish together, or while the driver is
        busy, travel back in one message. The driver re-raises errors, so no
        exception object (nor a traceback) travels. One exchange waits at a time: a newer one
        (from a new run of the driver) ends the older with nothing. Both ways the batch travels
        pickled (`pack`), as one bytes object."""
        self._start(unpack(calls))
        self._exchanges += 1
        mine = self._exchanges
        self._wake.set()  # an older exchange still waiting returns empty
        while not self._finished:
            self._wake.clear()
            await self._wake.wait()
            if self._exchanges != mine:
                return pack([])
        deadline = asyncio.get_running_loop().time() + GATHER_S
        while len(self._finished) < len(self._calls):  # calls still running: those ending in a moment come along
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), deadline - asyncio.get_running_loop().time())
            except asyncio.TimeoutError:  # TimeoutError itself from Python 3.11
                break
            if self._exchanges != mine:
                return pack([])
        out, self._finished = self._finished, []
        for call_id, _, _ in out:
            del self._calls[call_id]
        self._traffic["answers"] += len(out)
        return pack(out)

    async def submit(self, calls: bytes) -> None:
        """Takes calls (pickled: `pack`) while an exchange waits for answers."""
        self._start(unpack(calls))

    def _start(self, calls: list[tuple[int, CallRequest, Any]]) -> None:
        """Starts calls, at most the backend's concurrency of them at the model at once (one for
        an embedded model, whatever the driver sends). A call already here (the driver sends a
        restarted worker's calls again, and some may have reached it) is not started twice.
        Each call comes with its row hint (RayBackend._hint), or None where no store takes it."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(max(1, self.backend.max_concurrency))  # type: ignore[union-attr]
        t = self._traffic
        t["messages"] += 1
        t["calls"] += len(calls)
        t["largest_batch"] = max(t["largest_batch"], len(calls))
        for call_id, request, hint in calls:
            if hint is not None:  # dictionaries sent with their first call: kept for the calls after it
                for dictionary, zdict in ((hint[0], hint[1]), (hint[2], hint[3])):
                    if zdict is not None:
                        self._zdicts[dictionary] = zdict
            if call_id not in self._calls:
                self._calls[call_id] = asyncio.ensure_future(self._run(call_id, request, hint))

    async def _run(self, call_id: int, request: CallRequest, hint: Any = None) -> None:
        try:
            async with self._slots:  # type: ignore[union-attr]
                result = await self.backend.aexecute(request)  # type: ignore[union-attr]
            result.extra = {**result.extra, "worker": self.worker}
            if hint is not None and self._row_parts is not None:  # the row's costly parts, made here
                result.row = self._row_parts(request, result, hint[0], hint[2], self._zdicts)
        except LogprobsUnsupported as exc:
            self._finished.append((call_id, "LogprobsUnsupported", str(exc)))
        except BackendError as exc:
            self._finished.append((call_id, "BackendError", str(exc)))
        except Exception as exc:  # a fault in the backend itself: this call fails, the others go on
            self._finished.append((call_id, "BackendError", f"Ray worker failed: {type(exc).__name__}: {exc}"))
        else:
            self._finished.append((call_id, "ok", result))
        self._wake.set()

    def count_tokens(self, text: str) -> int | None:
        return self.backend.count_tokens(text)  # type: ignore[union-attr]

    def token_prefix(self, text: str, n: int) -> tuple[int, int] | None:
        return self.backend.token_prefix(text, n)  # type: ignore[union-attr]

    def max_token_chars(self) -> int | None:
        return self.backend.max_token_chars()  # type: ignore[union-attr]

    async def retries_total(self) -> int:
        """The worker's backend's transport retries so far (Backend.count_retries)."""
        return 0 if self.backend is None else int(await self.backend.count_retries())

    def traffic(self) -> dict[str, int]:
        """Since this process started: messages from the driver (exchanges and submits), the calls
        they carried, the most calls in one, and the answers sent back."""
        return dict(self._traffic)

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()


def pack(batch: list) -> bytes:
    """A batch of calls or answers as one bytes object, for an exchange with a worker. Ray would
    pickle the list itself, with cloudpickle, whose Python-level hook runs for every object in it
    (a third of what an actor call cost the driver's thread): the standard pickler runs in C, and
    Ray sends bytes as they are. Calls and answers are the project's own classes, which the
    standard pickler handles (nothing in them is a lambda or a class made at run time)."""
    return pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)


def unpack(data: bytes) -> list:
    """The batch `pack` made, on the other side of the exchange."""
    return pickle.loads(data)


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
            "options, or fewer workers: ray_workers=)")
    concurrency = 1 if total_concurrency is None else max(1, math.ceil(total_concurrency / workers))
    return WorkerPlan(workers, cpus, gpus, concurrency)


@dataclass
class _Item:
    """One call on its way to a worker: its caller waits on `future`."""

    request: CallRequest
    future: asyncio.Future
    retries: int = 0  # times sent again because its worker died and restarts
    call_id: int = -1  # given when first sent; kept when sent again


class RayBackend(Backend):
    """The driver's view of a judge's backend: identity and limits from the workers, calls sent
    to them. `max_concurrency` is the bound on calls outstanding (the engine's pool size)."""

    rows_off_driver = True

    def __init__(self, model: str, options: dict[str, Any], workers: int | None = None, share: int = 1,
                 rows: RowMaker | None = None):
        """`share`: how many models will hold workers at once (RayJudges): each plans with that
        share of the cluster's CPUs and GPUs. `rows`: the store's row functions, for the workers to
        make each answer's row parts (None: the driver makes the rows, as without Ray)."""
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
            max_task_retries=MAX_TASK_RETRIES, max_concurrency=self.plan.concurrency + 2)
        self.model = model
        self.row_maker = rows
        self.actors = [actor.remote(model, backend_options, rows.parts if rows is not None else None)
                       for _ in range(self.plan.workers)]
        # calls go out and answers come back in exchanges (JudgeWorker.exchange); Ray never re-runs
        # one (its calls would be asked again): _exchanges sends a dead worker's open calls again itself
        self._exchange = [a.exchange.options(max_task_retries=0) for a in self.actors]
        self._next_id = 0
        self._loop: asyncio.AbstractEventLoop | None = None  # the event loop of the calls in flight
        self._waiting: list[_Item] = []  # asked for in this turn of the loop, sent at its end
        self._parked: list[_Item] = []  # waiting for a restarting worker
        self._restarting: set[int] = set()
        self._open: list[dict[int, _Item]] = []  # per worker: sent, not answered, by call id
        self._next: list[list | None] = []  # per worker: calls for its next exchange, while it is about to go
        self._polling: list[bool] = []  # per worker: its exchanges are running
        self._tasks: set[asyncio.Task] = set()
        self._dead: dict[int, str] = {}  # worker slot -> why Ray gave it up (died more often than it may restart)
        # (store, its id of the identity, the event loop of the run it was given for) whose rows the workers make
        self._rows: tuple[Any, int, asyncio.AbstractEventLoop] | None = None
        self._sent: list[set[int]] = []  # per worker: the store dictionaries sent to it
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

    async def count_retries(self) -> int:
        """Transport retries of the live workers (a dead worker's count died with it), asked of
        them all at once and awaited, so the driver's event loop goes on meanwhile (a ray.get
        here blocked it for a round trip per worker); kept in `retries_total` as well."""
        live = self._live()
        counts = await asyncio.gather(*(self.actors[i].retries_total.remote() for i in live), return_exceptions=True)
        total = 0
        for i, count in zip(live, counts):
            if isinstance(count, self._ray.exceptions.RayActorError):
                self._dead[i] = _first_line(count)
            elif isinstance(count, BaseException):
                raise count
            else:
                total += count
        self.retries_total = total
        return total

    def traffic(self) -> list[dict[str, int]]:
        """Each live worker's traffic (JudgeWorker.traffic), with its pid."""
        live = self._live()
        infos = self._ray.get([self.actors[i].info.remote() for i in live])
        counts = self._ray.get([self.actors[i].traffic.remote() for i in live])
        return [{"pid": i["pid"], **c} for i, c in zip(infos, counts)]

    def worker_pids(self) -> list[int]:
        """The live workers' current pids (they change when a worker restarts)."""
        return [i["pid"] for i in self._ray.get([self.actors[i].info.remote() for i in self._live()])]

    def execute(self, request: CallRequest) -> CallResult:
        """One call from synchronous code (the engine uses aexecute): the same worker choice,
        run to completion on an event loop of its own."""
        return asyncio.run(self.aexecute(request))

    async def aexecute(self, request: CallRequest) -> CallResult:
        """Waits for this call's answer; the call itself goes out in a batch (`_send`) with the
        others asked for in the same turn of the event loop."""
        loop = asyncio.get_running_loop()
        item = _Item(request, loop.create_future())
        self._enqueue([item], loop)
        return await item.future

    def store_rows(self, store: RowStore | None) -> None:
        """The engine's store for the calls to come (None: none): each answer's worker makes the
        costly parts of its row there (`RowMaker.parts`), so the driver, whose CPU bounds
        how many calls one driver feeds, only checks and inserts them. Called by the engine in the
        run's event loop; a later run (another loop) sends no hints until it says its own store."""
        if store is None or self.row_maker is None:  # no store, or nothing to make rows with: the driver makes them
            self._rows = None
        else:
            self._rows = (store, self.row_maker.text_id(canonical_json(self._identity)), asyncio.get_running_loop())
        if store is not None:  # and its SQLite work leaves the driver too
            store.write_in_child()

    def _hint(self, slot: int, request: CallRequest) -> Any:
        """What the worker in `slot` needs to make this call's row parts: the ids of the store's
        dictionaries for it (CallStore.row_hint), each with its bytes the first time that worker
        needs it; None with no store (or one that makes the rows itself)."""
        if self._rows is None or self._rows[2] is not self._loop:
            return None
        store, identity_id, _ = self._rows
        hint = store.row_hint(request, identity_id)
        if hint is None:
            return None
        dictionary, extra = hint
        sent = self._sent[slot]
        if (dictionary is None or dictionary in sent) and (extra is None or extra in sent):
            return dictionary, None, extra, None  # nearly every call: the worker has both
        out = []
        for tid in (dictionary, extra):
            zdict = None
            if tid is not None and tid not in sent:
                sent.add(tid)
                zdict = store.dictionary_bytes(tid)
            out += [tid, zdict]
        return tuple(out)

    def _enqueue(self, items: list[_Item], loop: asyncio.AbstractEventLoop) -> None:
        if self._loop is not loop:  # a new event loop (each run has its own): nothing of the last one goes on
            n = len(self.actors)
            self._loop, self._waiting, self._parked, self._restarting = loop, [], [], set()
            self._open, self._next, self._polling = [{} for _ in range(n)], [None] * n, [False] * n
            self._sent = [set() for _ in range(n)]
        if not self._waiting:
            loop.call_soon(self._send)
        self._waiting.extend(items)

    def _send(self) -> None:
        """The calls asked for since the last turn, as one batch per worker: each call goes to the
        least loaded live worker (by its share of its capacity), as one at a time would. The engine
        never has more than max_concurrency calls out, so no worker gets more than its capacity
        while all live; a dead worker's calls are spread over the others. Calls wait here while
        every live worker is restarting."""
        items, self._waiting = [it for it in self._waiting if not it.future.done()], []
        if not items:
            return
        live = self._live()
        if not live:  # a failed call: counted, not stored, asked again on a re-run (exit status 3)
            why = next(iter(self._dead.values()))
            for it in items:
                it.future.set_exception(BackendError(
                    f"every Ray worker of {self.model} died more often than its {MAX_RESTARTS} restarts allow ({why})"))
            return
        ready = [i for i in live if i not in self._restarting]
        if not ready:
            self._parked.extend(items)
            return
        load = [(len(self._open[i]) / self._capacity[i], i) for i in ready]
        heapq.heapify(load)
        batches: dict[int, list[tuple[int, CallRequest, Any]]] = {}
        for it in items:
            _, slot = heapq.heappop(load)
            if it.call_id < 0:
                it.call_id = self._next_id = self._next_id + 1
            self._open[slot][it.call_id] = it
            batches.setdefault(slot, []).append((it.call_id, it.request, self._hint(slot, it.request)))
            heapq.heappush(load, (len(self._open[slot]) / self._capacity[slot], slot))
        for slot, calls in batches.items():
            if not self._polling[slot]:  # the worker's exchanges carry calls out and answers back
                self._polling[slot] = True
                self._next[slot] = calls
                self._spawn(self._exchanges(slot))
            elif self._next[slot] is not None:  # its next exchange goes out in a moment: with these
                self._next[slot].extend(calls)
            else:  # its exchange is out, waiting for answers
                self._spawn(self._submit(slot, calls))

    def _spawn(self, coro) -> None:
        task = self._loop.create_task(coro)  # type: ignore[union-attr]
        self._tasks.add(task)  # the loop keeps only a weak reference
        task.add_done_callback(self._tasks.discard)

    async def _submit(self, slot: int, calls: list[tuple[int, CallRequest, Any]]) -> None:
        try:
            await self.actors[slot].submit.remote(pack(calls))
        except self._ray.exceptions.RayActorError as exc:  # they may not have reached it: its open calls go again
            self._lost(slot, exc)
        except self._ray.exceptions.RayError as exc:
            self._fail(slot, [c for c, *_ in calls], exc)

    def _fail(self, slot: int, call_ids, exc: BaseException) -> None:
        for call_id in call_ids:
            it = self._open[slot].pop(call_id, None)
            if it is not None and not it.future.done():
                it.future.set_exception(BackendError(f"Ray worker failed: {_first_line(exc)}"))

    async def _exchanges(self, slot: int) -> None:
        """The worker's exchanges while it has calls open: each carries the calls asked for since
        the last and brings back every answer that came since, each caller resumed with its own.
        After answers, the next exchange waits a few turns of the loop, for the calls the engine
        asks for as those answers free its workers, so one exchange carries both. A worker that
        dies takes only its open calls with it: those are sent again, once it is back (it
        restarts) or to the live workers (it is gone for good)."""
        ray, open_calls = self._ray, self._open[slot]
        try:
            while True:
                calls, self._next[slot] = self._next[slot] or [], None
                try:
                    answers = unpack(await self._exchange[slot].remote(pack(calls)))
                except ray.exceptions.RayActorError as exc:
                    self._lost(slot, exc)
                    return
                except ray.exceptions.RayError as exc:
                    self._fail(slot, list(open_calls), exc)
                    return
                for call_id, status, value in answers:
                    it = open_calls.pop(call_id, None)
                    if it is None or it.future.done():  # asked twice, or its caller is gone (cancelled)
                        continue
                    if status == "ok":
                        it.future.set_result(value)
                    elif status == "LogprobsUnsupported":
                        it.future.set_exception(LogprobsUnsupported(value))
                    else:
                        it.future.set_exception(BackendError(value))
                self._next[slot] = []
                for _ in range(EXCHANGE_TURNS):
                    await asyncio.sleep(0)
                if not open_calls:
                    return
        finally:
            self._polling[slot] = False
            self._next[slot] = None

    def _lost(self, slot: int, exc: BaseException) -> None:
        """The worker in `slot` died (or could not be reached) with calls open: they go again."""
        again = [it for it in self._open[slot].values() if not it.future.done()]
        self._open[slot].clear()
        self._sent[slot].clear()  # a restarted worker has none of the dictionaries
        if self._next[slot]:  # about to go to it: they go again with the rest instead
            self._next[slot].clear()
        if isinstance(exc, self._ray.exceptions.ActorDiedError):  # restarts spent: gone for good
            self._dead.setdefault(slot, _first_line(exc))
        else:  # restarting (or unreachable for a moment): its calls wait until it answers again
            if slot not in self._restarting:
                self._restarting.add(slot)
                self._spawn(self._await_back(slot))
            for it in again:
                it.retries += 1
            for it in again:
                if it.retries > MAX_TASK_RETRIES:
                    it.future.set_exception(BackendError(
                        f"Ray worker failed {MAX_TASK_RETRIES + 1} times on this call: {_first_line(exc)}"))
            again = [it for it in again if it.retries <= MAX_TASK_RETRIES]
        if again:
            self._enqueue(again, self._loop)  # type: ignore[arg-type]

    async def _await_back(self, slot: int) -> None:
        """Until a restarting worker answers again (or is gone for good); then the calls waiting
        for a worker go out."""
        errors = self._ray.exceptions
        while True:
            try:
                await self.actors[slot].info.remote()  # Ray re-runs it on the restarted worker
            except errors.ActorDiedError as exc:
                self._dead.setdefault(slot, _first_line(exc))
            except errors.RayActorError:  # not reachable yet
                await asyncio.sleep(RESTART_POLL_S)
                continue
            break
        self._restarting.discard(slot)
        parked, self._parked = self._parked, []
        if parked:
            self._enqueue(parked, self._loop)  # type: ignore[arg-type]

    def close(self) -> None:
        for a in getattr(self, "actors", []):
            try:
                self._ray.kill(a)
            except Exception:  # already gone
                pass
        self.actors = []


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
