"""Executors: where a job's images run. `run_job` (augd/job/run.py) plans the job, claims its output, asks an
Executor to turn every group's images into shards in the output's temporary folder, then checks, reports and
commits the same way whichever executor ran.

An executor is one module here named after its ExecutorKind value, with `TRAITS` (what it needs and offers:
Traits below; the CLI, run_job and the daemon ask these instead of testing names) and
`open_executor(launch) -> Executor`:

  threads.py    batches on a thread pool over one graph in this process
  processes.py  batches on worker processes (augd.job.workers.pool), each with its own graph
  dask.py       batches as tasks on a dask.distributed cluster, each worker with its own graph
  beam.py       every image as a Beam work unit; the runner places work, its workers write the shards
                (the pipeline: beam_pipeline.py, apart so that these traits read without Beam installed)

Threads, processes and dask share local.py: they only submit a batch and give its results back in order, and
local.py's write loop does the batching, the memory bound and the writing. A new executor of that kind (Ray's
futures) is one module with a LocalExecutor subclass; one that owns the placement of work (another distributed
engine) implements `write` itself, as beam_pipeline.py does. Either way: a value in augd.defaults.ExecutorKind,
the module, and its test. Every executor calls the per-image work in augd/job/images.py, so all write the same
bytes. `auto` is not an executor: choice.py turns it into threads or processes (and a worker count) by what the
job costs, and `for_job` is the daemon's one choice per job (its larger jobs diverted to Beam by their size).
"""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

from augd.defaults import ExecutorKind
from augd.job.executors.choice import Choice, Divert, Host, JobCost, choose, for_job

if TYPE_CHECKING:   # the names only: importing them here would load TensorFlow (Engine) and the pool
    from augd.engine import Engine, EngineOptions
    from augd.job.units import JobPlan
    from augd.job.workers.pool import ProcessPool

__all__ = ["Choice", "Divert", "Executor", "ExecutorKind", "Host", "JobCost", "Launch", "Traits", "choose", "for_job",
           "open_executor", "traits"]


@dataclass(frozen=True)
class Traits:
    """What an executor needs and offers: its module's `TRAITS`, read by `traits(kind)` before anything runs."""
    engine_here: bool = False   # compiles the job's graph in the calling process: run_job hands it an Engine
    graph_here: bool = False    # may run graphs in the calling process all the same (Beam's DirectRunner): the CLI
                                # loads TensorFlow there first, quietly
    pool: bool = False          # runs on augd's worker processes (ProcessPool): `augd run` starts them before the
                                # plan, the daemon keeps them warm from job to job
    watch: bool = True          # calls the JobWatch as images finish (progress, cancel); else the daemon runs its
                                # jobs on a thread of their own and ticks meanwhile, `augd run` shows no progress bar
    daemon: bool = True         # the daemon may run its jobs; a config naming one that may not is refused at start
    options: str | None = None  # what its own options are (`augd run ... -- OPTIONS`, the daemon's
                                # `executor_options:`); None: it takes none
    needs: tuple[str, str] | None = None   # (module, pip extra): what it needs beyond augd's own dependencies
    check_options: Callable[[tuple[str, ...]], object] | None = None   # raises ValueError (saying what is
                                # allowed) for options it cannot take: asked before any job starts

    def missing(self, kind) -> str | None:
        """Why it cannot run here (what to install), or None."""
        if self.needs is None or importlib.util.find_spec(self.needs[0]) is not None:
            return None
        return (f"the {ExecutorKind(kind).value} executor needs {self.needs[0]}, which is not installed: "
                f"pip install 'augd[{self.needs[1]}]'")


#: auto is not an executor: it becomes threads (an engine here) or processes (the pool), by choice.py
AUTO = Traits(engine_here=True, pool=True)


def traits(kind) -> Traits:
    """The Traits of the executor `kind` (an ExecutorKind or its value), from its module (auto: AUTO)."""
    kind = ExecutorKind(kind)
    if kind is ExecutorKind.AUTO:
        return AUTO
    return importlib.import_module(f"{__name__}.{kind.value}").TRAITS


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
    plan: JobPlan
    engine_options: EngineOptions
    workers: int
    engine: Engine | None = None
    pool: ProcessPool | None = None
    memory_limit: int | None = None
    args: tuple[str, ...] = ()


def open_executor(kind: ExecutorKind, launch: Launch) -> Executor:
    """The executor of `kind` (not auto: choose() first), from the module of that name."""
    if kind is ExecutorKind.AUTO:
        raise ValueError("choose() turns auto into an executor first")
    return importlib.import_module(f"{__name__}.{kind.value}").open_executor(launch)
