"""augd.data on a real detection output, as Keras 3 takes it: the loader knows a detection output from its
manifest (no label arguments), gives Keras' {"boxes", "labels"} in "rel_yxyx" (or a format it converts to with
Keras' own converter), Keras' bounding-box layers take a padded batch as it comes, and a small Keras detection
model fits one epoch on it. Truth in the pixels: each object is a solid rectangle of its class's colour, and every
box the loader (and each Keras layer after it) gives must enclose the pixels of that colour, and no more."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

import augd.data
from augd.data import DataError
from augd.job import JobOptions, run_job
from augd.schema import parse_pipeline
from tests.annotated import Img, voc_job

SIZE = 64
COLOURS = {"red": (230, 20, 20), "blue": (20, 20, 230)}   # one object per class per image: a colour is a box
MAX_BOXES = 4
PIPELINE = """name: det-loader
seed: 5
variants: 1
keep_original: true
output: {format: png, shards: 2}
ops:
  - random_flip_left_right: {}
"""


def scene(i: int) -> Img:
    rng = np.random.default_rng(i)
    shapes = []
    for cls in ("red", "blue")[: 1 + i % 2]:
        w, h = (int(v) for v in rng.integers(12, 24, 2))
        x, y = (int(v) for v in rng.integers(0, SIZE - 24, 2))
        if cls == "blue":   # keep the two apart: the blue one in the lower right
            x, y = SIZE - w - x // 3, SIZE - h - y // 3
        shapes.append((cls, (x, y, x + w, y + h), COLOURS[cls]))
    return Img(f"im{i}.png", SIZE, SIZE, shapes, split="train" if i < 6 else "val")


@pytest.fixture(scope="module")
def det(tmp_path_factory):
    """(the --out folder, the detection output in it, class names by label id)."""
    root = tmp_path_factory.mktemp("det")
    voc_job(str(root / "job"), [scene(i) for i in range(8)])
    out = run_job(str(root / "job"), parse_pipeline(PIPELINE), str(root / "out"), JobOptions(name="det")).out_dir
    names = dict(re.findall(r"id: (\d+)\s+name: '(\w+)'", (root / "out" / "det" / "label_map.pbtxt").read_text()))
    return root / "out", out, {int(k): v for k, v in names.items()}


def colour_box(image: np.ndarray, colour) -> np.ndarray | None:
    """(ymin, xmin, ymax, xmax) in pixel edges of the pixels near `colour` (a float image in [0, 1]), or None."""
    hit = np.all(np.abs(image - np.asarray(colour) / 255.0) < 0.12, axis=-1)
    if not hit.any():
        return None
    ys, xs = np.nonzero(hit)
    return np.array([ys.min(), xs.min(), ys.max() + 1, xs.max() + 1], np.float32)


def assert_boxes_on_their_pixels(images, target, names, *, pixels: bool = False, tol: float = 1.5) -> int:
    """Every real box (label >= 0) of a batch on the pixels of its class's colour (within `tol` pixels); every
    colour seen has its box. `pixels`: boxes are in pixels (xyxy), else normalized rel_yxyx. Returns boxes seen."""
    seen = 0
    for image, boxes, labels in zip(np.asarray(images), np.asarray(target["boxes"]), np.asarray(target["labels"])):
        h, w = image.shape[:2]
        found = {}
        for box, label in zip(boxes, labels):
            if label < 0:
                continue
            found[names[int(label)]] = (box[[1, 0, 3, 2]] if pixels else box * [h, w, h, w])
        for name, colour in COLOURS.items():
            truth = colour_box(image, colour)
            assert (truth is None) == (name not in found), (name, truth, found)
            if truth is not None:
                np.testing.assert_allclose(found[name], truth, atol=tol, err_msg=name)
                seen += 1
    return seen


def test_a_detection_output_loads_with_no_label_arguments_in_keras_3s_layout(det):
    _, out, names = det
    ds, meta = augd.data.load(out, "train", image_size=SIZE, batch_size=4, boxes="padded", max_boxes=MAX_BOXES,
                              with_info=True)
    assert meta.detection and meta.bounding_box_format == "rel_yxyx" and augd.data.info(out, "train").detection
    batches = list(ds.as_numpy_iterator())
    assert len(batches) == ds.cardinality().numpy() == 3            # 6 train images x 2 records, by 4
    x, y = batches[0]
    assert x.shape == (4, SIZE, SIZE, 3) and set(y) == {"boxes", "labels"}
    assert y["boxes"].shape == (4, MAX_BOXES, 4) and y["labels"].dtype == np.int32
    assert sum(assert_boxes_on_their_pixels(x, y, names) for x, y in batches) == 6 * 2 * 1.5
    ragged = augd.data.load(out, "validation", image_size=SIZE, batch_size=4, boxes="ragged")
    (x, y), = list(ragged)
    # validation is written as it is: its 2 images once each
    assert isinstance(y["boxes"], tf.RaggedTensor) and sorted(y["labels"].row_lengths().numpy().tolist()) == [1, 2]


def test_bounding_box_format_converts_with_keras_converter(det):
    _, out, names = det
    ds, meta = augd.data.load(out, "train", image_size=SIZE, batch_size=12, boxes="padded", max_boxes=MAX_BOXES,
                              bounding_box_format="xyxy", with_info=True)
    assert meta.bounding_box_format == "xyxy"
    (x, y), = list(ds.as_numpy_iterator())
    assert assert_boxes_on_their_pixels(x, y, names, pixels=True) == 18     # boxes in pixels now
    (_, c), = list(augd.data.load(out, "train", image_size=SIZE, batch_size=12, boxes="padded",
                                  max_boxes=MAX_BOXES, bounding_box_format="center_xywh").as_numpy_iterator())
    real = y["labels"] >= 0
    want = keras.utils.bounding_boxes.convert_format(y["boxes"][real], source="xyxy", target="center_xywh")
    np.testing.assert_allclose(c["boxes"][real], keras.ops.convert_to_numpy(want), atol=1e-4)


#: Keras 3.15.1's RandomCrop shifts boxes along the wrong axes (keras-team/keras#23518, fixed upstream in #23519,
#: in no release yet): up to that version its boxes miss their pixels, which this test expects (strict), so that
#: the release with the fix turns this into an ordinary check.
CROP_BUG = pytest.mark.xfail(tuple(int(v) for v in keras.__version__.split(".")[:3] if v.isdigit()) <= (3, 15, 1),
                             reason="keras-team/keras#23518: RandomCrop moves boxes along the wrong axes",
                             strict=True)


@pytest.mark.parametrize("make,fmt", [
    (lambda f: keras.layers.RandomFlip("horizontal", bounding_box_format=f, seed=1), None),
    # Keras 3.15.1's RandomRotation reads its boxes as xyxy whatever bounding_box_format says: ask augd for xyxy
    (lambda f: keras.layers.RandomRotation(0.04, fill_mode="constant", bounding_box_format=f, seed=2), "xyxy"),
    pytest.param(lambda f: keras.layers.RandomCrop(48, 48, bounding_box_format=f, seed=3), "xyxy", marks=CROP_BUG),
    (lambda f: keras.layers.MaxNumBoundingBoxes(8, bounding_box_format=f), None),
], ids=["RandomFlip", "RandomRotation", "RandomCrop", "MaxNumBoundingBoxes"])
def test_keras_bounding_box_layers_take_a_batch_as_it_comes(det, make, fmt):
    _, out, names = det
    ds, meta = augd.data.load(out, "train", image_size=SIZE, batch_size=4, boxes="padded", max_boxes=MAX_BOXES,
                              bounding_box_format=fmt, with_info=True)
    layer = make(meta.bounding_box_format)
    mapped = ds.map(lambda x, y: layer({"images": x, "bounding_boxes": y}))
    seen = 0
    for batch in mapped.as_numpy_iterator():
        assert set(batch["bounding_boxes"]) >= {"boxes", "labels"}
        tol = 4.0 if isinstance(layer, keras.layers.RandomRotation) else 1.5   # thin turned corners blend away
        seen += assert_boxes_on_their_pixels(batch["images"], batch["bounding_boxes"], names, tol=tol,
                                             pixels=meta.bounding_box_format == "xyxy")
    assert seen > 0
    if isinstance(layer, keras.layers.MaxNumBoundingBoxes):
        assert batch["bounding_boxes"]["boxes"].shape[1:] == (8, 4)


def test_a_small_keras_detection_model_fits_one_epoch(det):
    _, out, names = det
    train, meta = augd.data.load(out, "train", image_size=SIZE, batch_size=4, boxes="padded", max_boxes=MAX_BOXES,
                                 shuffle=True, with_info=True)
    classes = max(names) + 1     # label map ids from 1; 0 stands for "no object" in this toy head
    inputs = keras.Input((SIZE, SIZE, 3))
    h = keras.layers.GlobalAveragePooling2D()(keras.layers.Conv2D(8, 3, strides=2, activation="relu")(inputs))
    boxes = keras.layers.Reshape((MAX_BOXES, 4), name="boxes")(keras.layers.Dense(MAX_BOXES * 4)(h))
    labels = keras.layers.Reshape((MAX_BOXES, classes), name="labels")(keras.layers.Dense(MAX_BOXES * classes)(h))
    model = keras.Model(inputs, {"boxes": boxes, "labels": labels})

    def label_loss(y_true, y_pred):      # padding (-1) is "no object"
        y = keras.ops.where(y_true < 0, 0, y_true)
        return keras.losses.sparse_categorical_crossentropy(y, y_pred, from_logits=True)

    model.compile("adam", loss={"boxes": "mse", "labels": label_loss})
    history = model.fit(train, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all() and len(history.history["loss"]) == 1


def test_a_glob_of_detection_shards_without_one_manifest_is_read_for_its_boxes(det, tmp_path):
    """Shards without a manifest (copied out of their output folder, as foreign shards come) read with boxes= are
    taken for detection records (image label -1) rather than filtered down to nothing."""
    _, out, names = det
    for shard in Path(out).glob("det-train-*.tfrecord"):
        shutil.copy(shard, tmp_path)
    assert augd.data.info(f"{tmp_path}/*.tfrecord").manifest is None
    (x, y), = list(augd.data.load(f"{tmp_path}/*.tfrecord", image_size=SIZE, batch_size=100,
                                  boxes="padded", max_boxes=MAX_BOXES).as_numpy_iterator())
    assert set(y) == {"boxes", "labels"} and len(x) == 12
    assert assert_boxes_on_their_pixels(x, y, names) == 18


def test_the_folder_above_the_outputs_says_which_outputs_it_holds(det, tmp_path):
    root, out, _ = det
    with pytest.raises(DataError, match=re.escape(f"{root}: not an output folder but a folder of 1 output(s): "
                                                  f"{out}; allowed: one of them, e.g. augd.data.load({out!r}")):
        augd.data.load(str(root), image_size=8)
    (tmp_path / "half").mkdir()                      # no output below, and none complete: as before
    with pytest.raises(DataError, match="incomplete output"):
        augd.data.load(str(tmp_path), image_size=8)
