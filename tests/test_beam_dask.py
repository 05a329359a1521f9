"""The Beam executor on a real cluster engine: Beam's DaskRunner over a dask.distributed LocalCluster of two
worker processes on loopback, started here. Before augd's pipeline kept repeated elements once, this job failed
("image 0 of group 0 was counted twice": the DaskRunner computes a side input by running its upstream again in
each task that reads it); with side inputs, every image was processed five times. Now the output is run_job's,
byte for byte, for a split classification job and a VOC detection job, and every image is processed once
(tests/test_beam.py holds the shared fixtures)."""
from __future__ import annotations

import collections
import json
import logging
import os
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("apache_beam")
distributed = pytest.importorskip("dask.distributed")

from augd.job import run_job  # noqa: E402
from augd.job.executors import beam_pipeline as augd_beam  # noqa: E402
from augd.schema import parse_pipeline  # noqa: E402
from tests.annotated import Img, voc_job  # noqa: E402
from tests.test_beam import DETECTION, _compare, run_beam_job, split_job  # noqa: E402,F401 (a fixture)


@pytest.fixture(scope="module")
def cluster():
    """(scheduler address, the two workers' pids, the cluster): a LocalCluster of two single-threaded worker
    processes. dask.distributed sets MALLOC_TRIM_THRESHOLD_ in this process' environment for its workers; it is
    put back afterwards, so later tests' child processes (augd turns its malloc tuning off for a user's MALLOC_*)
    do not inherit it."""
    saved = dict(os.environ)
    try:
        yield from _cluster()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  scheduler_port=0, host="127.0.0.1") as c, distributed.Client(c) as client:
        pids = set(client.run(lambda: __import__("os").getpid()).values())
        assert len(pids) == 2
        yield c.scheduler_address, pids, c


def clients(cluster) -> int:
    """Clients connected to the cluster's scheduler (it runs in this process)."""
    return len(cluster.scheduler.clients)


class CountingProcess(augd_beam._ProcessImage):
    """Leaves a file per image it processes, in `folder` (set before the pipeline is built; it travels to the
    Dask workers in each instance)."""
    folder: str = ""

    def __init__(self, *args):
        super().__init__(*args)
        self.marks = CountingProcess.folder

    def process(self, unit):
        Path(self.marks, f"{unit[0]}-{unit[1]}-{uuid.uuid4().hex}").touch()
        yield from super().process(unit)


def dask_args(address: str) -> list[str]:
    # four partitions, so that both workers get images
    return ["--runner=DaskRunner", f"--dask_client_address={address}", "--dask_npartitions=4"]


def test_a_split_classification_job_on_a_dask_cluster_writes_run_jobs_bytes_processing_each_image_once(
        split_job, cluster, tmp_path, caplog, monkeypatch):
    job, spec, local = split_job
    address, pids, c = cluster
    before = clients(c)
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setattr(CountingProcess, "folder", str(marks))
    monkeypatch.setattr(augd_beam, "_ProcessImage", CountingProcess)
    with caplog.at_level(logging.INFO, logger="augd.job"):
        run_beam_job(str(job), spec, str(tmp_path / "out"), pipeline_args=dask_args(address))
    m = _compare(local, tmp_path / "out" / "job")
    processed = collections.Counter(name.rsplit("-", 1)[0] for name in os.listdir(marks))
    assert len(processed) == 11 and set(processed.values()) == {1}, processed   # every image once, no more
    workers = {w["pid"] for w in m["graph"]["workers"]}
    assert workers <= pids, (workers, pids)                 # the images ran on the cluster's worker processes
    assert sum(w["images"] for w in m["graph"]["workers"]) == 11   # each image once in the report
    assert "on the DaskRunner" in caplog.text
    deadline = time.monotonic() + 30          # the runner's own client is closed, not left to reconnect forever
    while clients(c) > before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert clients(c) == before


def test_a_voc_detection_job_on_a_dask_cluster_writes_run_jobs_bytes(cluster, tmp_path):
    red, green = (230, 30, 30), (30, 220, 30)
    images = [Img(f"im{i}.{'jpg' if i % 3 == 0 else 'png'}", 48 + 2 * i, 64,
                  [("cat", (4 + i, 6, 24 + i, 30), red), ("dog", (34, 10 + i, 58, 40), green)][:1 + i % 2],
                  split="train" if i < 5 else "val") for i in range(7)]
    voc_job(str(tmp_path / "job"), images)
    spec = parse_pipeline(DETECTION)
    run_job(str(tmp_path / "job"), spec, str(tmp_path / "local"))
    run_beam_job(str(tmp_path / "job"), spec, str(tmp_path / "dask"), pipeline_args=dask_args(cluster[0]))
    m = _compare(tmp_path / "local" / "job", tmp_path / "dask" / "job")
    assert m["annotations"]["objects"]["out"] > 0 and (tmp_path / "dask" / "job" / "label_map.pbtxt").exists()
    assert json.loads((tmp_path / "dask" / "job" / "manifest.json").read_text())["graph"]["executor"] == "beam"
