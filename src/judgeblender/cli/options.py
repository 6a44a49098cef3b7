"""Options shared by the commands that run judges (judge, grade, cascade): one declaration each."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

Threads = Annotated[Optional[int], typer.Option("--threads", help="llama.cpp / torch CPU threads.")]
BaseUrl = Annotated[Optional[str], typer.Option(
    "--base-url", help="OpenAI-compatible server URL (or $OPENAI_BASE_URL).")]
ApiKeyEnv = Annotated[Optional[str], typer.Option(
    "--api-key-env", help="Environment variable holding the API key [OPENAI_API_KEY].")]
Concurrency = Annotated[Optional[int], typer.Option("--concurrency", help="Requests in flight for served models.")]
Timeout = Annotated[Optional[float], typer.Option(
    "--timeout", help="Per-request timeout in seconds for served models.")]
RayAddress = Annotated[Optional[str], typer.Option(
    "--ray", help="Run the model calls on Ray workers: local (a runtime on this machine), auto ($RAY_ADDRESS), "
    "HOST:PORT or ray://HOST:10001. Needs the [ray] extra.")]
RayWorkers = Annotated[Optional[int], typer.Option(
    "--ray-workers", help="With --ray: workers holding the model [default: as many as the cluster fits; one per node "
    "for a served model].")]
Progress = Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar on stderr.")]


def backend_options(threads: int | None, base_url: str | None, api_key_env: str | None, concurrency: int | None,
                    timeout: float | None, context_tokens: int | None = None) -> dict:
    """The backend options given on the command line (the ones left out keep the backend's default)."""
    opts = {"n_threads": threads, "base_url": base_url, "api_key_env": api_key_env,
            "concurrency": concurrency, "timeout_s": timeout, "context_tokens": context_tokens}
    return {k: v for k, v in opts.items() if v is not None}
