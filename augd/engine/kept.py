"""A long-lived process' last graph, kept for the next job of the same pipeline."""
from __future__ import annotations

import collections
import threading

__all__ = ["KeptGraphs"]


class KeptGraphs:
    """The graph of the last finished job, kept for the next job of the same pipeline (the same normalized spec,
    seed included): the daemon runs one pipeline job after job, and building its graph costs ~0.1-0.2 s and a
    slow first call, more than a small job's images. One is kept at most; a job of another pipeline closes it
    before building its own, so a long-lived process stays flat whatever the jobs. Each worker process keeps its
    own (augd.job.workers.serve); the threads executor keeps its engine's (Engine.kept)."""

    def __init__(self, engine, release_memory):
        self.engine, self.release = engine, release_memory
        self.kept = None   # (spec sha256, Compiled)
        self._users: collections.Counter = collections.Counter()   # take/give_back: graphs jobs hold now
        self._lock = threading.Lock()

    def take(self, spec):
        """get() for a job on a thread of this process, the graphs other jobs hold here counted (a job that
        overran its timeout may still be finishing a batch): (the job's graph, whether it was built now)."""
        with self._lock:
            compiled, built = self.get(spec, list(self._users))
            self._users[compiled] += 1
            return compiled, built

    def give_back(self, spec, compiled) -> None:
        """done() for a graph take() gave."""
        with self._lock:
            self._users[compiled] -= 1
            if self._users[compiled] <= 0:
                del self._users[compiled]
            self.done(spec, compiled, list(self._users))

    def get(self, spec, in_use: list):
        """(the job's graph, whether it was built now)."""
        if self.kept is not None and self.kept[0] == spec.sha256:
            return self.kept[1], False
        self._drop(in_use)
        return self.engine.compile(spec), True

    def done(self, spec, compiled, in_use: list) -> None:
        """A job let its graph go; `in_use`: the graphs of the jobs still running here."""
        if compiled is not None and compiled not in in_use:
            if self.kept is None or self.kept[1] is not compiled:
                self._drop(in_use)
                self.kept = (spec.sha256, compiled)
        self.release()

    def _drop(self, in_use: list) -> None:
        if self.kept is not None:
            if self.kept[1] not in in_use:   # a running job's graph is closed when that job lets it go
                self.kept[1].close()
            self.kept = None
            self.release()
