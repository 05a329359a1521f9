"""A worker process of augd.job.workers.pool.ProcessPool. Light on import (a spawned worker unpickles `serve` before it
runs it): TensorFlow's start-up noise, where the worker loads it itself, is filtered by quiet_native_stderr."""
from __future__ import annotations

import os
import pickle
import signal
import time
import traceback

__all__ = ["serve"]


def serve(conn, options: dict) -> None:
    """A worker's life: one Engine; per job, its graph built at its first batch; batches until told to stop or
    the parent goes (its end of the pipe closes)."""
    # Ctrl-C reaches the whole process group: the parent decides, and ends a worker through its pipe. (SIGTERM
    # stays: multiprocessing ends leftover workers with it at exit; the systemd unit signals the daemon alone.)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from augd.tfenv import quiet_native_stderr
    with quiet_native_stderr():
        from augd.engine import Engine, EngineOptions, release_memory
        engine = Engine(EngineOptions(**options))
    from augd.job.images import process_images
    jobs: dict = {}   # job id -> (spec, detection, partners, compiled)
    conn.send(("ready", engine.device))   # the job's report names it: the parent need not load TensorFlow
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        if msg[0] == "forget":
            job = jobs.pop(msg[1], None)
            if job is not None:
                job[3].close()
                release_memory()
            continue
        _, job_id, payload, batch, variants = msg
        try:
            if job_id not in jobs:
                jobs[job_id] = None   # a graph that fails to build fails each of the job's batches the same way
                spec, detection, partners = pickle.loads(payload)
                jobs[job_id] = (spec, detection, partners, engine.compile(spec))
            if jobs[job_id] is None:
                raise RuntimeError("this worker could not build the job's graph (see its first batch's error)")
            spec, detection, partners, compiled = jobs[job_id]
            t0 = time.perf_counter()
            outcomes = process_images(compiled, spec, batch, variants, detection, partners)
            stats = {"builds": compiled.builds, "traces": compiled.traces, "stage_devices": compiled.stage_devices}
            conn.send(("done", outcomes, time.perf_counter() - t0, stats))
        except Exception as exc:  # noqa: BLE001 - the parent decides; this worker stays up for the next batch
            # as text: not every exception unpickles in the parent, and the worker's traceback is what helps
            conn.send(("error", f"{type(exc).__name__}: {exc} (in worker process {os.getpid()})\n"
                                f"{traceback.format_exc()}"))
