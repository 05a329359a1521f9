"""Issue 8, item 3: 500 tiny jobs (AUGD_LOAD_JOBS=N for another figure) dropped at once into a real daemon whose inotify queue is made to overflow
(max_queued_events lowered while it starts, when this runs as root; restored at once): the rescans find what
the events missed, every job runs exactly once, the queue metrics return to 0, and memory stays bounded."""
from __future__ import annotations

import os
import re
import time


from tests.daemon_harness import (Daemon, make_job, manifest, no_leaked_children,  # noqa: F401
                                  no_leaked_children_module, wait_for, write_config)

#: 500 is the issue's figure (~5 min here: each job builds its own graph by design, ~430 ms of ~600 ms per
#: 1-image job on this 2-core box). AUGD_LOAD_JOBS=N runs another figure.
N_JOBS = int(os.environ.get("AUGD_LOAD_JOBS", "500"))
QUEUE_KNOB = "/proc/sys/fs/inotify/max_queued_events"
#: Generous: TensorFlow + one job's graph on CPU is ~0.5-0.8 GB here; a leak of a graph or a few MB per job
#: over 500 jobs would cross it.
RSS_LIMIT_KB = 2_500_000


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", fh.read(), re.M).group(1))


def sample(text: str, name: str, labels: str = "") -> float:
    m = re.search(rf"^{re.escape(name)}{re.escape(labels)} ([0-9.e+-]+)$", text, re.M)
    assert m, f"{name}{labels} not in the scrape"
    return float(m.group(1))


def _has_inotify(pid: int) -> bool:
    """Whether the process holds an inotify instance (inotify_init has read max_queued_events)."""
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify" for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def test_hundreds_of_jobs_at_once_with_an_overflowing_inotify_queue(tmp_path):
    cfg = write_config(tmp_path, settle_seconds=1.0, rescan_seconds=3, workers=1)
    staging = tmp_path / "staging"
    for i in range(N_JOBS):
        make_job(staging / f"j{i:03d}", n=1, seed=i, classes=())
    old_knob = None
    overflow = "not tried"
    if os.geteuid() == 0 and os.access(QUEUE_KNOB, os.W_OK):
        with open(QUEUE_KNOB) as fh:
            old_knob = fh.read().strip()
    d = Daemon(cfg)
    try:
        if old_knob is not None:
            with open(QUEUE_KNOB, "w") as fh:
                fh.write("16\n")  # read by inotify_init: the daemon's queue holds 16 events
            overflow = "max_queued_events=16"
        d.start()
        if old_knob is not None:   # the knob is machine-wide: back as soon as the daemon's watcher has read it,
            # so that the daemons another pytest worker starts meanwhile keep the usual queue
            wait_for(lambda: _has_inotify(d.proc.pid), 120, "the daemon's inotify watcher", on_fail=d.log_tail)
            with open(QUEUE_KNOB, "w") as fh:
                fh.write(old_knob + "\n")
            old_knob = None
        d.wait_ready(timeout=120)
    finally:
        if old_knob is not None:
            with open(QUEUE_KNOB, "w") as fh:
                fh.write(old_knob + "\n")
    if overflow == "not tried":
        print(f"\nnote: cannot lower {QUEUE_KNOB} (not root); 500 renames still far exceed one scan's batch")
    try:
        t0 = time.monotonic()
        for i in range(N_JOBS):  # all land within a fraction of a second: far more events than the queue holds
            os.rename(staging / f"j{i:03d}", d.inbox / f"j{i:03d}")
        peak = rss_kb(d.proc.pid)

        def all_done():
            nonlocal peak
            peak = max(peak, rss_kb(d.proc.pid))
            return len(os.listdir(d.done)) >= N_JOBS or os.listdir(d.failed)

        wait_for(all_done, 60 + 2.0 * N_JOBS, f"{N_JOBS} jobs done", interval=0.5, on_fail=d.log_tail)
        elapsed = time.monotonic() - t0
        wait_for(lambda: (m := d.get("/metrics")[1]) and sample(m, "augd_queue_jobs", '{state="ready"}') == 0
                 and sample(m, "augd_queue_jobs", '{state="waiting"}') == 0
                 and sample(m, "augd_inflight_jobs") == 0, 30, "queue metrics back to 0", on_fail=d.log_tail)
        metrics = d.get("/metrics")[1]
        peak = max(peak, rss_kb(d.proc.pid))
    finally:
        assert d.stop() == 0, d.log_tail()
    assert os.listdir(d.failed) == []
    assert sorted(os.listdir(d.done)) == [f"j{i:03d}" for i in range(N_JOBS)], "each exactly once (no name.1)"
    assert os.listdir(d.inbox) == [] and os.listdir(d.work) in ([], [".claims"])
    assert os.listdir(d.work / ".claims") == [] if (d.work / ".claims").exists() else True, "no record left"
    assert sample(metrics, "augd_jobs_total", '{result="success"}') == N_JOBS
    assert sample(metrics, "augd_records_written_total") == N_JOBS
    assert sum(manifest(d.out, f"j{i:03d}")["records"]["written"] for i in range(0, N_JOBS, 25)) == len(range(0, N_JOBS, 25))
    claimed = [ln for ln in d.events("claimed ")]
    assert len(claimed) == N_JOBS, len(claimed)
    assert peak < RSS_LIMIT_KB, f"peak RSS {peak} kB"
    print(f"\n{N_JOBS} jobs in {elapsed:.1f}s ({elapsed / N_JOBS * 1000:.0f} ms/job), peak RSS {peak // 1024} MB, "
          f"inotify: {overflow}, overflow logged: {bool(d.events('overflow'))}")
