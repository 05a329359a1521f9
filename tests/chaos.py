"""The chaos soak: one big job through `augd serve` on worker processes while its peers are killed.

During the job, at moments drawn from a seeded generator (fractions of its progress, so they land inside the
job whatever the machine's speed): `kill -9` of a worker process several times, of multiprocessing's resource
tracker once, and of the daemon itself once, which is then started again, as systemd would. The output must be
byte-identical to the same job run without faults (`augd run --executor threads`), every image written
exactly once, and /healthz 200 at the end.

Used by tests/test_chaos_soak.py (10,000 images in CI) and bench/chaos.py (longer runs, more kills).
"""
from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from augd.io.lite import decode_example, iter_records
from tests.daemon_harness import (REPO, Daemon, children_of, make_job, resource_tracker_of, status, wait_for,
                                  write_config)

#: The job's name (not a pipeline's: a folder named like a pipeline is a routing folder).
JOB = "chaos-job"
PIPELINE = """name: soak
variants: 1
keep_original: false
output: {shards: 4}
ops:
  - random_flip_left_right: {}
  - random_rotation: {degrees: 10}
"""


def _oldest_worker(pid: int, killed: set[int]) -> int | None:
    """The worker that has run longest: a working one, not a replacement still starting (a pool whose workers
    keep dying before they are up gives up, by design)."""
    def started(child: int) -> int:
        with open(f"/proc/{child}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    workers = children_of(pid) - {resource_tracker_of(pid)} - killed
    try:
        return min(workers, key=started) if workers else None
    except OSError:   # one just ended
        return None


def _kill(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


def _outputs(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != "manifest.json"}


def soak(root: Path, images: int = 10_000, worker_kills: int = 3, seed: int = 0, log=print) -> dict:
    """Run the soak under root; return its figures. Raises AssertionError on any difference or loss."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    (root / "pipelines").mkdir(exist_ok=True)
    (root / "pipelines" / "soak.yaml").write_text(PIPELINE)
    staging = root / ".soak"
    make_job(staging, n=images, seed=seed, classes=("a", "b"))
    ref = subprocess.run([sys.executable, "-m", "augd", "run", str(staging), "-p", str(root / "pipelines/soak.yaml"),
                          "-o", str(root / "reference"), "--name", JOB, "--executor", "threads", "-q"],
                         env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
    assert ref.returncode == 0, ref.stderr
    cfg = write_config(root, default_pipeline="soak", workers=2, executor="processes", settle_seconds=0.5,
                       max_attempts=3, grace_seconds=5)
    # kills as fractions of the job's progress: worker kills spread over both runs (the one the daemon's kill
    # ends, and the one after the restart), the tracker and the daemon in the first
    # (a worker killed after the tracker makes the pool start one, which talks to the dead tracker: the moment a
    # daemon that let SIGPIPE through died)
    tracker_at = rng.uniform(0.05, 0.25)
    first = sorted([*(rng.uniform(0.05, 0.5) for _ in range(max(1, worker_kills - 1) - 1)),
                    rng.uniform(tracker_at + 0.05, 0.5)])
    daemon_at = rng.uniform(0.55, 0.8)
    second = sorted(rng.uniform(0.1, 0.7) for _ in range(worker_kills - len(first)))
    plan = {"workers_first_run": [round(f, 3) for f in first], "tracker": round(tracker_at, 3),
            "daemon": round(daemon_at, 3), "workers_after_restart": [round(f, 3) for f in second]}
    log(f"chaos soak: {images} images, seed {seed}, kills at fractions of progress {plan}")
    kills = collections.Counter()
    daemons = []
    t0 = time.monotonic()
    try:
        d = Daemon(cfg).start()
        daemons.append(d)
        d.wait_ready(180)
        wait_for(lambda: resource_tracker_of(d.proc.pid), 60, "the resource tracker")
        os.rename(staging, d.inbox / JOB)
        events = [(f, "worker") for f in first] + [(tracker_at, "tracker"), (daemon_at, "daemon")]
        _run_with_kills(d, images, sorted(events), kills)
        d.proc.wait(30)
        d._log.close()
        d = Daemon(cfg).start()   # as systemd would
        daemons.append(d)
        d.wait_ready(180)
        _run_with_kills(d, images, [(f, "worker") for f in second], kills)
        d.wait_done(JOB, timeout=600)
        code, _, _ = d.get("/healthz")
        assert code == 200, f"/healthz {code} at the end"
        seconds = time.monotonic() - t0
        got, want = _outputs(d.out / JOB), _outputs(root / "reference" / JOB)
        assert got.keys() == want.keys(), (sorted(got), sorted(want))
        differ = [name for name in want if got[name] != want[name]]
        assert not differ, f"files that differ from the run without faults: {differ}"
        written = collections.Counter()
        for name in got:
            if name.endswith(".tfrecord"):
                for rec in iter_records(str(d.out / JOB / name)):
                    ex = decode_example(rec)
                    written[(ex["image/filename"], ex["augd/variant"])] += 1
        twice = [k for k, n in written.items() if n != 1]
        assert len(written) == images and not twice, f"{len(written)} images written, {twice[:5]} not once"
        attempts = [ln for ln in d.log().splitlines() if "found in work/: running it again" in ln]
        assert attempts, "the killed daemon's job was recovered from work/"
        return {"images": images, "records": sum(written.values()), "kills": dict(kills), "plan": plan,
                "seed": seed, "files_compared": len(want), "identical": True, "healthz": code,
                "seconds": round(seconds, 1)}
    finally:
        for x in daemons:
            x.stop()


def _run_with_kills(d: Daemon, images: int, events: list[tuple[float, str]], kills: collections.Counter) -> None:
    """Poll the running job's progress; at each event's fraction, kill its target. A daemon kill ends the run."""
    pending = list(events)
    killed: set[int] = set()   # a worker killed a moment ago may not have ended yet: never count it twice

    def next_kills() -> bool:
        assert d.proc.poll() is None, f"the daemon died on its own: {d.proc.returncode}\n{d.log_tail()}"
        cur = status(d)["current"]
        done = cur.get("done", 0) if cur and cur["job"] == JOB else 0
        if (d.done / JOB).is_dir():
            raise AssertionError(f"the job ended before its kills at {pending}: make it bigger")
        while pending and done >= pending[0][0] * images:
            _, target = pending.pop(0)
            if target == "worker":
                victim = _oldest_worker(d.proc.pid, killed)
                if _kill(victim):
                    killed.add(victim)
                    kills["worker"] += 1
            elif target == "tracker":
                if _kill(resource_tracker_of(d.proc.pid)):
                    kills["resource_tracker"] += 1
            else:
                assert _kill(d.proc.pid)
                kills["daemon"] += 1
                return True
        return not pending
    wait_for(next_kills, 300, f"the kills at {events}", interval=0.02, on_fail=d.log_tail)
