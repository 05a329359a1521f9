"""Claim records: which daemon runs each job in work/, so that several daemons can share one set of folders.

`work/.claims/<job>/` holds the records of the job folder `work/<job>`, one file per generation, `<gen>.json`:
`{"owner": {host, boot_id, pid_ns, pid, started}, "attempts": n, "beat": k, "renewed": ISO time}`. The highest
generation is the job's holder. Every record file is created whole and only if absent (written aside, then
`os.link`ed into place), so of two daemons taking the same job over at once exactly one gets generation g + 1.

- A new claim first creates `work/.claims/<job>/` (mkdir: exactly one daemon gets a name) and generation 1, then
  renames the job into `work/<job>`: a job folder in work/ always has its holder's record.
- The holder renews its record (beat + 1, a new file each time) every lease/6 seconds while its job runner
  lives, and gives the job up (cancels it, commits nothing, moves nothing) when it finds a generation above its
  own: another daemon judged it gone and took the job over.
- A holder is gone when its process is dead (same process table: augd.owner.Owner.alive, exact) or, on another
  machine, when its record file has not changed (inode, size, mtime: readable or not) for `lease_seconds` while
  this daemon watched it, by this daemon's own clock: no clocks are compared across machines. A job whose holder
  is gone is taken over by the first daemon to create the next generation, one job at a time (idle daemons share
  the orphans); its attempts carry on (a job that keeps killing its daemons is still dead-lettered).
- The records of a job leave with it (done/, failed/, the inbox): `release`, only while this daemon is still its
  holder. Records whose job is no longer in work/ and whose holder is gone (a crash between the move and the
  release) are swept by `orphans`.
"""
from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import re
import secrets
import shutil
import threading
import time
from dataclasses import dataclass

from augd.files import fsync_dir
from augd.owner import Owner

log = logging.getLogger("augd.daemon")

__all__ = ["CLAIMS_DIR", "Leases", "Lost", "Record"]

CLAIMS_DIR = ".claims"
_GEN = re.compile(r"^(\d{1,9})\.json$")


@dataclass(frozen=True)
class Record:
    """One generation of a job's claim record."""
    job: str               # the job folder's name in work/
    gen: int
    owner: Owner | None    # None: a record that cannot be read (judged by its heartbeat, like another machine's)
    attempts: int = 1      # processes that started the job so far
    beat: int = 0
    stamp: tuple = ()      # (inode, size, mtime) of its file as read: what changes at every beat

    def to_dict(self) -> dict:
        return {"owner": self.owner.to_dict() if self.owner else None, "attempts": self.attempts, "beat": self.beat,
                "renewed": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")}


class Lost(Exception):
    """This daemon no longer holds the job: another daemon took it over."""


class Leases:
    """The claim records of one work/ folder, as one daemon (`me`) sees and holds them. Thread-safe: the job
    runner claims, takes over and releases; the main loop renews; HTTP reads the view."""

    def __init__(self, work: str, lease_seconds: float, me: Owner | None = None):
        self.work = work
        self.root = os.path.join(work, CLAIMS_DIR)
        self.lease_seconds = lease_seconds
        self.me = me or Owner.me()
        self._held: dict[str, Record] = {}
        self._abandoned: set[str] = set()   # jobs this daemon held and let go of (abandon): its own orphans
        self._watched: dict[str, tuple[int, tuple, float]] = {}   # job -> (gen, stamp, monotonic time first seen)
        self._lock = threading.RLock()
        self._renewed = 0.0

    # -- records ---------------------------------------------------------------------------------------------
    def _dir(self, job: str) -> str:
        return os.path.join(self.root, job)

    def _gens(self, job: str) -> list[int]:
        try:
            return sorted(int(m.group(1)) for n in os.listdir(self._dir(job)) if (m := _GEN.match(n)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def read(self, job: str) -> Record | None:
        """The job's holder (its highest generation), None when it has no record at all. A record that cannot
        be read (or keeps being replaced while it is read) has no owner: it is judged by its changes alone."""
        gens: list[int] = []
        for _ in range(3):   # a generation may be replaced by the next one while it is read
            gens = self._gens(job)
            if not gens:
                return None
            path = os.path.join(self._dir(job), f"{gens[-1]}.json")
            try:
                with open(path, "rb") as fh:
                    st = os.fstat(fh.fileno())
                    raw = fh.read(64 * 1024)
            except FileNotFoundError:
                continue
            except OSError:   # unreadable (permissions): its metadata still shows each beat
                try:
                    st = os.stat(path)
                except OSError:
                    return Record(job, gens[-1], None)
                return Record(job, gens[-1], None, stamp=(st.st_ino, st.st_size, st.st_mtime_ns))
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
            try:
                d = json.loads(raw)
                return Record(job, gens[-1], Owner.from_dict(d["owner"]), max(1, int(d["attempts"])), int(d["beat"]),
                              stamp)
            except (KeyError, TypeError, ValueError):
                return Record(job, gens[-1], None, stamp=stamp)
        return Record(job, gens[-1], None)

    def _put(self, rec: Record, *, new: bool) -> bool:
        """Write a record whole; `new`: only if its generation does not exist yet (False when it does)."""
        path = os.path.join(self._dir(rec.job), f"{rec.gen}.json")
        tmp = f"{path}.{self.me.machine}-{self.me.pid}-{secrets.token_hex(4)}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(rec.to_dict(), fh, sort_keys=True)
                fh.flush()
                os.fsync(fh.fileno())
            if new:
                os.link(tmp, path)
            else:
                os.replace(tmp, path)
        except FileExistsError:
            return False
        finally:
            _unlink(tmp)
        try:
            fsync_dir(self._dir(rec.job))
        except OSError as exc:   # the record is in place; only its durability across a power cut is in doubt
            log.warning("cannot fsync %s: %s", self._dir(rec.job), exc)
        return True

    def _hold(self, rec: Record) -> Record:
        with self._lock:
            self._held[rec.job] = rec
            self._abandoned.discard(rec.job)
        return rec

    # -- what the job runner does ----------------------------------------------------------------------------
    def taken(self, job: str) -> bool:
        """The name is in use in work/: a job folder or claim records (a claim under way, or records to sweep)."""
        return os.path.lexists(os.path.join(self.work, job)) or os.path.lexists(self._dir(job))

    def reserve(self, job: str) -> bool:
        """Hold the name `job` in work/ for a new claim, before the job is renamed there: False when another
        claim has it. Raises OSError when the records cannot be written (the caller releases)."""
        os.makedirs(self.root, exist_ok=True)
        try:
            os.mkdir(self._dir(job))
        except FileExistsError:
            return False
        rec = Record(job, 1, self.me)
        if not self._put(rec, new=True):
            return False
        self._hold(rec)
        return True

    def take(self, job: str, rec: Record | None) -> Record | None:
        """Become the holder of `job`, whose holder `rec` is gone (None: it has no record): the next generation,
        if no other daemon created it first (then None). Its attempts carry on."""
        if rec is None:
            os.makedirs(self._dir(job), exist_ok=True)
        elif not os.path.exists(os.path.join(self._dir(job), f"{rec.gen}.json")):
            return None   # taken over (or released) since it was read
        # The generation after the one read, created only if absent: of the daemons that read the same one, one
        # gets it (never the next but one: a taker never jumps another's fresh generation).
        gen = rec.gen + 1 if rec is not None else 1
        mine = Record(job, gen, self.me, rec.attempts if rec is not None else 1)
        if not self._put(mine, new=True):
            return None
        self._hold(mine)
        if not self.holds(job):   # a later generation landed meanwhile (a record appeared where none was)
            self.forget(job)
            _unlink(os.path.join(self._dir(job), f"{gen}.json"))
            return None
        for g in self._gens(job):
            if g < gen:
                _unlink(os.path.join(self._dir(job), f"{g}.json"))
        return mine

    def count_attempt(self, job: str) -> int:
        """One more process starts the held job: counted durably before it runs (a crash during it counts).
        Raises Lost when another daemon holds it now."""
        with self._lock:
            rec = self._held.get(job)
            if rec is None or not self.holds(job):
                raise Lost(job)
            rec = Record(job, rec.gen, self.me, rec.attempts + 1, rec.beat + 1)
            self._put(rec, new=False)
            self._held[job] = rec
        return rec.attempts

    def release(self, job: str) -> None:
        """The held job left work/ (to done/, failed/ or the inbox): its records go with it, unless another
        daemon holds it now (then they are that one's)."""
        with self._lock:
            mine = self._held.pop(job, None)
        gens = self._gens(job)
        if mine is not None and (not gens or gens[-1] == mine.gen):
            shutil.rmtree(self._dir(job), ignore_errors=True)

    def forget(self, job: str) -> None:
        """Stop holding a job another daemon took over: its records are theirs now."""
        with self._lock:
            self._held.pop(job, None)

    def abandon(self) -> list[str]:
        """Stop holding every held job (the runner's step failed with one in work/, a folder not writable say):
        each is this daemon's orphan now, which its next rescan takes over and runs again (`orphans`)."""
        with self._lock:
            jobs, self._held = list(self._held), {}
            self._abandoned.update(jobs)
        return jobs

    def lost_how(self, job: str) -> str:
        """Why this daemon no longer holds `job`: "taken over by HOLDER" or "its claim records are gone"."""
        rec = self.read(job)
        if rec is None:
            return (f"its claim records ({os.path.join(self.root, job)}) are gone: removed by hand or by a tool, not "
                    f"by a daemon (a daemon takes a job over by adding a generation)")
        holder = rec.owner.label if rec.owner else "a holder whose record is unreadable"
        return (f"another daemon took it over ({holder}, generation {rec.gen}): this daemon's heartbeat was older "
                f"than claim_lease_seconds={self.lease_seconds:g}")

    def holds(self, job: str) -> bool:
        """Whether this daemon still holds the job: its generation is the highest (read now, not remembered).
        Raises OSError when the records cannot be listed."""
        with self._lock:
            mine = self._held.get(job)
        gens = self._gens(job)
        return mine is not None and bool(gens) and gens[-1] == mine.gen

    # -- what the main loop does -----------------------------------------------------------------------------
    def renew(self, now: float | None = None) -> list[str]:
        """Beat every held job's record, at most every lease/6 s. Returns the held jobs lost since the last
        renewal (a higher generation there, or their records gone): the caller cancels them. A record that
        cannot be read or written now is tried again at the next beat."""
        now = time.monotonic() if now is None else now
        if now - self._renewed < max(0.2, self.lease_seconds / 6):
            return []
        self._renewed = now
        lost = []
        with self._lock:   # held: count_attempt's write (the runner's) never crosses a beat's
            for job in list(self._held):
                rec = self._held[job]
                beat = Record(job, rec.gen, self.me, rec.attempts, rec.beat + 1)
                try:
                    if not self.holds(job):
                        self.forget(job)
                        lost.append(job)
                        continue
                    self._put(beat, new=False)
                except OSError as exc:   # a lapsed lease is what another daemon sees; its takeover, what we see
                    log.warning("cannot renew the claim of job %s: %s", job, exc)
                    continue
                self._held[job] = beat
        return lost

    # -- what every daemon's rescans do ----------------------------------------------------------------------
    def _alive(self, rec: Record, now: float, watch: bool) -> bool | None:
        """Whether the holder lives: by its process where it shares this process table, else by its record's
        changes: False once it has not changed for the lease (None: not watched long enough to tell)."""
        alive = rec.owner.alive() if rec.owner is not None else None
        if alive is not None:
            return alive
        key = (rec.gen, rec.stamp)
        seen = self._watched.get(rec.job)
        if seen is None or seen[:2] != key:
            if watch:
                self._watched[rec.job] = (*key, now)
            return None
        return False if now - seen[2] >= self.lease_seconds else None

    def _jobs(self) -> list[str]:
        try:
            with os.scandir(self.work) as it:
                return sorted(e.name for e in it if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
        except FileNotFoundError:
            return []

    def orphans(self) -> list[tuple[str, Record | None]]:
        """The jobs in work/ that no live daemon holds, with their last holder's record (None: no record: a
        folder put there by hand, or by augd before claim records). Sweeps the records of jobs no longer in
        work/ whose holder is gone."""
        now = time.monotonic()
        try:
            recorded = set(os.listdir(self.root))   # before work/: a job claimed meanwhile is in both
        except FileNotFoundError:
            recorded = set()
        jobs = self._jobs()
        with self._lock:
            held = set(self._held)
        out = []
        for job in jobs:
            if job in held:
                continue
            rec = self.read(job)
            mine = job in self._abandoned and rec is not None and rec.owner == self.me   # let go of: run it again
            if rec is None or mine or self._alive(rec, now, watch=True) is False:
                out.append((job, rec))
        for job in sorted(recorded - set(jobs) - held):
            rec = self.read(job) or Record(job, 0, None)   # no generation yet: a claim creating its first
            if self._alive(rec, now, watch=True) is False and not os.path.lexists(os.path.join(self.work, job)):
                shutil.rmtree(self._dir(job), ignore_errors=True)
        self._watched = {k: v for k, v in self._watched.items() if k in recorded or k in jobs}
        self._abandoned &= set(jobs)
        return out

    def view(self) -> list[dict]:
        """Every job in work/ and its holder, for /status: `holder` (host:pid), `state`: "this" (this daemon
        runs it), "other" (another daemon holds it, or may: not watched long enough to tell) or "none" (its
        holder is gone, or it has none: it is taken over at the next rescan)."""
        out = []
        now = time.monotonic()
        try:
            jobs = self._jobs()
        except OSError:
            return out
        for job in jobs:
            try:
                rec = self.read(job)
            except OSError:
                rec = None
            if rec is not None and rec.owner == self.me:
                state = "this"
            else:
                state = "none" if rec is None or self._alive(rec, now, watch=False) is False else "other"
            out.append({"job": job, "holder": rec.owner.label if rec and rec.owner else None, "state": state,
                        "attempts": rec.attempts if rec else None, "generation": rec.gen if rec else None})
        return out


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
