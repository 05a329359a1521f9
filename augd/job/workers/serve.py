"""A worker process of augd.job.workers.pool.ProcessPool. Light on import (a spawned worker unpickles `serve` before it
runs it): TensorFlow's start-up noise, where the worker loads it itself, is filtered by quiet_native_stderr."""
from __future__ import annotations

import contextlib
import os
import pickle
import signal
import time
import traceback

from augd.defaults import IGNORED_SIGNALS
from augd.job.workers.messages import Batch, Call, Called, Done, Failed, Forget, Ready
from augd.tfenv import import_tensorflow, prepare_own_process, quiet_native_stderr

__all__ = ["GROUP_SIGNALS", "group_signals_blocked", "serve"]

#: What a signal to the daemon's whole process group must not end a child with (workers, multiprocessing's
#: resource tracker): the daemon acts on them itself, or ignores them.
GROUP_SIGNALS = frozenset(getattr(signal, n) for n in ("SIGINT", "SIGHUP", "SIGUSR1", *IGNORED_SIGNALS)
                          if hasattr(signal, n))


@contextlib.contextmanager
def group_signals_blocked():
    """Start child processes inside this: they inherit the mask (it survives exec), so a group-wide signal cannot
    end one before it has set its own handlers, nor ever end the resource tracker started with the first one."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, GROUP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def serve(conn, options: dict) -> None:
    """A worker's life: one Engine; per job, its graph built at its first batch (or the previous job's graph of
    the same pipeline, kept: see augd.engine.kept.KeptGraphs); batches until told to stop or the parent goes (its end of the pipe
    closes: the worker then ends without a word, whatever it was doing)."""
    try:
        _serve(conn, options)
    except (BrokenPipeError, ConnectionResetError, EOFError):
        pass   # the parent is gone (killed, or it exited): nothing to report to, nobody to blame


def _serve(conn, options: dict) -> None:
    # Ctrl-C, a terminal's hangup and `systemctl kill -s USR1` reach the whole process group: the parent decides,
    # and ends a worker through its pipe. (SIGTERM stays: multiprocessing ends leftover workers with it at exit.)
    # The pool started this process with them blocked (group_signals_blocked): ignored now, they can be let in.
    for sig in GROUP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, GROUP_SIGNALS)
    prepare_own_process()   # a pool a library user's program started (where its main module left NumPy unloaded)
    with quiet_native_stderr():
        import_tensorflow()   # before augd's modules: their imports then never walk TensorFlow's objects
        from augd.engine import Engine, EngineOptions
        engine = Engine(EngineOptions(**options))
    from augd.job.images import process_images
    graphs = engine.kept
    jobs: dict = {}   # job id -> (spec, detection, partners, compiled, builds, traces before the job)
    conn.send(Ready(engine.device))   # the job's report names it: the parent need not load TensorFlow
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        if isinstance(msg, Call):   # the plan's TensorFlow-free work (ProcessPool.map): fn(chunk), pickled back
            try:
                fn, chunk = pickle.loads(msg.payload)
                conn.send(Called(pickle.dumps(fn(chunk), pickle.HIGHEST_PROTOCOL)))
            except Exception as exc:  # noqa: BLE001 - the parent runs the chunk itself
                conn.send(_error(exc))
            continue
        if isinstance(msg, Forget):
            job = jobs.pop(msg.job_id, None)
            if job is not None:
                graphs.done(job[0], job[3], [j[3] for j in jobs.values() if j is not None])
            continue
        job_id, payload, batch, variants = msg if isinstance(msg, Batch) else (None, None, None, None)
        try:
            if job_id is None:
                raise TypeError(f"a worker takes Batch, Call, Forget or None; got {type(msg).__name__}")
            if job_id not in jobs:
                jobs[job_id] = None   # a graph that fails to build fails each of the job's batches the same way
                spec, detection, partners = pickle.loads(payload)
                compiled, built = graphs.get(spec, [j[3] for j in jobs.values() if j is not None])
                jobs[job_id] = (spec, detection, partners, compiled, int(built), 0 if built else compiled.traces)
            if jobs[job_id] is None:
                raise RuntimeError("this worker could not build the job's graph (see its first batch's error)")
            spec, detection, partners, compiled, builds, traces = jobs[job_id]
            t0 = time.perf_counter()
            outcomes = process_images(compiled, spec, batch, variants, detection, partners)
            stats = {"builds": builds, "traces": compiled.traces - traces, "stage_devices": compiled.stage_devices}
            conn.send(Done(outcomes, time.perf_counter() - t0, stats))
        except Exception as exc:  # noqa: BLE001 - the parent decides; this worker stays up for the next batch
            conn.send(_error(exc))


def _error(exc: Exception) -> Failed:
    """The reply for a failure: as text (not every exception unpickles in the parent, and the worker's traceback
    is what helps)."""
    return Failed(f"{type(exc).__name__}: {exc} (in worker process {os.getpid()})\n{traceback.format_exc()}")
