"""`judgeblender proxy`: an OpenAI-compatible caching proxy in front of a served model (docs/serve.md).

Starlette and uvicorn (the `[serve]` extra) are imported only when the command runs, so
`import judgeblender`, `--help` and every other command never load them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .. import masking
from ..errors import require
from .console import err_console


def register(app: typer.Typer) -> None:
    @app.command("proxy")
    def proxy_command(
        upstream: str = typer.Option(..., "--upstream", help="The served model's base URL, as --base-url takes it "
                                     "(e.g. http://127.0.0.1:8000/v1).", callback=masking.register_url),
        store: Path = typer.Option(Path("judgments.sqlite"), "--store", help="The store its answers are kept in."),
        host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on; beyond loopback, --token-file "
                                 "is required."),
        port: int = typer.Option(8080, "--port", help="Port to listen on; 0 picks a free one (printed)."),
        token_file: Optional[Path] = typer.Option(None, "--token-file", help="Bearer tokens clients must present, "
                                                  "one a line (a file only its owner can read). With it, the "
                                                  "upstream key comes from --api-key-env and every token "
                                                  "holder shares every answer; without it, each client's own "
                                                  "key is forwarded (loopback only) and answers are shared "
                                                  "only among clients with the same key."),
        api_key_env: Optional[str] = typer.Option(None, "--api-key-env", help="With --token-file: the environment "
                                                  "variable holding the upstream's API key [OPENAI_API_KEY]."),
        timeout: float = typer.Option(600.0, "--timeout", help="Seconds an upstream call may take."),
    ) -> None:
        """Serve an OpenAI-compatible proxy (POST /v1/chat/completions, GET /v1/models) that answers repeated
        deterministic requests (temperature 0, or a seed) from the store, keeping every answer it gets there."""
        for module in ("starlette", "uvicorn"):
            require(module, "serve", "judgeblender proxy")
        from ..serve.proxy import proxy_settings, run_proxy

        settings = proxy_settings(upstream, store, host=host, port=port, token_file=token_file,
                                  api_key_env=api_key_env, timeout_s=timeout)

        def announce(url: str) -> None:
            # the URL goes to stdout, flushed: scripts and tests read the port from it
            print(f"proxy for {settings.upstream} at {url} (store {settings.store})", flush=True)
            err_console.print("SIGTERM or Ctrl+C stops it (requests in flight are finished first)", markup=False)

        run_proxy(settings, announce=announce)
        err_console.print("proxy stopped", markup=False)
