"""Issue 8, item 2: faults against a real `augd serve`: kill -9 at random moments, a full output disk, a
read-only output, a missing or broken pipeline while it runs, and a GPU that cannot initialise."""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.daemon_harness import (Daemon, add_slow_pipeline, drop_job, manifest,  # noqa: F401
                                  no_leaked_children, no_leaked_children_module, running_images, wait_for,
                                  write_config)
from tests.jobfiles import tree


#: What the daemon adds to a job folder: its failure report, its claim (with the attempts) and its log.
CONTROL = ("failure.json", "error.txt", ".augd-claim.json", ".augd-job.log")


def visible(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) if folder.exists() else []


def drop_ready(inbox: Path, name: str, n: int, seed: int) -> Path:
    """An atomic drop that is ready at once (_READY inside before the rename)."""
    tmp = drop_job(inbox, f".{name}", n=n, seed=seed)
    (tmp / "_READY").write_text("")
    os.rename(tmp, inbox / name)
    return inbox / name


# -- (a) kill -9 at random moments ---------------------------------------------------------------------------

@pytest.mark.slow
def test_kill_9_at_random_moments_then_a_clean_run_does_every_job_exactly_once(tmp_path):
    rng = random.Random(8)
    # Exactly-once under random kills; a job killed max_attempts times would be dead-lettered (reason crashed,
    # test_reliability_resources.py), which this test does not look at: attempts are not limited here.
    cfg = write_config(tmp_path, settle_seconds=0.5, rescan_seconds=1, max_attempts=1000)
    d = Daemon(cfg)
    for room in ("inbox", "work", "done", "failed", "out"):
        getattr(d, room).mkdir(exist_ok=True)
    jobs: dict[str, int] = {}
    for i in range(4):
        jobs[f"k{i:02d}"] = 2 + i % 3
        drop_ready(d.inbox, f"k{i:02d}", jobs[f"k{i:02d}"], seed=i)
    # At least 20 kills and at least 30 s of them; the 300 s bound only stops a loop that cannot progress
    # (a cycle is ~3 s here: TF import, start-up, a random wait).
    kills, started = 0, time.monotonic()
    while kills < 20 or time.monotonic() < started + 30:
        assert time.monotonic() < started + 300, f"only {kills} kills in 300 s: the daemon does not start"
        name = f"k{len(jobs):02d}"  # a new job lands while the daemon starts, runs or dies
        jobs[name] = 1 + len(jobs) % 3
        drop_ready(d.inbox, name, jobs[name], seed=len(jobs))
        d.start()
        if kills % 4 == 3:  # now and then during start-up (TensorFlow import, recovery, start-up scan)
            _sleep_or_exit(d, rng.uniform(0.2, 3.0))
        else:  # mostly while jobs are claimed, run, committed and moved
            d.wait_ready(timeout=120)
            _sleep_or_exit(d, rng.uniform(0.0, 1.5))
        d.proc.kill()
        assert d.wait_exit() == -signal.SIGKILL, d.log_tail()
        d.stop()
        kills += 1
    d = Daemon(cfg).start()
    try:
        d.wait_ready(timeout=120)
        wait_for(lambda: len(visible(d.done)) >= len(jobs) or visible(d.failed), 150, "every job in done/",
                 on_fail=d.log_tail)
    finally:
        assert d.stop() == 0, d.log_tail()
    assert visible(d.failed) == []
    assert visible(d.done) == sorted(jobs), "each job done exactly once (a second run would be name.1)"
    assert visible(d.work) == [] and visible(d.inbox) == []
    assert visible(d.out) == sorted(jobs)
    assert [p.name for p in d.out.iterdir() if p.name.startswith(".")] == [], "temp output left visible"
    for name, n in jobs.items():
        assert (d.out / name / "_SUCCESS").is_file()
        m = manifest(d.out, name)
        assert m["inputs"]["written"] == n and m["records"]["written"] == n
        assert sum(s["records"] for s in m["shards"]) == n
    print(f"\n{kills} kills over {len(jobs)} jobs")


def _sleep_or_exit(d: Daemon, seconds: float) -> None:
    """The random moment of the kill: this wait is the fault injection itself, not a synchronisation."""
    try:
        d.proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return
    raise AssertionError(f"daemon exited on its own\n{d.log_tail()}")


# -- (b) output disk full; read-only output ------------------------------------------------------------------

def _can_mount() -> str | None:
    if os.geteuid() != 0:
        return "needs root to mount a small tmpfs"
    if not shutil.which("mount"):
        return "no mount command"
    return None


@pytest.fixture
def small_out(tmp_path):
    why = _can_mount()
    if why:
        pytest.skip(why)
    mnt = tmp_path / "outfs"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_output_disk_full_fails_cleanly_keeps_inputs_and_recovers(tmp_path, small_out):
    """Inputs of the failed job stay whole in failed/ (with error.txt and failure.json); to retry, move the
    folder back into the inbox. The daemon keeps serving; the next job succeeds once space is back."""
    subprocess.run(["mount", "-o", "remount,size=8m", str(small_out)], check=True)
    add_slow_pipeline(tmp_path)
    cfg = write_config(tmp_path, out=str(small_out), settle_seconds=0.5)
    d = Daemon(cfg).start()
    try:
        d.wait_ready()
        # The slow chain writes ~3 MB for these 12 images, which fits: the job passes the space check made
        # before its first record. Then another writer fills the disk while it runs.
        src = drop_job(tmp_path / "staging", "full", n=12, seed=5)
        before = tree(src)
        (d.inbox / "slow").mkdir()
        os.rename(src, d.inbox / "slow" / "full")
        wait_for(lambda: running_images(d, "full") >= 1, 90, "the job's first image", on_fail=d.log_tail)
        filler = small_out / ".filler"
        with open(filler, "wb") as f:  # leave ~20 KB free
            st = os.statvfs(small_out)
            f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - 20 * 1024))
        failed = d.wait_failed("full", timeout=90)
        failure = json.loads((failed / "failure.json").read_text())
        assert failure["reason"] == "output_error", failure
        assert "No space left on device" in failure["message"], failure
        assert "No space left on device" in (failed / "error.txt").read_text()
        after = {k: v for k, v in tree(failed).items() if k not in CONTROL}
        assert after == before, "the inputs of a failed job stay whole"
        assert sorted(os.listdir(small_out)) == [".filler"], "no partial output, no temp folder left"
        filler.unlink()
        shutil.move(str(failed), str(d.inbox / ".full"))  # the documented retry
        for f in ("failure.json", "error.txt"):
            (d.inbox / ".full" / f).unlink()
        os.rename(d.inbox / ".full", d.inbox / "slow" / "full")
        d.wait_done("full", timeout=120)
        assert manifest(small_out, "full")["inputs"]["written"] == 12
    finally:
        assert d.stop() == 0, d.log_tail()


def test_read_only_output_fails_cleanly_and_keeps_inputs(tmp_path, small_out):
    subprocess.run(["mount", "-o", "remount,ro", str(small_out)], check=True)
    cfg = write_config(tmp_path, out=str(small_out), settle_seconds=0.5)
    d = Daemon(cfg).start()
    try:
        d.wait_ready()
        src = drop_job(tmp_path / "staging", "ro", n=2, seed=6)
        before = tree(src)
        os.rename(src, d.inbox / "ro")
        failed = d.wait_failed("ro", timeout=90)
        failure = json.loads((failed / "failure.json").read_text())
        assert failure["reason"] == "output_error" and "Read-only file system" in failure["message"], failure
        after = {k: v for k, v in tree(failed).items() if k not in CONTROL}
        assert after == before
        drop_job(d.inbox, "ro-after", n=1, seed=7)
        d.wait_failed("ro-after", timeout=90)  # still serving: the next job is taken (and fails the same way)
        assert d.get("/healthz")[0] == 200
    finally:
        assert d.stop() == 0, d.log_tail()


# -- (c) pipelines that go missing or bad while the daemon runs; a GPU that cannot initialise ---------------

@pytest.fixture(scope="module")
def gpu_broken(tmp_path_factory):
    """A daemon whose TensorFlow is told to use a GPU that does not exist."""
    root = tmp_path_factory.mktemp("faults")
    d = Daemon(write_config(root, settle_seconds=0.5), env={"CUDA_VISIBLE_DEVICES": "bogus-gpu-uuid"}).start()
    try:
        d.wait_ready()
        yield d
    finally:
        assert d.stop() == 0, d.log_tail()


def test_gpu_that_cannot_initialise_falls_back_to_the_cpu_and_says_so(gpu_broken):
    d = gpu_broken
    assert d.events("running on the CPU"), d.log_tail()
    drop_job(d.inbox, "gpu-fallback", n=2, seed=1)
    d.wait_done("gpu-fallback")
    assert json.dumps(manifest(d.out, "gpu-fallback")).count('"device": "CPU"') == 1
    assert 'augd_build_info{' in d.get("/metrics")[1] and 'device="CPU"' in d.get("/metrics")[1]


def test_missing_pipeline_file_fails_the_job_and_the_daemon_goes_on(gpu_broken):
    d = gpu_broken
    src = drop_job(d.root / "staging", "nopipe", n=2, seed=2)
    (src / "augd.yaml").write_text("pipeline: not-here.yaml\n")
    before = tree(src)
    os.rename(src, d.inbox / "nopipe")
    failed = d.wait_failed("nopipe")
    failure = json.loads((failed / "failure.json").read_text())
    assert failure["reason"] == "bad_pipeline" and "not-here.yaml" in (failed / "error.txt").read_text()
    assert {k: v for k, v in tree(failed).items() if k in before} == before
    default = d.root / "pipelines" / "tiny.yaml"
    saved = default.read_text()
    default.unlink()  # the default pipeline's file removed while the daemon runs
    try:
        drop_job(d.inbox, "nodefault", n=1, seed=3)
        failed = d.wait_failed("nodefault")
        assert json.loads((failed / "failure.json").read_text())["reason"] == "bad_pipeline"
        assert "tiny" in (failed / "error.txt").read_text()
    finally:
        default.write_text(saved)
    drop_job(d.inbox, "default-back", n=1, seed=4)
    d.wait_done("default-back")


def test_pipeline_edited_to_invalid_while_running_fails_jobs_with_the_yaml_error_even_after_sighup(gpu_broken):
    """Pipelines are read when each job starts; there is no silent fallback to a last good copy: a job that
    names a broken pipeline fails with its YAML error (file, line, path), before and after SIGHUP, and the
    next job after the fix succeeds."""
    d = gpu_broken
    p = d.root / "pipelines" / "tiny2.yaml"
    good = p.read_text()
    p.write_text(good.replace("random_flip_left_right: {}", "random_hue: {max_delta: 9}"))
    try:
        for sighup, name in ((False, "edited-1"), (True, "edited-2")):
            if sighup:
                d.signal(signal.SIGHUP)
                wait_for(lambda: d.events("SIGHUP"), 30, "the reload", on_fail=d.log_tail)
            drop_job(d.inbox, f"tiny2/{name}", n=1, seed=5)
            failed = d.wait_failed(name)
            text = (failed / "error.txt").read_text()
            assert "tiny2.yaml:" in text and "ops[0].random_hue.max_delta" in text, text
            assert visible(failed) == sorted(["a", "error.txt", "failure.json"])
    finally:
        p.write_text(good)
    drop_job(d.inbox, "tiny2/edited-fixed", n=1, seed=6)
    d.wait_done("edited-fixed")
