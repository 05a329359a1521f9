"""Executors: where a job's images run. `run_job` (augd/job/run.py) plans the job, claims its output, asks an
Executor to turn every group's images into shards in the output's temporary folder, then checks, reports and
commits the same way whichever executor ran.

An executor is one module here named after its ExecutorKind value, with `open_executor(launch) -> Executor`:

  threads.py    batches on a thread pool over one graph in this process
  processes.py  batches on worker processes (augd.job.workers.pool), each with its own graph
  beam.py       every image as a Beam work unit; the runner places work, its workers write the shards

Threads and processes share local.py: they only submit a batch and give its results back in order, and
local.py's write loop does the batching, the memory bound and the writing. A new executor of that kind (Dask's
or Ray's futures) is one module with a LocalExecutor subclass; one that owns the placement of work (another
distributed engine) implements `write` itself, as beam.py does. Either way: a value in augd.defaults.ExecutorKind,
the module, and its test. Every executor calls the per-image work in augd/job/images.py, so all write the same
bytes. `auto` is not an executor: choice.py turns it into threads or processes (and a worker count) by what the
job costs.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol

from augd.defaults import ExecutorKind
from augd.job.executors.choice import Choice, Host, JobCost, choose

__all__ = ["Choice", "Executor", "ExecutorKind", "Host", "JobCost", "Launch", "choose", "open_executor"]


class Executor(Protocol):
    """What run_job needs of an executor."""

    def write(self, plan, out_dir: str, tally, watch) -> Any:
        """Every group's records into shards under `out_dir` (ShardWriter's names and bytes), each image's
        outcome added to `tally` in the job's order (group after group, each in its seeded order), and given to
        `watch` as it goes where the executor can. Returns the ShardSet written."""

    def report(self) -> tuple[Any, Any]:
        """(GraphInfo, device): what its workers built (graphs, traces, per worker), and the device they ran on
        (`name`, `tf_version`), for manifest.json."""

    def close(self) -> None:
        """Release its workers and graphs; called once, whether write returned or raised."""


@dataclass(frozen=True)
class Launch:
    """What an executor is opened with. `engine`: the caller's Engine (threads compile their graph with it; its
    device is the report's); `engine_options`: for the workers that build their own; `pool`: a warm ProcessPool
    (the daemon's); `workers`: images in parallel; `memory_limit`: bytes the job may add to this process;
    `args`: the executor's own options (Beam's pipeline options)."""
    plan: Any                       # augd.job.units.JobPlan
    engine_options: Any             # augd.engine.EngineOptions
    workers: int
    engine: Any = None              # augd.engine.Engine
    pool: Any = None                # augd.job.workers.pool.ProcessPool
    memory_limit: int | None = None
    args: tuple[str, ...] = ()


def open_executor(kind: ExecutorKind, launch: Launch) -> Executor:
    """The executor of `kind` (not auto: choose() first), from the module of that name."""
    if kind is ExecutorKind.AUTO:
        raise ValueError("choose() turns auto into an executor first")
    return importlib.import_module(f"{__name__}.{kind.value}").open_executor(launch)
