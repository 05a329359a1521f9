"""What this host lets the process use: CPUs (its affinity, from taskset or cpusets, capped by a cgroup CPU quota:
docker --cpus, systemd CPUQuota=, Kubernetes limits; os.cpu_count() counts the machine's, and a 2-CPU container on
a 64-core node would start 64 TensorFlow workers) and open files. A leaf: importing it loads nothing."""
from __future__ import annotations

import math
import os
import resource

__all__ = ["raise_open_files", "usable_cpus"]


def raise_open_files() -> tuple[int, int]:
    """Raise the soft open-files limit to the hard one and return (soft, hard). systemd starts services with soft
    1024 and hard 524288 and expects a service that needs more to raise its own soft limit (systemd.exec(5))."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (OSError, ValueError):   # a hard limit of "unlimited" that the kernel caps lower (nr_open)
            pass
    return soft, hard


def usable_cpus() -> int:
    """CPUs this process may keep busy (at least 1): the affinity mask's size, capped by the tightest cgroup CPU
    quota of its cgroup and its ancestors, rounded up."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):   # not Linux
        n = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    return max(1, min(n, math.ceil(quota)) if quota else n)


def parse_quota(v2: str | None = None, v1_quota: str | None = None, v1_period: str | None = None) -> float | None:
    """CPUs a quota allows: v2 cpu.max ("max 100000" or "200000 100000"), or v1 cfs_quota_us / cfs_period_us
    (-1: none). None where there is no limit or the text is not understood."""
    try:
        if v2 is not None:
            quota, period = v2.split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        if v1_quota is not None and v1_period is not None:
            q = int(v1_quota)
            return None if q <= 0 else q / int(v1_period)
    except (ValueError, ZeroDivisionError):
        pass
    return None


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def _cgroup_cpu_quota() -> float | None:
    try:
        with open("/proc/self/cgroup") as fh:
            entries = [line.rstrip("\n").split(":", 2) for line in fh]
    except OSError:
        return None
    quotas = []
    for _, controllers, path in (e for e in entries if len(e) == 3):
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):   # the cgroup, then each ancestor: the tightest one holds
            if controllers == "":   # v2
                q = parse_quota(v2=_read(os.path.join("/sys/fs/cgroup", *parts[:depth], "cpu.max")))
            elif "cpu" in controllers.split(","):
                base = next((m for m in ("/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu") if os.path.isdir(m)),
                            "/sys/fs/cgroup/cpu")
                d = os.path.join(base, *parts[:depth])
                q = parse_quota(v1_quota=_read(os.path.join(d, "cpu.cfs_quota_us")),
                                v1_period=_read(os.path.join(d, "cpu.cfs_period_us")))
            else:
                break
            if q:
                quotas.append(q)
    return min(quotas) if quotas else None
