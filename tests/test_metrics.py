"""Metrics and HTTP endpoints of a running `augd serve`, scraped over real HTTP and parsed with
prometheus_client's parsers; plus the metric bookkeeping on a fresh registry."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families
from prometheus_client.parser import text_string_to_metric_families

from augd.io import RejectedInput
from augd.job.report import ByteCounts, GraphInfo, Inputs, JobReport, RecordCounts, Shard, Timing
from augd.daemon.metrics import METRIC_NAMES, Metrics
from augd.stages import STAGES
from tests.daemon_harness import (REPO, Daemon, make_image, manifest, no_leaked_children,  # noqa: F401
                                  no_leaked_children_module, wait_for, write_config)

DOCS = REPO / "docs" / "metrics.md"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """A daemon held before TensorFlow loads (tests.held_daemon), so /readyz can be seen answering 503 first.
    Jobs are only ready with a _READY marker (settle_seconds is an hour) and deleted after success."""
    root = tmp_path_factory.mktemp("metrics")
    holds = root / "holds"
    holds.mkdir()
    (holds / "startup").write_text("")
    cfg = write_config(root, settle_seconds=3600, on_success="delete", health_stale_seconds=2)
    d = Daemon(cfg, hold_dir=holds).start()
    try:
        d.wait_http()
        yield d
    finally:
        for f in holds.iterdir():
            f.unlink()
        assert d.stop() == 0, d.log_tail()


@pytest.fixture
def ready(daemon):
    (daemon.holds / "startup").unlink(missing_ok=True)
    return daemon.wait_ready()


def scrape(d: Daemon) -> dict[str, float]:
    """{'name{label="v",...}': value} for every sample of /metrics."""
    code, text, headers = d.get("/metrics")
    assert code == 200 and headers["Content-Type"].startswith("text/plain")
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def delta(after: dict, before: dict, key: str) -> float:
    return after.get(key, 0.0) - before.get(key, 0.0)


def test_readyz_is_503_until_tensorflow_and_the_watcher_are_up(daemon):
    code, body, _ = daemon.get("/readyz")
    assert code == 503 and json.loads(body)["tensorflow"] is False
    assert daemon.get("/healthz")[0] in (200, 503)  # answered, whatever the start-up takes
    assert daemon.get("/metrics")[0] == 200         # metrics are served from the first second
    (daemon.holds / "startup").unlink()
    daemon.wait_ready()
    code, body, _ = daemon.get("/readyz")
    assert json.loads(body) == {"ok": True, "tensorflow": True, "watching": True, "stopping": False}


def _drop_marked(d: Daemon, rel: str, build) -> Path:
    tmp = d.inbox / f".{rel.replace('/', '_')}"
    build(tmp)
    (tmp / "_READY").write_text("")
    dest = d.inbox / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.rename(tmp, dest)
    return dest


def test_counters_equal_the_manifests_of_the_jobs_processed(ready):
    d = ready
    before = scrape(d)

    def good(tmp, n=3, seed=1):
        for i in range(n):
            make_image(tmp / ("cats" if i % 2 else "dogs") / f"{i}.png", seed=seed * 10 + i)

    def with_rejects(tmp):
        good(tmp, 2, seed=2)
        (tmp / "empty.png").write_bytes(b"")                         # empty (scan)
        (tmp / "notes.txt").write_text("not an image")               # unknown_format (scan)
        png = make_image(tmp / "cut.png", seed=99).read_bytes()
        (tmp / "cut.png").write_bytes(png[: len(png) // 2])          # undecodable (engine)

    names = {"m-plain": lambda t: good(t, 3, 1), "m-rejects": with_rejects, "tiny2/m-routed": lambda t: good(t, 2, 3)}
    for rel, build in names.items():
        _drop_marked(d, rel, build)
    jobs = [rel.split("/")[-1] for rel in names]
    for name in jobs:
        wait_for(lambda: (d.out / name / "_SUCCESS").is_file() and not (d.inbox / name).exists()
                 and not (d.work / name).exists(), 60, f"{name} to finish", on_fail=d.log_tail)
    wait_for(lambda: delta(scrape(d), before, 'augd_jobs_total{result="success"}') == 3, 10, "3 successes")
    after = scrape(d)
    ms = [manifest(d.out, n) for n in jobs]
    assert list(d.done.iterdir()) == []  # on_success: delete

    total = lambda f: sum(f(m) for m in ms)  # noqa: E731
    expect = {
        'augd_images_total{result="written"}': total(lambda m: m["inputs"]["written"]),
        'augd_images_total{result="rejected"}': total(lambda m: m["inputs"]["rejected"]),
        "augd_records_written_total": total(lambda m: m["records"]["written"]),
        "augd_bytes_read_total": total(lambda m: m["bytes"]["read"]),
        "augd_bytes_written_total": total(lambda m: m["bytes"]["written"]),
        "augd_graph_builds_total": total(lambda m: m["graph"]["builds"]),
        "augd_graph_traces_total": total(lambda m: m["graph"]["traces"]),
        'augd_jobs_total{result="failed"}': 0,
        "augd_job_duration_seconds_count": 3,
    }
    reasons = {}
    for m in ms:
        for r in m["inputs"]["rejected_files"]:
            reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
    assert reasons == {"empty": 1, "unknown_format": 1, "undecodable": 1}  # the test data is what we think
    for reason, n in reasons.items():
        expect[f'augd_rejected_inputs_total{{reason="{reason}"}}'] = n
    got = {k: delta(after, before, k) for k in expect}
    assert got == pytest.approx(expect), got
    assert expect['augd_images_total{result="written"}'] == 7 and expect["augd_bytes_written_total"] > 0

    written = expect['augd_images_total{result="written"}']
    for stage in STAGES:
        assert delta(after, before, f'augd_stage_seconds_count{{stage="{stage}"}}') == written
        manifest_sum = total(lambda m: m["timing"]["stage_seconds"][stage])
        assert delta(after, before, f'augd_stage_seconds_sum{{stage="{stage}"}}') == \
            pytest.approx(manifest_sum, abs=1e-3 * len(ms) + 1e-6)
    assert after["augd_last_success_timestamp_seconds"] > 0
    assert after['augd_queue_jobs{state="ready"}'] == 0 and after['augd_queue_jobs{state="waiting"}'] == 0
    assert after["augd_inflight_jobs"] == 0 and after["augd_current_job_images_per_second"] == 0
    build = [k for k in after if k.startswith("augd_build_info{")]
    assert len(build) == 1 and 'device="CPU"' in build[0] and after[build[0]] == 1


def test_a_failed_job_counts_as_failed(ready):
    d = ready
    before = scrape(d)
    job = _drop_marked(d, "m-failing", lambda t: (t.mkdir(), (t / "augd.yaml").write_text("pipeline: nope\n"),
                                                   make_image(t / "x.png")))
    wait_for(lambda: (d.failed / "m-failing" / "failure.json").is_file(), 60, "the failure", on_fail=d.log_tail)
    assert not job.exists()
    after = wait_for(lambda: (s := scrape(d)) and delta(s, before, 'augd_jobs_total{result="failed"}') == 1 and s,
                     10, "the failed counter")
    assert delta(after, before, 'augd_jobs_total{result="success"}') == 0
    assert delta(after, before, "augd_job_duration_seconds_count") == 1


def test_every_documented_metric_exists_and_known_labels_start_at_zero(ready):
    code, text, _ = ready.get("/metrics")
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    declared = lambda n: n in types or n.removesuffix("_total") in types or f"{n}_total" in types  # noqa: E731
    for name in METRIC_NAMES:
        assert declared(name), name
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "python_info",
                 "python_gc_objects_collected_total"):
        assert declared(name), name
    samples = scrape(ready)
    for key in ('augd_rejected_inputs_total{reason="bad_header"}', 'augd_rejected_inputs_total{reason="outside_job"}',
                'augd_stage_seconds_count{stage="write"}', 'augd_queue_jobs{state="waiting"}'):
        assert key in samples, key
    documented = set(re.findall(r"`(augd_[a-z_]+)", DOCS.read_text()))
    assert set(METRIC_NAMES) <= documented, set(METRIC_NAMES) - documented
    for name in documented:
        assert declared(name), f"{name} is documented but not exported"


def test_openmetrics_when_asked(ready):
    code, text, headers = ready.get("/metrics", {"Accept": "application/openmetrics-text; version=1.0.0"})
    assert code == 200 and headers["Content-Type"].startswith("application/openmetrics-text")
    assert text.endswith("# EOF\n")
    names = {f.name for f in om_families(text)}
    assert {"augd_jobs", "augd_images", "augd_stage_seconds", "augd_build_info"} <= names


def test_healthz_turns_503_while_the_work_loop_is_stalled_and_200_after(ready):
    d = ready
    assert d.get("/healthz")[0] == 200
    (d.holds / "loop").write_text("")
    try:
        wait_for(lambda: d.get("/healthz")[0] == 503, 30, "/healthz 503 while stalled", on_fail=d.log_tail)
        assert json.loads(d.get("/healthz")[1])["last_tick_seconds_ago"] > 2
    finally:
        (d.holds / "loop").unlink()
    wait_for(lambda: d.get("/healthz")[0] == 200, 30, "/healthz 200 again", on_fail=d.log_tail)


def test_status_landing_page_and_unknown_paths(ready):
    code, body, headers = ready.get("/status")
    st = json.loads(body)
    assert code == 200 and headers["Content-Type"] == "application/json"
    assert st["state"] == "idle" and st["device"] == "CPU" and st["current"] is None
    assert st["queue"] == {"ready": 0, "waiting": 0, "jobs": []}
    assert {j["job"] for j in st["last_jobs"]} >= {"m-plain", "m-rejects", "m-routed"}
    done = next(j for j in st["last_jobs"] if j["job"] == "m-plain")
    assert done["result"] == "done" and done["images"] == 3
    code, body, _ = ready.get("/")
    assert code == 200 and all(p in body for p in ('href="/metrics"', 'href="/healthz"', 'href="/readyz"',
                                                   'href="/status"'))
    assert ready.get("/nope")[0] == 404


# -- bookkeeping on a fresh registry (no daemon) ----------------------------------------------------------------

class _Rej:
    def __init__(self, reason):
        self.reason = reason


class _Outcome:
    def __init__(self, records=(), rejected=None, bytes_read=0, stages=None):
        self.records, self.rejected, self.bytes_read = records, rejected, bytes_read
        self.stage_seconds = stages or {}


def _report(*, written: int, rejected: list[str], records: int, read: int, shards: int) -> JobReport:
    """A JobReport with the figures a Succeeded event carries; the rest is filler."""
    return JobReport(
        augd_version="0", tensorflow_version="0", device="CPU", job="j", input="/in/j", created="", pipeline={},
        pipeline_sha256="", seed=0, classes=(), unlabeled=None,
        inputs=Inputs(seen=written + len(rejected), written=written,
                      rejected_files=tuple(RejectedInput(f"r{i}", r, "") for i, r in enumerate(rejected))),
        records=RecordCounts(written=records, variants=(1,)), shards=(Shard("j-00000-of-00001", records),),
        splits={}, bytes=ByteCounts(read=read, written=shards), graph=GraphInfo(builds=1, traces=1, stage_devices=None),
        timing=Timing.measured(1.0, written, dict.fromkeys(STAGES, 0.0)))


def test_job_tally_settles_with_the_report():
    from augd.daemon import events
    reg = CollectorRegistry()
    m = Metrics(reg, process_collectors=False)
    get = reg.get_sample_value
    assert get("augd_images_total", {"result": "rejected"}) == 0
    assert get("augd_rejected_inputs_total", {"reason": "too_many_pixels"}) == 0
    m.record(events.Started())
    m.record(events.Image(_Outcome(records=(b"a", b"b"), bytes_read=100, stages=dict.fromkeys(STAGES, 0.01))))
    m.record(events.Image(_Outcome(rejected=_Rej("undecodable"), bytes_read=7)))
    assert get("augd_images_total", {"result": "written"}) == 1 and get("augd_records_written_total") == 2
    m.record(events.Succeeded(_report(written=1, rejected=["undecodable", "empty", "empty"], records=2, read=107,
                                      shards=5000), 3.5))
    assert get("augd_images_total", {"result": "rejected"}) == 3
    assert get("augd_rejected_inputs_total", {"reason": "empty"}) == 2
    assert get("augd_rejected_inputs_total", {"reason": "undecodable"}) == 1
    assert get("augd_bytes_read_total") == 107 and get("augd_bytes_written_total") == 5000
    assert get("augd_stage_seconds_count", {"stage": "augment"}) == 1
    assert get("augd_jobs_total", {"result": "success"}) == 1 and get("augd_job_duration_seconds_sum") == 3.5
    assert get("augd_last_success_timestamp_seconds") > 0

