"""Issue 8, item 4: YAML safe-loaded, ops only from the registry, nothing outside the job folder read, the HTTP
server on loopback serving only its endpoints. (Non-root Docker image and systemd unit: tests/test_deploy.py,
test_dockerfile_pins_base_runs_as_non_root_with_init_and_healthcheck and test_systemd_unit_settings.)"""
from __future__ import annotations

import http.client
import os

import pytest
from prometheus_client import CollectorRegistry

from augd import defaults
from augd.daemon.routing import resolve_pipeline
from augd.errors import SpecError
from augd.schema import parse_pipeline
from tests.daemon_harness import TINY

PWNED = "/tmp/augd-security-pwned"


def test_python_tags_in_a_pipeline_are_refused_and_never_run():
    text = TINY.format(name="x") + f"extra: !!python/object/apply:os.system ['touch {PWNED}']\n"
    with pytest.raises(SpecError):
        parse_pipeline(text, "evil.yaml")
    assert not os.path.exists(PWNED)


def test_python_tags_in_a_jobs_augd_yaml_are_refused(tmp_path):
    (tmp_path / "augd.yaml").write_text(f"pipeline: !!python/object/apply:os.system ['touch {PWNED}']\n")
    with pytest.raises(SpecError, match="augd.yaml"):
        resolve_pipeline(str(tmp_path), None, "normalize")
    assert not os.path.exists(PWNED)


def test_op_names_come_only_from_the_registry(tmp_path):
    for op in ("os.system", "__import__", "eval", "tf.io.write_file"):
        with pytest.raises(SpecError, match="unknown op|ops\\[0\\]"):
            parse_pipeline(TINY.format(name="x").replace("random_flip_left_right", op), "p.yaml")


@pytest.fixture
def outside(tmp_path):
    """A valid pipeline outside the job whose name would show up in an error or a manifest if it were read."""
    (tmp_path / "secret.yaml").write_text(TINY.format(name="leaked-secret"))
    job = tmp_path / "job"
    job.mkdir()
    return tmp_path, job


@pytest.mark.parametrize("ref", ["../secret.yaml", "/ABS/secret.yaml", "sub/../../secret.yaml", "link.yaml"])
def test_a_jobs_augd_yaml_cannot_name_a_pipeline_file_outside_the_job(outside, ref):
    root, job = outside
    os.symlink(root / "secret.yaml", job / "link.yaml")
    (job / "augd.yaml").write_text(f"pipeline: {ref.replace('/ABS', str(root))}\n")
    with pytest.raises(SpecError, match="outside the job folder") as e:
        resolve_pipeline(str(job), None, "normalize")
    assert "leaked-secret" not in str(e.value)


def test_a_jobs_augd_yaml_that_is_a_symlink_out_is_refused(outside):
    root, job = outside
    (root / "cfg.yaml").write_text("pipeline: {name: leaked-secret, ops: []}\n")
    os.symlink(root / "cfg.yaml", job / "augd.yaml")
    with pytest.raises(SpecError, match="outside the job folder") as e:
        resolve_pipeline(str(job), None, "normalize")
    assert "leaked-secret" not in str(e.value)


def test_a_pipeline_file_inside_the_job_still_works_and_a_fifo_is_refused(outside):
    _, job = outside
    (job / "mine.yaml").write_text(TINY.format(name="mine"))
    (job / "augd.yaml").write_text("pipeline: mine.yaml\n")
    spec, how = resolve_pipeline(str(job), None, "normalize")
    assert (spec.name, how) == ("mine", "augd.yaml")
    os.mkfifo(job / "pipe.yaml")
    (job / "augd.yaml").write_text("pipeline: ./pipe.yaml\n")
    with pytest.raises(SpecError, match="not a regular file"):  # open() on a FIFO would block the daemon
        resolve_pipeline(str(job), None, "normalize")


# Symlinks out of the job, whose content would show up in the records, are proven never read by
# tests/test_reliability_inputs.py::test_nothing_outside_the_job_is_read (static links) and
# ::test_job_changing_during_and_after_the_scan (links swapped in after the scan).


def test_metrics_server_binds_loopback_by_default():
    from augd.daemon.config import load_settings  # noqa: F401  (the default lives in one place)
    assert defaults.METRICS_BIND == "127.0.0.1"


@pytest.fixture
def server():
    from augd.daemon.http import StatusServer
    s = StatusServer(CollectorRegistry(), "127.0.0.1", 0, health=lambda: (True, {}), ready=lambda: (True, {}),
                     status=lambda: {"ok": 1}, version="t").start()
    yield s
    s.stop()


def raw_get(port: int, path: str, method: str = "GET") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=False, skip_accept_encoding=True)
        conn.endheaders()
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.parametrize("path", ["/../etc/passwd", "/metrics/../x", "/%2e%2e/%2e%2e/etc/passwd", "/etc/passwd",
                                  "//etc/passwd", "/metrics/x", "/status.json", "/healthz/../../", "/./metrics/..",
                                  "/.git/config", "/augd.yaml", "/?file=/etc/passwd&x=../"])
def test_only_its_endpoints_are_served(server, path):
    expected = 200 if path.split("?")[0] in ("/", "") else 404
    assert raw_get(server.port, path) == expected


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "TRACE"])
def test_other_methods_are_refused(server, method):
    assert raw_get(server.port, "/metrics", method) == 501


def test_known_endpoints_answer(server):
    for p in ("/metrics", "/healthz", "/readyz", "/status", "/"):
        assert raw_get(server.port, p) == 200, p


def test_inside_resolves_symlinks_before_it_compares(tmp_path):
    from augd.files import inside
    job = tmp_path / "job"
    (job / "a").mkdir(parents=True)
    (tmp_path / "jobber").mkdir()  # a prefix of the job's name is not inside it
    os.symlink(tmp_path / "jobber", job / "out")
    os.symlink(job / "a", job / "in")
    assert inside(str(job), str(job)) and inside(str(job), str(job / "a" / "x.jpg"))
    assert inside(str(job), str(job / "in" / "x.jpg"))
    assert not inside(str(job), str(job / "out" / "x.jpg")) and not inside(str(job), str(tmp_path / "jobber"))
    assert not inside(str(job), str(job / ".." / "jobber"))
