"""Worker processes for a job's images: each holds its own Engine and compiles each job's graph once; the parent
only hands out batches, orders the results and writes.

Why processes: the per-image work outside TensorFlow's kernels (reading and re-checking the file, the Python
around the OpenCV step, hashing, building the tf.train.Example) runs under one GIL per process. Threads keep
~1.65 of 2 cores busy; processes are not capped by it on hosts with many cores.

A worker that dies (kill -9, the OOM killer, a crash in native code) is replaced; the batch it held is handed
out again, up to MAX_ATTEMPTS times, then the job fails with WorkerLost naming the images and the signal. A
batch's results are only written once they are all back, in the job's order, so a re-run batch can neither be
lost nor written twice. The pool outlives jobs (the daemon keeps one): TensorFlow is imported once per worker.

Between jobs a warm pool's workers are idle while the parent plans the next job: `map` hands them TensorFlow-free
work of the plan (reading a big job's annotation files, augd.job.units) in chunks, the same way as batches.
"""
from __future__ import annotations

import atexit
import itertools
import logging
import multiprocessing
import pickle
import signal
import threading
import time
from collections import deque
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from multiprocessing.connection import wait

from augd.engine.options import EngineOptions
from augd.errors import WorkerError, WorkerLost
from augd.host import usable_cpus
from augd.job.workers.messages import Batch, Call, Called, Done, Failed, Forget, Ready
from augd.job.workers.serve import group_signals_blocked, serve

log = logging.getLogger("augd.job")

__all__ = ["MAX_ATTEMPTS", "MAP_MIN_ITEMS", "ProcessPool", "WorkerError", "WorkerLost", "chunked_map"]

#: A batch handed to this many workers that all died is not tried again: the job fails.
MAX_ATTEMPTS = 3
#: Batches a worker holds: the one it runs and the next, so it never waits for the parent's round trip.
PER_WORKER = 2
#: chunked_map hands work to the workers from this many items (fewer cost less here than the round trips). On
#: 2 cores the plan's wall is the same either way and the parent's CPU halves (python -m bench.plan).
MAP_MIN_ITEMS = 400
#: ...in chunks of this many at most, so that every worker gets several and a dead one costs a chunk.
MAP_CHUNK = 250
#: A worker ended by SIGTERM is replaced only after this long without the parent stopping (see _replace).
SIGTERM_GRACE_SECONDS = 1.0


@dataclass
class JobContext:
    """One job as the workers see it: an id, and (spec, detection, partners) pickled once and sent to each worker
    once."""
    id: int
    payload: bytes
    #: per worker pid: {"pid", "builds", "traces", "batches", "images", "seconds"}; stage_devices from the first
    workers: dict = field(default_factory=dict)
    stage_devices: dict | None = None


@dataclass
class _Task:
    job: JobContext | None                       # None: a call (`map`'s chunk), not a batch of a job's images
    batch: list                                  # the images; a call's items
    variants: list
    future: Future
    attempts: int = 0
    deaths: list = field(default_factory=list)   # how each worker that held it ended
    call: object = None                          # a call's function (module level: sent by reference)
    payload: bytes = b""                         # a call's (function, items), pickled

    def names(self) -> str:
        items = [i.relpath for i in self.batch[:5]] if self.call is None else \
            [f"{call_name(self.call)} of {len(self.batch)} item(s)"]
        return ", ".join(items) + (" ..." if self.call is None and len(self.batch) > 5 else "")


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: object
    ready: bool = False
    tasks: deque = field(default_factory=deque)  # sent to it, in order: the first is the one it runs
    jobs: set = field(default_factory=set)       # job ids whose context this worker holds


_ids = itertools.count(1)


class ProcessPool:
    """`workers` processes, each running an Engine(options). submit() returns a Future of process_images()'s
    outcomes plus the seconds the worker spent on them. Thread-safe; one dispatcher thread talks to the workers."""

    def __init__(self, workers: int, options: EngineOptions):
        self.size, self.options = workers, options
        # each worker's TensorFlow gets its share of the cores (unless set): N workers each spinning a pool of
        # one thread per core kept 1.9 of 2 cores busy for less work than threads in one process did
        share = max(1, usable_cpus() // workers)
        self._worker_options = options if options.tf_threads else options.replace(tf_threads=share)
        self.restarts = 0
        self.lost_sends = 0    # batches whose worker died while the parent was writing them (sent again)
        self.calls = 0         # map's chunks the workers ran
        # spawn, not fork: a fork of a process running TensorFlow is unsafe. (A fork server that imports TensorFlow
        # once and forks workers from it saves an import's CPU per worker and replaces a dead worker in 0.04 s
        # instead of ~3, but on 2 cores brings no worker up sooner: one import takes the wall of two at once.
        # bench/README.md.)
        self._ctx = multiprocessing.get_context("spawn")
        self._queue: deque[_Task] = deque()
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = self._ctx.Pipe(duplex=False)
        self._closed = False
        self._draining = False              # stopping: a worker that dies is not replaced
        self._broken: str | None = None     # why no worker can start, once that is clear
        self._start_failures = 0
        self._forget: list[int] = []
        self._device = None                 # the first ready worker's augd.engine.DeviceInfo
        self._settled = threading.Event()   # set once a worker is ready, or none can be
        self._workers = [self._spawn() for _ in range(workers)]
        self._thread = threading.Thread(target=self._loop, name="augd-pool", daemon=True)
        self._thread.start()
        # at exit multiprocessing terminates leftover workers (SIGTERM): they must not be replaced meanwhile.
        # (atexit runs last-registered first, so this runs before multiprocessing's own handler.)
        atexit.register(self.drain)

    # -- the parent's API --------------------------------------------------------------------------------------
    def start_job(self, spec, detection, partners=None) -> JobContext:
        return JobContext(next(_ids), pickle.dumps((spec, detection, partners), protocol=pickle.HIGHEST_PROTOCOL))

    def submit(self, job: JobContext, batch: list, variants: list) -> Future:
        task = _Task(job, batch, variants, Future())
        with self._lock:
            if self._closed or self._broken or (self._draining and not self._workers):
                raise WorkerLost(self._broken or "the worker pool is closed")
            self._queue.append(task)
        self._wake_w.send(None)
        return task.future

    def ready_workers(self) -> int:
        """Workers up now (TensorFlow loaded, waiting for work); never waits."""
        return sum(w.ready for w in self._workers)

    def map(self, fn, chunks: list) -> list[Future]:
        """fn(chunk) for each chunk on the workers (a call's future gives fn's result, pickled): `fn` is a
        module-level, TensorFlow-free function, its chunks and results picklable. A chunk whose worker died
        MAX_ATTEMPTS times, or that raised, fails its future (WorkerLost, WorkerError): the caller may run it."""
        # pickled here, so that what cannot be pickled fails the caller, not the dispatcher
        tasks = [_Task(None, chunk, [], Future(), call=fn,
                       payload=pickle.dumps((fn, chunk), pickle.HIGHEST_PROTOCOL)) for chunk in chunks]
        with self._lock:
            if self._closed or self._broken or (self._draining and not self._workers):
                raise WorkerLost(self._broken or "the worker pool is closed")
            self._queue.extend(tasks)
        self._wake_w.send(None)
        return [t.future for t in tasks]

    def end_job(self, job: JobContext) -> None:
        """Let the workers drop the job's graph (a long-lived pool stays flat from job to job)."""
        with self._lock:
            kept = [t for t in self._queue if t.job is not job]
            self._queue.clear()
            self._queue.extend(kept)
            self._forget.append(job.id)
        self._wake_w.send(None)

    @property
    def usable(self) -> bool:
        """False once closed, or broken (its workers cannot start, or its dispatcher failed): start another."""
        return not (self._closed or self._broken)

    def drain(self) -> None:
        """Replace no worker that dies from now on: the process is stopping (a signal to the whole process
        group, or interpreter exit, ends the workers too). A dead worker's batches fail with WorkerLost. No lock:
        it is called from a signal handler, on a thread that may hold it."""
        self._draining = True

    def device(self):
        """The workers' device (augd.engine.DeviceInfo, as the first to be ready found it), once one is; None when
        none can start (the job's first batch then fails with WorkerLost, saying why)."""
        self._settled.wait()
        return self._device

    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers]

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._settled.set()
        atexit.unregister(self.drain)
        self._wake_w.send(None)
        self._thread.join(30)
        for w in self._workers:   # an idle worker exits on None; a busy one's results are not wanted any more
            _fail(w.tasks, RuntimeError("the worker pool was closed"))
            try:
                w.process.kill() if w.tasks else w.conn.send(None)
            except OSError:
                pass
        deadline = time.monotonic() + 5
        for w in self._workers:
            w.process.join(max(0.0, deadline - time.monotonic()))
            if w.process.is_alive():
                w.process.kill()
                w.process.join(5)
        for c in [self._wake_r, self._wake_w, *(w.conn for w in self._workers)]:
            c.close()

    def __enter__(self) -> "ProcessPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the dispatcher ----------------------------------------------------------------------------------------
    def _spawn(self) -> _Worker:
        parent, child = self._ctx.Pipe()
        # the target lives in a module that loads nothing on import, so TensorFlow's start-up noise is filtered
        p = self._ctx.Process(target=serve, args=(child, self._worker_options.model_dump()), name="augd-worker",
                              daemon=True)
        with group_signals_blocked():
            p.start()
        child.close()
        return _Worker(p, parent)

    def _loop(self) -> None:
        try:
            self._dispatch()
        except BaseException as exc:  # noqa: BLE001 - never leave a job waiting on futures nobody will settle
            log.exception("the worker pool's dispatcher failed")
            with self._lock:
                self._broken = f"the worker pool failed: {type(exc).__name__}: {exc}"
                _fail([*self._queue, *(t for w in self._workers for t in w.tasks)], WorkerLost(self._broken))
                self._queue.clear()
            self._settled.set()
            for w in self._workers:
                w.process.kill()

    def _dispatch(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    _fail(self._queue, RuntimeError("the worker pool was closed"))
                    self._queue.clear()
                    return
                forget, self._forget = self._forget, []
                self._hand_out(forget)
            waits = {self._wake_r: None}
            for w in self._workers:
                waits[w.conn] = w
                waits[w.process.sentinel] = w
            for ready in wait(list(waits)):
                if ready is self._wake_r:
                    while self._wake_r.poll():
                        self._wake_r.recv()
                    continue
                w = waits[ready]
                if w not in self._workers:
                    continue   # replaced earlier in this round
                if ready is w.conn:
                    try:
                        msg = w.conn.recv()
                    except (EOFError, OSError):
                        msg = None
                    if msg is not None:
                        with self._lock:
                            self._receive(w, msg)
                        continue
                with self._lock:
                    self._replace(w)

    def _hand_out(self, forget: list) -> None:
        for w in self._workers:
            for job_id in forget:
                if job_id in w.jobs:
                    w.jobs.discard(job_id)
                    self._send(w, Forget(job_id))
        for w in self._workers:
            while w.ready and len(w.tasks) < PER_WORKER and self._queue:
                t = self._queue.popleft()
                if t.future.cancelled():
                    continue
                if t.call is not None:
                    if w.tasks:
                        # only to an idle worker, as a job's first batch: a chunk (and its result) may be more
                        # than the pipe holds, and a busy worker is not reading while its result waits on us
                        self._queue.appendleft(t)
                        break
                    if self._send(w, Call(t.payload)):
                        w.tasks.append(t)
                    else:
                        self._queue.appendleft(t)
                        break
                    continue
                payload = None if t.job.id in w.jobs else t.job.payload
                if payload is not None and w.tasks:
                    # a job's first batch (its spec and annotations: megabytes for a big detection job) only goes
                    # to an idle worker: a busy one is not reading, and a full pipe would block this thread
                    self._queue.appendleft(t)
                    break
                if self._send(w, Batch(t.job.id, payload, t.batch, t.variants)):
                    w.tasks.append(t)
                    w.jobs.add(t.job.id)
                else:
                    self._queue.appendleft(t)
                    break

    def _send(self, w: _Worker, msg) -> bool:
        try:
            w.conn.send(msg)
            return True
        except OSError as exc:   # it died, maybe mid-write (EPIPE, never SIGPIPE); its sentinel says so next round
            log.debug("worker process %s gone while a message was written to it: %s", w.process.pid, exc)
            self.lost_sends += 1
            w.ready = False
            return False

    def _receive(self, w: _Worker, msg: Ready | Done | Called | Failed) -> None:
        if isinstance(msg, Ready):
            w.ready = True
            self._start_failures = 0
            self._device = self._device or msg.device
            self._settled.set()
            return
        if not w.tasks:
            return
        task = w.tasks.popleft()
        if isinstance(msg, Called):
            self.calls += 1
            _settle(task.future, msg.result)
        elif isinstance(msg, Done):
            outcomes, seconds, stats = msg
            info = task.job.workers.setdefault(w.process.pid, {"pid": w.process.pid, "builds": 0, "traces": 0,
                                                               "batches": 0, "images": 0, "seconds": 0.0})
            info["builds"], info["traces"] = stats["builds"], stats["traces"]
            info["batches"] += 1
            info["images"] += len(task.batch)
            info["seconds"] = round(info["seconds"] + seconds, 3)
            task.job.stage_devices = task.job.stage_devices or stats["stage_devices"]
            _settle(task.future, (outcomes, seconds))
        else:   # Failed: its text with the worker's traceback
            _settle(task.future, exc=WorkerError(msg.text))

    def _replace(self, w: _Worker) -> None:
        """w died: start another in its place and hand its batch out again (or fail it)."""
        w.process.join(1)
        code = w.process.exitcode
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        if not w.ready:
            self._start_failures += 1
        if self._closed:
            return
        if code == -signal.SIGTERM and not self._draining:
            # most likely a stop signal to the whole process group: the parent's own handler for it runs on the
            # main thread, which may not have had the GIL yet; give it a moment to say so before replacing
            deadline = time.monotonic() + SIGTERM_GRACE_SECONDS
            while not self._draining and time.monotonic() < deadline:
                time.sleep(0.01)
        if self._draining:
            self._workers.remove(w)
            log.info("worker process %s ended (%s) while stopping; not replaced", w.process.pid, how)
            lost = WorkerLost(f"worker process {w.process.pid} ended ({how}) while the process was stopping")
            _fail(w.tasks, lost)
            if not self._workers:
                _fail(self._queue, lost)
                self._queue.clear()
                self._settled.set()
            try:
                w.conn.close()
            except OSError:
                pass
            return
        if self._start_failures >= MAX_ATTEMPTS:  # workers die before they are up: starting more will not help
            self._broken = (f"{self._start_failures} worker processes died while starting (last: {how}); see the "
                            f"log above for their error")
            _fail([*self._queue, *(t for x in self._workers for t in x.tasks)], WorkerLost(self._broken))
            self._queue.clear()
            self._workers.remove(w)
            self._settled.set()
            return
        self._workers[self._workers.index(w)] = self._spawn()
        self.restarts += 1
        try:
            w.conn.close()
        except OSError:
            pass
        held = [t for t in w.tasks if not t.future.cancelled()]
        log.warning("worker process %s died (%s)%s; started another", w.process.pid, how,
                    f" holding {sum(len(t.batch) for t in held)} image(s)" if held else "")
        if not held:
            return
        running = w.tasks[0]   # the others were waiting behind it: they go back as they were
        if running in held:
            running.attempts += 1
            running.deaths.append(how)
            if running.attempts >= MAX_ATTEMPTS:
                held.remove(running)
                names = running.names()
                _settle(running.future, exc=WorkerLost(
                    f"{running.attempts} worker processes died processing {names} ({'; '.join(running.deaths)}); "
                    f"the job stops rather than retry it again"))
        self._queue.extendleft(reversed(held))


def chunked_map(pool: ProcessPool | None):
    """A Reading.map for the plan (augd.annotations.reading): map(fn, items) -> fn's results, item by item. On the
    pool's workers in chunks when some are up and the items are many (a warm pool between the daemon's jobs),
    else here (`augd run`'s early pool is still loading TensorFlow while the plan reads: this process's read
    overlaps it). `fn(chunk)` returns one result per item; a chunk the workers could not run is run here."""
    def run(fn, items: list) -> list:
        ready = pool.ready_workers() if pool is not None and pool.usable else 0
        if ready == 0 or len(items) < MAP_MIN_ITEMS:
            return fn(items)
        size = max(1, min(MAP_CHUNK, -(-len(items) // (4 * ready))))
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        try:
            futures = pool.map(fn, chunks)
        except Exception:  # noqa: BLE001 - a closed pool, items that do not pickle: read here
            return fn(items)
        out = []
        for chunk, fut in zip(chunks, futures):
            try:
                got = pickle.loads(fut.result())
            except Exception as exc:  # noqa: BLE001 - WorkerLost, WorkerError, a closed pool: here is always safe
                log.warning("the workers could not run %s on %d item(s) (%s); running it here", call_name(fn),
                            len(chunk), (str(exc).splitlines() or [type(exc).__name__])[0])
                got = fn(chunk)
            out.extend(got)
        return out
    return run


def call_name(fn) -> str:
    """A mapped function's name for messages (a functools.partial: its function's)."""
    return getattr(getattr(fn, "func", fn), "__name__", "a call")


def _fail(tasks, exc: BaseException) -> None:
    for t in list(tasks):
        _settle(t.future, exc=exc)


def _settle(fut: Future, result=None, exc: BaseException | None = None) -> None:
    try:
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(result)
    except InvalidStateError:  # cancelled by the job meanwhile
        pass
