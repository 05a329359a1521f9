"""Signal handling for the daemon's main thread. Handlers only record what arrived; the main loop acts (and logs:
a handler that logs could deadlock on the logging lock the interrupted code holds).

SIGTERM / SIGINT: the first asks for a graceful stop, the second for an immediate one. SIGXCPU (the soft CPU-time
limit; the kernel repeats it every second until the hard one's SIGKILL): a graceful stop, never escalated. SIGHUP:
reload. SIGUSR1: one status line in the log. augd.defaults.IGNORED_SIGNALS (SIGUSR2, SIGALRM, SIGPWR, ...: whose
default action would end the process silently): the first of each name gets one log line saying it is ignored
(a profiler's SIGPROF at 100 Hz must not flood the log). Every other catchable signal keeps its default action,
as docs/daemon.md lists.
"""
from __future__ import annotations

import signal
import threading

from augd.defaults import IGNORED_SIGNALS

__all__ = ["SignalState", "ignored_signals"]

STOP_SIGNALS = ("SIGTERM", "SIGINT")


def ignored_signals() -> list[signal.Signals]:
    """IGNORED_SIGNALS that this platform has."""
    return [getattr(signal, n) for n in IGNORED_SIGNALS if hasattr(signal, n)]


class SignalState:
    """`on_stop` runs inside the handler of the first stop signal: only for what must happen before any other
    thread sees the signal's effects (the pool must know not to replace workers the same signal ends)."""

    def __init__(self, on_stop=lambda: None):
        self.on_stop = on_stop
        self.stops = 0
        self.reloads = 0
        self.status_dumps = 0
        self.ignored: list[str] = []   # names of the ignored signals that arrived first, not yet logged
        self._seen: set[str] = set()
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

    def _on_xcpu(self, signum, frame) -> None:
        if self.stops == 0:
            self._on_stop(signum, frame)

    def _on_hup(self, _signum, _frame) -> None:
        self.reloads += 1
        self.wake.set()

    def _on_usr1(self, _signum, _frame) -> None:
        self.status_dumps += 1
        self.wake.set()

    def _on_ignored(self, signum, _frame) -> None:
        name = signal.Signals(signum).name
        if name not in self._seen:
            self._seen.add(name)
            self.ignored.append(name)
            self.wake.set()

    def take_ignored(self) -> list[str]:
        got, self.ignored = self.ignored, []
        return got

    def install(self) -> "SignalState":
        table = [(getattr(signal, n), self._on_stop) for n in STOP_SIGNALS if hasattr(signal, n)]
        table += [(signal.SIGHUP, self._on_hup), (signal.SIGUSR1, self._on_usr1)]
        table += [(signal.SIGXCPU, self._on_xcpu)] if hasattr(signal, "SIGXCPU") else []
        table += [(s, self._on_ignored) for s in ignored_signals()]
        for sig, fn in table:
            self._previous[sig] = signal.signal(sig, fn)
        return self

    def restore(self) -> None:
        for sig, fn in self._previous.items():
            signal.signal(sig, fn)
        self._previous.clear()

    def wait(self, timeout: float) -> None:
        if self.wake.wait(timeout):
            self.wake.clear()
