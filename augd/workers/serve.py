"""A worker process of augd.workers.pool.ProcessPool. Light on import (a spawned worker unpickles `serve` before it
runs it): TensorFlow's start-up noise, where the worker loads it itself, is filtered by quiet_native_stderr."""
from __future__ import annotations

import pickle
import signal
import time

__all__ = ["serve"]


def serve(conn, options: dict) -> None:
    """A worker's life: one Engine; per job, its graph built at its first batch; batches until told to stop or
    the parent goes (its end of the pipe closes)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C reaches the whole group: the parent decides
    from augd.tfenv import quiet_native_stderr
    with quiet_native_stderr():
        from augd.engine import Engine, EngineOptions, release_memory
        engine = Engine(EngineOptions(**options))
    from augd.job.run import process_images
    jobs: dict = {}   # job id -> (spec, detection, compiled)
    conn.send(("ready",))
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
                job[2].close()
                release_memory()
            continue
        _, job_id, payload, batch, variants = msg
        try:
            if job_id not in jobs:
                spec, detection = pickle.loads(payload)
                jobs[job_id] = (spec, detection, engine.compile(spec))
            spec, detection, compiled = jobs[job_id]
            t0 = time.perf_counter()
            outcomes = process_images(compiled, spec, batch, variants, detection)
            stats = {"builds": compiled.builds, "traces": compiled.traces, "stage_devices": compiled.stage_devices}
            conn.send(("done", outcomes, time.perf_counter() - t0, stats))
        except Exception as exc:  # noqa: BLE001 - the parent decides; this worker stays up for the next batch
            try:
                conn.send(("error", exc))
            except Exception:  # noqa: BLE001 - an exception that does not pickle: send its text
                conn.send(("error", RuntimeError(f"{type(exc).__name__}: {exc}")))
