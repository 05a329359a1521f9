"""The executor over worker processes (augd.job.workers.pool): each builds the job's graph at its first batch. The
pool is the caller's warm one (the daemon's, `augd run`'s early one) or started for the job and closed after."""
from __future__ import annotations

from augd.job.executors import Traits
from augd.job.executors.local import Batches, LocalExecutor
from augd.job.report import GraphInfo
from augd.job.workers.pool import ProcessPool

#: what run_job, the CLI and the daemon ask of it (augd.job.executors.Traits)
TRAITS = Traits(pool=True)

__all__ = ["Processes", "open_executor"]


class Processes(LocalExecutor):
    def __init__(self, launch):
        super().__init__(launch.plan, launch.memory_limit)   # the memory check comes before any process starts
        self.own = launch.pool is None
        self.pool = launch.pool or ProcessPool(launch.workers, launch.engine_options)
        self.workers = self.pool.size
        # the workers' device where this process has no engine (it never loads TensorFlow then: augd.job.run)
        self.device = launch.engine.device if launch.engine is not None else self.pool.device()
        try:
            self.job = self.pool.start_job(self.spec, self.detection, self.partners)
        except BaseException:
            if self.own:
                self.pool.close()
            raise

    def submit(self, batches: Batches, batch):
        return self.pool.submit(self.job, batch, batches.variants_for(batch))   # WorkerLost: claimed_output maps it

    def result(self, batches: Batches, future):
        outcomes, seconds = future.result()
        batches.observe(seconds, batches.records_in([o.image for o in outcomes]))
        return outcomes

    def graph(self) -> GraphInfo:
        workers = tuple(sorted(self.job.workers.values(), key=lambda w: w["pid"]))
        return GraphInfo(sum(w["builds"] for w in workers), sum(w["traces"] for w in workers),
                         self.job.stage_devices, "processes", workers)

    def close(self) -> None:
        self.pool.end_job(self.job)
        if self.own:
            self.pool.close()


def open_executor(launch) -> Processes:
    return Processes(launch)
