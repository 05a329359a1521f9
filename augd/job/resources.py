"""Resource bounds of one job, so that one job cannot take the host (or the daemon serving it) down.

Memory: a limit on how much the process' resident memory may grow while the job runs. It is enforced twice:
before any pixel is decoded, from the image headers (an image that alone cannot fit fails the job; images are
let into flight only while their budget fits), and by sampling the resident size while the job runs (what the
budget missed: a codec or a chain that needs more than budgeted). TensorFlow's kernels cannot be interrupted,
so a sampled overrun stops the job after the images in flight; the budget is what keeps them small.

Space: before the first record is written, the job's output size, extrapolated from its first records, is
checked against the free space of the output filesystem, so a job that cannot fit fails at once instead of
filling the disk for the next one.
"""
from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass

from augd import defaults
from augd.errors import FailureReason, JobFailed
from augd.ops import REGISTRY

__all__ = ["MemoryGuard", "SpaceCheck", "check_memory", "check_space", "default_job_memory_bytes",
           "host_memory_bytes", "image_memory", "job_memory_bytes", "OutputBound", "output_bound", "over_budget",
           "rss_bytes"]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_MB = 1024 * 1024


def rss_bytes(pid: int | str = "self") -> int:
    """Resident memory of a process (Linux /proc); 0 where it cannot be read (the sampled check is then off)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _cgroup_limit() -> int | None:
    """The tightest memory limit of this process' cgroup and its ancestors (v2 memory.max, v1
    memory.limit_in_bytes), wherever the hierarchy is mounted: a systemd service (MemoryMax=) sees its own
    cgroup's path in /proc/self/cgroup, a container its root."""
    try:
        with open("/proc/self/cgroup") as fh:
            entries = [line.rstrip("\n").split(":", 2) for line in fh]
    except OSError:
        return None
    limits = []
    for _, controllers, path in (e for e in entries if len(e) == 3):
        if controllers == "":
            mount, name = "/sys/fs/cgroup", "memory.max"            # v2 (or /sys/fs/cgroup/unified)
        elif "memory" in controllers.split(","):
            mount, name = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):   # the cgroup, then each ancestor: the tightest one holds
            try:
                with open(os.path.join(mount, *parts[:depth], name)) as fh:
                    raw = fh.read().strip()
            except OSError:
                continue
            if raw.isdigit() and int(raw) < 1 << 60:  # v1 says "no limit" with a huge number, v2 with "max"
                limits.append(int(raw))
    return min(limits) if limits else None


def host_memory_bytes() -> int:
    """The memory this process may use: the cgroup's limit where one is set (containers, systemd's
    MemoryMax=), else physical RAM."""
    phys = os.sysconf("SC_PHYS_PAGES") * _PAGE
    limit = _cgroup_limit()
    return min(phys, limit) if limit else phys


def default_job_memory_bytes() -> int:
    return int(host_memory_bytes() * defaults.JOB_MEMORY_SHARE)


def job_memory_bytes(setting: str | int | None) -> int | None:
    """What `job_memory_mb` (daemon) and `--max-memory-mb` (augd run) mean: "auto", None (no limit) or MB."""
    if setting == "auto":
        return default_job_memory_bytes()
    return None if setting is None else int(setting) * _MB


def image_memory(source_pixels: int, output_pixels: int, graph_variants: int) -> int:
    """Working memory budgeted for one image with `graph_variants` variants in one graph call."""
    return (source_pixels + output_pixels) * defaults.BYTES_PER_PIXEL_IN_FLIGHT * max(1, graph_variants)


class MemoryGuard:
    """Samples the process' resident memory in a thread while a job runs; `error()` is the JobFailed to raise
    once it grew past `limit` bytes over its size at start()."""

    def __init__(self, limit: int, interval: float = defaults.MEMORY_SAMPLE_SECONDS):
        self.limit = limit
        self.interval = interval
        self.baseline = 0
        self.peak = 0          # largest growth seen, bytes
        self.tripped = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "MemoryGuard":
        self.baseline = rss_bytes()
        if self.baseline:  # no /proc: nothing to sample
            self._thread = threading.Thread(target=self._run, name="augd-memory", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, rss_bytes() - self.baseline)
            if self.peak > self.limit:
                self.tripped.set()
                return

    def error(self) -> JobFailed:
        return JobFailed(_oom_message(self.limit, self.peak),
                         reason=FailureReason.OUT_OF_MEMORY)


def over_budget(relpath: str, width: int, height: int, need: int, limit: int) -> JobFailed:
    """The failure of a job holding an image that alone needs more than the job's memory limit."""
    return JobFailed(f"{relpath}: {width}x{height} needs ~{need / _MB:.0f} MB to process "
                     f"({defaults.BYTES_PER_PIXEL_IN_FLIGHT} bytes per pixel of source and output, per variant), "
                     f"over {defaults.MEMORY_BUDGET_SHARE:.0%} of the job's memory "
                     f"limit of {limit / _MB:.0f} MB (job_memory_mb in the daemon config, --max-memory-mb for augd "
                     f"run); raise the limit, or resize the image before dropping it",
                     reason=FailureReason.OUT_OF_MEMORY)


def _oom_message(limit: int, used: int) -> str:
    return (f"the job grew the process' resident memory by {used / _MB:.0f} MB, over its memory limit of "
            f"{limit / _MB:.0f} MB (job_memory_mb in the daemon config, --max-memory-mb for augd run); raise the "
            f"limit, or split the job")


def check_space(folder: str, estimate: int) -> None:
    """Raise JobFailed(output_error) when the filesystem holding `folder` (local) has too little free space
    for `estimate` bytes of output, with the margin and reserve of augd.defaults."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return  # not a local folder we can ask: the writes themselves will say
    free = st.f_bavail * st.f_frsize
    need = int(estimate * defaults.SPACE_MARGIN) + defaults.SPACE_RESERVE_BYTES
    if need > free:
        raise JobFailed(f"not enough space for the output under {folder.rsplit('/', 1)[0]}: the job needs about "
                        f"{need / _MB:.1f} MB (estimated output {estimate / _MB:.1f} MB, plus "
                        f"{round((defaults.SPACE_MARGIN - 1) * 100)} % and {defaults.SPACE_RESERVE_BYTES // _MB} MB "
                        f"reserve) and {free / _MB:.1f} MB are free; free some space or split the job",
                        reason=FailureReason.OUTPUT_ERROR)


@dataclass(frozen=True)
class OutputBound:
    """The most pixels an image holds at any point of a chain: max(scale x its own pixels, pixels)."""
    scale: float     # growth of the source's pixels (Op.growth squared, over every op that grows its input)
    pixels: int      # the largest fixed size an op crops or resizes to (Op.size_limit), grown by the ops after it

    def __call__(self, source_pixels: int) -> int:
        return int(max(source_pixels * self.scale, self.pixels, source_pixels))


def output_bound(nodes) -> OutputBound:
    """The chain's OutputBound, walked in order. An op with a size_limit outputs at most that size; one with growth
    g at most g x g its input's pixels; any other op no more than its input. A one_of's children are alternatives
    (the largest of them, or none, bounds it); a sequence's and some_of's children are taken as if each applied."""
    scale, fixed, peak_scale, peak_fixed = _bound(nodes, 1.0, 0.0)
    return OutputBound(peak_scale, math.ceil(peak_fixed))


def _bound(nodes, scale: float, fixed: float) -> tuple[float, float, float, float]:
    """(scale, fixed) after `nodes` from (scale, fixed) before them, and the peaks on the way."""
    peak_scale, peak_fixed = scale, fixed
    for node in nodes:
        if node.name == "one_of":
            ends = [_bound([child], scale, fixed) for child in node.children]
            scale, fixed = max([scale] + [e[0] for e in ends]), max([fixed] + [e[1] for e in ends])
            peak_scale = max([peak_scale] + [e[2] for e in ends])
            peak_fixed = max([peak_fixed] + [e[3] for e in ends])
            continue
        if node.children:
            scale, fixed, ps, pf = _bound(node.children, scale, fixed)
        else:
            op = REGISTRY[node.name](node.params)
            grow = op.growth ** 2
            scale, fixed = scale * grow, fixed * grow
            if op.size_limit:
                fixed = max(fixed, float(op.size_limit[0] * op.size_limit[1]))
            ps, pf = scale, fixed
        peak_scale, peak_fixed = max(peak_scale, ps), max(peak_fixed, pf)
    return scale, fixed, peak_scale, peak_fixed


def check_memory(cost, images, budget: int, limit: int) -> None:
    """Fail before any decode when one image alone needs more than the job's memory budget (its share of the
    limit that images in flight may take)."""
    for img in images:
        need = cost(img)
        if need > budget:
            raise over_budget(img.relpath, img.header.width, img.header.height, need, limit)


class SpaceCheck:
    """Before the job's first record is written: its output, extrapolated from the first records made (bytes
    per source byte per record), must fit the output filesystem (augd.job.resources.check_space). One check
    per job, whichever split comes first; `groups`: (images, records per image) of every split."""

    def __init__(self, folder: str, groups):
        self.folder, self.done = folder, False
        self.planned = sum(i.size * n for images, n in groups for i in images)  # source bytes x records

    def __call__(self, results) -> None:
        made = [r for r in results if not r.rejected]
        if self.done or not made:
            return
        self.done = True
        per = sum(len(rec) for r in made for rec in r.records) / max(1, sum(r.image.size * len(r.records)
                                                                         for r in made))
        check_space(self.folder, int(self.planned * per))
