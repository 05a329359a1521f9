"""Issue 14: one hostile or unlucky job never takes the daemon down, nor keeps it down. Against a real
`augd serve`: a poison job that kills the process on every attempt is dead-lettered; jobs over their memory
limit, or too big for the output filesystem, fail at once with their reason; hostile YAML fails only its job.
Each time the daemon's resident memory is sampled throughout and stays within its bound."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest

from augd.daemon import claims as claim
from augd.daemon.claims import CLAIM_FILE, Leases
from augd.daemon.watcher import JobReady
from augd.errors import FailureReason
from tests.daemon_harness import (Daemon, RssSampler, add_slow_pipeline, dead_owner, drop_job,  # noqa: F401
                                  manifest, no_leaked_children, no_leaked_children_module, status, wait_for, write_config)
from tests.test_reliability_faults import small_out  # noqa: F401  (fixture: a small tmpfs, root only)

MB = 1024 * 1024
LIMIT_MB = 300


def _scrape(d: Daemon, sample: str) -> float | None:
    code, body, _ = d.get("/metrics")
    assert code == 200
    for line in body.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    return None


def _started(d: Daemon, name: str) -> bool:
    """The daemon logged that it started job `name` (its own line, not a quote of it in another message)."""
    return any(re.match(rf"\S+ \S+ INFO augd\.daemon: job {name} started", ln) for ln in d.log().splitlines())


def _failure(d: Daemon, name: str, timeout: float = 90) -> dict:
    return json.loads((d.wait_failed(name, timeout=timeout) / "failure.json").read_text())


def _ready_job(inbox: Path, rel: str, n: int, seed: int, **kw) -> Path:
    """An atomic drop that is ready at once (_READY inside before the rename)."""
    tmp = drop_job(inbox, str(Path(rel).parent / f".{Path(rel).name}"), n=n, seed=seed, **kw)
    (tmp / "_READY").write_text("")
    os.rename(tmp, inbox / rel)
    return inbox / rel


# -- poison jobs ---------------------------------------------------------------------------------------------

def test_a_job_that_kills_the_daemon_on_every_attempt_is_dead_lettered_and_the_next_job_runs(tmp_path):
    """The crash is simulated from the test side: each time a daemon starts running the poison job, kill -9.
    After max_attempts (3) such ends, the next start moves it to failed/ (reason crashed, attempts, last log
    line) without running it, and serves the next job."""
    add_slow_pipeline(tmp_path)
    cfg = write_config(tmp_path, settle_seconds=0.5, job_memory_mb=1024)  # the slow chain's blur takes ~300 MB
    probe = Daemon(cfg)
    for room in ("inbox", "work", "done", "failed", "out"):
        getattr(probe, room).mkdir(exist_ok=True)
    _ready_job(probe.inbox, "slow/poison", n=30, seed=1)
    for attempt in (1, 2, 3):
        d = Daemon(cfg).start()
        try:
            wait_for(lambda: d._alive_or_raise() and _started(d, "poison"), 120,
                     f"attempt {attempt} of the poison job to start", on_fail=d.log_tail)
            if attempt > 1:
                assert d.events(f"running it again (attempt {attempt} of 3)"), d.log_tail()
        finally:
            d.proc.kill()
            assert d.wait_exit() == -signal.SIGKILL
            d.stop()
        counted = Leases(str(d.work), 60).read("poison")
        assert counted.attempts == attempt, "each attempt is counted durably, before the job runs"
        assert counted.owner.pid == d.proc.pid, "in the record of the daemon that ran it"
    _ready_job(probe.inbox, "after", n=2, seed=2)
    d = Daemon(cfg).start()
    try:
        d.wait_ready(timeout=120)
        with RssSampler(d.proc.pid) as rss:
            failure = _failure(d, "poison")
            d.wait_done("after", timeout=90)
            idle = rss.samples[0]
        assert failure["reason"] == "crashed" and failure["attempts"] == 3, failure
        assert "ended the daemon's process 3 times" in failure["message"], failure
        assert "poison" in failure["last_log_line"], failure
        text = (d.failed / "poison" / "error.txt").read_text()
        assert "max_attempts=3" in text and failure["last_log_line"] in text
        assert not _started(d, "poison"), "a dead-lettered job is not run again"
        assert manifest(d.out, "after")["inputs"]["written"] == 2
        assert not (d.out / "poison").exists()
        last = {r["job"]: r for r in status(d)["last_jobs"]}
        assert last["poison"]["reason"] == "crashed" and last["poison"]["attempts"] == 3
        assert _scrape(d, 'augd_job_failures_total{reason="crashed"}') == 1.0
        assert _scrape(d, 'augd_jobs_total{result="failed"}') == 1.0
        assert d.get("/healthz")[0] == 200
        assert rss.peak <= idle + 1024 * MB, (idle / MB, rss.peak / MB)
    finally:
        assert d.stop() == 0, d.log_tail()


def test_attempts_are_counted_per_claim_and_forgotten_when_the_job_leaves_work(tmp_path):
    """The counter resets on success: a job that leaves work/ (done, failed, requeued) takes its count with it,
    and a job claimed again (retried from failed/, dropped again) counts from 1. A read-only job is counted too.
    The count lives in the claim records: a job taken over from a dead holder carries it on."""
    work, inbox, done = tmp_path / "work", tmp_path / "inbox", tmp_path / "done"
    work.mkdir()
    done.mkdir()
    killed = Leases(str(work), 60, me=dead_owner())   # the daemon that claimed it, since killed
    here = Leases(str(work), 60)

    def claimed(name: str, leases: Leases):
        job = inbox / name
        job.mkdir(parents=True, exist_ok=True)
        return claim.claim(JobReady(path=str(job), relpath=name, name=name, route=None, trigger="marker",
                                    inode=os.stat(job).st_ino), leases)

    c = claimed("again", killed)
    assert c.attempts == 1
    os.chmod(c.path, 0o555)  # the count lives in work/.claims, not in the job
    taken = claim.take_over(here)
    assert taken.attempts == 1 and taken.recovered
    assert claim.next_attempt(taken, here).attempts == 2
    assert here.read("again").attempts == 2, "written through"
    assert claim.take_over(here) is None, "a job its live holder runs is never taken (again)"
    os.chmod(c.path, 0o755)
    claim.finish(taken, str(done), "move", here)
    assert os.listdir(work / ".claims") == [], "its records left with it"
    os.rename(done / "again", inbox / "again")  # dropped again
    assert claimed("again", killed).attempts == 1
    claim.requeue(claim.next_attempt(claim.take_over(here), here), str(inbox), here)
    assert os.listdir(work) == [".claims"] and os.listdir(work / ".claims") == [], "no job, no record between jobs"
    (work / ".claims" / "gone").mkdir(parents=True)  # a job that left work/ without its records (a crash)
    (work / ".claims" / "gone" / "3.json").write_text(json.dumps(
        {"owner": dead_owner().to_dict(), "attempts": 3, "beat": 0}))
    assert claimed("again", here).attempts == 1
    assert claim.take_over(here) is None
    assert not (work / ".claims" / "gone").exists(), "records of a job no longer in work/ are swept"


def test_recover_rules_what_becomes_of_a_job_taken_over(tmp_path):
    """claims.recover, the one rule for a job whose holder died: run again with one more attempt counted, or
    dead-lettered once it has ended max_attempts holders (and then not counted again)."""
    work, inbox, out = tmp_path / "work", tmp_path / "inbox", tmp_path / "out"
    work.mkdir()
    out.mkdir()
    here = Leases(str(work), 60)
    for name in ("twice", "poison"):
        job = inbox / name
        job.mkdir(parents=True)
        claim.claim(JobReady(path=str(job), relpath=name, name=name, route=None, trigger="marker",
                             inode=os.stat(job).st_ino), Leases(str(work), 60, me=dead_owner()))
    taken = {c.name: c for c in (claim.take_over(here), claim.take_over(here))}
    run = claim.recover(taken["twice"], here, str(out), max_attempts=3)
    assert run.verdict is claim.Verdict.RUN and run.claimed.attempts == 2 and here.read("twice").attempts == 2
    poison = claim.recover(dataclasses.replace(taken["poison"], attempts=3), here, str(out), max_attempts=3)
    assert poison.verdict is claim.Verdict.DEAD_LETTER and poison.why is None
    assert here.read("poison").attempts == 1, "a dead letter is not counted again"


def test_a_job_cannot_make_the_daemon_block_or_write_elsewhere_through_its_control_files(tmp_path):
    """A job may ship anything under the names the daemon writes into it (its log, its claim file's temp,
    error.txt): FIFOs, symlinks out, hard links. The daemon replaces them, never blocking and never writing
    through them."""
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched\n")
    work, job = tmp_path / "work", tmp_path / "inbox" / "evil"
    work.mkdir()
    (tmp_path / "failed").mkdir()
    job.mkdir(parents=True)
    os.mkfifo(job / claim.JOB_LOG)
    os.mkfifo(job / (CLAIM_FILE + ".tmp"))
    os.symlink(outside, job / "error.txt")
    leases = Leases(str(work), 60)
    c = claim.claim(JobReady(path=str(job), relpath="evil", name="evil", route=None, trigger="marker",
                             inode=os.stat(job).st_ino), leases)
    with claim.open_job_log(c) as fh:
        fh.write("a line\n")
    assert claim.last_log_lines(c) == ["a line"]
    os.unlink(Path(c.path) / claim.JOB_LOG)
    os.link(outside, Path(c.path) / claim.JOB_LOG)
    with claim.open_job_log(c) as fh:
        fh.write("another\n")
    dest = claim.fail(c, str(tmp_path / "failed"), {"reason": "crashed"}, "why", leases)
    assert (Path(dest) / "error.txt").read_text() == "why\n"
    assert outside.read_text() == "untouched\n"


# -- hostile and oversized jobs against one daemon -----------------------------------------------------------

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")) + "pipeline: normalize\n"


def _gradient_jpeg(path: Path, w: int, h: int) -> None:
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // w, y * 255 // h, (x + y) % 256], -1).astype(np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), img, [cv2.IMWRITE_JPEG_QUALITY, 80])


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    d = Daemon(write_config(root, settle_seconds=0.5, job_memory_mb=LIMIT_MB)).start()
    try:
        d.wait_ready(timeout=120)
        with RssSampler(d.proc.pid) as rss:
            yield d, rss
    finally:
        assert d.stop() == 0, d.log_tail()


def _drop_with(d: Daemon, name: str, files: dict, n: int = 2) -> None:
    staging = d.root / "staging" / name
    drop_job(staging.parent, name, n=n, seed=3)
    for rel, content in files.items():
        if isinstance(content, str):
            (staging / rel).write_text(content)
        else:
            content(staging / rel)
    (staging / "_READY").write_text("")
    os.rename(staging, d.inbox / name)


@pytest.mark.parametrize("name, files, says", [
    ("alias-bomb", {"augd.yaml": BOMB}, r"augd\.yaml.*aliases expand"),
    ("alias-bomb-pipeline", {"augd.yaml": "pipeline: p.yaml\n", "p.yaml": "name: p\n" + BOMB.replace(
        "pipeline: normalize\n", "ops: *i\n")}, r"p\.yaml.*aliases expand"),
    ("deep-yaml", {"augd.yaml": "pipeline: " + "[" * 50_000 + "]" * 50_000 + "\n"}, r"augd\.yaml.*nesting deeper"),
    ("huge-yaml", {"augd.yaml": "pipeline: normalize\n" + "# padding\n" * 300_000}, r"augd\.yaml.*MiB"),
])
def test_hostile_yaml_in_a_job_fails_only_that_job(served, name, files, says):
    d, rss = served
    _drop_with(d, name, files)
    failure = _failure(d, name)
    assert failure["reason"] == "bad_pipeline", failure
    assert re.search(says, failure["message"]), failure
    assert "limit" in (d.failed / name / "error.txt").read_text()
    assert _scrape(d, 'augd_job_failures_total{reason="bad_pipeline"}') >= 1
    assert d.get("/healthz")[0] == 200


def test_a_job_over_its_memory_limit_fails_out_of_memory_before_decoding(served):
    """A 5000x5000 image is budgeted 8 bytes per pixel of source and output (400 MB) against a 300 MB limit: the
    job fails at once, naming the image, its size and the limit, and the daemon never holds it in memory."""
    d, rss = served
    _drop_with(d, "huge", {"a/huge.jpg": lambda p: _gradient_jpeg(p, 5000, 5000)})
    failure = _failure(d, "huge")
    assert failure["reason"] == "out_of_memory", failure
    assert "a/huge.jpg: 5000x5000" in failure["message"] and f"limit of {LIMIT_MB} MB" in failure["message"]
    assert "job_memory_mb" in failure["message"]
    assert not (d.out / "huge").exists()
    assert _scrape(d, 'augd_job_failures_total{reason="out_of_memory"}') == 1


def test_after_hostile_jobs_the_next_job_succeeds_and_memory_stayed_bounded(served):
    d, rss = served
    _drop_with(d, "fine", {}, n=3)
    d.wait_done("fine", timeout=90)
    assert manifest(d.out, "fine")["inputs"]["written"] == 3
    assert d.get("/healthz")[0] == 200
    idle = rss.samples[0]
    assert rss.peak <= idle + LIMIT_MB * MB, f"RSS {idle / MB:.0f} -> peak {rss.peak / MB:.0f} MB"


def test_a_job_that_outgrows_its_memory_limit_while_running_is_stopped_and_the_daemon_goes_on(tmp_path):
    """The slow chain (upscale to 1536x1536, a wide blur) is budgeted ~38 MB an image but holds more: the sampled
    limit (100 MB) stops it after the images in flight with out_of_memory; the next job runs, and the
    daemon's RSS stays within its idle size plus the limit plus what was in flight when it tripped."""
    add_slow_pipeline(tmp_path)
    d = Daemon(write_config(tmp_path, settle_seconds=0.5, job_memory_mb=100)).start()
    try:
        d.wait_ready(timeout=120)
        with RssSampler(d.proc.pid) as rss:
            (d.inbox / "slow").mkdir()
            _ready_job(d.inbox, "slow/grows", n=30, seed=5)
            failure = _failure(d, "grows")
            _ready_job(d.inbox, "after", n=2, seed=6)
            d.wait_done("after", timeout=90)
        assert failure["reason"] == "out_of_memory", failure
        assert "grew the process' resident memory by" in failure["message"]
        assert "over its memory limit of 100 MB" in failure["message"], failure
        assert not (d.out / "grows").exists()
        assert d.get("/healthz")[0] == 200
        idle = rss.samples[0]
        in_flight = 2 * 150 * MB  # the window (1 worker: 2 graph calls) of this chain, measured ~100-150 MB each
        assert rss.peak <= idle + 100 * MB + in_flight, f"RSS {idle / MB:.0f} -> peak {rss.peak / MB:.0f} MB"
    finally:
        assert d.stop() == 0, d.log_tail()


# -- memory: the sampled guard and the budget, in process ----------------------------------------------------

def test_the_memory_guard_trips_when_the_process_outgrows_its_limit():
    from augd.job.resources import MemoryGuard
    with MemoryGuard(64 * MB, interval=0.01) as small:
        ballast = np.ones(16 * MB, np.uint8)  # well under: must not trip
        assert not small.tripped.wait(0.3)
        ballast = np.ones(256 * MB, np.uint8)  # pages touched: resident
        assert small.tripped.wait(10), f"peak {small.peak / MB:.0f} MB"
    err = small.error()
    assert err.reason == FailureReason.OUT_OF_MEMORY and "over its memory limit of 64 MB" in str(err)
    del ballast


_MEASURED_RUN = """
import sys, threading
from augd.job import JobOptions, run_job
from augd.job.executors.threads import Threads
from augd.job.resources import rss_bytes
from augd.schema import parse_pipeline
job, warm, out, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) or None
spec = parse_pipeline(sys.argv[5])
run_job(warm, spec, out + "-warm", JobOptions(workers=4, executor="threads"))  # TF and the kernels loaded
flight = {"now": 0, "most": 0, "sizes": {}}   # the write loop calls both from its one thread
submit, result = Threads.submit, Threads.result
def counted_submit(self, batches, batch):  # the write loop's own calls, counted: images handed out, not written
    handle = submit(self, batches, batch)
    flight["sizes"][handle] = len(batch)
    flight["now"] += len(batch)
    flight["most"] = max(flight["most"], flight["now"])
    return handle
def counted_result(self, batches, handle):
    try:
        return result(self, batches, handle)
    finally:
        flight["now"] -= flight["sizes"].pop(handle)
Threads.submit, Threads.result = counted_submit, counted_result
peak, base, done = [0], rss_bytes(), threading.Event()
def sample():
    while not done.wait(0.01):
        peak[0] = max(peak[0], rss_bytes() - base)
threading.Thread(target=sample, daemon=True).start()
run_job(job, spec, out, JobOptions(workers=4, executor="threads", memory_limit=limit))
done.set()
print(peak[0], flight["most"])
"""


def test_images_that_together_exceed_the_limit_run_within_it_and_write_the_same_bytes(tmp_path):
    """The budget lets images into flight only while they fit: 6 images of 61 MB budget each (4 MP, source and
    output), 4 worker threads and a 160 MB limit (120 MB for images in flight) go out one at a time and the process
    grows within the limit (RSS sampled in a fresh process), while without the limit the write loop hands them all
    out at once (its window: 4 workers x 2 batches); the same shards either way. In flight is counted where the
    write loop hands images out and takes them back, which the budget (bounded) and the window (free) decide, not
    timing. (The free run's RSS is printed in a failure's message, not compared: it grows more only where its
    images happen to overlap in time.)"""
    import subprocess
    import sys
    job, warm = tmp_path / "big", tmp_path / "warm"
    for i in range(6):
        _gradient_jpeg(job / "a" / f"img{i}.jpg", 2000 + i, 2000)
        _gradient_jpeg(warm / "a" / f"img{i}.jpg", 64, 48)
    spec = ("name: rot\nvariants: 1\nkeep_original: false\noutput: {shards: 1}\n"
            "ops:\n  - random_rotation: {degrees: 10}\n")
    grew, flew = {}, {}
    for name, limit in (("bounded", 160 * MB), ("free", 0)):
        r = subprocess.run([sys.executable, "-c", _MEASURED_RUN, str(job), str(warm), str(tmp_path / name),
                            str(limit), spec], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
        assert r.returncode == 0, r.stderr[-3000:]
        grew[name], flew[name] = map(int, r.stdout.split()[-2:])
    assert grew["bounded"] <= 160 * MB, f"grew {grew['bounded'] / MB:.0f} MB"
    assert flew == {"bounded": 1, "free": 6}, (flew, {k: round(v / MB) for k, v in grew.items()})
    shard = "big/big-00000-of-00001.tfrecord"
    assert (tmp_path / "bounded" / shard).read_bytes() == (tmp_path / "free" / shard).read_bytes()


# -- space: a job that cannot fit fails before it writes -----------------------------------------------------

def test_a_job_that_cannot_fit_the_output_filesystem_fails_at_once_with_both_numbers(tmp_path, small_out):
    subprocess.run(["mount", "-o", "remount,size=4m", str(small_out)], check=True)
    cfg = write_config(tmp_path, out=str(small_out), settle_seconds=0.5)
    d = Daemon(cfg).start()
    try:
        d.wait_ready(timeout=120)
        staging = tmp_path / "staging" / "large"
        for i in range(80):  # ~60 KB a record: ~5 MB of output for a 4 MB filesystem
            rng = np.random.default_rng(i)
            staging.joinpath("a").mkdir(parents=True, exist_ok=True)
            assert cv2.imwrite(str(staging / "a" / f"n{i:02d}.png"), rng.integers(0, 256, (256, 256, 3), np.uint8))
        (staging / "_READY").write_text("")
        os.rename(staging, d.inbox / "large")
        failure = _failure(d, "large")
        assert failure["reason"] == "output_error", failure
        m = re.search(r"needs about ([\d.]+) MB .* and ([\d.]+) MB are free", failure["message"])
        assert m and float(m[1]) > float(m[2]), failure
        assert os.listdir(small_out) == [], "nothing written, no temp folder left"
        assert not any("job_progress" in ln and "large" in ln for ln in d.log().splitlines())
        _ready_job(d.inbox, "small", n=2, seed=4)
        d.wait_done("small", timeout=90)
        assert (small_out / "small" / "_SUCCESS").is_file()
        assert d.get("/healthz")[0] == 200
    finally:
        assert d.stop() == 0, d.log_tail()


def test_the_space_check_compares_the_estimate_with_the_free_space_of_that_filesystem(tmp_path):
    """Without root (no tmpfs): the check against this filesystem's real free space, both ways."""
    from augd.errors import JobFailed
    from augd.job.resources import check_space
    st = os.statvfs(tmp_path)
    free = st.f_bavail * st.f_frsize
    check_space(str(tmp_path), 1024 * 1024)  # 1 MB fits (the test machine has more than 2.1 MB free)
    with pytest.raises(JobFailed) as e:
        check_space(str(tmp_path), free)  # the estimate alone takes all there is: the margin does not fit
    assert e.value.reason == "output_error"
    m = re.search(r"needs about ([\d.]+) MB .* and ([\d.]+) MB are free", str(e.value))
    assert m and float(m[1]) > float(m[2]), str(e.value)


def test_every_failure_reason_is_documented():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "daemon.md").read_text()
    missing = [r.value for r in FailureReason if f"`{r.value}`" not in doc]
    assert not missing, f"docs/daemon.md does not describe the failure reasons {missing}"
