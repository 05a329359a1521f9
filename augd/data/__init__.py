"""augd.data: an augd output as a tf.data.Dataset that `model.fit` takes as it is.

    import augd.data

    train, meta = augd.data.load("datasets/photos", image_size=(224, 224), batch_size=32, shuffle=True,
                                 with_info=True)
    model.fit(train, epochs=10)                 # elements: (float32 [32, 224, 224, 3] in [0, 1], int32 [32])
    meta.class_names, meta.labeled_records      # also augd.data.info("datasets/photos"), without a dataset

API.
    load(path, split=None, *, image_size, resize="stretch", batch_size=32, shuffle=False, seed=0,
         reshuffle_each_iteration=True, drop_remainder=False, labels="auto", num_classes=None, unlabeled="auto",
         dtype="float32", boxes=None, max_boxes=None, bounding_box_format=None, keypoints=None, ignored="keep",
         weights=False, oriented=False, polygons=False, repeat=False, prefetch=True,
         num_parallel_calls=tf.data.AUTOTUNE, with_info=False)
        -> tf.data.Dataset, or (tf.data.Dataset, DatasetInfo) with with_info=True
    info(path, split=None) -> DatasetInfo      # frozen: job, split, splits, class_names, num_classes,
        # class_counts, records, unlabeled_records, labeled_records, split_records, pipeline, pipeline_sha256,
        # variants, image_format, shard_files, compression, manifest (the parsed manifest.json, or None),
        # bounding_box_format ("rel_yxyx" for a detection output, else None), detection (bool)

A detection output (its manifest has an annotations block) is read for its boxes, as Keras 3 and KerasHub take
them:

    train, meta = augd.data.load("datasets/detection", "train", image_size=(256, 256), batch_size=8,
                                 boxes="padded", max_boxes=20, with_info=True)
    # elements: (float32 [8, 256, 256, 3], {"boxes": float32 [8, 20, 4], "labels": int32 [8, 20]})
    flip = keras.layers.RandomFlip("horizontal", bounding_box_format=meta.bounding_box_format)
    train = train.map(lambda x, y: flip({"images": x, "bounding_boxes": y}))

Paths. An output folder (`out/<job>/`, which must hold `_SUCCESS`: a folder without it is refused, as augd
writes it last) reads the shards its manifest.json lists; the folder above it (`out/`, what `augd run --out`
was given) is refused with the outputs it holds. A glob (`"out/photos/*.tfrecord.gz"`, or one file)
reads every file it matches; a matched file whose folder holds a manifest.json but no `_SUCCESS` is refused too.
`.gz` shards are read as GZIP. Paths may be any `tf.io.gfile` URL.

Splits. Shards named `<job>-<split>-00000-of-00004.tfrecord[.gz]` (or TFDS's `<job>-<split>.tfrecord-00000-of-
00004`) belong to `<split>`; `split="train"` reads those, `split="train+validation"` both. An output folder with
split shards and `split=None` is refused, the error listing the splits (reading them all would mix training and
evaluation data unasked); a glob reads what it matches. Without a manifest (foreign shards) a split is found by
its name's suffix.

Elements, as `model.fit` wants them: `(image, label)`.
* image: `image_size=(h, w)` (or an int for a square) with `resize=` "stretch" (every pixel, aspect changed;
  the default), "pad" (aspect kept, the whole image centred on black) or "crop" (aspect kept, the centre,
  covering the whole output). `image_size=None` keeps each image's own size (then `batch_size` must be None).
  Resizing is bilinear with antialiasing. `dtype="float32"` (default: values in [0, 1]; any float dtype) or
  "uint8" (0..255). Always 3 channels. JPEG and PNG records, and raw-mode records (`image/raw`), decode alike.
* label: `labels="int"` (int32 class index), "one_hot" (float32 [num_classes]; the count comes from the
  manifest or labels.txt, or `num_classes=`), or None (elements are the image alone, or (image, boxes)). The
  default "auto" follows the output: None for a detection output (its records carry boxes, not an image
  label, and so are shards without a manifest read with `boxes=`), "int" otherwise.
* Unlabeled records (label -1: images at a job's root) are dropped with `unlabeled="skip"` and kept with "keep"
  (label -1; an all-zero one-hot row). The default "auto": "keep" for a detection output (every record is
  "unlabeled" there), "skip" otherwise. A selection known to hold no labeled record is refused with "skip".
* Boxes (TF object-detection keys `image/object/bbox/{ymin,xmin,ymax,xmax}`, `image/object/class/label`):
  `boxes="ragged"` or "padded" (with `max_boxes=`) turns the target into Keras 3's bounding-box dict {"boxes":
  float32 [n, 4], "labels": int32 [n]} (plus "label", the image's class, when labels is not None). The boxes are
  normalized (ymin, xmin, ymax, xmax), Keras' "rel_yxyx", which DatasetInfo.bounding_box_format names;
  `bounding_box_format=` another of Keras' formats ("xyxy", "rel_xyxy", "center_xywh", ...; absolute ones in
  pixels of the output image) converts them with keras.utils.bounding_boxes.convert_format. Ragged: a batch
  holds tf.RaggedTensors [batch, None, 4] and [batch, None]. Padded: [max_boxes, 4] rows of -1 and labels -1 after
  the real ones, as keras.layers.MaxNumBoundingBoxes pads; a record with more boxes than max_boxes raises when
  read. Keras' layers take a padded batch as it comes: `layer({"images": x, "bounding_boxes": y})`. Boxes follow
  the resize: unchanged by "stretch", shifted and scaled by "pad", and with "crop" clipped to the crop, those
  left without area dropped. Records without boxes give n = 0. The default `boxes=None` ignores them.
* Keypoints (a keypoint job's `image/object/keypoint/{y,x,visibility}`, K points per object in the order of
  the manifest's annotations.keypoints.names): `keypoints="padded"` (with `boxes="padded"`) adds "keypoints":
  float32 [max_boxes, K, 2] normalized (y, x) and "keypoint_visibility": int32 [max_boxes, K] (COCO's 0 not
  visible, 1 occluded, 2 visible), zeros for padding and for points not visible; normalized whatever
  `bounding_box_format` the boxes are converted to. They follow the resize as the
  boxes do; with "crop" a point outside the crop becomes not visible.
* Oriented boxes (records with an oriented object: DOTA, YOLO-OBB, a tool's rotated rectangles; docs/records.md):
  `oriented=True` (with boxes) adds "oriented_boxes": float32 [n, 4, 2], each box's 4 corners as normalized (y, x)
  (image/object/obb/*: clockwise as shown, the top-most first; a record without the keys gives each box's own
  corners, from its top-left). Padded: [max_boxes, 4, 2], -1 after the real ones, as the boxes. They follow the
  resize as the boxes do, never clipped; whatever `bounding_box_format` the boxes are converted to, they stay
  normalized (y, x).
* Polygons (a job with annotations.polygon_keys: docs/records.md#polygons): `polygons=True` (with boxes) adds
  "polygons": a tf.RaggedTensor [n, (rings), (vertices), 2] of normalized (y, x) vertices, what shows of each object
  (no ring for an object with none, and in records of a job that did not ask). Padded: [max_boxes, ...], objects
  with no ring after the real ones; a batch is ragged in its rings and vertices either way. They follow the resize
  as the oriented boxes do.
* Ignored objects (docs/records.md: an object that still shows, but less of itself than the job's
  min_visibility, written with image/object/weight 0): `ignored="keep"` (the default) keeps them among the boxes,
  `ignored="skip"` leaves them out. `weights=True` adds "weights": float32 [n] (padded: [max_boxes], 0 for the
  padding), each box's image/object/weight (0 ignored, a mixup blend's share, else 1; 1 where a record has no
  weights), for a loss that weighs its boxes: with it, an ignored box counts neither as an object nor as
  background. Keep is the default because Keras 3's box dicts and KerasHub's detectors read no weight: kept, an
  ignored sliver is learned as the object it is (as Albumentations and YOLOv5 keep remnants); skipped, its pixels
  would be learned as background, which the records were written to avoid.

Order. `shuffle=False` (default) reads the shards round robin, which is the writer's own (seeded, classes
interleaved) order for up to 64 shards. `shuffle=True` shuffles the shard files and the records (a buffer of
every record, up to ~256 MB of them; an int sets the buffer size), from `seed` (default 0; None: different each
run), again each epoch unless `reshuffle_each_iteration=False`. `batch_size` (default 32; None: unbatched),
`drop_remainder`, `repeat` (False; True: forever; an int: that many epochs), `prefetch` (True: AUTOTUNE; an int;
False) and `num_parallel_calls` (AUTOTUNE) do what tf.data's own arguments do. When the manifest tells the
number of elements, the dataset's cardinality is set (and checked while reading), so Keras shows steps per epoch.

Errors are DataError (a ValueError): "<path>: what is wrong; allowed: what is".
"""
from __future__ import annotations

import dataclasses
import math
import numbers

import tensorflow as tf

from augd.data import images
from augd.data.source import STORED_BOX_FORMAT, DataError, DatasetInfo, resolve

__all__ = ["DataError", "DatasetInfo", "info", "load"]

AUTOTUNE = tf.data.AUTOTUNE
#: shuffle=True buffers every record, or as many as fit in this many serialized bytes.
SHUFFLE_BYTES = 256 * 1024 * 1024
#: shuffle=True's buffer when the records' size is unknown (foreign shards).
SHUFFLE_RECORDS = 10_000
LABEL_MODES = ("auto", "int", "one_hot", None)
UNLABELED = ("auto", "skip", "keep")
BOX_MODES = (None, "ragged", "padded")
KEYPOINT_MODES = (None, "padded")
#: What becomes of an ignored object (image/object/weight 0): kept among the boxes, or skipped.
IGNORED = ("keep", "skip")
#: Keras 3's box formats, which keras.utils.bounding_boxes converts between (the records store STORED_BOX_FORMAT).
BOX_FORMATS = ("xyxy", "yxyx", "xywh", "center_xywh", "center_yxhw", "rel_xyxy", "rel_yxyx", "rel_xywh",
               "rel_center_xywh")


def info(path: str, split: str | None = None) -> DatasetInfo:
    """What `load(path, split)` reads: classes, counts, pipeline, shard files. Reads no record."""
    return resolve(path, split)


def load(path: str, split: str | None = None, *, image_size, resize: str = "stretch", batch_size: int | None = 32,
         shuffle: bool | int = False, seed: int | None = 0, reshuffle_each_iteration: bool = True,
         drop_remainder: bool = False, labels: str | None = "auto", num_classes: int | None = None,
         unlabeled: str = "auto", dtype="float32", boxes: str | None = None, max_boxes: int | None = None,
         bounding_box_format: str | None = None, keypoints: str | None = None, ignored: str = "keep",
         weights: bool = False, oriented: bool = False, polygons: bool = False, repeat: bool | int = False,
         prefetch: bool | int = True, num_parallel_calls: int = AUTOTUNE, with_info: bool = False):
    """A tf.data.Dataset of (image, label), or of (image, boxes) from a detection output, from an augd output
    folder or a glob of shards; with `with_info=True`, (dataset, DatasetInfo). See the module docstring for every
    argument."""
    path = str(path)
    size = _image_size(path, image_size, batch_size)
    out_dtype = _dtype(path, dtype)
    _check_args(path, resize=resize, batch_size=batch_size, labels=labels, unlabeled=unlabeled, boxes=boxes,
                max_boxes=max_boxes, repeat=repeat, prefetch=prefetch, num_parallel_calls=num_parallel_calls,
                ignored=ignored, weights=weights, oriented=oriented, polygons=polygons)
    box_format = _box_format(path, bounding_box_format, boxes)
    meta = resolve(path, split)
    # A detection output's records carry boxes and image label -1: its manifest says so, and shards without one
    # (a glob over several outputs, foreign shards) read for their boxes are taken to be such records too.
    detection = meta.detection or (meta.manifest is None and boxes is not None)
    if labels == "auto":
        labels = None if detection else "int"
    if unlabeled == "auto":
        unlabeled = "keep" if detection else "skip"
    if boxes is not None:
        meta = dataclasses.replace(meta, bounding_box_format=box_format)
    k = _num_keypoints(path, meta, keypoints, boxes)
    classes = _num_classes(path, meta, labels, num_classes)
    if unlabeled == "skip" and meta.labeled_records == 0:
        raise DataError(f"{path}: every record is unlabeled (label -1: images at the job's root), and "
                        f"unlabeled='skip' drops them; allowed: unlabeled='keep'")
    ds = _records(meta, _shuffle_buffer(path, meta, shuffle), seed, reshuffle_each_iteration, num_parallel_calls)
    ds = ds.map(lambda r: tf.io.parse_single_example(r, images.features(boxes is not None, k > 0,
                                                                         labels == "one_hot", oriented,
                                                                         polygons)),
                num_parallel_calls=num_parallel_calls)
    if unlabeled == "skip":
        ds = ds.filter(lambda f: f["image/class/label"] >= 0)
    element = _element_fn(path, size, resize, out_dtype, labels, classes, boxes, max_boxes, k, box_format,
                          ignored, weights, oriented, polygons)
    ds = ds.map(element, num_parallel_calls=num_parallel_calls)
    count = meta.records if unlabeled == "keep" else meta.labeled_records
    if count is not None:  # checked while reading: a wrong count raises rather than mislead Keras
        ds = ds.apply(tf.data.experimental.assert_cardinality(count))
    if batch_size is not None:
        ds = (ds.ragged_batch(batch_size, drop_remainder=drop_remainder) if boxes == "ragged"
              else ds.batch(batch_size, drop_remainder=drop_remainder))
    if repeat is not False:
        ds = ds.repeat(None if repeat is True else repeat)
    if prefetch is not False:
        ds = ds.prefetch(AUTOTUNE if prefetch is True else prefetch)
    return (ds, meta) if with_info else ds


def _records(meta: DatasetInfo, buffer: int, seed, reshuffle: bool, parallel: int) -> tf.data.Dataset:
    """Serialized records. Shards are read round robin, one record each in turn: the writer put record i into
    shard i % count, so with every shard in the cycle this is the writer's order."""
    files = tf.data.Dataset.from_tensor_slices(list(meta.shard_files))
    if buffer:
        files = files.shuffle(len(meta.shard_files), seed=seed, reshuffle_each_iteration=reshuffle)
    kind = "GZIP" if meta.compression == "gzip" else ""
    ds = files.interleave(lambda f: tf.data.TFRecordDataset(f, compression_type=kind),
                          cycle_length=min(len(meta.shard_files), 64), block_length=1,
                          num_parallel_calls=parallel, deterministic=True)
    if buffer:  # before parsing: the buffer holds compact serialized records, not decoded images
        ds = ds.shuffle(buffer, seed=seed, reshuffle_each_iteration=reshuffle)
    return ds


def _num_keypoints(path: str, meta: DatasetInfo, keypoints, boxes) -> int:
    """K, the points per object, from the manifest (0 with keypoints=None); DataError when it cannot be known."""
    if keypoints not in KEYPOINT_MODES:
        raise DataError(f"{path}: keypoints={keypoints!r} is not a keypoint mode; allowed: None, 'padded'")
    if keypoints is None:
        return 0
    if boxes != "padded":
        raise DataError(f"{path}: keypoints='padded' with boxes={boxes!r}; allowed: keypoints='padded' with "
                        f"boxes='padded' (a row of points per padded box)")
    found = ((meta.manifest or {}).get("annotations") or {}).get("keypoints")
    if not found:
        raise DataError(f"{path}: keypoints='padded', but the manifest names no keypoints (not a keypoint job's "
                        f"output); allowed: keypoints=None")
    return len(found["names"])


def _element_fn(path, size, resize, dtype, labels, classes, boxes, max_boxes, k=0, box_format=STORED_BOX_FORMAT,
                ignored="keep", weights=False, oriented=False, polygons=False):
    too_many = (f"{path}: a record has more boxes than max_boxes={max_boxes}; allowed: max_boxes >= the most "
                f"boxes in one record")
    wrong_k = f"{path}: a record's keypoint lists are not {k} points per box"
    wrong_w = f"{path}: a record's image/object/weight list is not one weight per box"
    wrong_o = f"{path}: a record's image/object/obb/* lists are not one corner per box"
    wrong_p = f"{path}: a record's image/object/polygon/* counts do not add up to its boxes, rings and vertices"

    def element(f):
        image = images.decode(f)
        transform = (1.0, 0.0, 1.0, 0.0)
        if size is not None:
            image, transform = images.resize(tf.cast(image, tf.float32), size, resize)
        image = _to_dtype(image, dtype, resized=size is not None)
        label = _label(f, labels, classes, path)
        if boxes is None:
            return image if label is None else (image, label)
        mode = resize if size is not None else "stretch"
        b, c = images.boxes_of(f)
        turned = [images.fit_oriented(images.oriented_of(f, b, wrong_o), transform, mode)] if oriented else []
        turned += [images.fit_polygons(images.polygons_of(f, b, wrong_p), transform, mode)] if polygons else []
        points = list(images.keypoints_of(f, k, wrong_k)) if k else []
        b, c, w, *more = images.fit_boxes(b, c, transform, mode, images.weights_of(f, wrong_w), *turned, *points)
        if ignored == "skip":   # an ignored object's weight is 0 (a blend's share never is)
            b, c, w, *more = (images.select(t, w > 0.0) for t in (b, c, w, *more))
        turned, points = more[:len(turned)], more[len(turned):]
        rings = turned.pop() if polygons else None
        if box_format != STORED_BOX_FORMAT:
            b = _convert_boxes(b, box_format, image)
        if boxes == "padded":
            b, c = images.pad_boxes(b, c, max_boxes, too_many)
            w = tf.ensure_shape(tf.pad(w, [[0, max_boxes - tf.shape(w)[0]]]), [max_boxes])
        target = {"boxes": b, "labels": c}
        if oriented:
            target["oriented_boxes"] = images.pad_oriented(turned[0], max_boxes) if boxes == "padded" else turned[0]
        if polygons:
            target["polygons"] = images.pad_polygons(rings, max_boxes) if boxes == "padded" else rings
        if weights:
            target["weights"] = w
        if k:
            p, v = images.fit_keypoints(*points, transform, mode)
            target["keypoints"], target["keypoint_visibility"] = images.pad_keypoints(p, v, max_boxes, k)
        if label is not None:
            target["label"] = label
        return image, target

    return element


def _convert_boxes(b: tf.Tensor, box_format: str, image: tf.Tensor) -> tf.Tensor:
    """Normalized (ymin, xmin, ymax, xmax) boxes in Keras' `box_format`, absolute ones in the output image's
    pixels, by Keras' own converter (imported here: only a conversion needs Keras 3, which TensorFlow's import
    does not load under TF_USE_LEGACY_KERAS)."""
    from keras.utils import bounding_boxes  # here: loads Keras 3 (see above)
    h, w = tf.unstack(tf.shape(image)[:2])
    return bounding_boxes.convert_format(b, source=STORED_BOX_FORMAT, target=box_format, height=h, width=w)


def _to_dtype(image: tf.Tensor, dtype: tf.DType, *, resized: bool) -> tf.Tensor:
    """uint8 pixels, or float32 0..255 after a resize, to `dtype` (floats in [0, 1])."""
    if dtype == tf.uint8:
        return tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8) if resized else image
    return tf.cast(tf.cast(image, tf.float32) / 255.0, dtype)


def _label(f: dict, mode: str | None, classes: int | None, path: str):
    """The element's label: the image's class (int), its one-hot row, or for a record a partner op mixed (mixup,
    cutmix, mosaic: augd/mix/label and augd/mix/weight) the soft one-hot of its sources' classes by their
    shares."""
    if mode is None:
        return None
    label = tf.cast(f["image/class/label"], tf.int32)
    if mode == "int":
        return label
    mixed = tf.cast(tf.sparse.to_dense(f["augd/mix/label"]), tf.int32)
    share = tf.sparse.to_dense(f["augd/mix/weight"])
    check = tf.debugging.assert_less(tf.concat([label[tf.newaxis], mixed], 0), classes,
                                     message=f"{path}: a label is >= num_classes={classes}; allowed: labels in "
                                             f"0..num_classes-1")
    with tf.control_dependencies([check]):
        hard = tf.one_hot(label, classes)  # label -1 (kept unlabeled): all zeros
        soft = tf.reduce_sum(tf.one_hot(mixed, classes) * share[:, tf.newaxis], axis=0)
        return tf.cond(tf.size(mixed) > 0, lambda: soft, lambda: hard)


# --- argument checks: each error names the path, the bad value and what is allowed ---

def _image_size(path, image_size, batch_size):
    if image_size is None:
        if batch_size is not None:
            raise DataError(f"{path}: image_size=None keeps each image's own size, which cannot be batched; "
                            f"allowed: image_size=(height, width), or batch_size=None")
        return None
    size = (image_size, image_size) if isinstance(image_size, numbers.Integral) else image_size
    try:
        h, w = size
        ok = all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0 for v in (h, w))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise DataError(f"{path}: image_size={image_size!r} is not a size; allowed: (height, width) of positive "
                        f"ints, an int for a square, or None")
    return int(h), int(w)


def _dtype(path, dtype) -> tf.DType:
    try:
        d = tf.as_dtype(dtype)
    except TypeError:
        d = None
    if d is None or not (d == tf.uint8 or d.is_floating):
        raise DataError(f"{path}: dtype={dtype!r} is not an image type; allowed: 'float32' (or another float "
                        f"type: values in [0, 1]) or 'uint8'")
    return d


def _count_ok(v, *, allow_none=False, allow_bool=False, autotune=False) -> bool:
    if v is None:
        return allow_none
    if isinstance(v, bool):
        return allow_bool
    return isinstance(v, numbers.Integral) and (v >= 1 or (autotune and v == AUTOTUNE))


def _check_args(path, *, resize, batch_size, labels, unlabeled, boxes, max_boxes, repeat, prefetch,
                num_parallel_calls, ignored="keep", weights=False, oriented=False, polygons=False):
    def refuse(what, allowed):
        raise DataError(f"{path}: {what}; allowed: {allowed}")

    if resize not in images.RESIZE_MODES:
        refuse(f"resize={resize!r} is not a mode", ", ".join(map(repr, images.RESIZE_MODES)))
    if labels not in LABEL_MODES:
        refuse(f"labels={labels!r} is not a label mode", "'auto', 'int', 'one_hot', None")
    if unlabeled not in UNLABELED:
        refuse(f"unlabeled={unlabeled!r}", "'auto', 'skip', 'keep'")
    if boxes not in BOX_MODES:
        refuse(f"boxes={boxes!r} is not a box mode", "None, 'ragged', 'padded'")
    if boxes == "padded" and not _count_ok(max_boxes):
        refuse(f"boxes='padded' with max_boxes={max_boxes!r}", "max_boxes= an int >= 1")
    if boxes != "padded" and max_boxes is not None:
        refuse("max_boxes is given but boxes is not 'padded'", "max_boxes only with boxes='padded'")
    if ignored not in IGNORED:
        refuse(f"ignored={ignored!r}", ", ".join(map(repr, IGNORED)))
    if weights not in (False, True):
        refuse(f"weights={weights!r}", "False, True (with boxes)")
    if weights and boxes is None:
        refuse("weights=True without boxes", "weights=True with boxes='ragged' or 'padded'")
    if oriented not in (False, True):
        refuse(f"oriented={oriented!r}", "False, True (with boxes)")
    if oriented and boxes is None:
        refuse("oriented=True without boxes", "oriented=True with boxes='ragged' or 'padded'")
    if polygons not in (False, True):
        refuse(f"polygons={polygons!r}", "False, True (with boxes)")
    if polygons and boxes is None:
        refuse("polygons=True without boxes", "polygons=True with boxes='ragged' or 'padded'")
    if not _count_ok(batch_size, allow_none=True):
        refuse(f"batch_size={batch_size!r}", "an int >= 1, or None (unbatched)")
    if not _count_ok(repeat, allow_bool=True):
        refuse(f"repeat={repeat!r}", "False, True (forever) or an int >= 1 (epochs)")
    if not _count_ok(prefetch, allow_bool=True):
        refuse(f"prefetch={prefetch!r}", "True (AUTOTUNE), False or an int >= 1")
    if not _count_ok(num_parallel_calls, autotune=True):
        refuse(f"num_parallel_calls={num_parallel_calls!r}", "tf.data.AUTOTUNE or an int >= 1")


def _box_format(path: str, box_format, boxes) -> str:
    if box_format is None:
        return STORED_BOX_FORMAT
    if boxes is None:
        raise DataError(f"{path}: bounding_box_format={box_format!r} without boxes; allowed: bounding_box_format "
                        f"with boxes='ragged' or 'padded'")
    if not isinstance(box_format, str) or box_format.lower() not in BOX_FORMATS:
        raise DataError(f"{path}: bounding_box_format={box_format!r} is not a Keras box format; allowed: "
                        f"{', '.join(map(repr, BOX_FORMATS))}")
    return box_format.lower()


def _shuffle_buffer(path: str, meta: DatasetInfo, shuffle) -> int:
    """0 for no shuffle; True: every record, or as many as fit in SHUFFLE_BYTES."""
    if shuffle is False or shuffle == 0 and not isinstance(shuffle, bool):
        return 0
    if shuffle is True:
        written = (meta.manifest or {}).get("records", {}).get("written")
        size = (meta.manifest or {}).get("bytes", {}).get("written")
        if meta.records is None or not written or not size:
            return meta.records or SHUFFLE_RECORDS
        return max(1, min(meta.records, SHUFFLE_BYTES // math.ceil(size / written)))
    if isinstance(shuffle, numbers.Integral) and shuffle >= 1:
        return int(shuffle)
    raise DataError(f"{path}: shuffle={shuffle!r}; allowed: False, True (a buffer of every record, up to "
                    f"~{SHUFFLE_BYTES >> 20} MB) or an int >= 1 (the buffer size)")


def _num_classes(path: str, meta: DatasetInfo, labels, num_classes) -> int | None:
    if num_classes is not None:
        if not _count_ok(num_classes):
            raise DataError(f"{path}: num_classes={num_classes!r}; allowed: an int >= 1, or None (from the "
                            f"manifest or labels.txt)")
        return num_classes
    if labels == "one_hot" and not meta.num_classes:
        raise DataError(f"{path}: labels='one_hot' needs the number of classes, and no manifest.json or "
                        f"labels.txt gives one; allowed: num_classes= an int >= 1")
    return meta.num_classes or None
