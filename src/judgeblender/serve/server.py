"""Running an ASGI app with uvicorn on a socket of our own: `judgeblender serve` (and the proxy
alike) bind first, so port 0 gets a free port that can be told before the first request, and
a host beyond loopback is refused without tokens before anything else is done.

SIGTERM and Ctrl+C stop the server gracefully (uvicorn's own handling): it stops accepting,
lets the requests in flight finish, runs the app's shutdown (the store closed, every answer
committed), and the command exits 0: a server told to stop has done what it was asked.
"""

from __future__ import annotations

import ipaddress
import signal
import socket
import threading
from collections.abc import Callable
from typing import Any

from ..errors import ArgumentError, InputError, require

BACKLOG = 4096  # connections waiting to be accepted


def is_loopback(host: str) -> bool:
    """Whether every address `host` names is a loopback one (127.0.0.0/8, ::1, localhost)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return False
    return bool(found) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in found)


def check_exposure(host: str, has_tokens: bool, option: str = "--token-file") -> None:
    """A server reachable beyond this machine needs bearer tokens: refused at start otherwise."""
    if not has_tokens and not is_loopback(host):
        raise ArgumentError("--host", f"a loopback address (127.0.0.1, ::1, localhost) unless {option} is given",
                            host, hint=f"a server reachable from other machines must ask for a token: pass "
                                       f"{option} FILE (one token a line)")


def read_tokens(path: Any) -> list[str]:
    """The bearer tokens of a token file: one a line, blank lines and `#` comments left out."""
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as exc:
        raise InputError(path, None, "a readable token file", exc.strerror or str(exc)) from None
    except UnicodeDecodeError:
        raise InputError(path, None, "a UTF-8 text file of tokens, one a line", "bytes that are not UTF-8") from None
    tokens = []
    for line in text.splitlines():
        token = line.strip()
        if token and not token.startswith("#"):
            if any(c.isspace() for c in token):
                raise InputError(path, len(tokens) + 1, "one token a line, without spaces", "a line with spaces")
            tokens.append(token)
    if not tokens:
        raise InputError(path, None, "at least one token (one a line)", "no token")
    return tokens


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port); port 0 picks a free one."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise ArgumentError("--host", "a host name or address of this machine", host, hint=str(exc)) from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ArgumentError("--port", "a port free to listen on", port, hint=exc.strerror or str(exc)) from None
    sock.listen(BACKLOG)  # connections made before uvicorn runs wait in the backlog, not refused
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}"


def run(app: Any, sock: socket.socket, on_listening: Callable[[str], None]) -> None:
    """Serve `app` on `sock` until SIGTERM or Ctrl+C, then return (exit 0) once the requests in
    flight are answered and the app's shutdown has run."""
    uvicorn = require("uvicorn", "serve", "judgeblender serve")
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_keep_alive=30,
                            backlog=BACKLOG)
    server = uvicorn.Server(config)
    on_listening(url_of(sock))
    # uvicorn handles SIGTERM/SIGINT while it runs (a graceful stop), then raises the signal again
    # for the handler it restores; a no-op one here, so the stop it has already made is the end
    main_thread = threading.current_thread() is threading.main_thread()
    before = {s: signal.signal(s, lambda *_: None) for s in (signal.SIGTERM, signal.SIGINT)} if main_thread else {}
    try:
        server.run(sockets=[sock])
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
        sock.close()
    if not server.started:
        from ..errors import JudgeblenderError

        raise JudgeblenderError("judgeblender serve: the server did not start (its log above says why)")
