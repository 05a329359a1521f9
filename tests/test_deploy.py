"""Deploy files: the checks a reviewer would run, in CI (there is no Docker engine here)."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPLOY = os.path.join(ROOT, "deploy")
COMPOSE = os.path.join(DEPLOY, "compose")
METRIC_RE = re.compile(r"\baugd_[a-z0-9_]+\b")


def _read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


@pytest.fixture(scope="module")
def registry_names(tmp_path_factory):
    """Every metric and sample name augd's registry exposes after a real job."""
    from prometheus_client import CollectorRegistry

    from augd.job import JobWatch, run_job
    from augd.daemon import events
    from augd.daemon.metrics import Metrics
    from tests.helpers import make_image, png, spec_for

    job = tmp_path_factory.mktemp("job") / "j"
    (job / "a").mkdir(parents=True)
    for i in range(3):
        (job / "a" / f"{i}.png").write_bytes(png(make_image(20 + i, 30)))
    (job / "a" / "bad.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    m = Metrics(CollectorRegistry())
    m.build_info("0", "0", "CPU")
    m.record(events.Started())
    result = run_job(str(job), spec_for([{"invert": {}}], fmt="jpeg"), str(tmp_path_factory.mktemp("out")),
                     watch=JobWatch(on_image=lambda o: m.record(events.Image(o))))
    m.record(events.Succeeded(result.report, 1.0))
    names = set()
    for fam in m.registry.collect():
        names.add(fam.name)
        names.update(s.name for s in fam.samples)
    return names


def _exprs_dashboard():
    dash = json.loads(_read("deploy", "compose", "grafana", "dashboards", "augd.json"))
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


def _exprs_alerts():
    rules = yaml.safe_load(_read("deploy", "compose", "prometheus", "alerts.yml"))
    return [r["expr"] for g in rules["groups"] for r in g["rules"]]


def _docs_text():
    text = _read("README.md")
    docs = os.path.join(ROOT, "docs")
    if os.path.isdir(docs):
        text += "".join(_read("docs", f) for f in sorted(os.listdir(docs)) if f.endswith(".md"))
    return text


@pytest.mark.parametrize("where", ["dashboard", "alerts", "docs"])
def test_every_metric_name_used_exists_in_the_registry(where, registry_names):
    sources = {"dashboard": _exprs_dashboard, "alerts": _exprs_alerts, "docs": lambda: [_docs_text()]}[where]()
    used = {name for text in sources for name in METRIC_RE.findall(text)}
    assert used, f"no augd metric found in the {where}"
    missing = sorted(used - registry_names)
    assert not missing, f"{where} uses metrics augd does not export: {missing}"


def test_dashboard_covers_what_operators_watch():
    exprs = " ".join(_exprs_dashboard())
    for needed in ("augd_images_total", "augd_stage_seconds_bucket", "augd_queue_jobs", "augd_jobs_total",
                   "augd_rejected_inputs_total", "augd_device_memory_bytes"):
        assert needed in exprs, needed
    assert "histogram_quantile(0.95" in exprs


def test_alerts_cover_down_stuck_failures_and_staleness():
    rules = yaml.safe_load(_read("deploy", "compose", "prometheus", "alerts.yml"))
    exprs = {r["alert"]: r["expr"] for g in rules["groups"] for r in g["rules"]}
    assert 'up{job="augd"} == 0' in exprs["AugdDown"]
    assert "rate(augd_images_total" in exprs["AugdQueueStuck"]
    assert 'result="failed"' in exprs["AugdFailureRatioHigh"]
    assert "augd_last_success_timestamp_seconds" in exprs["AugdNoSuccessFor6h"]


def test_promtool_accepts_config_and_rules():
    if not shutil.which("promtool"):
        pytest.skip("promtool not installed (Debian package 'prometheus'; .ci/run installs it when it can)")
    for args in (["check", "config", os.path.join(COMPOSE, "prometheus", "prometheus.yml")],
                 ["check", "rules", os.path.join(COMPOSE, "prometheus", "alerts.yml")]):
        res = subprocess.run(["promtool", *args], capture_output=True, text=True)
        assert res.returncode == 0, res.stdout + res.stderr


def test_systemd_unit_verifies(tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze not installed (Debian package 'systemd')")
    unit = _read("deploy", "systemd", "augd.service")
    # verify checks that ExecStart exists: point it at this environment's real augd entry point.
    augd_bin = shutil.which("augd") or os.path.join(os.path.dirname(sys.executable), "augd")
    if not os.path.exists(augd_bin):
        pytest.skip("no installed `augd` entry point to point ExecStart at")
    (tmp_path / "augd.service").write_text(unit.replace("/opt/augd/venv/bin/augd", augd_bin))
    res = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "augd.service")], capture_output=True,
                         text=True)
    problems = [ln for ln in (res.stdout + res.stderr).splitlines()
                if "augd.service" in ln and "Failed to resolve user" not in ln and "does not exist" not in ln]
    assert not problems, problems


def test_systemd_unit_settings():
    unit = _read("deploy", "systemd", "augd.service")
    for line in ("Type=notify", "WatchdogSec=", "Restart=on-failure", "User=augd", "NoNewPrivileges=yes",
                 "ProtectSystem=strict", "ReadWritePaths=/var/lib/augd", "ProtectHome=yes", "PrivateTmp=yes",
                 "ExecReload=/bin/kill -HUP $MAINPID", "DeviceAllow=/dev/nvidiactl rw", "LimitNOFILE=65536",
                 "Environment=CUDA_CACHE_PATH=/var/lib/augd/", "Environment=CUDA_CACHE_MAXSIZE="):
        assert line in unit, line
    directives = [ln.strip() for ln in unit.splitlines() if not ln.lstrip().startswith("#")]
    assert "PrivateDevices=yes" not in directives  # would hide the GPU


@pytest.mark.parametrize("path", ["deploy/systemd/augd.yaml", "deploy/docker/augd.yaml"])
def test_example_configs_are_valid_daemon_configs(path):
    from augd.daemon.config import DaemonConfig
    DaemonConfig.model_validate(yaml.safe_load(_read(path)))


def test_docker_config_binds_metrics_on_all_interfaces():
    cfg = yaml.safe_load(_read("deploy", "docker", "augd.yaml"))
    assert cfg["metrics_bind"] == "0.0.0.0" and cfg["data_dir"] == "/data"


def test_compose_parses_and_names_three_services():
    compose = yaml.safe_load(_read("deploy", "compose", "docker-compose.yml"))
    assert set(compose["services"]) == {"augd", "prometheus", "grafana"}
    augd = compose["services"]["augd"]
    assert augd["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert augd["ulimits"]["nofile"] == {"soft": 65536, "hard": 65536}
    cache = augd["environment"]   # the driver's compiled kernels on the volume, room for TensorFlow's (>= 2 GiB)
    assert cache["CUDA_CACHE_PATH"].startswith("/data/") and int(cache["CUDA_CACHE_MAXSIZE"]) >= 2 << 30
    scrape = yaml.safe_load(_read("deploy", "compose", "prometheus", "prometheus.yml"))
    assert scrape["scrape_configs"][0]["static_configs"][0]["targets"] == ["augd:7464"]
    for svc in ("prometheus", "grafana"):
        assert ":" in compose["services"][svc]["image"] and not compose["services"][svc]["image"].endswith(":latest")


def test_dockerfile_pins_base_runs_as_non_root_with_init_and_healthcheck():
    lines = [ln.strip() for ln in _read("Dockerfile").splitlines() if ln.strip() and not ln.startswith("#")]
    base = [ln for ln in lines if ln.startswith("FROM ")]
    assert len(base) == 1 and re.fullmatch(r"FROM tensorflow/tensorflow:\d+\.\d+\.\d+-gpu(@sha256:[0-9a-f]{64})?",
                                           base[0]), base
    users = [ln.split()[1] for ln in lines if ln.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert any(ln.startswith("HEALTHCHECK") and "--start-period=" in ln for ln in lines)
    assert any("/healthz" in ln for ln in lines)
    assert any(ln.startswith("ENTRYPOINT") and "tini" in ln for ln in lines)
    assert any(ln.startswith("EXPOSE 7464") for ln in lines)
    assert any(ln.startswith("VOLUME") for ln in lines)
    text = _read("Dockerfile")
    assert re.search(r"CUDA_CACHE_PATH=/data/", text) and int(re.search(r"CUDA_CACHE_MAXSIZE=(\d+)", text)[1]) >= 2 << 30
    from augd import defaults
    assert defaults.METRICS_PORT == 7464
    assert os.path.isfile(os.path.join(ROOT, ".dockerignore"))


@pytest.mark.parametrize("limit", [1024, 65536])
def test_the_http_server_takes_at_most_a_quarter_of_the_open_files_limit(limit):
    """Under systemd's default soft limit (1024) and the shipped LimitNOFILE (65536): the default
    http_max_connections fits, and a larger one is capped at a quarter; the jobs keep the rest. (A real daemon
    under `prlimit --nofile=1024`: tests/test_peers_http.py.)"""
    from augd import defaults
    from augd.daemon.httpconn import descriptor_share
    assert descriptor_share(defaults.HTTP_MAX_CONNECTIONS, limit) == 128
    assert descriptor_share(100000, limit) == limit // 4
