"""Every peer can go away: readers of stdout and stderr, HTTP clients that reset or never finish, the resource
tracker and worker processes killed. None of them may end `augd serve` or `augd run`, or stop a job.

Real processes throughout: `augd` subprocesses with pipes whose readers are gone, a real daemon under rude raw
sockets, and its descriptors and threads counted in /proc before and after.
"""
from __future__ import annotations

import os
import random
import signal
import socket
import struct
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


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def settled(pid: int, what=None, timeout: float = 60) -> tuple[int, int]:
    """(descriptors, threads) of pid once they have not changed for a second, with no request of ours open.
    `what()`, if given, must hold too (the daemon idle, say)."""
    seen: list = []

    def steady():
        seen.append((fds(pid), threads(pid)))
        return len(seen) >= 10 and len(set(seen[-10:])) == 1 and (what is None or what()) and seen[-1]
    return wait_for(steady, timeout, "descriptors and threads to settle", interval=0.1, on_fail=lambda: seen[-10:])


def ignores_sigpipe(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as fh:
        mask = int(next(ln.split()[1] for ln in fh if ln.startswith("SigIgn:")), 16)
    return bool(mask & (1 << (signal.SIGPIPE - 1)))


def gone_reader():
    """A pipe whose reader has already left: the first write to its other end fails with EPIPE."""
    r, w = os.pipe()
    os.close(r)
    return w


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


# -- HTTP clients ----------------------------------------------------------------------------------------------

ENDPOINTS = ("/metrics", "/status", "/", "/healthz", "/readyz", "/preview.png", "/no-such-page")


def _rst(s: socket.socket) -> None:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def rude(port: int, path: str, kind: str) -> None:
    """One client that goes away in a way of `kind`."""
    req = f"GET {path} HTTP/1.1\r\nHost: augd\r\n\r\n".encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        if kind == "reset-before":
            pass
        elif kind == "reset-during-request":
            s.sendall(req[:len(req) // 2])
        elif kind == "reset-during-response":
            s.sendall(req)
        elif kind == "read-5-and-leave":
            s.sendall(req)
            s.recv(5)
        elif kind == "half-closed":   # sends the request, shuts its sending side, reads the whole answer
            s.sendall(req)
            s.shutdown(socket.SHUT_WR)
            data = b""
            while chunk := s.recv(65536):
                data += chunk
            assert data.startswith(b"HTTP/1.1 "), data[:40]
            s.close()
            return
        elif kind == "reset-after":
            s.sendall(req)
            assert s.recv(65536).startswith(b"HTTP/1.1 ")
    finally:
        if s.fileno() != -1:
            _rst(s)


def slow_job(d: Daemon, name: str, n: int) -> None:
    """A job on the slow pipeline (a good fraction of a second per image), dropped and seen to start."""
    staging = d.root / f".{name}"
    make_job(staging, n=n, classes=())
    (staging / "augd.yaml").write_text("pipeline: slow\n")
    os.rename(staging, d.inbox / name)
    (d.inbox / name / "_READY").touch()
    wait_for(lambda: (status(d)["current"] or {}).get("job") == name, 120, f"{name} to start", on_fail=d.log_tail)


KINDS = ("reset-before", "reset-during-request", "reset-during-response", "read-5-and-leave", "half-closed",
         "reset-after")


def test_rude_http_clients_on_every_endpoint_never_hurt_the_daemon_or_its_job(tmp_path):
    """200 rude clients in a row on each endpoint (1,400 in all, six ways of leaving) while a job runs: the same
    process answers after, the job completes, no traceback is logged, threads and descriptors are as before."""
    add_slow_pipeline(tmp_path)
    d = Daemon(write_config(tmp_path, settle_seconds=0.5, log_level="debug")).start()
    try:
        d.wait_ready()
        drop_job(d.inbox, "warm", n=2)   # TensorFlow's own threads and caches come with the first job
        d.wait_done("warm", timeout=120)
        for p in ENDPOINTS:   # each endpoint once, politely: whatever it loads on first use is loaded
            rude(d.port, p, "half-closed")
        pid = d.proc.pid
        before = settled(pid)
        slow_job(d, "slowjob", 6)
        for path in ENDPOINTS:
            for i in range(200):
                rude(d.port, path, KINDS[i % len(KINDS)])
        assert status(d)["current"] is not None, "the job was still running through all of it"
        assert d.get("/healthz")[0] == 200 and d.proc.pid == pid and d.proc.poll() is None
        d.wait_done("slowjob", timeout=300)
        assert manifest(d.out, "slowjob")["inputs"]["written"] == 6
        counts = status(d)["http"]
        wait_for(lambda: status(d)["current"] is None, 30, "the daemon idle again")
        after = settled(pid)
        assert after == before
        print(f"rude clients: {len(ENDPOINTS) * 200} on {len(ENDPOINTS)} endpoints; daemon pid {pid} before and "
              f"after; fds, threads before {before}, after {after}; server {counts}")
    finally:
        code = d.stop()
    assert code == 0
    log = d.log()
    assert "Traceback" not in log and "ERROR" not in log, d.log_tail()
    assert "went away" in log   # the resets were seen, as debug lines


def test_clients_that_never_read_their_replies_hold_no_thread(tmp_path):
    """Twelve clients ask for a 4 MB reply and never read it: replies are made in memory and sent by the
    connection loop without blocking, so /healthz is answered at once, not after their request timeout."""
    from prometheus_client import CollectorRegistry

    from augd.daemon.http import ConnLimits, StatusServer
    big = b"\x89PNG" + bytes(4 << 20)
    server = StatusServer(CollectorRegistry(), "127.0.0.1", 0, health=lambda: (True, {}), ready=lambda: (True, {}),
                          status=dict, preview=lambda: big, limits=ConnLimits(request_timeout=60)).start()
    readers = []
    try:
        for _ in range(12):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", server.port))
            s.sendall(b"GET /preview.png HTTP/1.1\r\nHost: x\r\n\r\n")
            readers.append(s)
        wait_for(lambda: server.connections["open"] == 12, 10, "the twelve connections open")
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as c:   # << the 60 s they may hold
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert c.recv(100).startswith(b"HTTP/1.1 200")
    finally:
        for s in readers:
            _rst(s)
        server.stop()


def test_a_request_body_is_never_taken_for_the_next_request():
    """GET with a body (Content-Length), the body shaped like a second request: one answer, then the close."""
    from prometheus_client import CollectorRegistry

    from augd.daemon.http import StatusServer
    server = StatusServer(CollectorRegistry(), "127.0.0.1", 0, health=lambda: (True, {}), ready=lambda: (True, {}),
                          status=dict).start()
    try:
        smuggled = b"GET /no-such-page HTTP/1.1\r\nHost: x\r\n\r\n"
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as c:
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(smuggled) + smuggled)
            data = b""
            while chunk := c.recv(65536):
                data += chunk
        assert data.count(b"HTTP/1.1 ") == 1 and data.startswith(b"HTTP/1.1 200"), data
    finally:
        server.stop()


def _nonblocking_half_requests(port: int, n: int) -> list[socket.socket]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        socks.append(s)
    for s in socks:   # each sends half a request head and then nothing, forever
        try:
            s.send(b"GET /metrics HTTP/1.1\r\nHost: augd\r\n")
        except OSError:   # not connected yet, or already closed by the server: it still holds its place
            pass
    return socks


def test_a_flood_of_half_sent_requests_under_1024_open_files_starves_neither_http_nor_jobs(tmp_path):
    """1,100 connections that send half a request, against a daemon run under `prlimit --nofile=1024`: /healthz
    answers during and after, a job dropped meanwhile writes every image, the descriptors return to where they
    were. The server holds at most http_max_connections of them; the rest wait, or are closed oldest first."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1400:
        pytest.skip(f"the test needs 1,400 open files of its own; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1400) if hard == resource.RLIM_INFINITY else hard, hard))
    d = Daemon(write_config(tmp_path, settle_seconds=0.5, http_request_timeout_seconds=30))
    if os.path.exists("/usr/bin/prlimit"):
        d.start(prefix=("prlimit", "--nofile=1024", "--"))
    else:   # the same limit, set by the test
        d.start(preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024)))
    socks = []
    try:
        d.wait_ready(120)
        pid = d.proc.pid
        with open(f"/proc/{pid}/limits") as fh:
            assert any(ln.startswith("Max open files") and ln.split()[3] == "1024" for ln in fh)
        drop_job(d.inbox, "warm", n=2)
        d.wait_done("warm", timeout=120)
        base = settled(pid)[0]
        socks = _nonblocking_half_requests(d.port, 1100)
        peak = fds(pid)
        assert d.get("/healthz")[0] == 200
        drop_job(d.inbox, "during-flood", n=400, seed=3)
        answered = []

        def healthy_until_done() -> bool:
            assert d.get("/healthz")[0] == 200   # 10 s client timeout: it answers, not merely eventually
            answered.append(fds(pid))
            return (d.done / "during-flood").is_dir()
        wait_for(healthy_until_done, 180, "the job done, /healthz answering throughout", interval=0.2,
                 on_fail=d.log_tail)
        healthz, peak = len(answered), max(peak, *answered)
        m = manifest(d.out, "during-flood")
        assert m["inputs"]["written"] == 400 and m["records"]["written"] == 400
        counts = status(d)["http"]
        assert counts["max"] == 128 and counts["open"] <= 128
        assert peak < 1024 - 256, f"the HTTP server took {peak} of 1024 descriptors"
        for s in socks:
            s.close()
        socks = []
        assert d.get("/healthz")[0] == 200
        # Back to the base, not merely steady: a connection the kernel's full accept queue left half-open (SYN-ACK
        # retried for up to ~31 s) may reach the server after our close and is held until its 30 s request timeout.
        end = settled(pid, what=lambda: fds(pid) <= base, timeout=100)[0]
        assert end == base
        print(f"half-sent flood: 1100 connections; daemon fds {base} -> peak {peak} -> {end} (limit 1024); "
              f"{healthz} /healthz answered during the job; job: {m['inputs']['written']}/400 images written; "
              f"server {counts}")
    finally:
        for s in socks:
            s.close()
        code = d.stop()
    assert code == 0
    assert "Too many open files" not in d.log(), d.log_tail()


EMFILE_SERVER = """
import os, resource, sys
from prometheus_client import CollectorRegistry
from augd.daemon.http import ConnLimits, StatusServer
s = StatusServer(CollectorRegistry(), "127.0.0.1", 0, health=lambda: (True, {}), ready=lambda: (True, {}),
                 status=dict, limits=ConnLimits(max_connections=64)).start()
import logging
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))   # a job that takes every descriptor left
except OSError:
    pass
os.close(held.pop())   # room for one connection
print(s.port, flush=True)
sys.stdin.readline()   # "free": the job ends
for fd in held:
    os.close(fd)
print("freed", flush=True)
sys.stdin.readline()
s.stop()
"""


def test_the_http_server_accepts_again_after_it_ran_out_of_descriptors(tmp_path):
    """EMFILE on accept (another part of the process holds every descriptor) pauses accepting, with one warning,
    and never closes the port: once descriptors are free, every waiting client is answered."""
    import resource
    proc = subprocess.Popen([sys.executable, "-c", EMFILE_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=ENV, text=True,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)))
    clients = []
    try:
        port = int(proc.stdout.readline())
        for _ in range(10):
            c = socket.create_connection(("127.0.0.1", port), timeout=30)
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            clients.append(c)
        first = clients[0].recv(100)
        assert first.startswith(b"HTTP/1.1 200"), first
        time.sleep(1.0)   # accepts keep failing meanwhile (pauses of 0.25 s); none of it may close the port
        proc.stdin.write("free\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "freed"
        for c in clients[1:]:
            assert c.recv(100).startswith(b"HTTP/1.1 200")
    finally:
        for c in clients:
            c.close()
        proc.stdin.write("stop\n")
        proc.stdin.flush()
        proc.wait(30)
    err = proc.stderr.read()
    assert err.count("cannot accept a connection (EMFILE)") == 1, err   # one warning a minute, at most
    assert "Traceback" not in err, err


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
