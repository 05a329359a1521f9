"""systemd's sd_notify protocol, without libsystemd: one datagram per message to $NOTIFY_SOCKET.

A path starting with "@" names a socket in Linux's abstract namespace. With NOTIFY_SOCKET unset every call is
a no-op, so the daemon never needs to know whether it runs under systemd.
"""
from __future__ import annotations

import logging
import os
import socket
import threading

log = logging.getLogger("augd.daemon")

__all__ = ["Notifier", "watchdog_interval"]


class Notifier:
    """notify("READY=1"), notify("STATUS=idle"), ... Thread-safe; never raises."""

    def __init__(self, address: str | None = None):
        address = os.environ.get("NOTIFY_SOCKET") if address is None else address
        self.address = None
        self._sock = None
        self._lock = threading.Lock()
        self._warned = False
        if address:
            self.address = "\0" + address[1:] if address.startswith("@") else address
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)

    @property
    def enabled(self) -> bool:
        return self._sock is not None

    def notify(self, *lines: str) -> bool:
        if self._sock is None:
            return False
        payload = "\n".join(lines).encode("utf-8", "replace")
        with self._lock:
            try:
                self._sock.sendto(payload, self.address)
                return True
            except OSError as exc:
                if not self._warned:  # a missing socket would otherwise log once a second
                    log.warning("sd_notify to %r failed: %s", self.address, exc)
                    self._warned = True
                return False

    def close(self) -> None:
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None


def watchdog_interval() -> float | None:
    """Half of systemd's WatchdogSec (from $WATCHDOG_USEC, when addressed to this pid), else None."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        return max(int(usec) / 1e6 / 2, 0.1)
    except ValueError:
        return None
