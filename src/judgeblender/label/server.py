"""The labeling server: the standard library's HTTP server, bound to 127.0.0.1 only.

Routes: GET / (the page), GET /api/state, GET /api/item?i=N, POST /api/label
({"i", "qid", "docid", "label": 0-3 or null for a skip}), GET /qrels (the labels so far).
"""

from __future__ import annotations

import json
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from ..pairs.qrels import format_qrels
from .journal import LEVELS
from .page import PAGE_HTML
from .session import LabelSession

HOST = "127.0.0.1"
MAX_BODY = 4096


class LabelServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, session: LabelSession, port: int = 0):
        self.session = session
        super().__init__((HOST, port), LabelHandler)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/"


class LabelHandler(BaseHTTPRequestHandler):
    server: LabelServer
    server_version = "judgeblender-label"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass  # one line per key press would drown the terminal

    # -- routing -------------------------------------------------------------------------
    def do_GET(self):
        if not self._host_ok():
            return
        url = urlsplit(self.path)
        session = self.server.session
        if url.path == "/":
            self._send(HTTPStatus.OK, PAGE_HTML.encode("utf-8"), "text/html; charset=utf-8")
        elif url.path == "/api/state":
            self._json(HTTPStatus.OK, session.state())
        elif url.path == "/api/item":
            raw = parse_qs(url.query).get("i", [""])[0]
            try:
                self._json(HTTPStatus.OK, session.item(int(raw)))
            except (ValueError, IndexError) as exc:
                self._json(HTTPStatus.BAD_REQUEST, {"error": f"bad pair index {raw!r}: {exc}"})
        elif url.path == "/qrels":
            body = format_qrels((q, d, lab) for q, docs in session.qrels().items() for d, lab in docs.items())
            self._send(HTTPStatus.OK, body.encode("utf-8"), "text/plain; charset=utf-8",
                       {"Content-Disposition": f'attachment; filename="{session.out.name}"'})
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no such page: {url.path}"})

    def do_POST(self):
        if not self._host_ok():
            return
        if urlsplit(self.path).path != "/api/label":
            self._json(HTTPStatus.NOT_FOUND, {"error": "POST goes to /api/label"})
            return
        # A JSON content type cannot be sent cross-site without a CORS preflight, which this
        # server never grants: other web pages cannot write labels.
        if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
            self._json(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, {"error": "send application/json"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= MAX_BODY:
            self._json(HTTPStatus.BAD_REQUEST, {"error": f"a body of 1..{MAX_BODY} bytes is needed"})
            return
        try:
            body = json.loads(self.rfile.read(length))
            i, qid, docid, label = body["i"], body["qid"], body["docid"], body["label"]
        except (ValueError, KeyError, TypeError):
            self._json(HTTPStatus.BAD_REQUEST, {"error": "expected JSON {i, qid, docid, label}"})
            return
        if isinstance(label, bool) or (label is not None and label not in LEVELS) or isinstance(i, bool) \
                or not isinstance(i, int):
            self._json(HTTPStatus.BAD_REQUEST, {"error": "label must be 0-3 or null (skip); i an integer"})
            return
        try:
            self._json(HTTPStatus.OK, self.server.session.record(i, str(qid), str(docid), label))
        except IndexError as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
        except LookupError as exc:
            self._json(HTTPStatus.CONFLICT, {"error": str(exc)})

    # -- helpers -------------------------------------------------------------------------
    def _host_ok(self) -> bool:
        # Refuse requests addressed to another host name: a DNS-rebinding page cannot reach us.
        port = self.server.server_address[1]
        if self.headers.get("Host") in (f"{HOST}:{port}", f"localhost:{port}"):
            return True
        self._json(HTTPStatus.MISDIRECTED_REQUEST, {"error": "use http://127.0.0.1 to reach this server"})
        return False

    def _json(self, status: HTTPStatus, obj) -> None:
        self._send(status, json.dumps(obj, ensure_ascii=False).encode("utf-8"), "application/json; charset=utf-8")

    def _send(self, status: HTTPStatus, body: bytes, ctype: str, extra: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy",
                         "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                         "connect-src 'self'; img-src 'none'")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
