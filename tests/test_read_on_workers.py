"""A warm pool's workers read a big job's annotation files while the parent plans it (ProcessPool.map,
chunked_map): the plan is the one this process reads alone, whatever the files hold (broken XML, a box off its
image, a link out of the job, an orphan, a negative), a worker killed mid-read loses nothing, a chunk a worker
cannot run is run here, and a pool whose workers are still starting is not waited for. Real spawned workers."""
import dataclasses
import logging
import os
import pickle
import signal
import time

import pytest

import augd.job.workers.pool as pool_module
from augd.engine import EngineOptions
from augd.io import scan_job
from augd.job import JobOptions, run_job
from augd.job.units import plan_job
from augd.job.workers.pool import ProcessPool, WorkerError, chunked_map
from augd.schema import parse_pipeline
from tests.annotated import Img, voc_job, yolo_job
from tests.test_executors import output

SPEC = parse_pipeline("name: det\nseed: 3\nvariants: 1\noutput: {format: png, shards: 2}\nops:\n"
                      "  - random_crop: {size: [32, 40], area: [0.5, 1.0]}\n", "det.yaml")


def slow_pids(items):
    """Each item's (item, the pid that ran it), a little slowly (so that a worker can be killed mid-chunk)."""
    time.sleep(0.2)
    return [(i, os.getpid()) for i in items]


def only_here(items):
    """Fails on any process but the one named in the items: a chunk that cannot run on a worker."""
    if os.getpid() != items[0][0]:
        raise RuntimeError("not on a worker")
    return [i[1] * 2 for i in items]


@pytest.fixture(scope="module")
def pool():
    with ProcessPool(2, EngineOptions()) as p:
        deadline = time.monotonic() + 120
        while p.ready_workers() < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        yield p


@pytest.fixture
def small_chunks(monkeypatch):
    """The map's thresholds, low enough for a test job of a few images."""
    monkeypatch.setattr(pool_module, "MAP_MIN_ITEMS", 2)
    monkeypatch.setattr(pool_module, "MAP_CHUNK", 3)


@pytest.fixture(scope="module")
def voc(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("in") / "voc")
    red, blue = (230, 30, 30), (30, 30, 230)
    images = [Img(f"im{i:02d}.{'jpg' if i % 2 else 'png'}", 40 + i, 56,
                  [("cat", (2 + i % 5, 4, 20, 30), red), ("dog", (24, 6, 50, 34), blue)][:1 + i % 2])
              for i in range(14)]
    images.append(Img("negative.png", 40, 40))
    voc_job(root, images, annotate={i.name for i in images} - {"negative.png"})
    ann = os.path.join(root, "Annotations")
    with open(os.path.join(ann, "im03.xml"), "w") as fh:
        fh.write("<annotation><object><name>cat</name>")                     # broken XML
    xml = open(os.path.join(ann, "im04.xml")).read()
    with open(os.path.join(ann, "im04.xml"), "w") as fh:
        fh.write(xml.replace("<xmax>20</xmax>", "<xmax>90</xmax>"))          # a box off its 56-pixel image
    outside = str(tmp_path_factory.mktemp("elsewhere") / "im05.xml")
    os.replace(os.path.join(ann, "im05.xml"), outside)
    os.symlink(outside, os.path.join(ann, "im05.xml"))                      # a link out of the job
    with open(os.path.join(ann, "orphan.xml"), "w") as fh:
        fh.write(xml)                                                        # no image of that name
    return root


def test_the_workers_read_the_annotations_and_the_plan_is_the_one_read_here(voc, pool, small_chunks):
    here = plan_job(voc, SPEC, None, 10 ** 8)
    before = pool.calls
    there = plan_job(voc, SPEC, None, 10 ** 8, chunked_map(pool))
    assert pool.calls - before >= 5          # 14 XMLs in chunks of 3: the workers read them
    assert there.detection.layout == here.detection.layout
    assert there.detection.annotations == here.detection.annotations
    assert there.scan == here.scan and there.groups == here.groups
    rejected = {r.relpath: r for r in there.scan.rejected}
    assert "invalid XML" in rejected["JPEGImages/im03.jpg"].message
    assert "passes the border" in rejected["JPEGImages/im04.png"].message
    assert "outside the job folder" in rejected["JPEGImages/im05.jpg"].message
    assert "missing image" in rejected["Annotations/orphan.xml"].message
    assert len(there.images) == 12           # 15 images, 3 rejected; the negative kept


def test_a_yolo_jobs_labels_are_read_on_the_workers_by_their_images_upright_size(tmp_path, pool, small_chunks):
    """YOLO's boxes are fractions of the image: the worker reads the image's header first (EXIF orientation
    applied, as the scan sees it) and scales by it; bad lines reject their image as they do here."""
    root = str(tmp_path / "yolo")
    images = [Img(f"im{i:02d}.png", 36 + 2 * i, 50, [("cat", (2, 3 + i, 30, 30), (230, 30, 30))]) for i in range(9)]
    images += [Img("negative.png", 40, 40), Img("turned.jpg", 20, 40)]
    yolo_job(root, images)
    from PIL import Image
    exif = Image.Exif()
    exif[0x0112] = 6   # stored 40 wide, shown 20 wide x 40 high
    turned = os.path.join(root, "images", "turned.jpg")
    Image.open(turned).save(turned, exif=exif, quality=95)
    with open(os.path.join(root, "labels", "turned.txt"), "w") as fh:
        fh.write("0 0.5 0.25 0.5 0.25\n")                  # of the upright 20x40: (5, 5, 15, 15)
    with open(os.path.join(root, "labels", "im02.txt"), "w") as fh:
        fh.write("7 0.5 0.5 0.2 0.2\n")                    # no class 7
    with open(os.path.join(root, "labels", "negative.txt"), "w") as fh:
        fh.write("")
    here = plan_job(root, SPEC, None, 10 ** 8)
    before = pool.calls
    there = plan_job(root, SPEC, None, 10 ** 8, chunked_map(pool))
    assert pool.calls - before >= 3
    assert there.detection.layout == here.detection.layout and there.scan == here.scan
    boxes = {rel: [o.box for o in a.objects] for rel, a in there.detection.annotations.items()}
    assert boxes["images/im05.png"] == [pytest.approx((2, 8, 30, 30), abs=1e-3)]   # pixels of its 50x46 image
    assert boxes["images/turned.jpg"] == [pytest.approx((5, 5, 15, 15))]
    rejected = {r.relpath: r.message for r in there.scan.rejected}
    assert "class 7" in rejected["images/im02.png"] and len(there.images) == 10


def test_the_scan_takes_the_headers_the_annotations_read_and_they_are_the_files_own(voc, monkeypatch):
    plan = plan_job(voc, SPEC, None, 10 ** 8)
    assert plan.detection.layout.headers == {}   # not sent to the workers with the annotations
    from augd.annotations.layout import read_job
    layout = read_job(voc)
    assert len(layout.headers) == 15
    from augd.io import jobfs
    reads = []
    real = jobfs.LocalTree.read

    def counted(self, rel, n):
        reads.append(rel)
        return real(self, rel, n)

    monkeypatch.setattr(jobfs.LocalTree, "read", counted)
    taken = scan_job(voc, layout=layout)
    assert reads == []                       # every image's header taken from the layout
    read_again = scan_job(voc, layout=dataclasses.replace(layout, headers={}))
    assert len(reads) == 12 and taken == read_again   # the 3 images the layout rejected are not candidates


def test_a_worker_killed_while_it_reads_loses_no_chunk(pool, small_chunks):
    items = list(range(40))
    futures = pool.map(slow_pids, [items[i:i + 4] for i in range(0, 40, 4)])
    deadline = time.monotonic() + 30
    while not any(w.tasks for w in pool._workers) and time.monotonic() < deadline:
        time.sleep(0.01)
    victim = next(w.process.pid for w in pool._workers if w.tasks)
    restarts = pool.restarts
    os.kill(victim, signal.SIGKILL)
    got = [r for f in futures for r in pickle.loads(f.result(timeout=120))]
    assert [i for i, _ in got] == items      # every item once, in order
    assert pool.restarts == restarts + 1 and victim not in pool.pids()


def test_a_chunk_a_worker_cannot_run_fails_its_future_and_chunked_map_runs_it_here(pool, small_chunks, caplog):
    items = [(os.getpid(), k) for k in range(6)]
    futures = pool.map(only_here, [items[:3], items[3:]])
    with pytest.raises(WorkerError, match="not on a worker"):
        futures[0].result(timeout=60)
    before = pool.calls
    with caplog.at_level(logging.WARNING, logger="augd.job"):
        assert chunked_map(pool)(only_here, items) == [k * 2 for k in range(6)]
    assert pool.calls == before              # every chunk went to the workers, failed there, and ran here
    ran_here = [r.getMessage() for r in caplog.records if "running it here" in r.getMessage()]
    assert sum(int(m.split(" on ")[1].split()[0]) for m in ran_here) == 6   # each item, in its chunk


def test_a_chunk_that_cannot_be_pickled_is_read_here(pool, small_chunks):
    items = [lambda: None, lambda: None, lambda: None]   # lambdas do not pickle
    assert chunked_map(pool)(len_each, items) == [0, 0, 0]


def len_each(items):
    return [0 for _ in items]


def test_a_pool_still_starting_is_not_waited_for(small_chunks):
    with ProcessPool(1, EngineOptions()) as starting:   # its worker is still loading TensorFlow
        assert starting.ready_workers() == 0
        got = chunked_map(starting)(slow_pids, [1, 2, 3])
        assert got == [(i, os.getpid()) for i in (1, 2, 3)] and starting.calls == 0


def test_a_job_planned_on_a_warm_pool_writes_the_bytes_threads_write(voc, pool, small_chunks, tmp_path):
    ref = run_job(voc, SPEC, str(tmp_path / "threads"), JobOptions(workers=2, executor="threads"))
    before = pool.calls
    res = run_job(voc, SPEC, str(tmp_path / "pool"), JobOptions(workers=2, executor="processes"), pool=pool)
    assert pool.calls > before
    (files_t, m_t), (files_p, m_p) = output(ref.out_dir), output(res.out_dir)
    assert files_p == files_t
    assert m_p["annotations"] == m_t["annotations"] and m_p["inputs"] == m_t["inputs"]
