"""The Dask executor (`--executor dask`): the job's batches as tasks on a dask.distributed cluster, each worker
process with one Engine and the job's graph, built at its first batch. The write loop is local.py's: batches in
flight, results written in the job's order by this process, so the bytes are threads' and processes'.

Without options, a LocalCluster of `workers` single-threaded worker processes on this host, started for the job
and closed after; `-- --scheduler tcp://HOST:8786` (or `--scheduler-file FILE`) uses a running cluster, whose
workers must have augd installed and read the job's input at the same paths (only the records come back).
Unlike Beam on the DaskRunner, no step re-runs its upstream, and progress and cancellation work as on this host.
"""
from __future__ import annotations

import argparse
import logging
import os
import threading
import time
import uuid

from augd.engine import Engine
from augd.errors import FailureReason, JobFailed, WorkerError, WorkerLost
from augd.host import usable_cpus
from augd.job.executors import Traits
from augd.job.executors.local import Batches, LocalExecutor
from augd.job.images import process_images
from augd.job.report import GraphInfo
from augd.tfenv import quiet_native_stderr

#: what run_job, the CLI and the daemon ask of it (augd.job.executors.Traits): its workers build their own graphs
TRAITS = Traits(options="--scheduler ADDRESS or --scheduler-file FILE, a running dask.distributed cluster (none: "
                "a local cluster of `workers` processes)", needs=("distributed", "dask"),
                check_options=lambda args: _options(args))

__all__ = ["Dask", "TRAITS", "open_executor"]

log = logging.getLogger("augd.job")

#: seconds to wait for a running cluster's scheduler
CONNECT_SECONDS = 30
#: in each Dask worker process: its engines (by options), the graphs of the jobs it ran batches of (by job id),
#: and the jobs that ended (a late batch of one builds no graph)
_ENGINES: dict = {}
_GRAPHS: dict = {}
_DONE: set = set()
_LOCK = threading.Lock()


def _options(args) -> dict:
    p = argparse.ArgumentParser(prog="augd run --executor dask --", add_help=False, exit_on_error=False)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--scheduler", dest="address")
    g.add_argument("--scheduler-file", dest="scheduler_file")
    try:
        ns, rest = p.parse_known_args(list(args))
    except (argparse.ArgumentError, SystemExit) as exc:
        raise ValueError(f"the dask executor's options: {exc}") from None
    if rest:
        raise ValueError(f"the dask executor's options: unknown {rest}; allowed: --scheduler ADDRESS, "
                         "--scheduler-file FILE")
    if ns.scheduler_file is not None and not os.path.isfile(ns.scheduler_file):
        # distributed would wait for it to appear, for ever
        raise ValueError(f"the dask executor's options: --scheduler-file {ns.scheduler_file}: no such file")
    return {k: v for k, v in vars(ns).items() if v is not None}


class Dask(LocalExecutor):
    def __init__(self, launch):
        super().__init__(launch.plan, launch.memory_limit)
        import dask.config   # loads Dask (an extra)
        import distributed
        if not logging.getLogger().isEnabledFor(logging.DEBUG):   # its scheduler logs every worker's comings
            logging.getLogger("distributed").setLevel(logging.WARNING)
        # distributed's nannies put MALLOC_TRIM_THRESHOLD_ and OMP_NUM_THREADS=1 into this process' environment
        # before each worker starts (and restarts): augd's engine sets its own threads and malloc in the worker
        dask.config.set({"distributed.nanny.pre-spawn-environ": {}})
        where = _options(launch.args)
        self.cluster = self.client = None
        try:
            if not where:
                self.cluster = distributed.LocalCluster(n_workers=launch.workers, threads_per_worker=1,
                                                        processes=True, dashboard_address=None, scheduler_port=0,
                                                        host="127.0.0.1", silence_logs=logging.WARNING)
                self.client = distributed.Client(self.cluster)
            else:
                self.client = distributed.Client(where.get("address"), scheduler_file=where.get("scheduler_file"),
                                                 timeout=CONNECT_SECONDS)
            # the window of batches in flight: one per worker thread (a running cluster's workers may have many)
            self.workers = max(1, sum(self.client.nthreads().values()))
            options = launch.engine_options
            if self.cluster is not None and not options.tf_threads:
                # each worker's TensorFlow its share of this host's cores, as ProcessPool does (a running cluster's
                # workers are left as their host and other jobs have them: settings fixed once TensorFlow started)
                options = options.replace(tf_threads=max(1, usable_cpus() // self.workers))
            # the job once to every worker (not with each batch): the spec, its annotations and partners
            self.job_id = uuid.uuid4().hex
            self.job = self.client.scatter((self.job_id, self.spec, self.detection, self.partners, options),
                                           broadcast=True, hash=False)
        except (OSError, TimeoutError) as exc:   # no scheduler there, or it went away
            self._shut()
            at = where.get("address") or where.get("scheduler_file") or "started here"
            raise JobFailed(f"the dask executor cannot reach its cluster ({at}): {exc}",
                            reason=FailureReason.WORKER_LOST) from None
        except BaseException:
            self._shut()
            raise
        self.seen: dict = {}   # worker pid -> its figures for the report
        self.stage_devices: dict = {}

    def submit(self, batches: Batches, batch):
        return self.client.submit(_batch, self.job, batch, batches.variants_for(batch), pure=False)

    def result(self, batches: Batches, future):
        from distributed import KilledWorker
        try:
            outcomes, seconds, worker = future.result()
        except KilledWorker as exc:   # the scheduler gave up on the batch: its workers kept dying on it
            raise WorkerLost(f"Dask workers died on a batch: {exc}") from None
        except OSError as exc:        # the connection to the scheduler closed
            raise WorkerLost(f"the Dask cluster went away: {exc}") from None
        except Exception as exc:      # noqa: BLE001 - raised on a worker (not bad input: that is a rejection)
            raise WorkerError(f"{type(exc).__name__}: {exc} (on a Dask worker)") from exc
        batches.observe(seconds, batches.records_in([o.image for o in outcomes]))
        self.device, self.stage_devices = worker.pop("device"), worker.pop("stage_devices")
        prior = self.seen.get(worker["pid"])
        worker["images"] = (prior["images"] if prior else 0) + len(outcomes)
        self.seen[worker["pid"]] = worker
        return outcomes

    def graph(self) -> GraphInfo:
        workers = tuple(sorted(self.seen.values(), key=lambda w: w["pid"]))
        return GraphInfo(sum(w["builds"] for w in workers), sum(w["traces"] for w in workers), self.stage_devices,
                         "dask", workers)

    def report(self):
        if self.device is None:   # no batch ran (every image rejected at the plan): ask a worker
            self.device = self.client.submit(_device, self.job, pure=False).result()
        return self.graph(), self.device

    def close(self) -> None:
        try:
            self.client.cancel(self.job)
            self.client.run(_forget, self.job_id)
        except Exception:  # noqa: BLE001 - a cluster already gone has nothing to forget
            log.debug("dask: could not tell the workers to drop the job's graph", exc_info=True)
        self._shut()

    def _shut(self) -> None:
        for what in (self.client, self.cluster):
            if what is not None:
                try:
                    what.close()
                except Exception:  # noqa: BLE001 - closing what is already gone
                    log.debug("dask: closing %s failed", type(what).__name__, exc_info=True)


def _engine(options):
    """On a Dask worker: its Engine for `options`, built once (TensorFlow loads here, in the worker)."""
    key = options.model_dump_json()
    with _LOCK:   # a worker may run tasks on several threads
        if key not in _ENGINES:
            with quiet_native_stderr():
                _ENGINES[key] = Engine(options)
        return _ENGINES[key]


def _batch(job, batch, variants):
    """On a Dask worker: process_images on the job's graph (built at the worker's first batch of the job)."""
    job_id, spec, detection, partners, options = job
    engine = _engine(options)
    with _LOCK:
        if job_id in _DONE:   # a batch that ran on after its job ended: build nothing that no one frees
            raise RuntimeError("the job ended")
        if job_id not in _GRAPHS:
            _GRAPHS[job_id] = engine.compile(spec)
        compiled = _GRAPHS[job_id]
    t0 = time.perf_counter()
    outcomes = process_images(compiled, spec, batch, variants, detection, partners)
    return outcomes, time.perf_counter() - t0, {
        "pid": os.getpid(), "builds": compiled.builds, "traces": compiled.traces,
        "stage_devices": compiled.stage_devices, "device": engine.device}


def _device(job):
    return _engine(job[4]).device


def _forget(job_id: str) -> None:
    """On every worker at the job's end: close the job's graph (the engine stays for the next job)."""
    with _LOCK:
        _DONE.add(job_id)
        compiled = _GRAPHS.pop(job_id, None)
    if compiled is not None:
        compiled.close()


def open_executor(launch) -> Dask:
    return Dask(launch)
