"""The labeling server: the standard library's HTTP server, bound to 127.0.0.1 only.

Routes: GET / (the page), GET /api/state, GET /api/item?i=N, POST /api/label
({"i", "qid", "docid", "label": 0-3 or null for a skip}), GET /qrels (the labels so far).
A label that is not an int of the scale is answered 400; one the journal could not take
(disk full) 507, and it is not saved; a saved label whose qrels export failed 200 with a
"warning".
"""

from __future__ import annotations

import json
import re
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from ..pairs.qrels import format_qrels
from .journal import LEVELS, JournalWriteError, is_level
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
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
            i, qid, docid, label = body["i"], body["qid"], body["docid"], body["label"]
        except (ValueError, KeyError, TypeError):
            self._json(HTTPStatus.BAD_REQUEST, {"error": "expected JSON {i, qid, docid, label}"})
            return
        # Only an int of the scale: 2.0, 1e0, "2", true, NaN and 4 are refused, never stored.
        if label is not None and not is_level(label):
            shown = raw.decode("utf-8", "replace")
            field = json.dumps(label) if isinstance(label, (list, dict, str)) else _json_token(shown, label)
            self._json(HTTPStatus.BAD_REQUEST, {
                "error": f"label must be one of {', '.join(map(str, LEVELS))} (an integer) or null for a skip, "
                         f"got {field}; not saved"})
            return
        if type(i) is not int:
            self._json(HTTPStatus.BAD_REQUEST, {"error": f"i must be an integer pair index, got {json.dumps(i)}"})
            return
        if not isinstance(qid, str) or not isinstance(docid, str):
            self._json(HTTPStatus.BAD_REQUEST, {"error": "qid and docid must be strings"})
            return
        try:
            self._json(HTTPStatus.OK, self.server.session.record(i, qid, docid, label))
        except JournalWriteError as exc:
            self._json(HTTPStatus.INSUFFICIENT_STORAGE,
                       {"error": f"{exc}; this label was NOT saved: press its key again once that is fixed"})
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


def _json_token(body: str, value) -> str:
    """The label as the client wrote it (2.0 and 1e0 read alike once parsed)."""
    m = re.search(r'"label"\s*:\s*([^,}\s]+)', body)
    return m.group(1) if m else json.dumps(value)
