"""Helpers for the daemon and metrics tests: images, job folders, configs, a daemon subprocess, polling.

Every wait is a poll on a condition with a deadline; nothing here sleeps to synchronise.
"""
from __future__ import annotations

import itertools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import cv2
import numpy as np

REPO = Path(__file__).resolve().parent.parent

TINY = """name: {name}
variants: 1
keep_original: false
output: {{shards: 1}}
ops:
  - random_flip_left_right: {{}}
"""


def wait_for(cond, timeout: float = 30.0, what: str = "condition", interval: float = 0.05, on_fail=None):
    """Poll cond() until it returns a truthy value; fail the test (with what, and on_fail()) after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            extra = f"\n{on_fail()}" if on_fail else ""
            raise AssertionError(f"timed out after {timeout}s waiting for {what}{extra}")
        time.sleep(interval)


def make_image(path: Path, seed: int = 0, w: int = 64, h: int = 48) -> Path:
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), img)
    return path


def make_job(folder: Path, n: int = 2, seed: int = 0, classes=("a",), ext=".png") -> Path:
    """A job folder with n images spread over class sub-folders."""
    for i in range(n):
        cls = classes[i % len(classes)] if classes else ""
        make_image(folder / cls / f"img{i:04d}{ext}", seed=seed * 1000 + i)
    return folder


def drop_job(inbox: Path, rel: str, n: int = 2, seed: int = 0, **kw) -> Path:
    """Build a job beside the inbox, hidden, then rename it in: an atomic drop."""
    dest = inbox / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.partial"
    make_job(tmp, n, seed, **kw)
    os.rename(tmp, dest)
    return dest


def dead_owner():
    """An augd.owner.Owner of this machine whose process has ended (a daemon since killed): what it held is free
    to take over."""
    from augd.owner import Owner
    gone = subprocess.Popen(["true"])
    gone.wait()
    me = Owner.me()
    return Owner(me.host, me.boot_id, me.pid_ns, gone.pid, 1)


def _ports():
    """Candidate ports for this test process: below the kernel's ephemeral range (where bind(0) and every outgoing
    connection draw theirs, so nothing takes one between free_port's check and the daemon's bind), each pytest
    worker (scripts/test.sh runs two) in a slice of its own, in turn from a random start (a test's two daemons
    never get the same one). None when the ephemeral range starts too low to leave room."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as fh:
            low = int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")
    k, n = (int(worker), max(1, int(count))) if worker.isdigit() and count.isdigit() else (0, 1)
    size = (low - 10000) // n
    if size < 100:
        return None
    lo, start = 10000 + (k % n) * size, random.randrange(size)
    return itertools.cycle([lo + (start + j) % size for j in range(size)])


_PORTS = _ports()


def free_port() -> int:
    """A port free now that no other test process will take before a daemon binds it (_ports)."""
    for _ in range(1000 if _PORTS is not None else 0):
        port = next(_PORTS)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(root: Path, **overrides) -> Path:
    """A daemon config under root with a tiny default pipeline (and a second one, tiny2, for routing)."""
    (root / "pipelines").mkdir(parents=True, exist_ok=True)
    for name in ("tiny", "tiny2"):
        (root / "pipelines" / f"{name}.yaml").write_text(TINY.format(name=name))
    cfg = {"data_dir": ".", "pipelines_dir": "pipelines", "default_pipeline": "tiny", "settle_seconds": 1.5,
           "rescan_seconds": 2, "metrics_port": free_port(), "workers": 1, "grace_seconds": 30,
           "health_stale_seconds": 30}
    cfg.update(overrides)
    path = root / "augd.yaml"
    path.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in cfg.items()))
    return path


class Daemon:
    """`augd serve --config CFG` as a real subprocess, its log in a file. With `hold_dir`, tests.held_daemon
    instead: the same daemon, stalled at "startup" or in its work "loop" while a file of that name is there."""

    def __init__(self, config: Path, env: dict | None = None, hold_dir: Path | None = None):
        self.config = Path(config)
        self.holds = Path(hold_dir) if hold_dir is not None else None
        self.root = self.config.parent
        self.log_path = self.root / f"daemon-{time.monotonic_ns()}.log"
        self.env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})}
        self.proc: subprocess.Popen | None = None
        text = self.config.read_text()
        self.port = int(next(line.split(":", 1)[1] for line in text.splitlines() if line.startswith("metrics_port")))
        for room in ("inbox", "work", "done", "failed", "out"):
            setattr(self, room, self.root / room)

    def start(self, prefix: tuple[str, ...] = (), stdout=None, stderr=None, **popen) -> "Daemon":
        """Start it. `prefix` runs it under another command (prlimit ...); `stdout`/`stderr` replace its log file
        (a pipe the test closes under it); `popen`: more subprocess.Popen arguments (start_new_session=True)."""
        self._log = open(self.log_path, "wb")
        cmd = ["augd", "serve", "--config", str(self.config)] if self.holds is None else \
            ["tests.held_daemon", "--config", str(self.config), "--hold-dir", str(self.holds)]
        self.proc = subprocess.Popen([*prefix, sys.executable, "-m", *cmd],
                                     stdout=self._log if stdout is None else stdout,
                                     stderr=subprocess.STDOUT if stderr is None else stderr,
                                     env=self.env, cwd=self.root, **popen)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_tail(self, n: int = 40) -> str:
        return "--- daemon log (tail) ---\n" + "\n".join(self.log().splitlines()[-n:])

    def events(self, kind: str) -> list[str]:
        return [ln for ln in self.log().splitlines() if kind in ln]

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path: str, headers: dict | None = None) -> tuple[int, str, dict]:
        req = urllib.request.Request(self.url(path), headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read().decode(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), dict(e.headers)

    def try_get(self, path: str):
        try:
            return self.get(path)
        except (urllib.error.URLError, ConnectionError, OSError):
            return None

    def wait_http(self, timeout: float = 30):
        self.check_alive_on_fail = True
        return wait_for(lambda: self._alive_or_raise() and self.try_get("/healthz"), timeout, "the HTTP server",
                        on_fail=self.log_tail)

    def wait_ready(self, timeout: float = 60) -> "Daemon":
        wait_for(lambda: self._alive_or_raise() and (r := self.try_get("/readyz")) and r[0] == 200, timeout,
                 "/readyz 200", on_fail=self.log_tail)
        return self

    def _alive_or_raise(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"daemon exited with {self.proc.returncode}\n{self.log_tail()}")
        return True

    def wait_done(self, name: str, timeout: float = 60) -> Path:
        return wait_for(lambda: self._alive_or_raise() and (self.done / name).is_dir() and self.done / name,
                        timeout, f"done/{name}", on_fail=self.log_tail)

    def wait_failed(self, name: str, timeout: float = 60) -> Path:
        return wait_for(lambda: self._alive_or_raise() and (self.failed / name / "failure.json").is_file()
                        and self.failed / name, timeout, f"failed/{name}", on_fail=self.log_tail)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait_exit(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"daemon did not exit in {timeout}s\n{self.log_tail()}") from None

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL if it hangs; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def manifest(out: Path, name: str) -> dict:
    return json.loads((out / name / "manifest.json").read_text())


def children_of(pid: int) -> set[int]:
    """Live child processes of pid (Linux /proc)."""
    out = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.add(int(entry))
    return out


def resource_tracker_of(pid: int) -> int | None:
    """multiprocessing's resource tracker among pid's children (a process that spawns workers starts one)."""
    for child in children_of(pid):
        try:
            with open(f"/proc/{child}/cmdline", "rb") as fh:
                if b"resource_tracker" in fh.read():
                    return child
        except OSError:
            pass
    return None


def reap_new_children(before: set[int]) -> list[int]:
    """Kill children of this process that were not there before; return their pids."""
    leaked = sorted(children_of(os.getpid()) - before)
    for pid in leaked:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    return leaked


import pytest  # noqa: E402  (fixtures below; the helpers above need no pytest)


@pytest.fixture(autouse=True)
def no_leaked_children():
    """Fail a test that leaves a child process behind (and kill it)."""
    before = children_of(os.getpid())
    yield
    leaked = reap_new_children(before)
    assert not leaked, f"the test leaked child processes {leaked}; they were killed"


@pytest.fixture(scope="module", autouse=True)
def no_leaked_children_module():
    """The same for module-scoped daemons: everything a module started is gone when it ends."""
    before = children_of(os.getpid())
    yield
    leaked = reap_new_children(before)
    assert not leaked, f"the module leaked child processes {leaked}; they were killed"


SLOW = """name: slow
variants: 2
keep_original: false
output: {shards: 1, quality: 50}
ops:
  - resize: {size: [1536, 1536]}
  - gaussian_blur: {sigma: [4, 5]}
"""


def add_slow_pipeline(root: Path) -> None:
    """A pipeline that takes a good fraction of a second per image on one CPU core: jobs that are still running
    when a test signals, kills or times out the daemon, without thousands of input files."""
    (root / "pipelines").mkdir(parents=True, exist_ok=True)
    (root / "pipelines" / "slow.yaml").write_text(SLOW)


def status(d: "Daemon") -> dict:
    code, body, _ = d.get("/status")
    assert code == 200
    return json.loads(body)


def running_images(d: "Daemon", name: str) -> int:
    """Images done so far by job `name` if it is the running one, else -1."""
    cur = status(d)["current"]
    return cur.get("done", 0) if cur and cur["job"] == name else -1


class NotifySocket:
    """A systemd stand-in: a datagram socket in the abstract namespace; NOTIFY_SOCKET=@name for the daemon."""

    def __init__(self):
        self.name = f"@augd-test-{os.getpid()}-{time.monotonic_ns()}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.name[1:])
        self.sock.setblocking(False)
        self.received: list[str] = []

    def messages(self) -> list[str]:
        while True:
            try:
                data = self.sock.recv(4096)
            except BlockingIOError:
                return self.received
            self.received.extend(data.decode().split("\n"))

    def has(self, prefix: str) -> bool:
        return any(m.startswith(prefix) for m in self.messages())

    def close(self) -> None:
        self.sock.close()


class RssSampler:
    """Samples a process' resident memory (Linux /proc) every `interval` s in a thread while in the block: the
    bound a test asserts is sampled, not assumed. `peak` in bytes."""

    def __init__(self, pid: int, interval: float = 0.05):
        import threading
        self.pid, self.interval, self.samples = pid, interval, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        page = os.sysconf("SC_PAGE_SIZE")
        while not self._stop.is_set():
            try:
                with open(f"/proc/{self.pid}/statm") as fh:
                    self.samples.append(int(fh.read().split()[1]) * page)
            except (OSError, ValueError):
                pass  # the process is gone (killed on purpose) or not yet there
            self._stop.wait(self.interval)

    @property
    def peak(self) -> int:
        return max(self.samples, default=0)

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
