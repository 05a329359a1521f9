"""`_SUCCESS` never lies: a job whose folder (or any input it listed) vanishes, moves away or is replaced while it
runs commits nothing, in run_job (every caller) and in the daemon, which says so in failed/ (or, with the folder
gone, in its log, /status and metrics) and leaves nothing behind in work/."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import augd.job.units as units
from augd.errors import FailureReason, JobFailed
from augd.io import scan_job as real_scan
from augd.job import JobOptions, JobWatch, run_job
from augd.schema import parse_pipeline
from tests.daemon_harness import (Daemon, add_slow_pipeline, drop_job, make_job, no_leaked_children,  # noqa: F401
                                  no_leaked_children_module, running_images, status, wait_for, write_config)

PIPELINE = parse_pipeline("name: p\nvariants: 1\nkeep_original: false\noutput: {shards: 2}\nops:\n"
                          "  - random_flip_left_right: {}\n", "p.yaml")
N = 24


def _away(job: Path) -> None:
    os.rename(job, job.parent / "moved-away")


def _replaced(job: Path, aside: Path | None = None) -> None:
    """The same files in a new folder of the same name (a user copying the job in again)."""
    aside = aside or job.parent / "old"
    os.rename(job, aside)
    shutil.copytree(aside, job)


def _one_file(job: Path) -> None:
    (job / "a" / "img0023.png").unlink()


#: (what happens, after which image: None = during the scan, before any header of the job is read).
CHANGES = {
    "a file deleted while the folder is scanned": (_one_file, None),
    "a file deleted before it is read": (_one_file, 1),
    "the folder removed mid-run": (shutil.rmtree, 5),
    "the folder moved away mid-run": (_away, 5),
    "the folder moved away after its last image": (_away, N),
    "the folder replaced mid-run": (_replaced, 5),
    "the folder replaced after its last image": (_replaced, N),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_job_whose_inputs_vanish_commits_nothing(tmp_path, monkeypatch, change):
    act, after = CHANGES[change]
    job = make_job(tmp_path / "in" / "job", N, classes=("a",))
    out = tmp_path / "out"
    done = []

    def on_image(_outcome) -> None:
        done.append(1)
        if len(done) == after:
            act(job)

    if after is None:
        def scan(root, ignore=None, **kw):   # listed, then gone before its header is read
            return real_scan(root, ignore=lambda rel: (rel == "a/img0000.png" and (job / "a" / "img0023.png")
                                                       .exists() and act(job)) or bool(ignore and ignore(rel)), **kw)
        monkeypatch.setattr(units, "scan_job", scan)
    with pytest.raises(JobFailed) as exc:
        run_job(str(job), PIPELINE, str(out), JobOptions(workers=1, executor="threads"), JobWatch(on_image=on_image))
    assert exc.value.reason is FailureReason.INPUT_MISSING, exc.value
    assert "nothing was committed" in str(exc.value), exc.value
    assert not out.exists() or os.listdir(out) == [], "no output, no temp folder, no _SUCCESS"


def test_a_job_kept_whole_still_commits(tmp_path):
    """The check's other side: the same job, nothing changed under it, commits with every image."""
    job = make_job(tmp_path / "in" / "job", N, classes=("a",))
    res = run_job(str(job), PIPELINE, str(tmp_path / "out"), JobOptions(workers=1, executor="threads"))
    assert res.report.inputs.written == N and (tmp_path / "out" / "job" / "_SUCCESS").exists()


def _metric(d: Daemon, sample: str) -> float | None:
    for line in d.get("/metrics")[1].splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    return None


def test_the_daemon_fails_a_job_whose_folder_is_removed_moved_or_replaced_and_commits_nothing(tmp_path):
    """Through a real daemon, each change made while the job is running (slow pipeline: the job is mid-way): no
    output, no _SUCCESS, the failure counted as input_missing and listed on /status, work/ left empty (no claim
    records), no "stays where it is" error; a replaced folder is moved to failed/ with its failure.json."""
    add_slow_pipeline(tmp_path)
    d = Daemon(write_config(tmp_path, settle_seconds=0.3)).start()
    try:
        d.wait_ready(timeout=120)
        for name, act in (("removed", shutil.rmtree), ("moved", lambda p: os.rename(p, tmp_path / "elsewhere")),
                          ("replaced", lambda p: _replaced(p, tmp_path / "old"))):
            drop_job(d.inbox, f"slow/{name}", n=8, seed=3)
            wait_for(lambda: running_images(d, name) >= 1, 120, f"job {name} running", on_fail=d.log_tail)
            act(d.work / name)
            last = wait_for(lambda: {r["job"]: r for r in status(d)["last_jobs"]}.get(name), 120,
                            f"the outcome of {name}", on_fail=d.log_tail)
            assert last["result"] == "failed" and last["reason"] == "input_missing", last
            assert not (d.out / name).exists(), f"{name}: nothing committed"
        assert _metric(d, 'augd_job_failures_total{reason="input_missing"}') == 3.0
        assert _metric(d, 'augd_jobs_total{result="success"}') == 0.0
        failure = json.loads((d.failed / "replaced" / "failure.json").read_text())
        assert failure["reason"] == "input_missing" and "replaced" in failure["message"], failure
        assert not (d.failed / "removed").exists() and not (d.failed / "moved").exists()
        wait_for(lambda: [p for p in d.work.rglob("*")] == [d.work / ".claims"], 10, "work/ empty, no record left",
                 on_fail=lambda: list(d.work.rglob("*")))
        assert [n for n in os.listdir(d.out) if not n.startswith(".")] == []
        assert "stays where it is" not in d.log() and "Traceback" not in d.log(), d.log_tail()
    finally:
        assert d.stop() == 0, d.log_tail()
