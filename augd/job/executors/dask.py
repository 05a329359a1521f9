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
import time
import uuid

from augd.engine import Engine
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

#: in each Dask worker process: its engines (by options) and the graphs of the jobs it ran batches of (by job id)
_ENGINES: dict = {}
_GRAPHS: dict = {}


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
    return {k: v for k, v in vars(ns).items() if v is not None}


class Dask(LocalExecutor):
    def __init__(self, launch):
        super().__init__(launch.plan, launch.memory_limit)
        import distributed  # loads Dask (an extra)
        if not logging.getLogger().isEnabledFor(logging.DEBUG):   # its scheduler logs every worker's comings
            logging.getLogger("distributed").setLevel(logging.WARNING)
        where = _options(launch.args)
        self.cluster = None
        if not where:
            saved = dict(os.environ)   # distributed sets MALLOC_TRIM_THRESHOLD_ here for its workers: not for ours
            try:
                self.cluster = distributed.LocalCluster(n_workers=launch.workers, threads_per_worker=1,
                                                        processes=True, dashboard_address=None, scheduler_port=0,
                                                        host="127.0.0.1", silence_logs=logging.WARNING)
            finally:
                os.environ.clear()
                os.environ.update(saved)
            self.client = distributed.Client(self.cluster)
        else:
            self.client = distributed.Client(where.get("address"), scheduler_file=where.get("scheduler_file"))
        self.workers = max(1, len(self.client.scheduler_info()["workers"]))
        options = launch.engine_options
        if self.cluster is not None and not options.tf_threads:
            # each worker's TensorFlow its share of this host's cores, as ProcessPool does (a running cluster's
            # workers are left as their host and other jobs have them: settings fixed once TensorFlow started)
            options = options.replace(tf_threads=max(1, usable_cpus() // self.workers))
        # the job once to every worker (not with each batch): the spec, its annotations and partners
        self.job_id = uuid.uuid4().hex
        self.job = self.client.scatter((self.job_id, self.spec, self.detection, self.partners, options),
                                       broadcast=True, hash=False)
        self.seen: dict = {}   # worker pid -> its figures for the report
        self.stage_devices: dict = {}

    def submit(self, batches: Batches, batch):
        return self.client.submit(_batch, self.job, batch, batches.variants_for(batch), pure=False)

    def result(self, batches: Batches, future):
        outcomes, seconds, worker = future.result()
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
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def _engine(options):
    """On a Dask worker: its Engine for `options`, built once (TensorFlow loads here, in the worker)."""
    key = options.model_dump_json()
    if key not in _ENGINES:
        with quiet_native_stderr():
            _ENGINES[key] = Engine(options)
    return _ENGINES[key]


def _batch(job, batch, variants):
    """On a Dask worker: process_images on the job's graph (built at the worker's first batch of the job)."""
    job_id, spec, detection, partners, options = job
    engine = _engine(options)
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
    compiled = _GRAPHS.pop(job_id, None)
    if compiled is not None:
        compiled.close()


def open_executor(launch) -> Dask:
    return Dask(launch)
