"""`--executor auto` by what the job costs (augd/job/executors/choice.py): the model's rules on hosts of every
shape, its estimates of the shipped chains, and real `augd run` processes that say what they picked and why."""
import dataclasses
import json
import os
import re
import subprocess
import sys

import cv2
import numpy as np
import pytest

from augd.job.executors import ExecutorKind, Host, JobCost, choose
from augd.job.executors.choice import (WORKER_BYTES, estimate_folder, job_cost, processes_seconds,
                                       threads_seconds)
from augd.schema import builtin_pipelines, load_pipeline, parse_pipeline
from tests.jobfiles import make_job, pipeline_yaml

GB = 1 << 30
TWO = Host(cores=2, workers=2, memory_available=16 * GB)


def cost(records, ms=5.0, gil_ms=4.0):
    """`records` of `ms` CPU each, `gil_ms` of it under the GIL (threads keep ms / gil_ms cores busy at most)."""
    return JobCost(images=records, records=records, record_seconds=ms / 1e3, gil_seconds=gil_ms / 1e3)


def test_other_kinds_are_what_was_asked_and_unknown_names_say_what_is_allowed():
    kinds = [k.value for k in ExecutorKind]   # the registry: a new executor is asked for like the others
    for kind in kinds[1:]:
        c = choose(kind, cost(10), Host(cores=16, workers=3, gpu=True))
        assert (c.kind.value, c.workers, c.why, c.requested) == (kind, 3, "asked for", kind)
    with pytest.raises(ValueError, match=re.escape(f"executor must be one of {kinds}; got 'gpu'")):
        choose("gpu", cost(10), TWO)


def test_auto_runs_threads_where_processes_cannot_pay():
    big = cost(10**6)
    assert choose("auto", big, Host(cores=16, workers=16, gpu=True)).why == "a GPU host: one process owns the device"
    one = choose("auto", big, Host(cores=1, workers=1))
    assert one.kind is ExecutorKind.THREADS and "on 1 usable core" in one.why
    assert choose("auto", big, Host(cores=8, workers=1)).kind is ExecutorKind.THREADS
    short = choose("auto", big, Host(cores=8, workers=8, memory_available=WORKER_BYTES + 1))
    assert short.kind is ExecutorKind.THREADS and "holds fewer than 2 worker processes" in short.why


def test_auto_switches_once_from_threads_to_processes_as_the_job_grows():
    """Threads for a job too small to pay a second process' start, processes from some size on, and never back:
    each record costs processes less than threads (more cores than one GIL keeps busy)."""
    picks = [choose("auto", cost(n), TWO).kind for n in (1, 10, 100, 1000, 10**4, 10**5)]
    assert picks[0] is ExecutorKind.THREADS and picks[-1] is ExecutorKind.PROCESSES
    first = picks.index(ExecutorKind.PROCESSES)
    assert all(p is ExecutorKind.PROCESSES for p in picks[first:])
    c = choose("auto", cost(10**4), TWO)
    assert c.workers == 2 and dict(c.estimates)["processes x2"] < dict(c.estimates)["threads"]
    assert "10000 records x 5.0 ms CPU (estimated): processes ~" in c.why
    assert threads_seconds(cost(10**4), TWO) == pytest.approx(2.5 + 10**4 * 0.005 / 1.25)   # 5 / 4 cores
    # a costlier record tips the balance sooner
    n = next(n for n in range(1, 10**5, 10) if choose("auto", cost(n, 3.0, 2.4), TWO).kind is ExecutorKind.PROCESSES)
    assert choose("auto", cost(n, 20.0, 16.0), TWO).kind is ExecutorKind.PROCESSES


def test_a_chain_whose_work_leaves_the_gil_free_stays_on_threads():
    """A record that holds the GIL for a third of its CPU keeps 2 cores busy on threads: processes would only add
    a second import and each record's trip between processes, at any size. On 4 cores they pay again."""
    for n in (300, 3000, 30000, 300000):
        assert choose("auto", cost(n, 12.0, 4.0), TWO).kind is ExecutorKind.THREADS
    four = Host(cores=4, workers=4, memory_available=16 * GB)
    assert choose("auto", cost(30000, 12.0, 4.0), four).kind is ExecutorKind.PROCESSES


def test_auto_starts_no_more_processes_than_pay_for_their_imports():
    """--workers 8 on 2 cores: 8 processes would import TensorFlow 4 times over on each core; auto takes 2. 16
    cores and memory for 3 workers: 3."""
    assert choose("auto", cost(10**5), Host(cores=2, workers=8, memory_available=16 * GB)).workers == 2
    assert choose("auto", cost(10**5), Host(cores=16, workers=16, memory_available=3 * WORKER_BYTES)).workers == 3
    host = Host(cores=2, workers=8)
    assert processes_seconds(cost(10**4), host, 8) > processes_seconds(cost(10**4), host, 2)


def test_a_warm_pool_has_paid_its_start_and_this_process_engine_its_import():
    warm = choose("auto", cost(50), Host(cores=4, workers=4, warm_workers=3))
    assert (warm.kind, warm.workers) == (ExecutorKind.PROCESSES, 3)
    assert "(a pool of 3 worker processes is running)" in warm.why
    ready = Host(cores=2, workers=2, engine_ready=True)
    assert threads_seconds(cost(100), ready) < threads_seconds(cost(100), TWO)
    daemon = choose("auto", None, Host(cores=2, workers=6, memory_available=16 * GB))
    assert (daemon.kind, daemon.workers) == (ExecutorKind.PROCESSES, 6)   # the daemon's configured workers
    assert daemon.served_by(None).kind is ExecutorKind.THREADS
    assert daemon.served_by(None).why == "worker processes could not start"
    assert daemon.served_by(6).to_dict() == {"requested": "auto", "executor": "processes", "workers": 6,
                                             "why": "the daemon's warm pool", "estimated_seconds": {}}
    dask = choose("dask", None, Host(cores=2, workers=6))   # an executor with workers of its own keeps its choice
    assert dask.served_by(None) == dask


def test_the_chain_estimate_follows_its_pixel_work():
    """More pixel passes cost more; colour: fast folds the colour ops into one; a crop to 224x224 bounds what the
    chain after it costs; an original record costs a decode and an encode; every shipped pipeline has a cost."""
    base = parse_pipeline(pipeline_yaml(variants=2, keep_original=False), "t.yaml")
    fast = parse_pipeline(pipeline_yaml(variants=2, keep_original=False).replace("name: t", "name: t\ncolour: fast"),
                          "t.yaml")
    one = lambda spec: job_cost(spec, 10, 100_000, 1_000_000).record_seconds  # noqa: E731
    assert one(fast) < one(base)
    # the seed chain's exact colour ops run outside the GIL (threads keep 2 cores busy), its fast ones do not
    seed = load_pipeline(builtin_pipelines()["seed-classifier"])
    fast_seed = dataclasses.replace(seed, colour="fast")
    ratio = lambda c: c.record_seconds / c.gil_seconds  # noqa: E731
    assert ratio(job_cost(seed, 10, 100_000)) > 2 > ratio(job_cost(fast_seed, 10, 100_000))
    assert ratio(job_cost(seed, 10, 100_000, annotated=True)) < ratio(job_cost(seed, 10, 100_000))
    assert job_cost(base, 10, 100_000).records == 20
    heavy, seed = (load_pipeline(builtin_pipelines()[n]) for n in ("geometric-heavy", "seed-classifier"))
    assert one(heavy) < one(seed)          # 8 crops of 224x224 against 5 full-size records of 1 Mpx
    for name, path in builtin_pipelines().items():
        c = job_cost(load_pipeline(path), 100, 100_000)
        assert 0.0005 < c.record_seconds < 0.1, name


def _shard(path, sizes) -> None:
    """A plain TFRecord file of records of these sizes (TFRecord's framing, written by hand)."""
    from augd.io.lite import masked_crc
    with open(path, "wb") as fh:
        for n in sizes:
            head = n.to_bytes(8, "little")
            fh.write(head + masked_crc(head) + b"\1" * n + masked_crc(b"\1" * n))


def test_the_folder_estimate_counts_images_and_their_bytes_and_reads_no_pixel(tmp_path):
    """Images by name (split folders other than train as they are: one record each), TFRecord shards by their
    records, however small (a 40-record records job was estimated at 0 records); a file of zeros is no shard."""
    spec = parse_pipeline(pipeline_yaml(variants=3, keep_original=True), "t.yaml")
    make_job(tmp_path / "job", {f"train/a/{i}.jpg": "jpeg" for i in range(6)})
    make_job(tmp_path / "job", {f"val/a/{i}.jpg": "jpeg" for i in range(2)})
    (tmp_path / "job" / "train" / "a" / "notes.xml").write_text("<annotation/>")
    (tmp_path / "job" / "zeros.bin").write_bytes(b"\0" * 2_000_000)
    c = estimate_folder(str(tmp_path / "job"), spec)
    assert (c.images, c.records) == (8, 6 * 4 + 2)
    (tmp_path / "rec").mkdir()
    _shard(tmp_path / "rec" / "coco_train.record-00000-of-00001", [5000] * 30)
    _shard(tmp_path / "rec" / "coco_val.record-00000-of-00001", [5000] * 10)
    c = estimate_folder(str(tmp_path / "rec"), spec, sample=25)   # 25 records walked, the rest by their bytes
    assert (c.images, c.records) == (40, 30 * 4 + 10) and c.annotated


def test_a_records_job_moves_objects_where_its_first_record_holds_them(tmp_path, monkeypatch):
    """A classification shard (TF-slim's, an augd classification output) moves no object: its threads hold the GIL
    for its pixels' Python alone, where the OD API's records (boxes, a DeepLab mask) carry annotations' work; a
    first record that cannot be read for its keys (not an Example, compressed, past the peek's bound) counts as
    annotated, as before."""
    import tensorflow as tf

    def example(**feats):
        def f(v):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v])) if isinstance(v, bytes) else \
                tf.train.Feature(float_list=tf.train.FloatList(value=v)) if isinstance(v, list) else \
                tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))
        return tf.train.Example(features=tf.train.Features(feature={k.replace("__", "/"): f(v) for k, v in
                                                                     feats.items()})).SerializeToString()
    jpeg = cv2.imencode(".jpg", np.full((60, 80, 3), 90, np.uint8))[1].tobytes()
    slim = example(image__encoded=jpeg, image__format=b"jpeg", image__class__label=3)
    od = example(image__encoded=jpeg, image__format=b"jpeg", image__object__bbox__xmin=[0.1],
                 image__object__bbox__ymin=[0.1], image__object__bbox__xmax=[0.5], image__object__bbox__ymax=[0.5])
    deeplab = example(image__encoded=jpeg, image__segmentation__class__encoded=jpeg)
    spec = load_pipeline(dict(builtin_pipelines())["seed-classifier"])
    costs = {}
    for name, records in (("slim", [slim] * 8), ("od", [od] * 8), ("deeplab", [deeplab] * 8), ("slim_then_od",
                                                                                               [slim, od])):
        (tmp_path / name).mkdir()
        with tf.io.TFRecordWriter(str(tmp_path / name / "train.tfrecord")) as w:
            for r in records:
                w.write(r)
        costs[name] = estimate_folder(str(tmp_path / name), spec)
    assert not costs["slim"].annotated and costs["od"].annotated and costs["deeplab"].annotated
    assert not costs["slim_then_od"].annotated   # the first record says: a sample, as the bytes are
    assert costs["slim"].gil_seconds < costs["od"].gil_seconds and costs["slim"].records == 8 * 5
    (tmp_path / "gz").mkdir()
    with tf.io.TFRecordWriter(str(tmp_path / "gz" / "train.tfrecord"), "GZIP") as w:
        w.write(slim)
    assert estimate_folder(str(tmp_path / "gz"), spec).annotated   # compressed: its keys are not read
    monkeypatch.setattr("augd.job.executors.choice.RECORD_PEEK_BYTES", len(slim) - 1)
    assert estimate_folder(str(tmp_path / "slim"), spec).annotated   # past the bound: not read


def test_a_tiled_job_is_estimated_by_its_images_tiles_read_from_their_headers(tmp_path):
    """Tiles come in whole numbers per image: the folder estimate counts them on its images' headers (flat
    images compress to a few bytes, which no bytes-to-pixels guess turns into their size), and the plan's cost
    counts each image's tiles for each of its variants."""
    from augd.job.executors.choice import plan_cost
    from augd.job.units import plan_job
    spec = parse_pipeline(pipeline_yaml(variants=2, keep_original=True).replace(
        "ops:", "tile: {size: 640, overlap: 0.2, full_image: 1024}\nops:"), "t.yaml")
    (tmp_path / "job" / "a").mkdir(parents=True)
    # 1300 x 700: 3 x 2 tiles and the whole image; 300 x 300: one tile, itself the whole image
    for i, (h, w) in enumerate([(700, 1300), (300, 300), (700, 1300)]):
        cv2.imwrite(str(tmp_path / "job" / "a" / f"{i}.jpg"), np.full((h, w, 3), 40 * i, np.uint8))
    records = (7 + 1 + 7) * 3
    assert estimate_folder(str(tmp_path / "job"), spec).records == records
    assert plan_cost(plan_job(str(tmp_path / "job"), spec, None, 10 ** 8)).records == records
    untiled = parse_pipeline(pipeline_yaml(variants=2, keep_original=True), "t.yaml")
    assert estimate_folder(str(tmp_path / "job"), untiled).records == 3 * 3


def test_the_daemon_s_one_choice_per_job_diverts_a_job_by_its_files(tmp_path):
    """for_job (the daemon's only chooser): a job of at least Divert's min_files files goes to its executor, any
    other (and every job without a Divert) to the daemon's own choice, as it is."""
    from augd.job.executors import Choice, Divert, ExecutorKind, for_job
    local = Choice(ExecutorKind.PROCESSES, 2, "the daemon's warm pool")
    make_job(tmp_path / "big", {f"a/{i}.jpg": "jpeg" for i in range(6)})
    make_job(tmp_path / "small", {f"a/{i}.jpg": "jpeg" for i in range(2)})
    divert = Divert(ExecutorKind.BEAM, 5)
    big = for_job(local, str(tmp_path / "big"), divert)
    assert (big.kind, big.requested, big.workers) == (ExecutorKind.BEAM, "beam", 2)
    assert for_job(local, str(tmp_path / "small"), divert) is local
    assert for_job(local, str(tmp_path / "big"), None) is local
    assert for_job(local, str(tmp_path / "small"), Divert(ExecutorKind.BEAM)).kind is ExecutorKind.BEAM


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """120 smooth 640x480 JPEGs: 600 records of the seed chain, enough that processes pay on 2 cores."""
    root = tmp_path_factory.mktemp("choice") / "photos"
    rng = np.random.default_rng(0)
    for i in range(120):
        folder = root / "train" / ("a" if i % 2 else "b")
        folder.mkdir(parents=True, exist_ok=True)
        img = cv2.resize(rng.integers(0, 255, (12, 16, 3), dtype=np.uint8), (640, 480), interpolation=cv2.INTER_CUBIC)
        (folder / f"{i}.jpg").write_bytes(cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes())
    return root


def _run(job, out, *flags, pipeline="seed-classifier"):
    r = subprocess.run([sys.executable, "-m", "augd", "run", str(job), "-p", str(pipeline), "-o", str(out),
                        *flags], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(out, os.path.basename(str(job)), "manifest.json")) as fh:
        return json.load(fh)["graph"], r.stderr


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="auto runs threads on one core")
def test_augd_run_says_what_auto_picked_and_why(photos, tmp_path):
    """A real `augd run` with no executor flag: the 600-record photo job of the seed chain with `colour: fast`
    (its Python holds the GIL) goes to worker processes, started before the plan (the choice is the command's,
    from the files' bytes); a 2-image job stays on threads. Each says so in the manifest (graph.choice) and in
    one log line."""
    fast = tmp_path / "seed-fast.yaml"
    fast.write_text(open(builtin_pipelines()["seed-classifier"]).read().replace("colour: exact", "colour: fast"))
    graph, err = _run(photos, tmp_path / "big", pipeline=fast)
    assert graph["executor"] == "processes" and len(graph["workers"]) == 2
    choice = graph["choice"]
    assert (choice["requested"], choice["executor"], choice["workers"]) == ("auto", "processes", 2)
    assert choice["why"].startswith("600 records x ") and set(choice["estimated_seconds"]) == \
        {"threads", "processes x2"}
    assert "executor processes x2 (auto): 600 records x" in err
    small = tmp_path / "small"
    make_job(small, {"train/a/x.jpg": "jpeg", "train/b/y.png": "png"})
    graph, err = _run(small, tmp_path / "small-out", "--workers", "2")
    assert graph["executor"] == "threads" and graph["choice"]["executor"] == "threads"
    assert "10 records x" in graph["choice"]["why"] and "executor threads x2 (auto)" in err
    graph, _ = _run(small, tmp_path / "asked", "--executor", "processes")
    assert graph["choice"]["why"] == "asked for" and graph["executor"] == "processes"
