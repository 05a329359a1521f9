"""Signal handling for the daemon's main thread. Handlers only record what arrived; the main loop acts.

SIGTERM / SIGINT: the first asks for a graceful stop, the second for an immediate one. SIGHUP: reload.
"""
from __future__ import annotations

import signal
import threading

__all__ = ["SignalState"]


class SignalState:
    """`on_stop` runs inside the handler of the first stop signal: only for what must happen before any other
    thread sees the signal's effects (the pool must know not to replace workers the same signal ends)."""

    def __init__(self, on_stop=lambda: None):
        self.on_stop = on_stop
        self.stops = 0
        self.reloads = 0
        self.wake = threading.Event()
        self._previous: dict = {}

    def _on_stop(self, signum, _frame) -> None:
        self.stops += 1
        self.last = signal.Signals(signum).name
        try:
            if self.stops == 1:
                self.on_stop()
        finally:
            self.wake.set()

    def _on_hup(self, _signum, _frame) -> None:
        self.reloads += 1
        self.wake.set()

    def install(self) -> "SignalState":
        for sig, fn in ((signal.SIGTERM, self._on_stop), (signal.SIGINT, self._on_stop),
                        (signal.SIGHUP, self._on_hup)):
            self._previous[sig] = signal.signal(sig, fn)
        return self

    def restore(self) -> None:
        for sig, fn in self._previous.items():
            signal.signal(sig, fn)
        self._previous.clear()

    def wait(self, timeout: float) -> None:
        if self.wake.wait(timeout):
            self.wake.clear()
