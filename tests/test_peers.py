"""Every peer can go away: readers of stdout and stderr, the resource tracker and worker processes killed (HTTP
clients: tests/test_peers_http.py). None of them may end `augd serve` or `augd run`, or stop a job.

Real processes throughout: `augd` subprocesses with pipes whose readers are gone, real daemons whose log readers and
workers die, and a worker pool whose processes are killed mid-batch.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from tests.daemon_harness import (REPO, Daemon, add_slow_pipeline, children_of, drop_job, make_job,  # noqa: F401
                                  manifest, no_leaked_children, no_leaked_children_module, resource_tracker_of,
                                  status, wait_for, write_config)

# This process' own worker pools (below) start multiprocessing's resource tracker, which lives as long as pytest:
# started here, it is there before any leak check takes its list of children.
from multiprocessing import resource_tracker  # noqa: E402
resource_tracker.ensure_running()

ENV = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}


def augd(*argv) -> list[str]:
    return [sys.executable, "-m", "augd", *argv]


def ignores_sigpipe(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as fh:
        mask = int(next(ln.split()[1] for ln in fh if ln.startswith("SigIgn:")), 16)
    return bool(mask & (1 << (signal.SIGPIPE - 1)))


def gone_reader():
    """A pipe whose reader has already left: the first write to its other end fails with EPIPE."""
    r, w = os.pipe()
    os.close(r)
    return w


def slow_job(d: Daemon, name: str, n: int) -> None:
    """A job on the slow pipeline (a good fraction of a second per image), dropped and seen to start."""
    staging = d.root / f".{name}"
    make_job(staging, n=n, classes=())
    (staging / "augd.yaml").write_text("pipeline: slow\n")
    os.rename(staging, d.inbox / name)
    (d.inbox / name / "_READY").touch()
    wait_for(lambda: (status(d)["current"] or {}).get("job") == name, 120, f"{name} to start", on_fail=d.log_tail)


# -- listing verbs and `augd run` ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def output(tmp_path_factory):
    root = tmp_path_factory.mktemp("peers-run")
    job = make_job(root / "little", n=3, classes=("a", "b"))
    subprocess.run(augd("run", str(job), "-p", "normalize", "-o", str(root / "out"), "-q"), env=ENV, check=True,
                   capture_output=True)
    return root / "out" / "little"


@pytest.mark.parametrize("argv", [["ops"], ["ops", "--json"], ["schema"], ["show", "seed-classifier"],
                                  ["validate", "seed-classifier", "normalize", "detection-ssd"], ["inspect", "OUT"]],
                         ids=lambda a: " ".join(a))
def test_a_listing_verb_whose_reader_left_ends_quietly(argv, output):
    """Python's recommended ending: no traceback, no "Exception ignored", exit 1, stdout pointed at devnull."""
    w = gone_reader()
    try:
        proc = subprocess.run(augd(*[str(output) if a == "OUT" else a for a in argv]), stdout=w,
                              stderr=subprocess.PIPE, env=ENV, timeout=120)
    finally:
        os.close(w)
    assert proc.returncode == 1, proc.stderr.decode()
    assert proc.stderr == b"", proc.stderr.decode()


def test_augd_ops_piped_into_head_prints_its_first_line_and_no_traceback():
    proc = subprocess.run(["bash", "-c", f"set -o pipefail; {sys.executable} -m augd ops | head -1"],
                          capture_output=True, env=ENV, timeout=120)
    assert proc.stdout.decode().startswith("== Geometry")
    assert b"Traceback" not in proc.stderr and b"Broken" not in proc.stderr, proc.stderr.decode()
    assert proc.returncode in (0, 1)   # 0 when the listing fitted the pipe before head left


def test_augd_run_with_both_readers_gone_writes_its_job_and_exits_0(tmp_path):
    job = make_job(tmp_path / "gone", n=4, classes=("a",))
    w = gone_reader()
    try:
        proc = subprocess.run(augd("run", str(job), "-p", "normalize", "-o", str(tmp_path / "out")), stdout=w,
                              stderr=w, env=ENV, timeout=300)
    finally:
        os.close(w)
    assert proc.returncode == 0
    assert (tmp_path / "out" / "gone" / "_SUCCESS").is_file()
    assert manifest(tmp_path / "out", "gone")["records"]["written"] == 4


# -- the daemon's log readers ----------------------------------------------------------------------------------

def test_a_daemon_whose_log_reader_exits_goes_on_running_jobs(tmp_path):
    """`augd serve 2>&1 | head -c 200`: the reader takes 200 bytes and leaves. Jobs go on, /status says the log
    streams are lost, SIGPIPE stays ignored, and SIGTERM still ends the daemon with 0."""
    d = Daemon(write_config(tmp_path)).start(stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    got = b""
    while len(got) < 200:
        chunk = d.proc.stdout.read1(200 - len(got))
        assert chunk, "the daemon closed its log before 200 bytes"
        got += chunk
    d.proc.stdout.close()   # the reader goes away
    try:
        d.wait_ready(120)
        assert ignores_sigpipe(d.proc.pid)
        for k in range(2):   # every job logs: claimed, started, done
            drop_job(d.inbox, f"after-reader-{k}", n=3, seed=k)
            d.wait_done(f"after-reader-{k}", timeout=120)
        lost = status(d)["log_streams_lost"]
        assert set(lost["streams"]) == {"stderr", "stdout"} and lost["dropped_lines"] > 0, lost
        assert "Broken pipe" in lost["streams"]["stderr"]["error"]
        assert d.get("/healthz")[0] == 200
    finally:
        code = d.stop()
    assert code == 0


def test_a_daemon_whose_stderr_reader_exits_says_so_once_on_stdout_and_logs_on_there(tmp_path):
    out = tmp_path / "stdout.log"
    d = Daemon(write_config(tmp_path))
    w = gone_reader()
    with open(out, "wb") as fh:
        d.start(stdout=fh, stderr=w)
    os.close(w)
    try:
        d.wait_ready(120)
        drop_job(d.inbox, "stderr-gone", n=3)
        d.wait_done("stderr-gone", timeout=120)
        wait_for(lambda: "job stderr-gone done" in out.read_text(), 30, "the job's log line on stdout")
        assert status(d)["log_streams_lost"]["streams"].keys() == {"stderr"}
    finally:
        code = d.stop()
    assert code == 0
    text = out.read_text()
    assert text.count("the log can no longer be written to stderr") == 1, text
    assert "Traceback" not in text and "stopped" in text.splitlines()[-1]


# -- child processes -------------------------------------------------------------------------------------------

def test_the_resource_tracker_and_workers_killed_never_take_the_daemon_with_them(tmp_path):
    """kill -9 of multiprocessing's resource tracker, then of a worker (its replacement talks to the tracker):
    the daemon lives, starts another worker and runs the next jobs on its processes."""
    d = Daemon(write_config(tmp_path, workers=2, executor="processes", settle_seconds=0.5)).start()
    try:
        d.wait_ready(120)
        tracker = wait_for(lambda: resource_tracker_of(d.proc.pid), 60, "the resource tracker")
        drop_job(d.inbox, "first", n=6)
        d.wait_done("first", timeout=120)
        os.kill(tracker, signal.SIGKILL)
        victim = sorted(children_of(d.proc.pid) - {tracker})[0]
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: f"worker process {victim} died" in d.log(), 60, "the worker replaced", on_fail=d.log_tail)
        for k in range(2):
            drop_job(d.inbox, f"after-tracker-{k}", n=6, seed=k)
            d.wait_done(f"after-tracker-{k}", timeout=120)
            assert manifest(d.out, f"after-tracker-{k}")["graph"]["executor"] == "processes"
        assert d.proc.poll() is None and d.get("/healthz")[0] == 200
    finally:
        code = d.stop()
    assert code == 0, d.log_tail()


def test_a_worker_killed_while_the_parent_writes_to_it_is_replaced_every_time(tmp_path):
    """Each round (6; AUGD_PEER_KILL_ROUNDS for more) hands a worker a job whose first batch carries 16 MB (a big
    detection job's annotations) and kills the worker while the parent is still writing it. The parent sees EPIPE,
    never SIGPIPE, hands the batch to a worker that lives, and every batch's outcome is the one an undisturbed
    worker gives."""
    import pickle

    from augd.engine import Engine
    from augd.io.scan import scan_job
    from augd.job import variants_of
    from augd.job.workers.pool import JobContext, ProcessPool
    from augd.schema import parse_pipeline
    spec = parse_pipeline("name: t\nvariants: 1\nkeep_original: false\noutput: {shards: 1}\nops:\n"
                          "  - random_flip_left_right: {}\n", "t.yaml")
    job = make_job(tmp_path / "job", n=4, classes=())
    images = list(scan_job(str(job)).images)
    variants = variants_of(spec)
    padding = b"\0" * (16 << 20)   # pickle.loads stops at the end of the pickle: the rest is only carried
    rounds = int(os.environ.get("AUGD_PEER_KILL_ROUNDS", "6"))
    rng = random.Random(7)
    with ProcessPool(2, Engine().options) as pool:
        reference = pool.submit(pool.start_job(spec, None), images, variants).result(120)[0]
        for r in range(rounds):
            ctx = JobContext(1000 + r, pickle.dumps((spec, None, None)) + padding)
            wait_for(lambda: sum(w.ready for w in pool._workers) == 2, 120, "both workers up")
            fut = pool.submit(ctx, images, variants)
            time.sleep(rng.uniform(0.0, 0.004))
            receiving = [w.process.pid for w in pool._workers if w.tasks] or pool.pids()
            os.kill(receiving[0], signal.SIGKILL)
            outcomes, _ = fut.result(120)
            assert [o.records for o in outcomes] == [o.records for o in reference]
            pool.end_job(ctx)
        print(f"{rounds} workers killed mid-batch; {pool.lost_sends} while the parent was writing to them; "
              f"{pool.restarts} replaced")
        assert pool.restarts >= rounds and pool.lost_sends >= 1


def test_a_stop_signal_to_the_whole_group_replaces_no_worker(tmp_path):
    """SIGTERM to the daemon's process group (as `kill -TERM -PGID` or a container runtime may send) while a job
    runs on worker processes: the workers it ends are not replaced, the job goes back to the inbox, exit 0."""
    add_slow_pipeline(tmp_path)
    d = Daemon(write_config(tmp_path, workers=2, executor="processes", settle_seconds=0.5))
    d.start(start_new_session=True)   # its own process group, as a service has
    try:
        d.wait_ready(120)
        wait_for(lambda: d.events("worker processes (pids"), 60, "the workers")
        slow_job(d, "slowjob", 8)
        os.killpg(d.proc.pid, signal.SIGTERM)
        assert d.wait_exit(120) == 0, d.log_tail()
    finally:
        d.stop()
    log = d.log()
    assert "started another" not in log, d.log_tail()
    assert "while stopping; not replaced" in log and (d.inbox / "slowjob").is_dir(), d.log_tail()
