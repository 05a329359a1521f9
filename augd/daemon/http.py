"""augd's one HTTP server: /metrics, /healthz, /readyz, /status and the status page at / (augd/daemon/statuspage.py).

prometheus_client's own server answers every path with metrics; this one routes. Connections are taken by
augd/daemon/httpconn.py (bounded in number and time, so rude clients cannot starve the daemon); each whole request is
answered here by a BaseHTTPRequestHandler, which only reads state through the callables it is given.
"""
from __future__ import annotations

import io
import json
import logging
from http.server import BaseHTTPRequestHandler
from typing import Callable

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from augd.daemon import statuspage
from augd.daemon.httpconn import ConnLimits, ConnServer

log = logging.getLogger("augd.http")

__all__ = ["ConnLimits", "StatusServer"]


class StatusServer:
    """StatusServer(registry, bind, port, health=..., ready=..., status=...).start(); .stop()

    health() and ready() return (ok, details dict); status() returns a JSON-able dict. on_drop(reason) is told of
    every connection the server closes on its own (timeout, evicted, reset, accept_error, too_large)."""

    def __init__(self, registry: CollectorRegistry, bind: str, port: int, *, health: Callable[[], tuple],
                 ready: Callable[[], tuple], status: Callable[[], dict], version: str = "",
                 preview: Callable[[], bytes | None] = lambda: None, limits: ConnLimits = ConnLimits(),
                 on_drop: Callable[[str], None] = lambda reason: None):
        self.registry = registry
        self.bind, self.requested_port = bind, port
        self.health, self.ready, self.status = health, ready, status
        self.preview = preview  # () -> PNG bytes of the last job's contact sheet, or None
        self.version = version
        self.limits, self.on_drop = limits, on_drop
        self._server: ConnServer | None = None

    @property
    def port(self) -> int:
        return self._server.port if self._server else self.requested_port

    @property
    def connections(self) -> dict:
        """What /status shows of the server: open connections, the cap, and what it closed on its own."""
        if self._server is None:
            return {}
        return {"open": self._server.open_connections, "max": self._server.max_connections,
                **self._server.stats}

    def start(self) -> "StatusServer":
        owner = self

        class Handler(_Handler):
            server_owner = owner

        def answer(conn) -> bytes:
            return Handler(conn, conn.addr, None).reply

        self._server = ConnServer(self.bind, self.requested_port, answer, self.limits, self.on_drop).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


class _Handler(BaseHTTPRequestHandler):
    """Answers the one request at the head of a connection's buffer (httpconn hands it over whole, and sends
    the reply, which is made here in memory: no handler ever waits on a client)."""
    server_owner: StatusServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        self.conn = self.request
        self.rfile = io.BytesIO(self.conn.buffer)
        self.wfile = io.BytesIO()

    def handle(self) -> None:
        self.close_connection = True
        self.handle_one_request()
        headers = getattr(self, "headers", None)
        if getattr(self, "command", None) not in ("GET", "HEAD") or (headers is not None and (
                headers.get("Content-Length", "0").strip() != "0" or "Transfer-Encoding" in headers)):
            self.close_connection = True   # a body we did not read must not be taken for the next request
        self.conn.keep = not self.close_connection
        self.conn.buffer = self.rfile.read()

    def finish(self) -> None:
        self.reply = self.wfile.getvalue()

    def log_message(self, fmt, *args):  # the default writes every request to stderr
        log.debug("%s %s", self.address_string(), fmt % args)

    def _send(self, code: int, body: bytes, ctype: str, headers: dict | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")  # every answer is live state
        self.send_header("X-Content-Type-Options", "nosniff")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, code: int, obj) -> None:
        self._send(code, (json.dumps(obj, indent=2, default=str) + "\n").encode(), "application/json")

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        owner = self.server_owner
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        try:
            if path == "/metrics":
                encoder, ctype = choose_encoder(self.headers.get("Accept", ""))
                self._send(200, encoder(owner.registry), ctype)
            elif path in ("/healthz", "/readyz"):
                ok, details = (owner.health if path == "/healthz" else owner.ready)()
                self._json(200 if ok else 503, {"ok": ok, **details})
            elif path == "/status":
                self._json(200, owner.status())
            elif path == "/preview.png":
                png = owner.preview()
                if not png:
                    self._send(404, b"no preview: no job has finished yet, or status_preview is off\n", "text/plain")
                else:
                    self._send(200, png, "image/png")
            elif path == "/":
                self._send(200, statuspage.render(owner.status(), owner.version), "text/html; charset=utf-8",
                           {"Content-Security-Policy": statuspage.CSP, "Referrer-Policy": "no-referrer"})
            else:
                self._send(404, b"not found: try /metrics, /healthz, /readyz, /status or /preview.png\n",
                           "text/plain")
        except Exception as exc:  # noqa: BLE001 - one bad request must not kill the server
            log.exception("HTTP %s failed", path)
            self._headers_buffer = []   # whatever was begun is not sent
            self.wfile.seek(0)
            self.wfile.truncate()
            self._send(500, f"internal error: {exc}\n".encode(), "text/plain")
