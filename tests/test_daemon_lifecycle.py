"""`augd serve` lifecycle with real processes and signals: config errors, kill -9 and restart, two-stage
SIGTERM, SIGHUP reload, sd_notify.

A job that must still be running when the test signals or kills the daemon is held after an image (the daemon
under tests.held_daemon, its `image` hold): the test waits on the hold's log line, never on a pipeline slow enough
on this machine, and what happens next does not hang on how fast the machine runs (a slow pipeline at 7 s an
image on a busy machine outlasted the 15 s a second SIGTERM waits for the job to stop)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.daemon_harness import (REPO, Daemon, NotifySocket, drop_job, manifest,  # noqa: F401
                                  no_leaked_children, no_leaked_children_module, running_images, status, wait_for,
                                  write_config)


def serve_cli(*args, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "augd", "serve", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60)


def visible(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) if folder.exists() else []


def hidden(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) if folder.exists() else []


def drop_routed(inbox, rel, n, seed=0, pipeline="tiny2"):
    job = drop_job(inbox, os.path.join(os.path.dirname(rel), "." + os.path.basename(rel)), n=n, seed=seed)
    (job / "augd.yaml").write_text(f"pipeline: {pipeline}\n")
    os.rename(job, inbox / rel)
    return inbox / rel


def held_images(tmp_path):
    """A holds folder whose `image` hold is on: each job stops after each image until released (the file removed)
    or cancelled."""
    holds = tmp_path / "holds"
    holds.mkdir()
    (holds / "image").write_text("")
    return holds


def held(d, name: str) -> None:
    """Wait until job `name` is held after an image (its first: the progress it reports counts it after the hold)."""
    wait_for(lambda: d.events("holding at 'image'") and running_images(d, name) >= 0, 60, f"{name} to be held",
             on_fail=d.log_tail)


@pytest.mark.parametrize("text, expected", [
    ("settle_seconds: -1\n", "bad.yaml:1: settle_seconds: Input should be greater than 0; got -1"),
    ("inbox: in\nsettle_second: 3\n", "bad.yaml:2: settle_second: unknown key 'settle_second'"),
    ("on_success: keep\n", "bad.yaml:1: on_success: Input should be 'move' or 'delete'"),
    ("default_pipeline: nope\n", "bad.yaml:1: default_pipeline: cannot be used: pipeline 'nope' not found"),
    ("inbox: x\nwork: x/y\n", "bad.yaml:2: work: inbox and work must be separate folders"),
    ("- a list\n", "bad.yaml:1: a daemon config must be a YAML mapping"),
    ("a: [\n", "bad.yaml:2: invalid YAML"),
])
def test_config_errors_name_file_line_and_key(tmp_path, text, expected):
    (tmp_path / "bad.yaml").write_text(text)
    r = serve_cli("--config", str(tmp_path / "bad.yaml"), cwd=tmp_path)
    assert r.returncode == 2, r
    assert expected in r.stderr, r.stderr


def test_no_config_defaults_live_under_the_current_directory(tmp_path):
    r = serve_cli("--check", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"inbox: {tmp_path}/augd-data/inbox" in r.stdout and f"out: {tmp_path}/augd-data/out" in r.stdout
    assert "metrics_port: 7464" in r.stdout and "settle_seconds: 10.0" in r.stdout


def test_kill_9_during_a_job_then_restart_completes_it_once(tmp_path):
    cfg = write_config(tmp_path, polling=True, settle_seconds=1.0)
    d = Daemon(cfg, hold_dir=held_images(tmp_path)).start()
    try:
        d.wait_ready()
        drop_routed(d.inbox, "tiny2/crashy", n=8, seed=3)  # routed by folder *and* by augd.yaml
        (d.inbox / "tiny2" / "crashy" / "_READY").write_text("")
        held(d, "crashy")   # half-way, however fast the machine
        d.proc.kill()
        assert d.wait_exit() == -signal.SIGKILL
    finally:
        d.stop()
    assert visible(d.work) == ["crashy"]
    assert visible(d.out) == [], "nothing partial may be visible in out/"
    assert hidden(d.out), "the killed run's temp output is left behind (hidden) for the restart to clean"

    d2 = Daemon(cfg).start()   # `augd serve` itself, no hold
    try:
        d2.wait_ready()
        d2.wait_done("crashy", timeout=90)
        assert d2.events("found in work/: running it again")
        assert d2.events("removed stale temp output")
    finally:
        assert d2.stop() == 0
    m = manifest(d2.out, "crashy")
    assert m["inputs"]["written"] == 8 and m["records"]["written"] == 8 and m["pipeline"]["name"] == "tiny2"
    assert len(m["shards"]) == 1 and sum(s["records"] for s in m["shards"]) == 8
    assert visible(d2.out) == ["crashy"] and hidden(d2.out) == []
    assert visible(d2.done) == ["crashy"] and visible(d2.failed) == [] and visible(d2.work) == []
    assert visible(d2.inbox) == ["tiny2"] and visible(d2.inbox / "tiny2") == []


def test_sd_notify_sighup_and_two_stage_sigterm(tmp_path):
    """And the warm-up (forced on here; auto warms GPU hosts only): every configured pipeline's graph run once
    before READY=1, each announced to systemd with a longer start timeout; a broken one logged, not fatal. The job
    the second SIGTERM aborts is held after its first image, which the abort releases."""
    cfg = write_config(tmp_path, grace_seconds=60, warm_up="on")
    (tmp_path / "pipelines" / "broken.yaml").write_text("name: broken\nops:\n  - no_such_op: {}\n")
    sock = NotifySocket()
    holds = tmp_path / "holds"
    holds.mkdir()
    d = Daemon(cfg, env={"NOTIFY_SOCKET": sock.name}, hold_dir=holds).start()
    try:
        d.wait_ready()
        wait_for(lambda: sock.has("READY=1"), 30, "READY=1")
        said = sock.messages()
        warming = [i for i, m in enumerate(said) if m.startswith("STATUS=warming up pipeline")]
        assert warming and max(warming) < said.index("READY=1") and "EXTEND_TIMEOUT_USEC=120000000" in said
        rows = status(d)["warm_up"]
        assert [r["pipeline"] for r in rows] == ["tiny", "broken", "tiny2"], rows
        assert "no_such_op" in rows[1]["error"] and all(r["seconds"] > 0 for r in rows if r is not rows[1])
        log = d.log()
        assert "warm-up of pipeline broken failed" in log
        assert log.index("warmed up pipeline tiny2") < log.index(" watching ")
        wait_for(lambda: sock.has("WATCHDOG=1"), 30, "WATCHDOG=1")
        assert any(m.startswith("STATUS=") and "queue" in m for m in sock.messages())

        # SIGHUP with a broken config: refused, the daemon runs on with the old one.
        good = cfg.read_text()
        cfg.write_text(good + "settle_seconds: oops\n")
        d.signal(signal.SIGHUP)
        wait_for(lambda: d.events("config not reloaded"), 30, "the reload to be refused", on_fail=d.log_tail)
        # SIGHUP with a new default pipeline: the next job uses it.
        cfg.write_text(good.replace('default_pipeline: "tiny"', 'default_pipeline: "tiny2"'))
        d.signal(signal.SIGHUP)
        wait_for(lambda: d.events("config reloaded"), 30, "the reload", on_fail=d.log_tail)
        drop_job(d.inbox, "afterhup", n=1)
        d.wait_done("afterhup")
        assert manifest(d.out, "afterhup")["pipeline"]["name"] == "tiny2"

        (holds / "image").write_text("")
        job = drop_routed(d.inbox, "interrupted", n=20, seed=9)
        held(d, "interrupted")
        wait_for(lambda: any(m.startswith("STATUS=running interrupted") for m in sock.messages()), 30,
                 "STATUS= naming the current job")
        d.signal(signal.SIGTERM)  # first: stop taking jobs, let this one run (grace 60 s)
        wait_for(lambda: d.events("stopping (SIGTERM)"), 30, "stage one", on_fail=d.log_tail)
        assert d.get("/readyz")[0] == 503 and status(d)["state"] == "stopping"
        assert d.proc.poll() is None and (d.work / "interrupted").is_dir()
        d.signal(signal.SIGTERM)  # second: abort now, requeue (the cancel releases the hold)
        assert d.wait_exit() == 0, d.log_tail()
        assert sock.has("STOPPING=1")
    finally:
        d.stop()
        sock.close()
    assert job.is_dir() and len(list(job.glob("a/*.png"))) == 20 and (job / "augd.yaml").is_file()
    assert visible(d.work) == [] and not (d.out / "interrupted").exists() and hidden(d.out) == []
    assert d.events("back in the inbox")


def test_sigterm_lets_the_current_job_finish_within_the_grace_period(tmp_path):
    holds = held_images(tmp_path)
    d = Daemon(write_config(tmp_path, grace_seconds=120, log_format="json"), hold_dir=holds).start()
    try:
        d.wait_ready()
        drop_job(d.inbox, "finishes", n=4)
        held(d, "finishes")
        d.signal(signal.SIGTERM)
        wait_for(lambda: "stopping" in {json.loads(ln).get("event") for ln in d.events('"stopping"')
                                         if ln.startswith("{")}, 30, "stage one", on_fail=d.log_tail)
        (holds / "image").unlink()   # the job goes on, within its grace period
        assert d.wait_exit(120) == 0, d.log_tail()
    finally:
        d.stop()
    assert visible(d.done) == ["finishes"] and (d.out / "finishes" / "_SUCCESS").is_file()
    assert manifest(d.out, "finishes")["inputs"]["written"] == 4
    assert visible(d.inbox) == [] and visible(d.work) == []
    lines = [json.loads(ln) for ln in d.log().splitlines() if ln.startswith("{")]  # TF's own lines are not ours
    events = [ln.get("event") for ln in lines if ln.get("job") == "finishes"]
    assert events[:4] == ["job_seen", "job_ready", "job_claimed", "job_started"] and "job_done" in events
    done = next(ln for ln in lines if ln.get("event") == "job_done")
    assert done["images"] == 4 and done["records"] == 4 and done["level"] == "info" and "time" in done
    assert {"stopping", "stopped"} <= {ln.get("event") for ln in lines}
