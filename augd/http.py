"""augd's one HTTP server: /metrics, /healthz, /readyz, /status and the status page at / (augd/statuspage.py).

prometheus_client's own server answers every path with metrics; this one routes. It runs on a daemon thread,
serves each request on its own thread, and only reads state through the callables it is given.
"""
from __future__ import annotations

import json
import logging
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from augd import statuspage

log = logging.getLogger("augd.http")

__all__ = ["StatusServer"]

class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address) -> None:
        """socketserver prints a traceback to stderr for every error; a client that resets its connection (a
        browser tab closed while the status page polls) is routine, so that is a debug line, the rest logged."""
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):
            log.debug("HTTP client %s went away: %s", client_address[0], exc)
        else:
            log.exception("HTTP connection from %s failed", client_address[0])


class StatusServer:
    """StatusServer(registry, bind, port, health=..., ready=..., status=...).start(); .stop()

    health() and ready() return (ok, details dict); status() returns a JSON-able dict."""

    def __init__(self, registry: CollectorRegistry, bind: str, port: int, *, health: Callable[[], tuple],
                 ready: Callable[[], tuple], status: Callable[[], dict], version: str = "",
                 preview: Callable[[], bytes | None] = lambda: None):
        self.registry = registry
        self.bind, self.requested_port = bind, port
        self.health, self.ready, self.status = health, ready, status
        self.preview = preview  # () -> PNG bytes of the last job's contact sheet, or None
        self.version = version
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._server.server_address[1] if self._server else self.requested_port

    def start(self) -> "StatusServer":
        owner = self

        class Handler(_Handler):
            server_owner = owner

        family = socket.AF_INET6 if ":" in self.bind else socket.AF_INET
        server_cls = type("_BoundServer", (_Server,), {"address_family": family})
        self._server = server_cls((self.bind, self.requested_port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="augd-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _Handler(BaseHTTPRequestHandler):
    server_owner: StatusServer
    protocol_version = "HTTP/1.1"

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
        except BrokenPipeError:
            pass
        except Exception as exc:  # noqa: BLE001 - one bad request must not kill the server
            log.exception("HTTP %s failed", path)
            self._send(500, f"internal error: {exc}\n".encode(), "text/plain")
