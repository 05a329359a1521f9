"""`augd serve` as a real subprocess on temp folders: readiness, routing, failures, exactly-once, timeouts.

One daemon serves the whole module; each test drops its own uniquely named jobs into it. Its jobs are all quick
ones and it sets no job timeout, so nothing here hangs on how fast the machine is; the timeout has a daemon of
its own, whose job is held after an image until the timeout cancels it.
"""
from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from tests.daemon_harness import (TINY, Daemon, drop_job, make_job, manifest,  # noqa: F401
                                  no_leaked_children, no_leaked_children_module, wait_for, write_config)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    cfg = write_config(root, settle_seconds=1.5)
    (root / "pipelines" / "other.yaml").write_text(TINY.format(name="other"))
    d = Daemon(cfg).start()
    try:
        d.wait_ready()
        yield d
    finally:
        code = d.stop()
        assert code == 0, d.log_tail()


def claimed(d: Daemon, name: str) -> list[str]:
    return [ln for ln in d.events("claimed") if f"[job={name} " in ln]


def test_twenty_jobs_dropped_at_once_each_run_exactly_once(daemon):
    names = [f"burst{i:02d}" for i in range(20)]
    staging = daemon.root / "staging"
    for i, name in enumerate(names):
        make_job(staging / name, n=2, seed=i)
    for name in names:  # all twenty land within a few milliseconds
        os.rename(staging / name, daemon.inbox / name)
    for name in names:
        daemon.wait_done(name, timeout=120)
    for i, name in enumerate(names):
        assert len(claimed(daemon, name)) == 1, claimed(daemon, name)
        m = manifest(daemon.out, name)
        assert m["inputs"]["written"] == 2 and m["records"]["written"] == 2
        assert (daemon.out / name / "_SUCCESS").is_file()
        assert not (daemon.failed / name).exists()
        assert not (daemon.done / f"{name}.1").exists()  # never a second run's folder
    assert [p.name for p in daemon.work.iterdir()] in ([], [".claims"])   # no job, and no claim record left
    assert not (daemon.work / ".claims").exists() or not list((daemon.work / ".claims").iterdir())
    assert not [p for p in daemon.out.iterdir() if p.name.startswith(".")]  # no temp output left


def test_slow_copy_is_not_picked_up_before_it_is_complete(daemon):
    """Files arrive one by one with gaps shorter than settle_seconds; the job must wait for the last one."""
    src = make_job(daemon.root / "slow-src", n=6, seed=77, classes=())
    job = daemon.inbox / "slowcopy"
    job.mkdir()
    for f in sorted(src.iterdir()):
        shutil.copyfile(f, job / f.name)
        # the copier's own pace (the thing under test), not a synchronisation:
        time.sleep(0.5)
        assert job.is_dir() and not (daemon.work / "slowcopy").exists() and not (daemon.done / "slowcopy").exists(), \
            "picked up while still being copied"
    daemon.wait_done("slowcopy")
    m = manifest(daemon.out, "slowcopy")
    assert m["inputs"]["seen"] == 6 and m["inputs"]["written"] == 6
    assert len(claimed(daemon, "slowcopy")) == 1


def test_ready_marker_makes_a_job_ready(daemon):
    drop_job(daemon.inbox, "marked", n=1, seed=5)
    (daemon.inbox / "marked" / "_READY").write_text("")
    daemon.wait_done("marked")
    assert "is ready (marker)" in "\n".join(daemon.events("job marked is ready"))
    assert manifest(daemon.out, "marked")["inputs"]["seen"] == 1  # the marker is not an input


@pytest.mark.parametrize("how", ["augd.yaml", "folder", "default"])
def test_routing(daemon, how):
    name = f"route-{how.replace('.', '-')}"
    if how == "augd.yaml":  # a job config beats the routing folder
        job = drop_job(daemon.inbox, f"tiny2/{name}-tmp", n=1, seed=11)
        (job / "augd.yaml").write_text("pipeline: other\n")
        os.rename(job, job.parent / name)
        expected, rel = "other", f"tiny2/{name}"
    elif how == "folder":
        drop_job(daemon.inbox, f"tiny2/{name}", n=1, seed=12)
        expected, rel = "tiny2", f"tiny2/{name}"
    else:
        drop_job(daemon.inbox, name, n=1, seed=13)
        expected, rel = "tiny", name
    daemon.wait_done(name)
    assert manifest(daemon.out, name)["pipeline"]["name"] == expected
    assert not (daemon.inbox / rel).exists()
    assert (daemon.inbox / "tiny2").is_dir()  # a routing folder stays; it is not a job


def test_embedded_pipeline_in_job_config(daemon):
    job = drop_job(daemon.inbox, ".embedded", n=1, seed=14)
    (job / "augd.yaml").write_text("pipeline:\n  name: inline\n  variants: 2\n  keep_original: true\n  ops:\n"
                                   "    - random_flip_up_down: {}\n")
    os.rename(job, daemon.inbox / "embedded")
    daemon.wait_done("embedded")
    m = manifest(daemon.out, "embedded")
    assert m["pipeline"]["name"] == "inline" and m["records"]["written"] == 3


def test_bad_pipeline_fails_the_job_with_its_yaml_error_and_the_next_job_succeeds(daemon):
    bad = drop_job(daemon.inbox, ".badpipe", n=1, seed=21)
    (bad / "augd.yaml").write_text("pipeline:\n  name: broken\n  ops:\n    - random_hue: {max_delta: 0.9}\n")
    os.rename(bad, daemon.inbox / "badpipe")
    drop_job(daemon.inbox, "afterbad", n=1, seed=22)
    failed = daemon.wait_failed("badpipe")
    daemon.wait_done("afterbad")
    failure = json.loads((failed / "failure.json").read_text())
    assert failure["reason"] == "bad_pipeline" and failure["job"] == "badpipe"
    error = (failed / "error.txt").read_text()
    assert "augd.yaml:4: pipeline.ops[0].random_hue.max_delta" in error and "0.9" in error
    assert list(failed.glob("a/*.png")), "the job's files are kept in failed/"
    assert not (daemon.out / "badpipe").exists()


def test_unknown_pipeline_name_fails_clearly(daemon):
    bad = drop_job(daemon.inbox, ".nopipe", n=1, seed=23)
    (bad / "augd.yaml").write_text("pipeline: does-not-exist\n")
    os.rename(bad, daemon.inbox / "nopipe")
    failed = daemon.wait_failed("nopipe")
    assert "augd.yaml:1: pipeline: pipeline 'does-not-exist' not found" in (failed / "error.txt").read_text()


def test_job_without_any_image_fails(daemon):
    job = daemon.inbox / ".noimages"
    job.mkdir()
    (job / "notes.txt").write_text("not an image")
    os.rename(job, daemon.inbox / "noimages")
    failed = daemon.wait_failed("noimages")
    assert json.loads((failed / "failure.json").read_text())["reason"] == "no_valid_input"


def test_output_name_clash_fails_instead_of_overwriting(daemon):
    drop_job(daemon.inbox, "clash", n=1, seed=31)
    daemon.wait_done("clash")
    before = (daemon.out / "clash" / "manifest.json").read_bytes()
    drop_job(daemon.inbox, "clash", n=2, seed=32)
    failed = daemon.wait_failed("clash")
    assert json.loads((failed / "failure.json").read_text())["reason"] == "output_exists"
    assert "already holds a complete output" in (failed / "error.txt").read_text()
    assert (daemon.out / "clash" / "manifest.json").read_bytes() == before


def test_job_over_timeout_fails_and_the_daemon_continues(tmp_path):
    holds = tmp_path / "holds"
    holds.mkdir()
    (holds / "image").write_text("")   # the job stays after its first image until the timeout cancels it
    d = Daemon(write_config(tmp_path, job_timeout_seconds=4), hold_dir=holds).start()
    try:
        d.wait_ready()
        drop_job(d.inbox, "toolong", n=4, seed=41)
        failed = d.wait_failed("toolong", timeout=90)
        failure = json.loads((failed / "failure.json").read_text())
        assert failure["reason"] == "timeout", failure
        assert "job_timeout_seconds=4" in (failed / "error.txt").read_text()
        (holds / "image").unlink()
        drop_job(d.inbox, "aftertimeout", n=1, seed=42)
        d.wait_done("aftertimeout")
        assert not (d.out / "toolong").exists()
        assert not [p for p in d.out.iterdir() if p.name.startswith(".")]
    finally:
        assert d.stop() == 0, d.log_tail()


def test_hidden_and_loose_files_in_the_inbox_are_ignored(daemon):
    (daemon.inbox / "stray.png").write_bytes(b"x")
    make_job(daemon.inbox / ".hidden-job", n=1)
    drop_job(daemon.inbox, "visible", n=1, seed=51)
    daemon.wait_done("visible")
    assert (daemon.inbox / "stray.png").exists() and (daemon.inbox / ".hidden-job").is_dir()
    assert not daemon.events("job .hidden-job") and not daemon.events("stray.png")


def test_a_job_folder_that_is_a_symlink_is_ignored_with_one_log_line(daemon):
    """A link is not claimed (renaming it would move the link, not the files): one warning per link, saying so
    and what to do, however many rescans see it; the folder it points at is untouched."""
    target = make_job(daemon.root / "elsewhere" / "linked", n=2, seed=5)
    os.symlink(target, daemon.inbox / "linkjob")
    (daemon.inbox / "tiny2").mkdir(exist_ok=True)
    os.symlink(target, daemon.inbox / "tiny2" / "routedlink")
    for rel in ("linkjob", "tiny2/routedlink"):
        wait_for(lambda: daemon.events(f"inbox/{rel} is a symbolic link"), 30, f"the line for {rel}",
                 on_fail=daemon.log_tail)
    drop_job(daemon.inbox, "after-links", n=2)   # rescans happen meanwhile
    daemon.wait_done("after-links")
    assert len(daemon.events("inbox/linkjob is a symbolic link")) == 1
    assert len(daemon.events("inbox/tiny2/routedlink is a symbolic link")) == 1
    assert "Copy or move the folder into the inbox" in daemon.events("inbox/linkjob is a symbolic link")[0]
    assert sorted(p.name for p in (target / "a").iterdir()) == ["img0000.png", "img0001.png"]
    assert not (daemon.out / "linkjob").exists() and not (daemon.out / "routedlink").exists()
    os.unlink(daemon.inbox / "linkjob")
    os.unlink(daemon.inbox / "tiny2" / "routedlink")
