"""`augd run`'s job end to end, in process (augd.job.run_job): labels, the record schema read back by the seeds'
reader, pixels against what augd meant to write, variant 0 passthrough, rejects, shards, manifest, failures.

One job folder of every source kind is run three times with the same pipeline and seed (jpeg, png and raw
output) and the outputs are compared with each other and with the sources. The CLI is in test_run_cli.py.
"""
import hashlib
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

import augd
from augd.errors import CancelCause, FailureReason, JobCancelled, JobFailed
from augd.io import parse_example
from augd.job import Cancel, JobOptions, JobWatch, run_job
from augd.job.report import SCHEMA_VERSION
from augd.stages import STAGES
from augd.schema import parse_pipeline
from tests.jobfiles import (BAD, PASSTHROUGH, make_job, pipeline_yaml, psnr, records, seed_reader, shard_files,
                      upright_rgb)

# 20 good images of 20 sizes in three classes (one in a sub-folder), 6 bad files, 2 hidden ones.
LAYOUT = {
    "F603/a.jpg": "jpeg", "F603/b.jpg": "jpeg", "F603/c.jpg": "jpeg_progressive", "F603/d.png": "png",
    "F603/e.jpg": "jpeg", "F603/f.jpg": "jpeg", "F603/g.jpg": "jpeg",
    "F603/trunc.jpg": "truncated", "F603/notes.txt": "text", "F603/.DS_Store": "random",
    "F663N/a.jpg": "jpeg", "F663N/b.png": "png", "F663N/gray.jpg": "gray", "F663N/rgba.png": "rgba",
    "F663N/rotated.jpg": "exif6", "F663N/c.jpg": "jpeg", "F663N/d.jpg": "jpeg",
    "F663N/noise.jpg": "random", "F663N/bomb.png": "bomb", "F663N/corrupt.png": "corrupt_png",
    "cat/x.bmp": "bmp", "cat/y.gif": "gif", "cat/z.webp": "webp", "cat/sub/deep.jpg": "jpeg", "cat/k.jpg": "jpeg",
    "cat/l.png": "png", "cat/empty.jpg": "empty",
    ".trash/old.jpg": "jpeg",
}
CLASSES = ["F603", "F663N", "cat"]  # sorted: upper case before lower case
HIDDEN = {r for r in LAYOUT if any(part.startswith(".") for part in r.split("/"))}
REJECTED = {r: BAD[k] for r, k in LAYOUT.items() if k in BAD and r not in HIDDEN}
GOOD = {r: k for r, k in LAYOUT.items() if r not in HIDDEN and r not in REJECTED}
VARIANTS = [0, 1, 2]


def spec(**kw):
    return parse_pipeline(pipeline_yaml(**kw), "test.yaml")


def by_key(out_dir):
    """{(filename, variant): parsed record}; also checks that no (filename, variant) is written twice."""
    out = {}
    for rec in records(out_dir):
        ex = parse_example(rec)
        key = (ex["image/filename"], ex["augd/variant"])
        assert key not in out, f"{key} written twice"
        out[key] = ex
    return out


def pixels(ex) -> np.ndarray:
    h, w = ex["image/height"], ex["image/width"]
    if ex["image/format"] == "raw":
        return np.frombuffer(ex["image/raw"], np.uint8).reshape(h, w, 3)
    return tf.io.decode_image(ex["image/encoded"], channels=3).numpy()


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    root = tmp_path_factory.mktemp("in") / "train"
    make_job(root, LAYOUT)
    return str(root)


@pytest.fixture(scope="module")
def runs(job, tmp_path_factory):
    """The same pipeline and seed with jpeg, png and raw output: {fmt: JobResult}."""
    out = tmp_path_factory.mktemp("out")
    return {fmt: run_job(job, spec(fmt=fmt), str(out / fmt), JobOptions(workers=2)) for fmt in ("jpeg", "png", "raw")}


@pytest.fixture(scope="module")
def parsed(runs):
    return {fmt: by_key(r.out_dir) for fmt, r in runs.items()}


def test_every_good_image_gives_one_record_per_variant(parsed):
    for fmt, recs in parsed.items():
        assert set(recs) == {(r, v) for r in GOOD for v in VARIANTS}, fmt


def test_labels_from_class_folders_and_labels_txt(runs, parsed):
    with open(os.path.join(runs["jpeg"].out_dir, "labels.txt")) as f:
        assert f.read() == "0:F603\n1:F663N\n2:cat\n"
    for (rel, _v), ex in parsed["jpeg"].items():
        cls = rel.split("/")[0]
        assert (ex["image/class/label"], ex["image/class/text"]) == (CLASSES.index(cls), cls), rel


def test_unlabeled_folder_label_minus_one_and_gzip_shards(tmp_path):
    make_job(tmp_path / "loose", {"a.jpg": "jpeg", "b.png": "png", "c.jpg": "gray"})
    result = run_job(str(tmp_path / "loose"), spec(compression="gzip", shards=2), str(tmp_path / "out"))
    files = shard_files(result.out_dir)
    assert [os.path.basename(p) for p in files] == ["loose-00000-of-00002.tfrecord.gz",
                                                     "loose-00001-of-00002.tfrecord.gz"]
    for p in files:
        with open(p, "rb") as f:
            assert f.read(2) == b"\x1f\x8b", "not gzip"
    got = list(tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator())
    assert len(got) == 9 == result.report.records.written
    examples = [parse_example(r) for r in got]
    assert {(e["image/class/label"], e["image/class/text"]) for e in examples} == {(-1, "")}
    assert result.report.classes == () and result.report.unlabeled.images == 3
    images = [img for img, _ in tf.data.TFRecordDataset(files, "GZIP").map(seed_reader)]
    assert len(images) == 9


@pytest.mark.parametrize("fmt", ["jpeg", "png"])
def test_seed_reader_parses_and_decodes_every_record(runs, parsed, fmt):
    files = shard_files(runs[fmt].out_dir)
    ds = tf.data.TFRecordDataset(files).map(seed_reader)
    got = [(img.numpy(), int(label)) for img, label in ds]
    want = [parse_example(r) for r in records(runs[fmt].out_dir)]
    assert len(got) == len(want) == runs[fmt].report.records.written
    for (img, label), ex in zip(got, want):
        assert img.shape == (ex["image/height"], ex["image/width"], 3)
        assert label == ex["image/class/label"]
    formats = {ex["image/format"] for ex in want}
    assert formats == ({"jpeg", "png"}), formats  # PNG sources' variant 0 keeps its PNG bytes in jpeg output


def test_png_and_raw_hold_identical_pixels_and_raw_round_trips(parsed):
    for key, raw in parsed["raw"].items():
        assert "image/encoded" not in raw and raw["image/format"] == "raw"
        h, w = raw["image/height"], raw["image/width"]
        assert len(raw["image/raw"]) == h * w * 3 and raw["image/channels"] == 3
        assert hashlib.sha256(raw["image/raw"]).hexdigest() == raw["image/key/sha256"]
        np.testing.assert_array_equal(pixels(parsed["png"][key]), pixels(raw), err_msg=str(key))


def test_jpeg_output_is_close_to_the_raw_pixels(parsed):
    for key, raw in parsed["raw"].items():
        ex = parsed["jpeg"][key]
        assert (ex["image/height"], ex["image/width"]) == (raw["image/height"], raw["image/width"])
        assert psnr(pixels(ex), pixels(raw)) > 30, key


def test_augmented_variants_differ_from_the_original(parsed):
    png = parsed["png"]
    changed = [rel for rel in GOOD if not np.array_equal(pixels(png[rel, 1]), pixels(png[rel, 0]))
               or not np.array_equal(pixels(png[rel, 2]), pixels(png[rel, 0]))]
    assert len(changed) == len(GOOD)


@pytest.mark.parametrize("fmt", ["jpeg", "png"])
def test_variant0_is_the_source_bytes_for_rgb_jpeg_and_png(job, parsed, fmt):
    for rel, kind in GOOD.items():
        with open(os.path.join(job, rel), "rb") as f:
            data = f.read()
        for v in VARIANTS:
            assert parsed[fmt][rel, v]["image/source_id"] == hashlib.sha256(data).hexdigest()
        ex = parsed[fmt][rel, 0]
        assert ex["image/key/sha256"] == hashlib.sha256(ex["image/encoded"]).hexdigest()
        if kind in PASSTHROUGH:
            assert ex["image/encoded"] == data, rel
            assert ex["image/format"] == ("png" if kind == "png" else "jpeg")
        else:
            assert ex["image/encoded"] != data and ex["image/format"] == fmt, rel


@pytest.mark.parametrize("kind", ["gray", "rgba", "exif6", "bmp", "gif", "webp"])
def test_variant0_of_other_sources_is_reencoded_upright_rgb(job, parsed, kind):
    (rel,) = [r for r, k in GOOD.items() if k == kind]
    want = upright_rgb(os.path.join(job, rel))
    if kind == "exif6":
        with Image.open(os.path.join(job, rel)) as stored:  # PIL's size is (width, height)
            assert stored.size == want.shape[:2] and stored.size[0] != stored.size[1], "fixture not on its side"
    png = parsed["png"][rel, 0]
    got = pixels(png)
    assert got.shape == want.shape == (png["image/height"], png["image/width"], 3)
    if kind in ("gray", "exif6"):  # JPEG sources: two decoders may round a little differently
        assert np.abs(got.astype(int) - want).mean() < 2, kind
    else:
        np.testing.assert_array_equal(got, want)
    assert psnr(pixels(parsed["jpeg"][rel, 0]), want) > 30


def test_rejected_files_listed_with_reasons_and_the_rest_written(runs):
    m = runs["jpeg"].report.to_dict()
    listed = {r["path"]: r for r in m["inputs"]["rejected_files"]}
    assert {p: r["reason"] for p, r in listed.items()} == REJECTED
    for r in listed.values():  # messages for people: no TF graph plumbing
        assert len(r["message"]) > 10 and not any(s in r["message"] for s in ("{{", "[[", "]]", "Op:")), r
    assert "JPEG" in listed["F603/trunc.jpg"]["message"], listed["F603/trunc.jpg"]
    assert "40000" in listed["F663N/bomb.png"]["message"]
    inputs = m["inputs"]
    assert (inputs["seen"], inputs["written"], inputs["rejected"]) == (len(GOOD) + len(REJECTED), len(GOOD),
                                                                       len(REJECTED))
    assert inputs["seen"] == inputs["written"] + inputs["rejected"]
    assert m["records"]["written"] == inputs["written"] * len(VARIANTS) == sum(s["records"] for s in m["shards"])
    assert m["records"]["variants"] == VARIANTS


def test_shard_count_names_and_interleaved_classes(runs):
    result = runs["jpeg"]
    files = shard_files(result.out_dir)
    assert [os.path.basename(p) for p in files] == [f"train-0000{i}-of-00003.tfrecord" for i in range(3)]
    per_shard = []
    for p in files:
        labels = [parse_example(r)["image/class/label"] for r in tf.data.TFRecordDataset(p).as_numpy_iterator()]
        per_shard.append(labels)
        assert set(labels) == {0, 1, 2}, os.path.basename(p)
        assert labels != sorted(labels), f"{os.path.basename(p)}: records are grouped by class, not shuffled"
    counts = [len(x) for x in per_shard]
    assert [s.records for s in result.report.shards] == counts
    assert [s.file for s in result.report.shards] == [os.path.basename(p) for p in files]
    assert max(counts) - min(counts) <= 1


def test_manifest_fields(job, runs):
    result = runs["jpeg"]
    with open(os.path.join(result.out_dir, "manifest.json")) as f:
        m = json.load(f)
    # manifest.json is the report's serialisation, keys in order, its schema version first.
    assert m == result.report.to_dict() and list(m) == list(result.report.to_dict())
    assert list(m)[:2] == ["schema_version", "augd_version"] and m["schema_version"] == SCHEMA_VERSION == 1
    s = spec(fmt="jpeg")
    assert (m["augd_version"], m["tensorflow_version"]) == (augd.__version__, tf.__version__)
    assert m["device"] == "CPU" or m["device"].startswith("GPU")
    assert m["pipeline"] == s.normalized() and m["seed"] == 11
    canon = json.dumps(m["pipeline"], sort_keys=True, separators=(",", ":")).encode()
    assert m["pipeline_sha256"] == s.sha256 == hashlib.sha256(canon).hexdigest()
    for ex in by_key(result.out_dir).values():
        assert (ex["augd/pipeline"], ex["augd/pipeline_sha256"]) == ("t", s.sha256)
    want_classes = []
    for label, name in enumerate(CLASSES):
        n = sum(r.startswith(name + "/") for r in GOOD)
        want_classes.append({"label": label, "name": name, "images": n, "records": n * len(VARIANTS),
                             "rejected": sum(r.startswith(name + "/") for r in REJECTED)})
    assert m["classes"] == want_classes
    # 20 sizes, one trace: the graph's signature takes any height and width.
    sizes = {(ex["image/height"], ex["image/width"]) for (r, v), ex in by_key(result.out_dir).items() if v == 0}
    assert len(sizes) == 20
    choice = m["graph"].pop("choice")
    assert m["graph"] == {"builds": 1, "traces": 1,
                          "stage_devices": {"decode": "CPU", "augment": "CPU (OpenCV)", "encode": "CPU"},
                          "executor": "threads", "workers": [{"pid": os.getpid(), "builds": 1, "traces": 1,
                                                              "threads": 2}]}
    # a small job in a process that has its engine already: threads, by the estimates, which it gives
    assert {k: choice[k] for k in ("requested", "executor", "workers")} == {"requested": "auto",
                                                                           "executor": "threads", "workers": 2}
    est = choice["estimated_seconds"]
    assert "records x" in choice["why"] and est["threads"] < est["processes x2"]
    shard_bytes = sum(os.path.getsize(p) for p in shard_files(result.out_dir))
    assert m["bytes"]["written"] == shard_bytes
    read_in_full = [r for r in LAYOUT if r in GOOD or REJECTED.get(r) == "undecodable"]
    assert m["bytes"]["read"] == sum(os.path.getsize(os.path.join(job, r)) for r in read_in_full)
    t = m["timing"]
    assert t["wall_seconds"] > 0 and t["images_per_second"] > 0
    assert 0 < t["first_record_seconds"] < t["wall_seconds"]
    assert list(t["stage_seconds"]) == list(STAGES) == ["read", "decode", "augment", "encode", "write"]
    assert all(t["stage_seconds"][k] > 0 for k in STAGES), t["stage_seconds"]


def test_variants_zero_still_stores_the_source_bytes(tmp_path):
    """A plain conversion job (no augmented copy) is exactly the seeds' gfile writer: no generation loss."""
    layout = make_job(tmp_path / "conv", {"a.jpg": "jpeg", "b.png": "png", "c.jpg": "gray", "d.jpg": "truncated"})
    result = run_job(str(tmp_path / "conv"), spec(variants=0, keep_original=True), str(tmp_path / "out"))
    got = by_key(result.out_dir)
    assert set(got) == {("a.jpg", 0), ("b.png", 0), ("c.jpg", 0)}
    assert {r.relpath: r.reason for r in result.report.inputs.rejected_files} == {"d.jpg": "undecodable"}
    for rel in ("a.jpg", "b.png"):
        with open(tmp_path / "conv" / rel, "rb") as f:
            assert got[rel, 0]["image/encoded"] == f.read(), f"{rel} ({layout[rel]}) was re-encoded"


def _raise_after(n):
    seen = []

    def on_image(outcome):
        seen.append(outcome)
        if len(seen) == n:
            raise RuntimeError("injected failure mid-write")
    return on_image


def test_failure_mid_write_leaves_no_output(job, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="injected"):
        run_job(job, spec(), str(out), JobOptions(workers=2), JobWatch(on_image=_raise_after(6)))
    assert os.listdir(out) == [], "neither the destination nor the temp folder may remain"
    assert run_job(job, spec(), str(out), JobOptions(workers=2)).report.inputs.written == len(GOOD)
    assert os.listdir(out) == ["train"]


def test_cancel_mid_write_leaves_no_output_and_says_who_asked(job, tmp_path):
    cancel = Cancel()
    out = tmp_path / "out"
    with pytest.raises(JobCancelled) as err:
        run_job(job, spec(), str(out), JobOptions(workers=2),
                JobWatch(on_image=lambda _o: cancel.set(CancelCause.TIMEOUT), cancel=cancel))
    assert err.value.reason is FailureReason.CANCELLED and err.value.cause is CancelCause.TIMEOUT
    assert not cancel.set(CancelCause.SHUTDOWN) and cancel.cause is CancelCause.TIMEOUT  # the first cause counts
    assert os.listdir(out) == []


def test_existing_output_fails_before_the_graph_is_built(job, runs):
    from augd.engine import Engine
    engine = Engine()
    with pytest.raises(JobFailed, match="--overwrite") as err:
        run_job(job, spec(fmt="jpeg"), os.path.dirname(runs["jpeg"].out_dir), engine=engine)
    assert err.value.reason is FailureReason.OUTPUT_EXISTS
    assert engine.builds == 0


def test_no_decodable_image_fails_and_leaves_nothing(tmp_path):
    make_job(tmp_path / "bad", {"a.jpg": "truncated", "b.jpg": "truncated", "c.txt": "text"})
    with pytest.raises(JobFailed, match="could be decoded") as err:
        run_job(str(tmp_path / "bad"), spec(), str(tmp_path / "out"))
    assert err.value.reason is FailureReason.NO_VALID_INPUT
    assert os.listdir(tmp_path / "out") == []


@pytest.mark.parametrize("fails", [False, True])
def test_a_long_lived_engine_keeps_one_graph_the_last_jobs(job, tmp_path, monkeypatch, fails):
    """A long-lived process (the daemon) keeps the last job's graph for a next job of the same pipeline (no build,
    no trace), and no other: a job of another pipeline frees it (it lives in reference cycles, so they are
    collected), whether the job committed or failed."""
    import weakref

    from augd.engine import Engine
    graphs = []

    class Watching(Engine):
        def compile(self, spec):
            compiled = super().compile(spec)
            graphs.append(weakref.ref(compiled.graph))
            return compiled

    engine = Watching()
    if fails:
        with pytest.raises(RuntimeError, match="injected"):
            run_job(job, spec(), str(tmp_path / "out"), JobOptions(workers=2), JobWatch(on_image=_raise_after(3)),
                    engine)
    else:
        run_job(job, spec(), str(tmp_path / "out"), JobOptions(workers=2), engine=engine)
    again = run_job(job, spec(), str(tmp_path / "again"), JobOptions(workers=2), engine=engine)
    assert len(graphs) == 1 and graphs[0]() is not None
    assert (again.report.graph.builds, again.report.graph.traces) == (0, 0)
    other = run_job(job, spec(fmt="png"), str(tmp_path / "other"), JobOptions(workers=2), engine=engine)
    assert len(graphs) == 2 and graphs[0]() is None and graphs[1]() is not None
    assert (other.report.graph.builds, other.report.graph.traces) == (1, 1)
