"""`judgeblender serve`: a judge or a panel behind HTTP (POST /v1/judge), with the CLI's store.

The command reads its flags as `judge` does (one `RunOptions`, the same option types), checks
what it can before anything is built (a host beyond loopback without --token-file is refused,
exit 2), and hands the judging to serve/service.py and HTTP to serve/app.py; the web framework
is imported only here, when the command runs, and its absence is one error naming [serve].
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .. import masking
from ..errors import ArgumentError, require
from ..judges.judge import DEFAULT_MIN_CHOICE_MASS
from ..panels.judging import RunOptions, panel_tiebreaker
from ..panels.panel import get_panel
from .console import err_console
from .options import (AllowFallback, ApiKeyEnv, BaseUrl, Concurrency, ContextTokens, InvalidPolicy, MinChoiceMass,
                      Seed, Threads, Timeout, backend_options)


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        model: Optional[str] = typer.Option(None, "--judge", "-j", help="Model string of the one judge served, e.g. openai:MODEL, llamacpp:default (or --panel)."),
        panel: Optional[str] = typer.Option(None, "--panel", help="A panel preset (promptblender, llmblender, umbrela) or a panel .toml to serve, blended per pair (or --judge)."),
        models: Optional[list[str]] = typer.Option(None, "--panel-model", help="Model string(s) for a preset panel (llmblender takes three)."),
        prompt: str = typer.Option("umbrela", "--prompt", help="Prompt template name or .toml path (see `judgeblender prompts list`)."),
        mode: str = typer.Option("generate", "--mode", "-m", help="generate (parse text) or logprobs (score label tokens)."),
        store_path: Path = typer.Option(Path("judgments.sqlite"), "--store", help="SQLite store of every call: answers already in it are served from it."),
        host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; beyond loopback only with --token-file."),
        port: int = typer.Option(8000, "--port", help="Port to listen on (0: a free one, told on stderr)."),
        port_file: Optional[Path] = typer.Option(None, "--port-file", help="Write the port listened on to this file once listening (with --port 0: for scripts)."),
        token_file: Optional[Path] = typer.Option(None, "--token-file", help="Bearer tokens the server accepts, one a line (needed to listen beyond loopback)."),
        queries: Optional[Path] = typer.Option(None, "--queries", "-q", help="Queries TSV, so requests may send a qid without its query."),
        corpus: Optional[Path] = typer.Option(None, "--corpus", "-c", help="Passages JSONL (or irds:ID), so requests may send a docid without its passage."),
        max_body: int = typer.Option(8 * 1024 * 1024, "--max-body", help="Largest request body in bytes (larger: 413)."),
        max_pairs: int = typer.Option(1000, "--max-pairs", help="Most pairs in one request (more: 413)."),
        max_queue: int = typer.Option(256, "--max-queue", help="Requests judged or waiting at once, counted once their bodies are read (more: 429 with Retry-After)."),
        max_reading: int = typer.Option(64, "--max-reading", help="Request bodies being received at once (more: 429 with Retry-After)."),
        read_timeout: float = typer.Option(30.0, "--read-timeout", help="Seconds a request's whole body may take to arrive (later: 408, connection closed)."),
        allow_fallback: AllowFallback = False,
        invalid_policy: InvalidPolicy = "retry-once",
        seed: Seed = 0,
        min_choice_mass: MinChoiceMass = DEFAULT_MIN_CHOICE_MASS,
        threads: Threads = None,
        base_url: BaseUrl = None,
        api_key_env: ApiKeyEnv = None,
        concurrency: Concurrency = None,
        timeout: Timeout = None,
        context_tokens: ContextTokens = None,
        redact: bool = typer.Option(False, "--redact", help="Do not keep prompt texts (passages) in the store."),
    ) -> None:
        """Serve a judge or a panel over HTTP: POST /v1/judge, GET /v1/panel, /v1/health, /metrics (docs/serve.md)."""
        from ..serve.server import bind, check_exposure, read_tokens, run
        from ..serve.service import Limits

        if (model is None) == (panel is None):
            raise ArgumentError("--judge", "either --judge MODEL or --panel PANEL (one of them)",
                                described="both" if model else "neither")
        for name, value in (("--max-body", max_body), ("--max-pairs", max_pairs), ("--max-queue", max_queue)):
            if value < 1:
                raise ArgumentError(name, "a whole number of at least 1", value)
        tokens = read_tokens(token_file) if token_file is not None else None
        check_exposure(host, tokens is not None)
        for token in tokens or ():
            masking.register(token)  # a token echoed anywhere this process writes is masked
        require("starlette", "serve", "judgeblender serve")
        require("prometheus_client", "serve", "judgeblender serve")
        options = RunOptions(mode=mode, seed=seed, allow_fallback=allow_fallback, invalid_policy=invalid_policy,
                             min_choice_mass=min_choice_mass, redact=redact,
                             backend=backend_options(threads, base_url, api_key_env, concurrency, timeout,
                                                     context_tokens)).check()
        if panel is not None:
            judging = get_panel(panel, models, options.mode, dict(options.backend), **options.spec_fields())
            if panel_tiebreaker(judging, options) is not None:
                raise ArgumentError("--panel", "a panel without a [tiebreaker]", panel,
                                    hint="a tie-breaker is called on the pairs a whole run leaves tied; serve the "
                                         "panel without it, or judge with `judgeblender judge --panel`")
        else:
            judging = options.spec(model, prompt)
        limits = Limits(max_body, max_pairs, max_queue, max_reading, read_timeout)
        _serve(judging, store_path, host, port, tokens, queries, corpus, limits, redact, port_file, bind, run)


def _serve(judging, store_path: Path, host: str, port: int, tokens, queries, corpus, limits, redact: bool,
           port_file: Path | None, bind, run) -> None:
    """Bind, build the service (judges, store, texts), and serve until SIGTERM or Ctrl+C."""
    from ..fileio import atomic_write_text
    from ..pairs import read_queries
    from ..pairs.corpus import close_corpus, open_corpus
    from ..serve.app import build_app
    from ..serve.server import url_of
    from ..serve.service import Service
    from ..store import CallStore

    query_map = read_queries(queries) if queries is not None else None
    passages = open_corpus(corpus) if corpus is not None else None
    try:
        sock = bind(host, port)  # before the judges are built: a port in use is one error, at once
        # closed by the app's shutdown once the last request is answered; here too, if it never ran
        with CallStore(store_path, redact_passages=redact) as store:
            service = Service(judging, store, query_map, passages, limits)
            what = f"panel {service.panel.name}" if service.panel is not None else f"judge {service.judges[0].id}"

            url = url_of(sock)

            def say() -> None:  # once the judges have loaded what they load: ready means ready
                if port_file is not None:  # whole or not at all: a script waiting on it never reads half a number
                    atomic_write_text(port_file, url.rsplit(":", 1)[1] + "\n")
                err_console.print(f"serving {what} on {url} (POST /v1/judge; GET /v1/panel, /v1/health, /metrics); "
                                  f"store {store_path}; SIGTERM or Ctrl+C stops it", markup=False, soft_wrap=True)

            run(build_app(service, tokens, say), sock, "judgeblender serve")
        err_console.print("stopped: every answer given is in the store", markup=False)
    finally:
        if passages is not None:
            close_corpus(passages)
