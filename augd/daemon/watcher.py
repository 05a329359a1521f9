"""The inbox watcher: finds job folders, decides when each is ready, emits one `JobReady` per job folder.

A watchdog observer (inotify, or polling for NFS/SMB) only wakes the scanner early and marks the touched jobs
as busy; the scan is the truth. Every scan lists the inbox; a job that has not been emitted yet is walked and
its tree signature (names, sizes, mtimes) compared with the last one. A job is ready when it holds `_READY`,
or when the daemon itself has seen its signature unchanged for `settle_seconds` (copied mtimes are not trusted:
`cp -p` and rsync preserve them). Each job folder is emitted once; it is keyed by relative path and inode, so a
new folder dropped under a name just claimed is a new job, and two events never make two jobs.

Layout: a non-hidden folder directly under the inbox is a job, unless its name is a known pipeline: then it is
a routing folder and each non-hidden folder inside it is a job for that pipeline. Hidden names (".x") are
ignored, so `cp -r src inbox/.x && mv inbox/.x inbox/x` is an atomic drop.
"""
from __future__ import annotations

import hashlib
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from watchdog.events import FileSystemEventHandler

from augd import defaults
from augd.daemon.logs import event
from augd.jobfolder import CLAIM_FILE

log = logging.getLogger("augd.daemon")

__all__ = ["JobReady", "Watcher", "tree_signature"]


@dataclass(frozen=True)
class JobReady:
    """A job folder in the inbox that is complete and may be claimed."""
    path: str            # absolute path in the inbox
    relpath: str         # relative to the inbox: "job" or "<pipeline>/job"
    name: str            # the job folder's name: output goes to <out>/<name>/
    route: str | None    # pipeline named by the routing folder, if any
    trigger: str         # "marker" (_READY) or "settled"
    inode: int
    seen_at: float = field(default=0.0, compare=False)  # time.time() when first seen


def tree_signature(root: str) -> str | None:
    """A digest of every entry below root (relative path, type, size, mtime); None if root vanished."""
    h = hashlib.sha1()
    stack = [""]
    try:
        while stack:
            rel = stack.pop()
            with os.scandir(os.path.join(root, rel) if rel else root) as it:
                entries = sorted(it, key=lambda e: e.name)
            for e in entries:
                if not rel and e.name == CLAIM_FILE:
                    continue
                st = e.stat(follow_symlinks=False)
                sub = f"{rel}/{e.name}" if rel else e.name
                h.update(f"{sub}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
                if e.is_dir(follow_symlinks=False):
                    stack.append(sub)
    except FileNotFoundError:
        if not os.path.isdir(root):
            return None
        return "changing"  # an entry vanished mid-walk: the tree is changing
    except OSError as exc:  # unreadable, a path too long to list, ...: stable, so the job still settles
        return f"unreadable:{exc.errno}:{exc.filename}:{h.hexdigest()}"
    return h.hexdigest()


@dataclass
class _Seen:
    signature: str | None
    since: float          # monotonic time the signature was last seen to change
    first_seen: float     # wall-clock time


class _Hints(FileSystemEventHandler):
    """watchdog handler: every event wakes the scanner and marks its job (first two path parts) as busy."""

    def __init__(self, inbox: str, wake: threading.Event):
        super().__init__()
        self.inbox = inbox
        self.wake = wake
        self.touched: set[str] = set()
        self.lock = threading.Lock()

    def dispatch(self, ev) -> None:  # watchdog calls dispatch(event) on its handler
        paths = [ev.src_path] + ([ev.dest_path] if getattr(ev, "dest_path", "") else [])
        with self.lock:
            for p in paths:
                p = os.fsdecode(p)
                rel = os.path.relpath(p, self.inbox)
                if rel.startswith(".."):
                    continue
                parts = rel.split(os.sep)
                self.touched.add(parts[0])
                if len(parts) > 1:
                    self.touched.add(f"{parts[0]}/{parts[1]}")
        self.wake.set()

    def take(self) -> set[str]:
        with self.lock:
            out, self.touched = self.touched, set()
        return out


class Watcher:
    """with Watcher(inbox, q, routes=...) as w: ... JobReady values arrive on q."""

    def __init__(self, inbox: str, out: "queue.Queue[JobReady]", *, routes: Callable[[], set[str]],
                 settle_seconds: float = defaults.SETTLE_SECONDS, rescan_seconds: float = defaults.RESCAN_SECONDS,
                 polling: bool = False):
        self.inbox = os.path.abspath(inbox)
        self.out = out
        self.routes = routes
        self.settle_seconds = settle_seconds
        self.rescan_seconds = rescan_seconds
        self.polling = polling
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._hints = _Hints(self.inbox, self._wake)
        self._seen: dict[tuple[str, int], _Seen] = {}
        self._emitted: set[tuple[str, int]] = set()
        self._retry_at: dict[tuple[str, int], float] = {}   # a job whose claim failed: not emitted before then
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._observer = None
        self.scans = 0
        self._warned: set[str] = set()

    # -- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> "Watcher":
        self.scan()  # the start-up scan: jobs already waiting are found without any event
        self._observer = self._start_observer()
        self._thread = threading.Thread(target=self._run, name="augd-watcher", daemon=True)
        self._thread.start()
        return self

    def _start_observer(self):
        try:
            if self.polling:
                from watchdog.observers.polling import PollingObserver
                obs = PollingObserver(timeout=defaults.POLL_INTERVAL_SECONDS)
            else:
                from watchdog.observers import Observer
                obs = Observer()
            obs.schedule(self._hints, self.inbox, recursive=True)
            obs.daemon = True
            obs.start()
            return obs
        except OSError as exc:  # e.g. inotify watch limit reached: rescans still find every job
            log.warning("cannot watch %s for events (%s); relying on rescans every %ss", self.inbox, exc,
                        self.rescan_seconds)
            return None

    def should_keep_running(self) -> bool:
        return not self._stop.is_set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "Watcher":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def configure(self, *, settle_seconds: float, rescan_seconds: float) -> None:
        """SIGHUP: new timings; what was seen so far is kept."""
        self.settle_seconds, self.rescan_seconds = settle_seconds, rescan_seconds
        self._wake.set()

    def retry(self, job: JobReady) -> None:
        """The job was emitted and could not be claimed (a transient error, its folder still in the inbox): emit it
        again, as if never emitted, at the first scan a rescan period from now (not at once: a claims folder that
        stays unwritable for an hour costs a line per job per rescan, not a busy loop)."""
        with self._lock:
            key = (job.relpath, job.inode)
            self._emitted.discard(key)
            self._retry_at[key] = time.monotonic() + self.rescan_seconds

    @property
    def waiting(self) -> int:
        """Job folders seen but not ready yet (still settling)."""
        with self._lock:
            return sum(1 for k in self._seen if k not in self._emitted)

    @property
    def settling(self) -> list[str]:
        """Relative paths of the job folders seen but not ready yet, sorted."""
        with self._lock:
            return sorted(k[0] for k in self._seen if k not in self._emitted)

    # -- the loop --------------------------------------------------------------------------------------------
    def _run(self) -> None:
        last_full = time.monotonic()
        while self.should_keep_running():
            timeout = max(0.0, self.rescan_seconds - (time.monotonic() - last_full))
            if self.waiting:
                timeout = min(timeout, max(0.05, min(1.0, self.settle_seconds / 4)))
            if self._wake.wait(timeout):
                self._wake.clear()
                self._stop.wait(0.05)  # let a burst of events land before scanning
            if not self.should_keep_running():
                break
            try:
                self.scan()
            except Exception:  # noqa: BLE001 - the watcher must outlive one bad scan
                log.exception("inbox scan failed; retrying at the next rescan")
            last_full = time.monotonic()

    def _candidates(self) -> dict[tuple[str, int], tuple[str, str, str, str | None]]:
        """(relpath, inode) -> (path, relpath, name, route) of every job folder in the inbox now."""
        found = {}
        routes = self.routes()
        try:
            top = list(os.scandir(self.inbox))
        except FileNotFoundError:
            log.error("inbox %s does not exist", self.inbox)
            return found
        for e in top:
            if e.name.startswith("."):
                continue
            if e.is_symlink() and e.is_dir():
                self._symlink_ignored(e.name)
            if not e.is_dir(follow_symlinks=False):
                continue
            if e.name in routes:
                try:
                    subs = list(os.scandir(e.path))
                except OSError:
                    continue
                loose = [s.name for s in subs if not s.name.startswith(".") and s.is_file(follow_symlinks=False)]
                if loose and e.name not in self._warned:
                    self._warned.add(e.name)
                    log.warning("inbox/%s is a routing folder (a pipeline has that name), so only the folders "
                                "inside it are jobs; its files (%s) are ignored. To run a job named %r, put it "
                                "in inbox/%s/%s/ or rename it.", e.name, ", ".join(sorted(loose)[:3]), e.name,
                                e.name, e.name)
                for s in subs:
                    if not s.name.startswith(".") and s.is_symlink() and s.is_dir():
                        self._symlink_ignored(f"{e.name}/{s.name}")
                    if not s.name.startswith(".") and s.is_dir(follow_symlinks=False):
                        rel = f"{e.name}/{s.name}"
                        found[(rel, s.inode())] = (s.path, rel, s.name, e.name)
            else:
                found[(e.name, e.inode())] = (e.path, e.name, e.name, None)
        return found

    def _symlink_ignored(self, rel: str) -> None:
        """Once per name: a job is claimed by renaming its folder, and renaming a link would move the link only."""
        if f"link:{rel}" in self._warned:
            return
        self._warned.add(f"link:{rel}")
        event("job_ignored", "inbox/%s is a symbolic link to a folder, not a job: augd claims a job by renaming its "
              "folder, which would move the link and leave the files where they are. Copy or move the folder into "
              "the inbox instead.", rel, level=logging.WARNING, job=os.path.basename(rel), why="symlink")

    def scan(self) -> list[JobReady]:
        """One pass over the inbox; emits and returns the jobs that became ready."""
        now = time.monotonic()
        touched = self._hints.take()
        found = self._candidates()
        ready = []
        with self._lock:
            for key in [k for k in self._seen if k not in found]:
                del self._seen[key]
            self._emitted &= set(found)
            self._retry_at = {k: t for k, t in self._retry_at.items() if k in found and t > now}
            for key, (path, rel, name, route) in found.items():
                if key in self._emitted:
                    continue
                sig = tree_signature(path)
                seen = self._seen.get(key)
                if seen is None:
                    seen = self._seen[key] = _Seen(sig, now, time.time())
                    event("job_seen", "job %s seen in the inbox", rel, job=name, route=route)
                elif sig != seen.signature or rel in touched:
                    seen.signature, seen.since = sig, now
                if sig is None or key in self._retry_at:
                    continue
                if os.path.isfile(os.path.join(path, defaults.READY_MARKER)):
                    trigger = "marker"
                elif now - seen.since >= self.settle_seconds:
                    trigger = "settled"
                else:
                    continue
                job = JobReady(path=path, relpath=rel, name=name, route=route, trigger=trigger, inode=key[1],
                               seen_at=seen.first_seen)
                self._emitted.add(key)
                ready.append(job)
        self.scans += 1
        for job in ready:
            event("job_ready", "job %s is ready (%s)", job.relpath, job.trigger, job=job.name, trigger=job.trigger)
            self.out.put(job)
        return ready
