"""The ASGI app of `judgeblender serve` (Starlette): HTTP around service.py's judging.

Endpoints: POST /v1/judge, GET /v1/panel, GET /v1/health, GET /metrics (Prometheus text) and
GET /openapi.json. Every answer is JSON, errors included (`{"error": ..., "field": ...}`): a
missing or wrong bearer token is 401, a body that has not all arrived within the read timeout
408 (its connection closed), a body past the size limit or too many pairs 413, a full queue (or
too many bodies being received) 429 with Retry-After, a bad field 400 naming it
(`pairs[3].passage`), failed model calls 502 with what was judged. Only GET /v1/health answers
without a token, so a load balancer can probe it; the rest, metrics included, need one when the
server has tokens.

Imported only when the command runs (cli/serve.py): `import judgeblender` and every other
command load no web framework.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import ArgumentError, JudgeblenderError
from .openapi import document
from .server import bearer_allowed
from .service import Service, TooLarge

log = logging.getLogger("judgeblender.serve")

Handler = Callable[[Request], Awaitable[Response]]


class Metrics:
    """The server's Prometheus figures, in a registry of its own (not the process-wide one), so
    two apps in one process (tests) never share or collide."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("judgeblender_requests", "HTTP requests answered, by endpoint and status",
                                ["endpoint", "status"], registry=r)
        self.pairs = Counter("judgeblender_pairs", "Pairs answered by POST /v1/judge", registry=r)
        self.calls = Counter("judgeblender_calls_made", "Model calls made (answered by the model, committed)",
                             ["judge"], registry=r)
        self.store_hits = Counter("judgeblender_store_hits", "Calls answered from the store", ["judge"], registry=r)
        self.invalid = Counter("judgeblender_invalid_answers", "Model answers that gave no valid label",
                               ["judge"], registry=r)
        self.failed = Counter("judgeblender_failed_calls", "Pairs left unjudged because model calls failed",
                              ["judge"], registry=r)
        self.latency = Histogram("judgeblender_request_seconds", "Seconds to answer a request, by endpoint",
                                 ["endpoint"], registry=r,
                                 buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
        self.in_flight = Gauge("judgeblender_requests_in_flight", "POST /v1/judge requests admitted", registry=r)
        self.reading = Gauge("judgeblender_bodies_reading", "POST /v1/judge request bodies being received",
                             registry=r)

    def text(self) -> bytes:
        return generate_latest(self.registry)


def error(status: int, message: str, field: str | None = None, headers: dict[str, str] | None = None,
          **more: Any) -> JSONResponse:
    """One JSON error: what was wrong, and the field it was in where there is one."""
    body: dict[str, Any] = {"error": message}
    if field is not None:
        body["field"] = field
    body.update(more)
    return JSONResponse(body, status_code=status, headers=headers)


def busy(why: str) -> JSONResponse:
    """429: the server is full now (`why`: which limit); the client is told when to come back."""
    return error(429, f"the server is busy: {why}; send this one again after Retry-After seconds",
                 headers={"Retry-After": "1"})


class Tokens:
    """The bearer tokens the server accepts (none: every request is let in, loopback only)."""

    def __init__(self, tokens: list[str] | None):
        self.tokens = [t.encode() for t in tokens] if tokens else None

    def allows(self, request: Request) -> bool:
        return bearer_allowed(request.headers.get("authorization"), self.tokens)


class BodyTimeout(Exception):
    """A request body that did not all arrive within the server's read timeout."""


async def read_body(request: Request, limit: int, timeout_s: float) -> bytes | None:
    """The request's body, or None past `limit` bytes: refused from its Content-Length before
    any is read, or as soon as the bytes received pass it (a chunked or lying body). BodyTimeout
    when the whole body has not arrived within `timeout_s` (a stalled or trickling client: the
    time is for the whole body, so a byte a second cannot keep it open)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks, size = [], 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    return None
                chunks.append(chunk)
    except TimeoutError:
        raise BodyTimeout from None
    return b"".join(chunks)


def parse_json(data: bytes) -> Any:
    """The body as JSON; one ArgumentError naming the body when it is not (bad UTF-8, bad JSON,
    nesting too deep for the parser)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ArgumentError("body", "UTF-8 text", described=f"bytes that are not UTF-8 (at byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ArgumentError("body", "a JSON object", described=f"invalid JSON ({exc.msg} at line {exc.lineno}, "
                                                               f"column {exc.colno})") from None
    except RecursionError:
        raise ArgumentError("body", "a JSON object", described="JSON nested too deep to read") from None


def build_app(service: Service, tokens: list[str] | None = None, ready: Callable[[], None] | None = None) -> Starlette:
    """The app serving `service`; `tokens`: the bearer tokens it accepts (None: no token needed);
    `ready()` is called once the judges have loaded all they load (Service.prepare)."""
    metrics = Metrics()
    guard = Tokens(tokens)
    limits = service.limits
    admitted = 0  # POST /v1/judge requests in the server now, their bodies read: the bounded queue
    reading = 0  # POST /v1/judge bodies being received now: bounded apart (--max-reading)

    def endpoint(name: str, public: bool = False) -> Callable[[Handler], Handler]:
        """Counts and times the handler's answers; asks for the token unless `public`."""

        def wrap(handler: Handler) -> Handler:
            async def run(request: Request) -> Response:
                started = time.perf_counter()
                if not public and not guard.allows(request):
                    response: Response = error(401, "a valid bearer token is needed: send 'Authorization: Bearer "
                                                    "TOKEN' with a token of the server's --token-file",
                                               headers={"WWW-Authenticate": "Bearer"})
                else:
                    try:
                        response = await handler(request)
                    except Exception:  # a bug: logged with its traceback here, one line to the client
                        log.exception("judgeblender serve: %s failed", name)
                        response = error(500, "internal error (the server's log has the traceback)")
                metrics.requests.labels(name, str(response.status_code)).inc()
                metrics.latency.labels(name).observe(time.perf_counter() - started)
                return response

            return run

        return wrap

    @endpoint("judge")
    async def judge(request: Request) -> Response:
        """A request is read first, then admitted: a client whose body is slow to come (or never
        comes) holds a reading place, for the read timeout at most, and never a place in the
        queue, so stalled clients cannot turn every later request away."""
        nonlocal admitted, reading
        if reading >= limits.max_reading:
            return busy(f"{limits.max_reading} request bodies are being received (its --max-reading)")
        reading += 1
        metrics.reading.inc()
        try:
            data = await read_body(request, limits.max_body, limits.read_timeout_s)
        except ClientDisconnect:  # nobody is left to answer: counted, not logged as a failure
            return error(400, "the client closed its connection before its body arrived", field="body")
        except BodyTimeout:
            return error(408, f"the request body did not arrive within {limits.read_timeout_s:g} s (the server's "
                              "--read-timeout); the connection is closed", field="body",
                         headers={"Connection": "close"})
        finally:
            reading -= 1
            metrics.reading.dec()
        if data is None:
            return error(413, f"the request body is larger than this server takes ({limits.max_body} bytes, its "
                              "--max-body); send the pairs in several requests", field="body")
        if admitted >= limits.max_queue:
            return busy(f"{limits.max_queue} requests are being judged or wait to be (its --max-queue)")
        admitted += 1
        metrics.in_flight.inc()
        try:
            return await _judge(data)
        finally:
            admitted -= 1
            metrics.in_flight.dec()

    async def _judge(data: bytes) -> Response:
        try:
            asked = await service.off_loop(lambda: service.read(parse_json(data)))
        except TooLarge as exc:
            return error(413, str(exc), field="pairs")
        except ArgumentError as exc:
            return error(400, str(exc), field=exc.argument)
        try:
            run, results = await service.judge(asked)
        except JudgeblenderError as exc:  # the store cannot be written (a full disk), a judge's own error
            log.error("judgeblender serve: %s", exc)
            return error(503, f"not judged: {exc}")
        stats = list(run.stats.values())
        for s in stats:
            metrics.calls.labels(s.judge_id).inc(s.calls_made)
            metrics.store_hits.labels(s.judge_id).inc(s.cache_hits)
            metrics.invalid.labels(s.judge_id).inc(s.invalid_outputs)
            metrics.failed.labels(s.judge_id).inc(s.failed_calls)
        metrics.pairs.inc(len(results))
        body: dict[str, Any] = {"results": results, "stats": [_stats(s) for s in stats]}
        failed = sum(s.failed_calls for s in stats)
        if failed:  # the pairs judged are answered, but the request is not: as `judge` exits 3
            body["error"] = (f"{failed} of {sum(s.pairs for s in stats)} judgments (judge x pair) not made because "
                             "their model calls failed after all retries (reasons in the results); send the request "
                             "again to retry only those (answered calls are reused from the store)")
            return await service.off_loop(JSONResponse, body, 502)
        return await service.off_loop(JSONResponse, body)  # the answer's JSON, up to megabytes

    @endpoint("panel")
    async def panel(request: Request) -> Response:
        return JSONResponse(service.describe())

    @endpoint("health", public=True)
    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "in_flight": admitted, "max_queue": limits.max_queue,
                             "reading": reading, "max_reading": limits.max_reading})

    @endpoint("metrics")
    async def prometheus(request: Request) -> Response:
        return Response(metrics.text(), media_type=CONTENT_TYPE_LATEST)

    @endpoint("openapi")
    async def openapi(request: Request) -> Response:
        return JSONResponse(document(limits))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return error(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            await service.prepare()
            if ready is not None:
                ready()
            yield
        finally:
            await service.close()  # in uvicorn's loop, after the last request: every answer committed

    routes = [Route("/v1/judge", judge, methods=["POST"]), Route("/v1/panel", panel, methods=["GET"]),
              Route("/v1/health", health, methods=["GET"]), Route("/metrics", prometheus, methods=["GET"]),
              Route("/openapi.json", openapi, methods=["GET"])]
    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error}, lifespan=lifespan)
    app.state.metrics = metrics
    return app


def _stats(s: Any) -> dict[str, Any]:
    """A judge's stats for this request, as JSON (JudgeStats' fields; why pairs stayed unjudged by reason)."""
    return {"judge": s.judge_id, "pairs": s.pairs, "judged": s.judged, "unjudged": dict(s.unjudged),
            "calls_made": s.calls_made, "cache_hits": s.cache_hits, "retries": s.retries,
            "backend_retries": s.backend_retries, "invalid_outputs": s.invalid_outputs, "truncated": s.truncated,
            "failed_calls": s.failed_calls, "deferred_calls": s.deferred_calls, "no_room": s.no_room,
            "fallback": s.fallback, "seconds": s.seconds}
