"""Who this process is, in terms another process can check: the owner of a claimed job (augd/daemon/claims/records.py) and of
a temporary output folder (augd/io/commit.py). A leaf: importing it loads nothing.

A pid alone names nothing for long: it is reused, it means another process in another pid namespace (a container)
and on another machine. An owner is (host, boot id, pid namespace, pid, start time); two owners share a process
table when their boot id and pid namespace are equal (the `machine` key), and only then can one tell by the pid
whether the other is alive. Across machines only a heartbeat can tell (the lease).
"""
from __future__ import annotations

import hashlib
import os
import socket
from dataclasses import asdict, dataclass
from functools import lru_cache

__all__ = ["Owner", "machine_key", "pid_alive"]


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _pid_ns() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")   # "pid:[4026531836]"
    except OSError:
        return ""


def _start_ticks(pid: int) -> int | None:
    """The process' start time in clock ticks after boot (field 22 of /proc/PID/stat); None when there is no
    such process (or it is a zombie: it has ended), 0 where /proc cannot tell."""
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return None if os.path.isdir("/proc/self") else 0
    fields = stat.rsplit(")", 1)[-1].split()   # the command name in parentheses may hold spaces
    if len(fields) < 20 or fields[0] == "Z":
        return None
    return int(fields[19])


@lru_cache(maxsize=1)
def machine_key() -> str:
    """12 hex digits naming this boot of this machine's process table (boot id + pid namespace)."""
    return Owner.me().machine


def pid_alive(pid: int) -> bool:
    """A process of this pid runs in this process table (signal 0; a process of another user counts). A zombie
    has ended: a daemon killed with kill -9 is one until its parent reaps it, and what it left must be swept by
    the same rule that lets its job be taken over (Owner.alive)."""
    if pid <= 0:  # os.kill(0, ...) would address our own process group
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True   # another user's: alive, and its /proc may be hidden (hidepid), so no zombie check
    stat = _read(f"/proc/{pid}/stat")
    return not (stat and stat.rsplit(")", 1)[-1].split()[:1] == ["Z"])   # unreadable: alive, as signal 0 says


@dataclass(frozen=True)
class Owner:
    """A process, as claim records name it."""
    host: str
    boot_id: str
    pid_ns: str
    pid: int
    started: int   # clock ticks after boot; 0 where unknown

    @classmethod
    def me(cls) -> "Owner":
        pid = os.getpid()
        return cls(socket.gethostname(), _read("/proc/sys/kernel/random/boot_id"), _pid_ns(), pid,
                   _start_ticks(pid) or 0)

    @property
    def machine(self) -> str:
        """The process table's key. Where the pid namespace cannot be read, a table of this process alone:
        containers share a boot id, and a pid seen from one of them names nothing in another."""
        table = self.pid_ns or f"pid {self.pid} started {self.started}"
        return hashlib.sha1(f"{self.boot_id or self.host}|{table}".encode()).hexdigest()[:12]

    @property
    def label(self) -> str:
        """host:pid, as the log, /status and the metrics show it."""
        return f"{self.host}:{self.pid}"

    def alive(self) -> bool | None:
        """Whether this owner's process still runs: True or False where it shares this process table, None where
        it does not (another machine, container or boot: only its heartbeat tells)."""
        if self.machine != machine_key():
            return None
        ticks = _start_ticks(self.pid)
        if ticks is None:
            return False
        if ticks and self.started:
            return ticks == self.started   # else the pid was reused by a younger process
        return pid_alive(self.pid)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d) -> "Owner":
        """Raises (KeyError, TypeError, ValueError) on anything but a dict of the five fields."""
        return cls(str(d["host"]), str(d["boot_id"]), str(d["pid_ns"]), int(d["pid"]), int(d["started"]))
