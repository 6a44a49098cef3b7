"""What `judgeblender serve` and `judgeblender proxy` share as network servers: whether a host is
loopback, the token file and the bearer check, and running an ASGI app with uvicorn on a socket
of our own. Both bind first, so port 0 gets a free port that can be told before the first request, and
a host beyond loopback is refused without tokens before anything else is done.

SIGTERM and Ctrl+C stop the server gracefully (uvicorn's own handling): it stops accepting,
lets the requests in flight finish, runs the app's shutdown (the store closed, every answer
committed), and the command exits 0: a server told to stop has done what it was asked.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import socket
import stat
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ArgumentError, InputError, JudgeblenderError, require

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


def check_exposure(host: str, has_tokens: bool) -> None:
    """A server reachable beyond this machine needs bearer tokens: refused at start otherwise."""
    if not has_tokens and not is_loopback(host):
        raise ArgumentError("host", "a loopback address (127.0.0.1, ::1, localhost) unless token_file= is given",
                            host, hint="a server reachable from other machines must ask for a token: pass "
                                       "token_file=FILE (one token a line)")


def read_tokens(path: Any, *, owner_only: bool = False, min_length: int = 1) -> list[str]:
    """The bearer tokens of a token file: one a line, blank lines and `#` comments left out.
    `owner_only`: the file must be a regular file only its owner can read, as an API key file
    (the proxy's tokens stand in for its upstream key); `min_length`: each token at least this
    long (a guessable token is refused)."""
    path = Path(path)
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise InputError(path, None, "a regular file of bearer tokens, one a line", "not a regular file")
        if owner_only and os.name == "posix" and st.st_mode & 0o077:
            raise InputError(path, None, "a file only its owner can read (chmod 600)",
                             f"permissions {stat.S_IMODE(st.st_mode):04o}")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(path, None, "a file of bearer tokens, one a line", "no such file") from None
    except UnicodeDecodeError:
        raise InputError(path, None, "a UTF-8 text file of tokens, one a line", "bytes that are not UTF-8") from None
    except OSError as exc:
        raise InputError(path, None, "a readable token file", exc.strerror or str(exc)) from None
    tokens = []
    for number, line in enumerate(text.splitlines(), 1):
        token = line.strip()
        if not token or token.startswith("#"):
            continue
        if any(c.isspace() for c in token):
            raise InputError(path, number, "one token a line, without spaces", "a line with spaces")
        if len(token) < min_length:
            raise InputError(path, number, f"one token of {min_length} or more characters", "a shorter token")
        tokens.append(token)
    if not tokens:
        raise InputError(path, None, "at least one token (one a line)", "no token")
    return tokens


def bearer_allowed(authorization: str | None, tokens: Sequence[bytes] | None) -> bool:
    """Whether an Authorization header presents one of `tokens` (None: no token needed). Every
    token is compared, each in constant time, whichever matches: no early exit to time."""
    if tokens is None:
        return True
    scheme, _, token = (authorization or "").partition(" ")
    presented = token.strip().encode()
    if scheme.lower() != "bearer" or not presented:
        return False
    ok = False
    for known in tokens:
        ok |= hmac.compare_digest(presented, known)
    return ok


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port); port 0 picks a free one."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise ArgumentError("host", "a host name or address of this machine", host, hint=str(exc)) from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ArgumentError("port", "a port free to listen on", port, hint=exc.strerror or str(exc)) from None
    sock.listen(BACKLOG)  # connections made before uvicorn runs wait in the backlog, not refused
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}"


@contextmanager
def _graceful_signals(server: Any) -> Iterator[None]:
    """uvicorn's signal handling (SIGTERM and SIGINT stop it gracefully: in-flight requests
    finish, the app's shutdown runs) without its last step, which raises the signal again once
    the server has stopped: a server stopped by SIGTERM has done what it was asked, and exits 0."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, server.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run(app: Any, sock: socket.socket, what: str, **config: Any) -> None:
    """Serve `app` on `sock` until SIGTERM or Ctrl+C, then return (exit 0) once the requests in
    flight are answered and the app's shutdown has run. The app announces itself from its
    startup, once it can answer (serve's judges loaded, the proxy's client made): said earlier,
    a client would wait on the start-up. `config`: more of uvicorn.Config's settings. `what`
    names the server in the error when it does not start."""
    uvicorn = require("uvicorn", "serve", what)

    class Server(uvicorn.Server):
        def capture_signals(self):  # see _graceful_signals
            return _graceful_signals(self)

    server = Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                                   **{"timeout_keep_alive": 30, "backlog": BACKLOG, **config}))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    if not server.started:
        raise JudgeblenderError(f"{what}: the server did not start (its log above says why)")
