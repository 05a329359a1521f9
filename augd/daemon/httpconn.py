"""Connections for augd's HTTP server, bounded so that no client can starve the daemon.

One thread (augd-http) owns the listening socket and every open connection: it accepts, reads request heads and
writes replies, all without blocking, and closes what is too slow. A whole request head goes to one of a fixed
set of handler threads (augd-http-N), which compute the reply into memory and hand it back. So a client that
sends half a request, or none, or never reads its reply, holds no thread and blocks nothing; the threads never
grow with clients, and /healthz is answered whatever the others do.

Bounds (ConnLimits, from the daemon config's http_* keys):
* a request head must arrive whole within `request_timeout` of its first byte (of the connection, for the first
  request); an idle keep-alive connection is closed after `idle_timeout`; a reply must be read within
  `request_timeout`;
* at most `max_connections` are open at once (also capped to a share of the process' open-files limit, so the
  job loop keeps its descriptors). A new connection over the cap closes the one that has waited longest without
  a whole request (an idle keep-alive first); when every open one is being answered, new ones wait in the
  listen backlog;
* an accept that fails (EMFILE, ENFILE, ENOBUFS, ...) pauses accepting for a moment and goes on: the port never
  closes while the process lives.
"""
from __future__ import annotations

import errno
import logging
import queue
import resource
import selectors
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

from augd import defaults

log = logging.getLogger("augd.http")

__all__ = ["DROP_REASONS", "ConnLimits", "ConnServer", "descriptor_share"]

#: Why the server closed a connection on its own (augd_http_connections_closed_total{reason}).
DROP_REASONS = ("timeout", "evicted", "reset", "accept_error", "too_large")

#: A request head larger than this is refused (431) and the connection closed.
MAX_HEAD_BYTES = 64 * 1024
#: After a failed accept, accepting pauses this long (the failure is usually a descriptor shortage).
ACCEPT_BACKOFF_SECONDS = 0.25
#: A failed accept is logged at most this often (a shortage of descriptors lasts, and each retry fails).
ACCEPT_WARN_SECONDS = 60.0
#: The HTTP server may hold at most this share of the process' open-files limit.
FD_SHARE = 0.25
_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)   # a reset peer raises EPIPE here, never SIGPIPE


@dataclass(frozen=True)
class ConnLimits:
    """The server's bounds; the defaults (and what they mean) are augd.defaults' HTTP_*."""
    request_timeout: float = defaults.HTTP_REQUEST_TIMEOUT_SECONDS
    idle_timeout: float = defaults.HTTP_IDLE_TIMEOUT_SECONDS
    max_connections: int = defaults.HTTP_MAX_CONNECTIONS
    threads: int = defaults.HTTP_THREADS


def descriptor_share(wanted: int, soft: int | None = None) -> int:
    """`wanted` connections, capped to FD_SHARE of the open-files soft limit (this process', unless given): the
    rest stays for jobs, worker pipes and TensorFlow (the daemon first raises its soft limit to the hard one:
    augd.host.raise_open_files)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0] if soft is None else soft
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(8, min(wanted, int(soft * FD_SHARE)))


class _Conn:
    __slots__ = ("sock", "addr", "buffer", "out", "deadline", "state", "since", "keep")

    def __init__(self, sock: socket.socket, addr, deadline: float):
        self.sock, self.addr = sock, addr
        self.buffer = b""          # bytes received and not yet answered
        self.out = b""             # the reply, as the handler made it, still to send
        self.deadline = deadline
        self.state = "head"        # head: reading a request; idle: kept alive; busy: with a handler; reply: sending
        self.since = time.monotonic()
        self.keep = False          # set by the handler: the connection may carry another request


class ConnServer:
    """ConnServer(bind, port, answer, limits).start(); .stop(). answer(conn) runs on a handler thread with
    conn.buffer holding at least one whole request head; it answers one request by returning the reply's bytes,
    sets conn.keep, and leaves any bytes after that request in conn.buffer."""

    def __init__(self, bind: str, port: int, answer: Callable[[_Conn], bytes], limits: ConnLimits,
                 on_drop: Callable[[str], None] = lambda reason: None):
        self.limits = limits
        self._answer, self._on_drop = answer, on_drop
        self.max_connections = descriptor_share(limits.max_connections)
        if self.max_connections < limits.max_connections:
            log.warning("HTTP: at most %d connections (not %d): the open-files limit is %d and the jobs keep the "
                        "rest", self.max_connections, limits.max_connections,
                        resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        family = socket.AF_INET6 if ":" in bind else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((bind, port))
            self._listener.listen(128)
            self._listener.setblocking(False)
        except OSError:
            self._listener.close()
            raise
        self.port = self._listener.getsockname()[1]
        self._conns: dict[int, _Conn] = {}            # fileno -> connection; the loop thread's alone
        self._ready: queue.Queue = queue.Queue()      # whole requests for the handler threads
        self._back: deque[_Conn] = deque()            # answered connections, back to the loop
        # socket objects, not raw fds: once closed their fileno is -1, so a late wake-up can never write into a
        # descriptor number that the process has since reused for a file
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._stop = threading.Event()
        self._listening = False
        self._paused_until = 0.0
        self._accept_errors = 0                       # failed accepts since the last warning
        self._warned_at = -ACCEPT_WARN_SECONDS
        self.stats = {"accepted": 0, **dict.fromkeys(DROP_REASONS, 0)}
        self._sel = selectors.DefaultSelector()
        self._threads: list[threading.Thread] = []

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def start(self) -> "ConnServer":
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._listen(True)
        self._threads = [threading.Thread(target=self._loop, name="augd-http", daemon=True)]
        self._threads += [threading.Thread(target=self._handle, name=f"augd-http-{i}", daemon=True)
                          for i in range(self.limits.threads)]
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake()
        for _ in range(self.limits.threads):
            self._ready.put(None)
        deadline = time.monotonic() + 10   # handlers only compute replies: they end as soon as their one does
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        for conn in [*self._conns.values(), *self._back]:
            conn.sock.close()
        self._conns.clear()
        self._back.clear()
        self._sel.close()
        self._listener.close()
        self._wake_r.close()
        self._wake_w.close()

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    # -- the loop thread ---------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._round()
            except Exception:  # noqa: BLE001 - the server outlives any one failure; never spin on one
                log.exception("HTTP connection loop failed; going on")
                self._stop.wait(ACCEPT_BACKOFF_SECONDS)

    def _round(self) -> None:
        now = time.monotonic()
        if not self._listening and now >= self._paused_until and len(self._conns) < self.max_connections:
            self._listen(True)
        waits = [c.deadline for c in self._conns.values() if c.state != "busy"]
        if not self._listening and self._paused_until > now:
            waits.append(self._paused_until)
        timeout = max(0.0, min([now + 0.5, *waits]) - now)
        for key, mask in self._sel.select(timeout):
            if key.data is None:
                self._drain_wake()
            elif key.data == "listen":
                self._accept()
            elif key.data.sock.fileno() != -1:   # not closed earlier in this round (evicted by an accept)
                self._send(key.data) if mask & selectors.EVENT_WRITE else self._read(key.data)
        self._take_back()
        now = time.monotonic()
        for conn in [c for c in self._conns.values() if c.state != "busy" and c.deadline <= now]:
            if conn.state in ("head", "reply") and (conn.buffer or conn.out):
                log.debug("HTTP client %s: %s within %gs; closed", conn.addr[0], "no whole request" if
                          conn.state == "head" else "reply not read", self.limits.request_timeout)
            self._drop(conn, None if conn.state == "idle" else "timeout")

    def _listen(self, on: bool) -> None:
        if on and not self._listening:
            self._sel.register(self._listener, selectors.EVENT_READ, "listen")
        elif not on and self._listening:
            self._sel.unregister(self._listener)
        self._listening = on

    def _accept(self) -> None:
        for _ in range(64):   # then the other events get their turn
            if len(self._conns) >= self.max_connections and not self._evict():
                self._listen(False)   # every connection is being answered: new ones wait in the backlog
                return
            try:
                sock, addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:   # EMFILE, ENFILE, ENOBUFS, ENOMEM: no descriptor or buffer for it now
                self._accept_failed(exc)
                return
            sock.setblocking(False)
            conn = _Conn(sock, addr, time.monotonic() + self.limits.request_timeout)
            self._conns[sock.fileno()] = conn
            self._sel.register(sock, selectors.EVENT_READ, conn)
            self.stats["accepted"] += 1

    def _accept_failed(self, exc: OSError) -> None:
        self._count("accept_error")
        self._accept_errors += 1
        now = time.monotonic()
        if now - self._warned_at >= ACCEPT_WARN_SECONDS:
            log.warning("HTTP: cannot accept a connection (%s); pausing accepts for %gs and retrying, %d "
                        "connections open, %d failed accepts (this message: at most once a minute)",
                        errno.errorcode.get(exc.errno, exc), ACCEPT_BACKOFF_SECONDS, len(self._conns),
                        self._accept_errors)
            self._warned_at, self._accept_errors = now, 0
        self._paused_until = now + ACCEPT_BACKOFF_SECONDS
        self._listen(False)

    def _evict(self) -> bool:
        """Close the connection that has waited longest without a whole request (idle keep-alive ones first,
        replies nobody reads last)."""
        waiting = [c for c in self._conns.values() if c.state != "busy"]
        if not waiting:
            return False
        order = {"idle": 0, "head": 1, "reply": 2}
        self._drop(min(waiting, key=lambda c: (order[c.state], c.since)), "evicted")
        return True

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:   # a reset
            log.debug("HTTP client %s went away: %s", conn.addr[0], exc)
            self._drop(conn, "reset")
            return
        if not data:
            self._drop(conn, None)
            return
        if conn.state == "idle":   # the next request on a kept-alive connection: its head has the full time
            conn.state, conn.since = "head", time.monotonic()
            conn.deadline = conn.since + self.limits.request_timeout
        conn.buffer += data
        self._dispatch_if_whole(conn)

    def _dispatch_if_whole(self, conn: _Conn) -> None:
        if b"\r\n\r\n" in conn.buffer or b"\n\n" in conn.buffer:
            self._sel.unregister(conn.sock)
            conn.state = "busy"
            self._ready.put(conn)
        elif len(conn.buffer) > MAX_HEAD_BYTES:
            try:
                conn.sock.send(b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
                               b"Connection: close\r\n\r\n", _NOSIGNAL)
            except OSError:
                pass
            self._drop(conn, "too_large")

    def _take_back(self) -> None:
        """Answered connections: their replies are sent from here, without blocking, within request_timeout."""
        while self._back:
            conn = self._back.popleft()
            if self._stop.is_set() or not conn.out:
                self._drop(conn, None)
                continue
            conn.state, conn.since = "reply", time.monotonic()
            conn.deadline = conn.since + self.limits.request_timeout
            self._sel.register(conn.sock, selectors.EVENT_WRITE, conn)
            self._send(conn)

    def _send(self, conn: _Conn) -> None:
        try:
            sent = conn.sock.send(conn.out, _NOSIGNAL)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:   # reset, or a broken pipe: EPIPE here, never SIGPIPE
            log.debug("HTTP client %s went away: %s", conn.addr[0], exc)
            self._drop(conn, "reset")
            return
        conn.out = conn.out[sent:]
        if conn.out:
            return
        if not conn.keep:
            self._drop(conn, None)
            return
        conn.state, conn.since = ("head", time.monotonic()) if conn.buffer else ("idle", time.monotonic())
        conn.deadline = conn.since + (self.limits.request_timeout if conn.buffer else self.limits.idle_timeout)
        self._sel.modify(conn.sock, selectors.EVENT_READ, conn)
        self._dispatch_if_whole(conn)   # a pipelined request may already be whole

    def _drop(self, conn: _Conn, reason: str | None) -> None:
        self._conns.pop(conn.sock.fileno(), None)
        if conn.state != "busy":
            try:
                self._sel.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
        conn.sock.close()
        if reason is not None:
            self._count(reason)

    def _count(self, reason: str) -> None:
        self.stats[reason] += 1
        try:
            self._on_drop(reason)
        except Exception:  # noqa: BLE001 - a metric must not keep a connection open
            log.debug("HTTP: on_drop(%r) failed", reason, exc_info=True)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:   # full: a wake-up is pending anyway; closed: stopping
            pass

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    # -- handler threads ---------------------------------------------------------------------------------------
    def _handle(self) -> None:
        while True:
            conn = self._ready.get()
            if conn is None:
                return
            conn.keep, conn.out = False, b""
            try:
                conn.out = self._answer(conn)
            except Exception:  # noqa: BLE001 - one request's failure is its own
                log.exception("HTTP request from %s failed", conn.addr[0])
                conn.keep, conn.out = False, b""
            self._back.append(conn)
            self._wake()
