"""Options shared by the commands that run judges (judge, grade, cascade): one declaration each."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Optional

import typer

from .. import masking
from ..arguments import BOUNDS
from ..errors import CallsFailed

Threads = Annotated[Optional[int], typer.Option("--threads", help="llama.cpp / torch CPU threads.")]
# the URL's user:password@ is masked in all the command writes, from the moment it is parsed
BaseUrl = Annotated[Optional[str], typer.Option(
    "--base-url", help="OpenAI-compatible server URL (or $OPENAI_BASE_URL).", callback=masking.register_url)]
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
MinChoiceMass = Annotated[float, typer.Option(
    "--min-choice-mass", min=BOUNDS["min_choice_mass"].low, max=BOUNDS["min_choice_mass"].high,
    help="logprobs mode: the least share of the next-token probability on the label tokens; below it the "
    "answer is invalid (recorded in the details).")]
Progress = Annotated[bool, typer.Option("--progress/--no-progress", help="Show a progress bar on stderr.")]
# how each judge of a run behaves (judge, serve): RunOptions' fields, declared once
AllowFallback = Annotated[bool, typer.Option(
    "--allow-fallback", help="Let logprobs mode fall back to generate when a model cannot score (recorded).")]
InvalidPolicy = Annotated[str, typer.Option("--invalid", help="retry-once (then unjudged) or no-retry.")]
Seed = Annotated[int, typer.Option("--seed")]
ContextTokens = Annotated[Optional[int], typer.Option(
    "--context-tokens", help="Model context size, to truncate long passages.")]


def backend_options(threads: int | None, base_url: str | None, api_key_env: str | None, concurrency: int | None,
                    timeout: float | None, context_tokens: int | None = None) -> dict:
    """The backend options given on the command line (the ones left out keep the backend's default)."""
    opts = {"n_threads": threads, "base_url": base_url, "api_key_env": api_key_env,
            "concurrency": concurrency, "timeout_s": timeout, "context_tokens": context_tokens}
    return {k: v for k, v in opts.items() if v is not None}


def fail_if_calls_failed(stats: Iterable[Any], what: str = "pairs") -> None:
    """Exit status 3, raised once the outputs are written, when model calls failed after their
    retries (JudgeStats.failed_calls): a pair left unjudged for a transport reason is not an
    answer, so the run is not complete. Invalid model answers are an outcome, not a failure."""
    stats = list(stats)
    failed = sum(s.failed_calls for s in stats)
    if not failed:
        return
    total = sum(s.pairs for s in stats)
    raise CallsFailed(
        f"{failed} of {total} {what} not judged because their model calls failed after all retries "
        "(reasons in the 'unjudged' lines above); the rest is written. Run the same command again to "
        "retry only those calls (answered calls are reused from the store)")
