"""The executor in one process: batches on a thread pool over one graph (TensorFlow and OpenCV release the GIL)."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from augd.job.executors import Traits
from augd.job.executors.local import Batches, LocalExecutor
from augd.job.report import GraphInfo

#: what run_job, the CLI and the daemon ask of it (augd.job.executors.Traits)
TRAITS = Traits(engine_here=True)

__all__ = ["Threads", "open_executor"]


class Threads(LocalExecutor):
    def __init__(self, launch):
        super().__init__(launch.plan, launch.memory_limit)
        self.workers, self.device, self.engine = launch.workers, launch.engine.device, launch.engine
        # the engine's kept graph when the last job ran this pipeline (a daemon's next job): no build, no trace
        self.compiled, built = launch.engine.kept.take(self.spec)
        self._builds, self._traces = int(built), 0 if built else self.compiled.traces   # this job's from there
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="augd-img")

    def submit(self, batches: Batches, batch):
        return self._pool.submit(batches.timed, self.compiled, self.spec, batch)

    def result(self, batches: Batches, future):
        return future.result()

    def graph(self) -> GraphInfo:
        c = self.compiled
        builds, traces = self._builds, c.traces - self._traces   # this job's
        return GraphInfo(builds, traces, c.stage_devices, "threads",
                         ({"pid": os.getpid(), "builds": builds, "traces": traces, "threads": self.workers},))

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)   # running batches end before their graph goes
        self.engine.kept.give_back(self.spec, self.compiled)   # kept for a next job of this pipeline; memory released


def open_executor(launch) -> Threads:
    return Threads(launch)
