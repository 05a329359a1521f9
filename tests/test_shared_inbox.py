"""Many daemons, one set of folders: a job is claimed once, run by one live daemon at a time, taken over exactly once
when its holder is gone (at once on the same machine, after the lease from another machine or container), and
given up by a holder that finds it was taken over. Claim records are augd/daemon/claims/records.py."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from augd.daemon import claims as claim
from augd.daemon.claims import Leases
from augd.daemon.watcher import JobReady
from augd.owner import Owner
from tests.daemon_harness import (Daemon, add_slow_pipeline, dead_owner, drop_job, free_port,  # noqa: F401
                                  no_leaked_children, no_leaked_children_module, running_images, status, wait_for)

ELSEWHERE = Owner("other-host", "boot-elsewhere", "pid:[1]", 4242, 1)   # a daemon on another machine


def _ready(inbox: Path, name: str) -> JobReady:
    job = inbox / name
    job.mkdir(parents=True, exist_ok=True)
    return JobReady(path=str(job), relpath=name, name=name, route=None, trigger="marker", inode=os.stat(job).st_ino)


def test_a_job_is_claimed_by_one_daemon_and_a_name_is_reserved_once(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    here, there = Leases(str(work), 60), Leases(str(work), 60, me=ELSEWHERE)
    job = _ready(tmp_path / "inbox", "pets")
    first = claim.claim(job, here)
    assert first is not None and claim.claim(job, there) is None, "the second claim of one folder gets nothing"
    assert here.read("pets").owner == here.me
    assert not there.reserve("pets"), "a name in work/ is never reserved twice"
    again = claim.claim(_ready(tmp_path / "inbox", "pets"), there)   # a new folder of the same name
    assert again is not None and os.path.basename(again.path) == "pets.1" and again.name == "pets"
    assert claim.take_over(here) is None and claim.take_over(there) is None, "both holders are alive"


def test_a_job_whose_holder_died_is_taken_over_exactly_once(tmp_path):
    """Eight daemons look at the orphan at once: one takes it, the others see it held."""
    work = tmp_path / "work"
    work.mkdir()
    dead = dead_owner()
    assert claim.claim(_ready(tmp_path / "inbox", "orphan"), Leases(str(work), 60, me=dead)) is not None
    takers = [Leases(str(work), 60) for _ in range(8)]
    start, got = threading.Barrier(len(takers)), []

    def look(leases: Leases) -> None:
        start.wait()
        got.append(claim.take_over(leases))

    threads = [threading.Thread(target=look, args=(t,)) for t in takers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    taken = [c for c in got if c is not None]
    assert len(taken) == 1 and taken[0].recovered and taken[0].taken_from == dead.label, taken
    assert sum(t.holds("orphan") for t in takers) == 1
    assert [n for n in os.listdir(work / ".claims" / "orphan")] == ["2.json"], "one generation left: the taker's"


class _Beater:
    """Renews a Leases' records on a thread of its own, as a daemon's main loop does, until stopped."""

    def __init__(self):
        self.beating = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, leases: Leases) -> None:
        self.beating.set()
        self.thread = threading.Thread(target=self._run, args=(leases,))
        self.thread.start()

    def _run(self, leases: Leases) -> None:
        while self.beating.is_set():
            leases.renew()
            time.sleep(0.02)

    def stop(self) -> None:
        self.beating.clear()
        if self.thread is not None:
            self.thread.join()


def test_another_machines_job_is_taken_only_when_its_heartbeat_stops(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    remote = Leases(str(work), 0.5, me=ELSEWHERE)
    assert claim.claim(_ready(tmp_path / "inbox", "far"), remote) is not None
    here = Leases(str(work), 0.5)
    beater = _Beater()
    beater.start(remote)
    try:
        deadline = time.monotonic() + 2.0   # four leases: its beats keep it held the whole time
        while time.monotonic() < deadline:
            assert claim.take_over(here) is None, "a job whose holder beats is never taken"
            time.sleep(0.05)
    finally:
        beater.stop()
    taken = wait_for(lambda: claim.take_over(here), 10, "the takeover after the heartbeat stopped")
    assert taken.taken_from == "other-host:4242" and taken.attempts == 1
    assert remote.renew(now=time.monotonic() + 10) == ["far"], "the old holder finds it lost the job"
    assert not remote.holds("far") and here.holds("far")


# -- real daemons ----------------------------------------------------------------------------------------------

def _shared(tmp_path: Path, name: str, lease: float, **extra) -> Daemon:
    """A daemon of its own (config, log, port) on the data folder every daemon of the test shares."""
    root = tmp_path / name
    root.mkdir()
    cfg = {"data_dir": str(tmp_path / "data"), "pipelines_dir": str(tmp_path / "pipelines"),
           "default_pipeline": "tiny", "settle_seconds": 0.3, "rescan_seconds": 1, "metrics_port": free_port(),
           "workers": 1, "grace_seconds": 60, "claim_lease_seconds": lease, **extra}
    (root / "augd.yaml").write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in cfg.items()))
    d = Daemon(root / "augd.yaml")
    for room in ("inbox", "work", "done", "failed", "out"):
        setattr(d, room, tmp_path / "data" / room)
    return d


def _pipelines(tmp_path: Path) -> None:
    add_slow_pipeline(tmp_path)
    (tmp_path / "pipelines" / "tiny.yaml").write_text("name: tiny\nvariants: 1\nkeep_original: false\n"
                                                       "output: {shards: 1}\nops:\n  - random_flip_left_right: {}\n")


def _running(d: Daemon, prefix: str) -> str | None:
    cur = status(d)["current"]
    return cur["job"] if cur and cur["job"].startswith(prefix) and cur.get("done", 0) >= 1 else None


def _done_events(logs: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for text in logs:
        for m in re.finditer(r"job (\S+) done: ", text):
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return counts


def test_two_daemons_share_an_inbox_through_restarts_and_kills(tmp_path):
    """A and B serve the same folders; 40 jobs dropped at once (4 slow ones). B restarts while A runs a slow job
    (B must leave it to A); A is killed with kill -9 during a slow job (B takes it over at once: same machine),
    then starts again. Every job is done exactly once, its records written once, nothing fails."""
    _pipelines(tmp_path)
    a, b = _shared(tmp_path, "a", 30), _shared(tmp_path, "b", 30)
    logs: list[Daemon] = [a.start(), b.start()]
    try:
        a.wait_ready(timeout=120)
        b.wait_ready(timeout=120)
        names = [f"slow/s{i}" for i in range(4)] + [f"t{i:02d}" for i in range(36)]
        for i, rel in enumerate(names):
            drop_job(a.inbox, rel, n=4 if rel.startswith("slow") else 2, seed=i)
        held = wait_for(lambda: _running(a, "s"), 120, "A running a slow job", on_fail=a.log_tail)
        b.stop()                                   # restart B while A runs `held`
        b = _shared_again(b)
        logs.append(b.start())
        b.wait_ready(timeout=120)
        killed = wait_for(lambda: (j := _running(a, "s")) and j != held and j, 180, "A running another slow job",
                          on_fail=a.log_tail)
        a.proc.kill()
        assert a.wait_exit() == -signal.SIGKILL
        a.stop()
        t_kill = time.monotonic()
        wait_for(lambda: b.events(f"job {killed} found in work/: running it again"), 120, "B taking over",
                 on_fail=b.log_tail)
        taken_after = time.monotonic() - t_kill
        a = _shared_again(a)
        logs.append(a.start())
        wait_for(lambda: sorted(os.listdir(a.done)) == sorted(n.split("/")[-1] for n in names), 240,
                 "every job done", on_fail=lambda: f"done: {sorted(os.listdir(a.done))}\n{b.log_tail()}")
        assert os.listdir(a.failed) == [], "no false failure"
        for rel in names:
            name = rel.split("/")[-1]
            m = json.loads((a.out / name / "manifest.json").read_text())
            n = 4 if rel.startswith("slow") else 2
            assert (a.out / name / "_SUCCESS").exists() and m["inputs"]["written"] == n
            assert m["records"]["written"] == n * len(m["records"]["variants"]), "each record written once"
        texts = [d.log() for d in logs]
        assert _done_events(texts) == {n.split("/")[-1]: 1 for n in names}, "each job committed exactly once"
        assert not any("output_exists" in t or "Traceback" in t for t in texts)
        assert held not in "".join(re.findall(r"job (\S+) found in work/", "".join(texts))), \
            "the job A held while B restarted was never taken from it"
        for d in (a, b):
            body = d.get("/metrics")[1]
            assert 'augd_jobs_total{result="failed"} 0.0' in body
        print(f"\ntakeover of {killed} by B {taken_after:.2f} s after kill -9 of A")
    finally:
        for d in (a, b):
            d.stop()


def test_a_daemon_whose_job_was_taken_over_stops_it_and_commits_nothing(tmp_path):
    """While A runs a job, another daemon (here: the test, as a daemon of another machine) takes it over, as it
    would after A's heartbeat lapsed: A finds the newer record at its next beat, stops the job, commits nothing,
    moves nothing, leaves the records to the new holder, and goes on with the next job."""
    _pipelines(tmp_path)
    a = _shared(tmp_path, "a", 2).start()
    beater = _Beater()
    try:
        a.wait_ready(timeout=120)
        drop_job(a.inbox, "slow/contested", n=6, seed=1)
        wait_for(lambda: running_images(a, "contested") >= 1, 120, "A running the job", on_fail=a.log_tail)
        other = Leases(str(a.work), 2, me=ELSEWHERE)
        assert other.take("contested", other.read("contested")) is not None
        beater.start(other)
        last = wait_for(lambda: {r["job"]: r for r in status(a)["last_jobs"]}.get("contested"), 60,
                        "A's outcome of the job", on_fail=a.log_tail)
        assert last["result"] == "lost", last
        t_lost = time.monotonic()
        assert a.events(f"job contested: this daemon no longer holds it: another daemon took it over "
                        f"({ELSEWHERE.label}, generation 2)"), a.log_tail()
        assert (a.work / "contested").is_dir() and not (a.out / "contested").exists(), "nothing moved or committed"
        assert other.holds("contested") and other.read("contested").owner == ELSEWHERE
        assert 'augd_claims_lost_total 1.0' in a.get("/metrics")[1]
        assert [w["state"] for w in status(a)["work"] if w["job"] == "contested"] == ["other"]
        drop_job(a.inbox, "after", n=2, seed=2)
        a.wait_done("after", timeout=60)
        wait_for(lambda: time.monotonic() - t_lost > 2 * 2, 30, "two leases of A watching the beats")
        assert not a.events("found in work/"), "A never takes back a job whose holder beats"
    finally:
        beater.stop()
        a.stop()


def _shared_again(d: Daemon) -> Daemon:
    """The same daemon started again (its config, rooms and port)."""
    again = Daemon(d.config)
    for room in ("inbox", "work", "done", "failed", "out"):
        setattr(again, room, getattr(d, room))
    return again


def _unshare_works() -> bool:
    try:
        return subprocess.run(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "true"],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not _unshare_works(), reason="needs unshare --pid (root): a daemon in its own pid namespace")
def test_a_daemon_in_another_pid_namespace_is_judged_by_its_lease(tmp_path):
    """C runs in a pid namespace of its own (as in a container): B cannot see its process, only its heartbeat.
    While C lives, B never takes its job; after kill -9 of C, B takes it over once the lease lapses."""
    _pipelines(tmp_path)
    lease = 2.0   # C beats from its main loop every 0.5 s: room for a late beat on a busy machine
    # B's own (empty) inbox: the job is C's; B only sees work/, where C holds it
    b, c = _shared(tmp_path, "b", lease, inbox=str(tmp_path / "data" / "inbox-b")), _shared(tmp_path, "c", lease)
    c.start(prefix=("unshare", "--pid", "--fork", "--kill-child", "--mount-proc"))   # C dies with unshare
    b.start()
    try:
        c.wait_ready(timeout=120)
        b.wait_ready(timeout=120)
        drop_job(c.inbox, "slow/far", n=6, seed=1)
        wait_for(lambda: running_images(c, "far") >= 1, 120, "C running the job", on_fail=c.log_tail)
        holder = [w for w in status(b)["work"] if w["job"] == "far"]
        assert holder and holder[0]["state"] == "other" and holder[0]["holder"], holder
        watched = time.monotonic()
        wait_for(lambda: time.monotonic() - watched > 2 * lease, 30, "B watching C beat for two leases")
        assert 0 <= running_images(c, "far") < 6, "C still runs the job"
        assert not b.events("found in work/"), "a job whose holder beats is never taken"
        for pid in _children(c.proc.pid):   # the daemon itself: pid 1 of its namespace
            os.kill(pid, signal.SIGKILL)
        c.wait_exit()
        t_kill = time.monotonic()
        b.wait_done("far", timeout=120)
        took = time.monotonic() - t_kill
        assert len(b.events("job far found in work/: running it again")) == 1, b.log_tail()
        assert json.loads((b.out / "far" / "manifest.json").read_text())["inputs"]["written"] == 6
        print(f"\nlease {lease:g} s: B took the job over and finished it {took:.1f} s after kill -9 of C")
    finally:
        c.stop()
        b.stop()


def _children(pid: int) -> list[int]:
    from tests.daemon_harness import children_of
    return sorted(children_of(pid))
