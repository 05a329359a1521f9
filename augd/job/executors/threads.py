"""The executor in one process: batches on a thread pool over one graph (TensorFlow and OpenCV release the GIL)."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from augd.engine import release_memory
from augd.job.executors import Traits
from augd.job.executors.local import Batches, LocalExecutor
from augd.job.report import GraphInfo

#: what run_job, the CLI and the daemon ask of it (augd.job.executors.Traits)
TRAITS = Traits(engine_here=True)

__all__ = ["Threads", "open_executor"]


class Threads(LocalExecutor):
    def __init__(self, launch):
        super().__init__(launch.plan, launch.memory_limit)
        self.workers, self.device = launch.workers, launch.engine.device
        self.compiled = launch.engine.compile(self.spec)
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="augd-img")

    def submit(self, batches: Batches, batch):
        return self._pool.submit(batches.timed, self.compiled, self.spec, batch)

    def result(self, batches: Batches, future):
        return future.result()

    def graph(self) -> GraphInfo:
        c = self.compiled
        return GraphInfo(c.builds, c.traces, c.stage_devices, "threads",
                         ({"pid": os.getpid(), "builds": c.builds, "traces": c.traces, "threads": self.workers},))

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)   # running batches end before their graph goes
        self.compiled.close()
        release_memory()  # a long-lived process (the daemon) stays flat from job to job


def open_executor(launch) -> Threads:
    return Threads(launch)
