"""augd.data: real job outputs (JPEG, PNG + gzip, raw) loaded as tf.data and trained on with Keras; labels and
pixels against the records read independently (augd.io's reader and parse_example, PIL); resize modes; splits,
boxes, refusals and info on output folders written here with augd's own record and shard functions."""
import hashlib
import io
import json
import math
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

import augd.data
from augd.data import DataError
from augd.io import ShardWriter, make_example, parse_example, read_records
from augd.job import JobOptions, run_job
from augd.schema import parse_pipeline
from tests.jobfiles import make_job

# 24 labeled images of 24 sizes in 3 classes, JPEG and PNG sources, and 1 unlabeled image at the job's root.
LAYOUT = {f"{c}/{i}.{'png' if i % 3 == 0 else 'jpg'}": "png" if i % 3 == 0 else "jpeg"
          for c in ("ant", "bee", "cat") for i in range(8)}
LAYOUT["loose.jpg"] = "jpeg"
CLASSES = ("ant", "bee", "cat")
# name: (output format, compression)
JOBS = {"jpeg": ("jpeg", "none"), "png_gzip": ("png", "gzip"), "raw": ("raw", "none")}


def pipeline(fmt: str, compression: str):
    return parse_pipeline(f"""\
name: loader-test
seed: 3
variants: 1
keep_original: true
output: {{format: {fmt}, shards: 2, compression: {compression}}}
ops:
  - random_flip_left_right: {{}}
""", "loader-test.yaml")


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """{name: output folder} of one real job per JOBS entry, run lazily."""
    root = tmp_path_factory.mktemp("loader")
    make_job(root / "pics", LAYOUT)
    done = {}

    def get(name):
        if name not in done:
            done[name] = run_job(str(root / "pics"), pipeline(*JOBS[name]), str(root / "out"),
                                 JobOptions(name=name, workers=2)).out_dir
        return done[name]

    return get


def writer_order(out_dir: str) -> list[dict]:
    """Every record, parsed by augd.io, in the order the writer made them: shard files are read one after the
    other, and record i sits in shard i % count."""
    names = sorted(n for n in os.listdir(out_dir) if ".tfrecord" in n)
    per_shard = [[parse_example(r) for r in read_records(os.path.join(out_dir, n))] for n in names]
    return [per_shard[i % len(names)][i // len(names)] for i in range(sum(map(len, per_shard)))]


def pixels(ex: dict) -> np.ndarray:
    """A record's image decoded without TensorFlow: numpy for raw, PIL for JPEG and PNG."""
    if ex["image/format"] == "raw":
        return np.frombuffer(ex["image/raw"], np.uint8).reshape(ex["image/height"], ex["image/width"], 3)
    return np.asarray(Image.open(io.BytesIO(ex["image/encoded"])).convert("RGB"))


def elements(ds) -> list:
    return list(ds.as_numpy_iterator())


# --- synthetic outputs, written with augd's own record and shard functions ---

def raw_record(img: np.ndarray, label: int, name: str = "x.png") -> bytes:
    return make_example(encoded=img.tobytes(), fmt="raw", height=img.shape[0], width=img.shape[1], label=label,
                        label_text=CLASSES[label] if label >= 0 else "", filename=name, source_sha256="0" * 64,
                        variant=0, pipeline="t", pipeline_sha256="f" * 64)


def with_boxes(record: bytes, boxes: list, classes: list) -> bytes:
    """The record plus TF object-detection keys; boxes as (ymin, xmin, ymax, xmax)."""
    ex = tf.train.Example.FromString(record)
    for i, key in enumerate(("ymin", "xmin", "ymax", "xmax")):
        ex.features.feature[f"image/object/bbox/{key}"].float_list.value.extend([b[i] for b in boxes])
    ex.features.feature["image/object/class/label"].int64_list.value.extend(classes)
    return ex.SerializeToString()


def fake_output(folder, job: str, shards: dict, *, unlabeled: int = 0, success: bool = True) -> str:
    """An output folder as `augd run` lays it out: shards {stem: [records]} written by ShardWriter (one shard
    per stem: `<stem>-00000-of-00001.tfrecord`, or `stem` itself when it is a whole file name), a manifest
    listing them, _SUCCESS."""
    folder = str(folder)
    os.makedirs(folder)
    listed, labels = [], []
    for stem, recs in shards.items():
        if ".tfrecord" in stem:
            with tf.io.TFRecordWriter(os.path.join(folder, stem)) as w:
                for r in recs:
                    w.write(r)
            name = stem
        else:
            with ShardWriter(folder, stem, 1) as w:
                for i, r in enumerate(recs):
                    w.write(i, r)
            name = os.path.basename(w.paths[0])
        listed.append({"file": name, "records": len(recs)})
        labels += [parse_example(r)["image/class/label"] for r in recs]
    manifest = {
        "job": job, "pipeline": {"name": "t", "output": {"format": "raw"}}, "pipeline_sha256": "f" * 64,
        "classes": [{"label": i, "name": c, "records": labels.count(i)} for i, c in enumerate(CLASSES)],
        "unlabeled": {"records": unlabeled} if unlabeled else None,
        "records": {"written": len(labels), "variants": [0]}, "shards": listed,
        "bytes": {"written": 1000 * len(labels)},
    }
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    if success:
        open(os.path.join(folder, "_SUCCESS"), "w").close()
    return folder


def solid(h: int, w: int, value: int) -> np.ndarray:
    return np.full((h, w, 3), value, np.uint8)


# --- training on a real job ---

@pytest.mark.parametrize("job", ["jpeg", "png_gzip"])
def test_keras_fits_one_epoch_on_a_real_job(outputs, job):
    out = outputs(job)
    labeled = sum(ex["image/class/label"] >= 0 for ex in writer_order(out))
    assert labeled == 48  # 24 labeled images x (original + 1 variant); the root image's 2 records are not
    ds, meta = augd.data.load(out, image_size=(32, 32), batch_size=5, shuffle=True, with_info=True)
    assert ds.cardinality().numpy() == math.ceil(labeled / 5)
    keras = tf.keras
    model = keras.Sequential([
        keras.Input((32, 32, 3)), keras.layers.Rescaling(2.0, offset=-1.0),
        keras.layers.Conv2D(4, 3, activation="relu"), keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(meta.num_classes)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    steps = []
    history = model.fit(ds, epochs=1, verbose=0,
                        callbacks=[keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: steps.append(b))])
    assert len(steps) == math.ceil(labeled / 5) == 10
    assert len(history.history["loss"]) == 1 and np.isfinite(history.history["loss"][0])


# --- what comes out equals what the records hold ---

@pytest.mark.parametrize("job", list(JOBS))
def test_images_and_labels_equal_the_records(outputs, job):
    """Unshuffled, the loader reads the writer's order; each element's label is its record's, and its pixels
    are the record's image (JPEG within decoder rounding: TF and PIL's libjpeg settings differ)."""
    out = outputs(job)
    records = writer_order(out)
    got = elements(augd.data.load(out, image_size=None, batch_size=None, dtype="uint8", unlabeled="keep"))
    assert len(got) == len(records) == 50
    assert [int(label) for _, label in got] == [ex["image/class/label"] for ex in records]
    assert {ex["image/class/label"] for ex in records} == {-1, 0, 1, 2}
    for (image, _), ex in zip(got, records):
        want = pixels(ex)
        assert image.shape == want.shape == (ex["image/height"], ex["image/width"], 3)
        diff = np.abs(image.astype(int) - want)
        if ex["image/format"] == "jpeg":
            assert diff.mean() < 2.5 and diff.max() <= 32, ex["image/filename"]  # a wrong image: mean >> 10
        else:
            assert diff.max() == 0, ex["image/filename"]


def test_unlabeled_records_skipped_by_default_kept_on_request(outputs):
    out = outputs("jpeg")
    labels = [ex["image/class/label"] for ex in writer_order(out)]
    skip = [int(y) for y in augd.data.load(out, image_size=8, batch_size=None).map(lambda x, y: y)]
    keep = [int(y) for y in augd.data.load(out, image_size=8, batch_size=None, unlabeled="keep").map(lambda x, y: y)]
    assert keep == labels and labels.count(-1) == 2
    assert skip == [y for y in labels if y >= 0]
    meta = augd.data.info(out)
    assert (meta.records, meta.unlabeled_records, meta.labeled_records) == (50, 2, 48)


def test_one_hot_labels_use_the_manifests_class_count(outputs):
    out = outputs("png_gzip")
    ints = np.concatenate([y for _, y in elements(augd.data.load(out, image_size=8, unlabeled="keep"))])
    hot = np.concatenate([y for _, y in elements(augd.data.load(out, image_size=8, labels="one_hot",
                                                                unlabeled="keep"))])
    assert hot.shape == (50, 3) and hot.dtype == np.float32
    labeled = ints >= 0
    assert np.array_equal(hot[labeled].argmax(1), ints[labeled]) and np.all(hot[labeled].sum(1) == 1)
    assert np.all(hot[~labeled] == 0) and (~labeled).sum() == 2


@pytest.mark.parametrize("resize", ["stretch", "pad", "crop"])
def test_mixed_sizes_batch_after_resize(outputs, resize):
    out = outputs("jpeg")
    assert len({(ex["image/height"], ex["image/width"]) for ex in writer_order(out)}) == 25  # mixed sizes
    batches = elements(augd.data.load(out, image_size=(24, 40), resize=resize, batch_size=7))
    assert [x.shape for x, _ in batches] == [(7, 24, 40, 3)] * 6 + [(6, 24, 40, 3)]
    assert all(x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1 and x.max() > 0.5 for x, _ in batches)
    u8 = elements(augd.data.load(out, image_size=(24, 40), resize=resize, batch_size=48, dtype="uint8"))
    assert u8[0][0].dtype == np.uint8 and u8[0][0].shape == (48, 24, 40, 3)
    assert np.abs(u8[0][0] / 255.0 - np.concatenate([x for x, _ in batches])).max() <= 0.5 / 255 + 1e-6


def test_pad_and_crop_keep_the_aspect(tmp_path):
    # A 10x40 white bar, letterboxed into 40x40: rows 15..24 white, the rest black. A 20x40 image, red left
    # half, blue right half, centre-cropped to 20x20: columns 10..29 of it, half red, half blue.
    halves = np.concatenate([np.tile([255, 0, 0], (20, 20, 1)), np.tile([0, 0, 255], (20, 20, 1))], 1)
    out = fake_output(tmp_path / "geo", "geo", {"geo": [raw_record(solid(10, 40, 255), 0),
                                                          raw_record(halves.astype(np.uint8), 1)]})
    (bar, _), _ = elements(augd.data.load(out, image_size=40, resize="pad", batch_size=None, dtype="uint8"))
    assert np.all(bar[15:25] == 255) and np.all(bar[:15] == 0) and np.all(bar[25:] == 0)
    _, (crop, _) = elements(augd.data.load(out, image_size=(20, 20), resize="crop", batch_size=None,
                                           dtype="uint8"))
    assert np.all(crop[:, :10] == [255, 0, 0]) and np.all(crop[:, 10:] == [0, 0, 255])
    (stretched, _), _ = elements(augd.data.load(out, image_size=40, batch_size=None, dtype="uint8"))
    assert np.all(stretched == 255)


# --- shuffling ---

def test_shuffle_is_seeded_and_reshuffles_each_epoch(outputs):
    out = outputs("raw")

    def order(ds):  # one epoch as the sequence of image checksums
        return [hashlib.sha1(x.tobytes()).hexdigest() for x, _ in ds.as_numpy_iterator()]

    kw = dict(image_size=None, batch_size=None, dtype="uint8")
    plain = order(augd.data.load(out, **kw))
    a = augd.data.load(out, shuffle=True, seed=7, **kw)
    first, second = order(a), order(a)
    assert sorted(first) == sorted(plain) and first != plain
    assert second != first and sorted(second) == sorted(first)
    assert order(augd.data.load(out, shuffle=True, seed=7, **kw)) == first
    fixed = augd.data.load(out, shuffle=16, seed=7, reshuffle_each_iteration=False, **kw)
    assert order(fixed) == order(fixed) != plain
    # A buffer of 1 leaves the records in order: only the order of the 2 shards changes, epoch by epoch.
    kw["unlabeled"] = "keep"
    plain = order(augd.data.load(out, **kw))
    swapped = [h for pair in zip(plain[1::2], plain[::2]) for h in pair]  # shard 1's record first
    files_only = augd.data.load(out, shuffle=1, seed=7, **kw)
    assert {tuple(order(files_only)) for _ in range(6)} == {tuple(plain), tuple(swapped)}


# --- paths: compression, incomplete folders, splits ---

def test_gzip_shards_are_read_transparently(outputs):
    meta = augd.data.info(outputs("png_gzip"))
    assert meta.compression == "gzip" and all(f.endswith(".tfrecord.gz") for f in meta.shard_files)
    assert len(meta.shard_files) == 2
    glob = augd.data.load(os.path.join(outputs("png_gzip"), "*.tfrecord.gz"), image_size=8, batch_size=None)
    assert len(elements(glob)) == 48


def test_mixed_compression_is_refused(outputs, tmp_path):
    for name in ("jpeg", "png_gzip"):
        src = augd.data.info(outputs(name)).shard_files[0]
        shutil.copy(src, tmp_path)
    with pytest.raises(DataError, match=r"\*\.tfrecord\*: mixes gzip \(\.gz\) and uncompressed shards; allowed"):
        augd.data.load(str(tmp_path / "*.tfrecord*"), image_size=8)


def test_an_incomplete_folder_is_refused(outputs, tmp_path):
    out = str(tmp_path / "half")
    shutil.copytree(outputs("jpeg"), out)
    os.remove(os.path.join(out, "_SUCCESS"))
    for call in (lambda: augd.data.load(out, image_size=8), lambda: augd.data.info(out),
                 lambda: augd.data.load(os.path.join(out, "*.tfrecord"), image_size=8)):
        with pytest.raises(DataError, match=f"^{re.escape(out)}: incomplete output \\(no _SUCCESS\\).*; "
                                            f"allowed: a folder holding _SUCCESS"):
            call()
    with pytest.raises(DataError, match=f"^{re.escape(str(tmp_path))}/nowhere: no such folder or file; "
                                        f"allowed: an augd output"):
        augd.data.load(str(tmp_path / "nowhere"), image_size=8)
    with pytest.raises(DataError, match=r"/\*\.nothing: matches no file; allowed"):
        augd.data.load(str(tmp_path / "*.nothing"), image_size=8)


def test_a_folder_that_is_not_a_whole_augd_output_is_refused(outputs, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "_SUCCESS").touch()
    with pytest.raises(DataError, match=f"^{re.escape(str(bare))}: no manifest.json, so this is not an augd "
                                        f"output folder; allowed: .*a glob"):
        augd.data.info(str(bare))
    (bare / "manifest.json").write_text('{"shards": [{"file": 3}]}')
    with pytest.raises(DataError, match="manifest.json: not an augd manifest .*; allowed: the manifest.json"):
        augd.data.info(str(bare))
    gone = str(tmp_path / "gone")
    shutil.copytree(outputs("jpeg"), gone)
    os.remove(os.path.join(gone, "jpeg-00001-of-00002.tfrecord"))
    with pytest.raises(DataError, match=f"^{re.escape(gone)}: 1 shard\\(s\\) the manifest lists are missing "
                                        f"\\(jpeg-00001-of-00002.tfrecord\\); allowed"):
        augd.data.load(gone, image_size=8)


@pytest.fixture
def split_output(tmp_path):
    """Job "my-pets" (a dash in the name: the split is what follows the job name) in TFDS-style split shards:
    train in 3 shards of 2 records (labels 0, 1, 2), test in 1 shard of 2 (label 2)."""
    train = [raw_record(solid(4, 6, 10 * i), i % 3) for i in range(6)]
    os.makedirs(tmp_path / "stage")
    with ShardWriter(str(tmp_path / "stage"), "my-pets-train", 3) as w:  # the repo's writer, split stem
        for i, r in enumerate(train):
            w.write(i, r)
    out = fake_output(tmp_path / "my-pets", "my-pets",
                      {"my-pets-test": [raw_record(solid(4, 6, 200), 2), raw_record(solid(4, 6, 210), 2)]})
    manifest = json.load(open(os.path.join(out, "manifest.json")))
    for p, n in zip(w.paths, w.records_per_shard):
        shutil.move(p, out)
        manifest["shards"].append({"file": os.path.basename(p), "records": n})
    manifest["classes"] = [{"label": i, "name": c, "records": 2 + 2 * (i == 2)} for i, c in enumerate(CLASSES)]
    json.dump(manifest, open(os.path.join(out, "manifest.json"), "w"))
    return out


def test_split_shards_are_read_by_split(split_output):
    out = split_output
    assert sorted(os.listdir(out))[:4] == ["_SUCCESS", "manifest.json", "my-pets-test-00000-of-00001.tfrecord",
                                           "my-pets-train-00000-of-00003.tfrecord"]
    train, meta = augd.data.load(out, "train", image_size=None, batch_size=None, dtype="uint8", with_info=True)
    assert sorted(int(x[0, 0, 0]) for x, _ in elements(train)) == [0, 10, 20, 30, 40, 50]
    assert (meta.splits, meta.split_records, meta.records) == (("test", "train"), {"test": 2, "train": 6}, 6)
    assert [os.path.basename(f) for f in meta.shard_files] == [f"my-pets-train-0000{i}-of-00003.tfrecord"
                                                               for i in range(3)]
    test = augd.data.load(out, "test", image_size=None, batch_size=None, dtype="uint8")
    assert [(int(x[0, 0, 0]), int(y)) for x, y in elements(test)] == [(200, 2), (210, 2)]
    both = augd.data.load(out, "train+test", image_size=4, batch_size=None)
    assert both.cardinality().numpy() == 8 and len(elements(both)) == 8
    with pytest.raises(DataError, match=f"^{re.escape(out)}: the shards are split into test, train; allowed: "
                                        f"split= one of them, or several joined by \\+ \\(split='test\\+train'\\)"):
        augd.data.load(out, image_size=4)
    with pytest.raises(DataError, match=f"^{re.escape(out)}: no shard of split val; allowed: test, train"):
        augd.data.info(out, "val")
    with pytest.raises(DataError, match=f"^{re.escape(out)}: split='train/x' is not a split name; allowed"):
        augd.data.info(out, "train/x")


def test_split_names_in_a_glob(split_output, tmp_path):
    # With the manifest: a glob reads what it matches, splits as named; split= picks among the matches.
    everything = augd.data.info(os.path.join(split_output, "*.tfrecord"))
    assert everything.splits == ("test", "train") and everything.records == 8
    assert augd.data.info(os.path.join(split_output, "*.tfrecord"), "test").records == 2
    # Foreign shards (no manifest): a split is recognised by its name's suffix, only when asked for.
    foreign = tmp_path / "foreign"
    shutil.copytree(split_output, foreign, ignore=shutil.ignore_patterns("manifest.json"))
    meta = augd.data.info(str(foreign / "*"), "train")
    assert len(meta.shard_files) == 3 and meta.records is None and meta.class_names == ()
    assert len(elements(augd.data.load(str(foreign / "*.tfrecord"), image_size=2, batch_size=None))) == 8
    with pytest.raises(DataError, match="no shard of split val; allowed: split=None, as no shard is named"):
        augd.data.info(str(foreign / "*.tfrecord"), "val")


def test_an_unsplit_job_with_a_dash_in_its_name_has_no_split(tmp_path):
    out = fake_output(tmp_path / "my-pets", "my-pets", {"my-pets": [raw_record(solid(4, 4, 1), 0)]})
    meta = augd.data.info(out)
    assert meta.splits == () and meta.records == 1
    with pytest.raises(DataError, match=f"^{re.escape(out)}: no shard of split pets; allowed: split=None"):
        augd.data.info(out, "pets")


def test_tfds_shard_names_are_splits_too(tmp_path):
    out = fake_output(tmp_path / "tfds", "tfds", {
        "tfds-train.tfrecord-00000-of-00001": [raw_record(solid(4, 4, 1), 0)] * 2,
        "tfds-validation.tfrecord-00000-of-00001": [raw_record(solid(4, 4, 2), 1)]})
    meta = augd.data.info(out, "validation")
    assert meta.splits == ("train", "validation") and meta.records == 1
    assert [int(y) for _, y in elements(augd.data.load(out, "train", image_size=2, batch_size=None))] == [0, 0]


def test_repeat_and_drop_remainder(outputs):
    ds = augd.data.load(outputs("raw"), image_size=4, batch_size=5, drop_remainder=True, repeat=2)
    batches = elements(ds)
    assert ds.cardinality().numpy() == len(batches) == 2 * (48 // 5)
    assert {x.shape for x, _ in batches} == {(5, 4, 4, 3)}


def test_a_folder_of_only_unlabeled_records_needs_unlabeled_keep(tmp_path):
    out = fake_output(tmp_path / "loose", "loose", {"loose": [raw_record(solid(4, 4, 1), -1)] * 3}, unlabeled=3)
    with pytest.raises(DataError, match=f"^{re.escape(out)}: every record is unlabeled .*; allowed: unlabeled='keep'"):
        augd.data.load(out, image_size=4)
    assert [int(y) for _, y in elements(augd.data.load(out, image_size=4, unlabeled="keep", batch_size=None))] \
        == [-1] * 3


# --- detection keys ---

@pytest.fixture
def box_output(tmp_path):
    """Three 20x40 records: two boxes, none, one box."""
    recs = [with_boxes(raw_record(solid(20, 40, 50), 0), [(0.0, 0.0, 1.0, 0.25), (0.5, 0.5, 1.0, 1.0)], [3, 7]),
            raw_record(solid(20, 40, 60), 1),
            with_boxes(raw_record(solid(20, 40, 70), 2), [(0.0, 0.0, 1.0, 1.0)], [5])]
    return fake_output(tmp_path / "det", "det", {"det": recs})


def test_boxes_ragged(box_output):
    (x, target), = list(augd.data.load(box_output, image_size=(20, 40), batch_size=3, boxes="ragged"))
    assert x.shape == (3, 20, 40, 3) and target["label"].numpy().tolist() == [0, 1, 2]
    assert isinstance(target["boxes"], tf.RaggedTensor) and target["boxes"].shape.as_list() == [3, None, 4]
    assert target["boxes"].row_lengths().numpy().tolist() == [2, 0, 1]
    np.testing.assert_allclose(target["boxes"].flat_values, [[0, 0, 1, 0.25], [0.5, 0.5, 1, 1], [0, 0, 1, 1]])
    assert target["labels"].to_list() == [[3, 7], [], [5]]
    one = elements(augd.data.load(box_output, image_size=8, batch_size=None, boxes="ragged", labels=None))
    assert [t["boxes"].shape for _, t in one] == [(2, 4), (0, 4), (1, 4)] and "label" not in one[0][1]


def test_boxes_padded(box_output):
    (_, target), = elements(augd.data.load(box_output, image_size=8, batch_size=3, boxes="padded", max_boxes=3))
    assert target["boxes"].shape == (3, 3, 4) and target["labels"].shape == (3, 3)
    assert target["labels"].tolist() == [[3, 7, -1], [-1, -1, -1], [5, -1, -1]]
    np.testing.assert_allclose(target["boxes"][0], [[0, 0, 1, 0.25], [0.5, 0.5, 1, 1], [-1, -1, -1, -1]])
    assert (target["boxes"][1] == -1).all()         # padding as keras.layers.MaxNumBoundingBoxes pads
    with pytest.raises(tf.errors.InvalidArgumentError, match="more boxes than max_boxes=1"):
        elements(augd.data.load(box_output, image_size=8, boxes="padded", max_boxes=1))


def test_boxes_follow_pad_and_crop(box_output):
    # pad, 20x40 into 40x40: the image fills rows 10..29, so y' = 0.25 + y / 2 and x is unchanged.
    padded = elements(augd.data.load(box_output, image_size=40, resize="pad", batch_size=None, boxes="ragged"))
    np.testing.assert_allclose(padded[0][1]["boxes"], [[0.25, 0, 0.75, 0.25], [0.5, 0.5, 0.75, 1]])
    # crop, 20x40 to 20x20: columns 10..29, so x' = 2x - 0.5, clipped; the first box (x < 0.25) falls outside.
    cropped = elements(augd.data.load(box_output, image_size=20, resize="crop", batch_size=None, boxes="ragged"))
    np.testing.assert_allclose(cropped[0][1]["boxes"], [[0.5, 0.5, 1, 1]])
    assert list(cropped[0][1]["labels"]) == [7]
    np.testing.assert_allclose(cropped[2][1]["boxes"], [[0, 0, 1, 1]])
    stretched = elements(augd.data.load(box_output, image_size=(7, 9), batch_size=None, boxes="ragged"))
    np.testing.assert_allclose(stretched[0][1]["boxes"], [[0, 0, 1, 0.25], [0.5, 0.5, 1, 1]])


# --- info and argument errors ---

def test_info_equals_the_manifest(outputs):
    out = outputs("png_gzip")
    manifest = json.load(open(os.path.join(out, "manifest.json")))
    meta = augd.data.info(out)
    assert meta.job == manifest["job"] == "png_gzip"
    assert meta.class_names == tuple(c["name"] for c in manifest["classes"]) == CLASSES
    assert meta.num_classes == 3
    assert meta.class_counts == {c["name"]: c["records"] for c in manifest["classes"]} == dict.fromkeys(CLASSES, 16)
    assert meta.records == manifest["records"]["written"] == 50
    assert meta.unlabeled_records == manifest["unlabeled"]["records"] == 2
    assert meta.pipeline == manifest["pipeline"]["name"] == "loader-test"
    assert meta.pipeline_sha256 == manifest["pipeline_sha256"]
    assert meta.variants == tuple(manifest["records"]["variants"]) == (0, 1)
    assert meta.image_format == "png" and meta.compression == "gzip"
    assert meta.shard_files == tuple(os.path.join(out, s["file"]) for s in manifest["shards"])
    assert (meta.split, meta.splits, meta.split_records) == (None, (), {})
    assert meta.manifest == manifest
    with open(os.path.join(out, "labels.txt")) as f:
        assert f.read() == "".join(f"{i}:{c}\n" for i, c in enumerate(meta.class_names))


@pytest.mark.parametrize("kwargs,message", [
    (dict(image_size=8, resize="fit"), "resize='fit' is not a mode; allowed: 'stretch', 'pad', 'crop'"),
    (dict(image_size=(0, 8)), r"image_size=\(0, 8\) is not a size; allowed: \(height, width\)"),
    (dict(image_size=None), "image_size=None keeps each image's own size, which cannot be batched; allowed"),
    (dict(image_size=8, unlabeled="drop"), "unlabeled='drop'; allowed: 'auto', 'skip', 'keep'"),
    (dict(image_size=8, labels="onehot"), "labels='onehot' is not a label mode; allowed: 'auto', 'int', "
                                          "'one_hot', None"),
    (dict(image_size=8, bounding_box_format="xyxy"), "bounding_box_format='xyxy' without boxes; allowed"),
    (dict(image_size=8, boxes="ragged", bounding_box_format="yxhw"), "bounding_box_format='yxhw' is not a Keras "
                                                                     "box format; allowed: 'xyxy'"),
    (dict(image_size=8, dtype="int16"), "dtype='int16' is not an image type; allowed: 'float32'"),
    (dict(image_size=8, batch_size=0), "batch_size=0; allowed: an int >= 1, or None"),
    (dict(image_size=8, shuffle=-1), r"shuffle=-1; allowed: False, True"),
    (dict(image_size=8, boxes="dense"), "boxes='dense' is not a box mode; allowed: None, 'ragged', 'padded'"),
    (dict(image_size=8, boxes="padded"), "boxes='padded' with max_boxes=None; allowed: max_boxes= an int >= 1"),
    (dict(image_size=8, max_boxes=4), "max_boxes is given but boxes is not 'padded'; allowed"),
    (dict(image_size=8, repeat=0), "repeat=0; allowed: False, True"),
    (dict(image_size=8, num_classes=0), "num_classes=0; allowed: an int >= 1"),
])
def test_bad_arguments_name_the_path_and_what_is_allowed(outputs, kwargs, message):
    out = outputs("jpeg")
    with pytest.raises(DataError, match=f"^{re.escape(out)}: {message}"):
        augd.data.load(out, **kwargs)


def test_one_hot_of_foreign_shards_needs_num_classes(outputs, tmp_path):
    shutil.copy(augd.data.info(outputs("jpeg")).shard_files[0], tmp_path / "a.tfrecord")
    with pytest.raises(DataError, match="labels='one_hot' needs the number of classes.*allowed: num_classes="):
        augd.data.load(str(tmp_path / "a.tfrecord"), image_size=8, labels="one_hot")
    (_, y), = elements(augd.data.load(str(tmp_path / "a.tfrecord"), image_size=8, labels="one_hot",
                                      num_classes=3, batch_size=100))
    assert y.shape[1] == 3
    with pytest.raises(tf.errors.InvalidArgumentError, match="a label is >= num_classes=2"):
        elements(augd.data.load(str(tmp_path / "a.tfrecord"), image_size=8, labels="one_hot", num_classes=2))
