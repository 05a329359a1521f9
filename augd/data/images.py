"""Graph functions of the loader: parse a record, decode it, bring it to a fixed size, move its boxes along."""
from __future__ import annotations

import tensorflow as tf

from augd.io.records import DETECTION_FEATURES, FEATURES, OBB_KEYS, POLYGON_KEYS

__all__ = ["BOX_KEYS", "KEYPOINT_KEYS", "RESIZE_MODES", "WEIGHT_KEY", "boxes_of", "decode", "features", "fit_boxes",
           "fit_keypoints", "fit_oriented", "fit_polygons", "keypoints_of", "oriented_of", "pad_boxes",
           "pad_keypoints", "pad_oriented", "pad_polygons", "polygons_of", "resize", "select", "weights_of"]

RESIZE_MODES = ("stretch", "pad", "crop")
#: TF object-detection API keys: normalized corners, one value per box, and each box's class.
BOX_KEYS = ("image/object/bbox/ymin", "image/object/bbox/xmin", "image/object/bbox/ymax",
            "image/object/bbox/xmax")
BOX_CLASS_KEY = "image/object/class/label"
#: The API's keypoint keys: K normalized y and x per object, and COCO's visibility (0: none).
KEYPOINT_KEYS = ("image/object/keypoint/y", "image/object/keypoint/x")
VISIBILITY_KEY = "image/object/keypoint/visibility"
#: The API's per-object weight: 0 for an object augd ignored (it shows, under the occlusion rule), a blend's share
#: for mixup's, 1 (or absent) for the rest.
WEIGHT_KEY = "image/object/weight"


def features(with_boxes: bool, with_keypoints: bool = False, with_mix: bool = False,
             with_oriented: bool = False, with_polygons: bool = False) -> dict:
    """The parse spec: augd's own features, with defaults where foreign (TF-slim) records may lack a key
    (no format: decode sniffs it; no label: unlabeled); `with_mix`: a mixed record's labels and shares (empty in
    any other record)."""
    spec = {k: FEATURES[k] for k in ("image/encoded", "image/raw")}
    spec["image/format"] = tf.io.FixedLenFeature([], tf.string, default_value=b"")
    spec.update({k: tf.io.FixedLenFeature([], tf.int64, default_value=d)
                 for k, d in (("image/height", 0), ("image/width", 0), ("image/class/label", -1))})
    if with_boxes:
        spec.update({k: tf.io.VarLenFeature(tf.float32) for k in BOX_KEYS})
        spec[BOX_CLASS_KEY] = tf.io.VarLenFeature(tf.int64)
        spec[WEIGHT_KEY] = tf.io.VarLenFeature(tf.float32)
    if with_keypoints:
        spec.update({k: tf.io.VarLenFeature(tf.float32) for k in KEYPOINT_KEYS})
        spec[VISIBILITY_KEY] = tf.io.VarLenFeature(tf.int64)
    if with_oriented:
        spec.update({k: tf.io.VarLenFeature(tf.float32) for k in OBB_KEYS})
    if with_polygons:
        spec.update({k: DETECTION_FEATURES[k] for k in POLYGON_KEYS})
    if with_mix:
        spec["augd/mix/label"] = tf.io.VarLenFeature(tf.int64)
        spec["augd/mix/weight"] = tf.io.VarLenFeature(tf.float32)
    return spec


def decode(f: dict) -> tf.Tensor:
    """HxWx3 uint8 from a parsed record: image/raw in raw mode, else JPEG, PNG (or GIF, BMP) bytes."""
    def from_raw():
        return tf.reshape(tf.io.decode_raw(f["image/raw"], tf.uint8),
                          tf.stack([f["image/height"], f["image/width"], 3]))

    def from_encoded():
        return tf.io.decode_image(f["image/encoded"], channels=3, expand_animations=False)

    image = tf.cond(tf.equal(f["image/format"], "raw"), from_raw, from_encoded)
    return tf.ensure_shape(image, [None, None, 3])


def resize(image: tf.Tensor, size: tuple[int, int], mode: str):
    """(float32 image of `size`, (ay, by, ax, bx)): the output's normalized coordinates are y' = ay*y + by,
    x' = ax*x + bx of the input's. stretch: every pixel kept, aspect changed. pad: the whole image, aspect
    kept, centred on black. crop: the centre, aspect kept, the image covering the whole output."""
    out_h, out_w = size
    hw = tf.cast(tf.shape(image)[:2], tf.float32)
    if mode == "stretch":
        return tf.image.resize(image, size, antialias=True), (1.0, 0.0, 1.0, 0.0)
    target = tf.constant([out_h, out_w], tf.float32)
    scale = tf.reduce_min(target / hw) if mode == "pad" else tf.reduce_max(target / hw)
    new = tf.maximum(tf.round(hw * scale), 1.0)
    new = tf.minimum(new, target) if mode == "pad" else tf.maximum(new, target)  # rounding must not overshoot
    image = tf.image.resize(image, tf.cast(new, tf.int32), antialias=True)
    offset = tf.abs(target - new) // 2
    oy, ox = tf.unstack(tf.cast(offset, tf.int32))
    if mode == "pad":
        image = tf.image.pad_to_bounding_box(image, oy, ox, out_h, out_w)
        sign = 1.0
    else:
        image = tf.image.crop_to_bounding_box(image, oy, ox, out_h, out_w)
        sign = -1.0
    ny, nx = tf.unstack(new)
    fy, fx = tf.unstack(sign * offset)
    return tf.ensure_shape(image, [out_h, out_w, 3]), (ny / out_h, fy / out_h, nx / out_w, fx / out_w)


def boxes_of(f: dict) -> tuple[tf.Tensor, tf.Tensor]:
    """([n, 4] float32 ymin, xmin, ymax, xmax; [n] int32 classes) of a parsed record; n may be 0."""
    cols = [tf.sparse.to_dense(f[k]) for k in BOX_KEYS]
    classes = tf.cast(tf.sparse.to_dense(f[BOX_CLASS_KEY]), tf.int32)
    n = tf.size(cols[0])
    checks = [tf.debugging.assert_equal(tf.size(c), n, message="box coordinate lists differ in length")
              for c in cols[1:] + [classes]]
    with tf.control_dependencies(checks):
        return tf.stack(cols, axis=-1), tf.identity(classes)


def weights_of(f: dict, message: str) -> tf.Tensor:
    """[n] float32: each box's image/object/weight, 1 for every box of a record without the key."""
    w = tf.sparse.to_dense(f[WEIGHT_KEY])
    n = tf.size(f[BOX_KEYS[0]].values)
    w = tf.cond(tf.equal(tf.size(w), 0), lambda: tf.ones([n], tf.float32), lambda: w)
    with tf.control_dependencies([tf.debugging.assert_equal(tf.size(w), n, message=message)]):
        return tf.identity(w)


def fit_boxes(boxes: tf.Tensor, classes: tf.Tensor, transform, mode: str, *more: tf.Tensor):
    """Boxes of the resized image: moved by `transform`; after a crop clipped to it, and those left with no
    area dropped (with their classes, and with `more`: per-object tensors such as their keypoints)."""
    ay, by, ax, bx = transform
    if mode == "stretch":
        return (boxes, classes, *more)
    boxes = boxes * tf.stack([ay, ax, ay, ax]) + tf.stack([by, bx, by, bx])
    if mode == "pad":
        return (boxes, classes, *more)
    boxes = tf.clip_by_value(boxes, 0.0, 1.0)
    keep = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    return tuple(select(t, keep) for t in (boxes, classes, *more))


def select(t, keep: tf.Tensor):
    """The rows of a per-object tensor where `keep` holds: dense, or ragged (the polygons' rings)."""
    return tf.ragged.boolean_mask(t, keep) if isinstance(t, tf.RaggedTensor) else tf.boolean_mask(t, keep)


def keypoints_of(f: dict, k: int, message: str) -> tuple[tf.Tensor, tf.Tensor]:
    """([n, k, 2] float32 normalized (y, x); [n, k] int32 visibility) of a parsed record."""
    y, x = (tf.sparse.to_dense(f[key]) for key in KEYPOINT_KEYS)
    vis = tf.cast(tf.sparse.to_dense(f[VISIBILITY_KEY]), tf.int32)
    n = tf.size(f[BOX_KEYS[0]].values)
    checks = [tf.debugging.assert_equal(tf.size(t), n * k, message=message) for t in (y, x, vis)]
    with tf.control_dependencies(checks):
        return tf.reshape(tf.stack([y, x], axis=-1), [-1, k, 2]), tf.reshape(vis, [-1, k])


def oriented_of(f: dict, boxes: tf.Tensor, message: str) -> tf.Tensor:
    """[n, 4, 2] float32: each object's oriented box (image/object/obb/*) as 4 normalized (y, x) corners; a record
    without the keys (no oriented object in it) gives each box's own corners, clockwise from its top-left."""
    x = tf.stack([tf.sparse.to_dense(f[k]) for k in OBB_KEYS[0::2]], axis=-1)
    y = tf.stack([tf.sparse.to_dense(f[k]) for k in OBB_KEYS[1::2]], axis=-1)
    n = tf.shape(boxes)[0]
    ymin, xmin, ymax, xmax = tf.unstack(boxes, axis=-1)
    upright = tf.stack([tf.stack([ymin, xmin], -1), tf.stack([ymin, xmax], -1), tf.stack([ymax, xmax], -1),
                        tf.stack([ymax, xmin], -1)], axis=1)
    check = tf.debugging.assert_equal(tf.logical_or(tf.equal(tf.shape(x)[0], 0), tf.equal(tf.shape(x)[0], n)), True,
                                      message=message)
    with tf.control_dependencies([check]):
        return tf.cond(tf.equal(tf.shape(x)[0], 0), lambda: upright, lambda: tf.stack([y, x], axis=-1))


def fit_oriented(corners: tf.Tensor, transform, mode: str) -> tf.Tensor:
    """Oriented boxes' corners of the resized image, moved as the boxes are (never clipped: a crop that keeps part
    of an object keeps its whole rectangle)."""
    ay, by, ax, bx = transform
    if mode == "stretch":
        return corners
    return corners * tf.stack([ay, ax]) + tf.stack([by, bx])


def polygons_of(f: dict, boxes: tf.Tensor, message: str) -> tf.RaggedTensor:
    """RaggedTensor [n, (rings), (vertices), 2] float32: each object's rings (image/object/polygon/*) as normalized
    (y, x) vertices; a record without the keys (its job did not ask) gives every object no ring."""
    x, y = (tf.sparse.to_dense(f[k]) for k in POLYGON_KEYS[:2])
    vertices, rings = (tf.sparse.to_dense(f[k]) for k in POLYGON_KEYS[2:])
    n = tf.shape(boxes, out_type=tf.int64)[0]
    rings = tf.cond(tf.equal(tf.size(rings), 0), lambda: tf.zeros([n], tf.int64), lambda: rings)
    checks = [tf.debugging.assert_non_negative(rings, message=message),
              tf.debugging.assert_non_negative(vertices, message=message),
              tf.debugging.assert_equal(tf.size(rings, out_type=tf.int64), n, message=message),
              tf.debugging.assert_equal(tf.reduce_sum(rings), tf.size(vertices, out_type=tf.int64), message=message),
              tf.debugging.assert_equal(tf.reduce_sum(vertices), tf.size(x, out_type=tf.int64), message=message),
              tf.debugging.assert_equal(tf.size(x), tf.size(y), message=message)]
    with tf.control_dependencies(checks):
        return tf.RaggedTensor.from_nested_row_lengths(tf.stack([y, x], axis=-1), [rings, vertices],
                                                       validate=False)


def fit_polygons(polygons: tf.RaggedTensor, transform, mode: str) -> tf.RaggedTensor:
    """Rings of the resized image, moved as the boxes are (never clipped, as the oriented boxes)."""
    ay, by, ax, bx = transform
    if mode == "stretch":
        return polygons
    return polygons.with_flat_values(polygons.flat_values * tf.stack([ay, ax]) + tf.stack([by, bx]))


def pad_polygons(polygons: tf.RaggedTensor, max_boxes: int) -> tf.RaggedTensor:
    """[max_boxes, (rings), (vertices), 2]: objects with no ring after the real ones (pad_boxes checked their
    count)."""
    pad = tf.cast(max_boxes - polygons.nrows(), tf.int64)
    empty = tf.RaggedTensor.from_nested_row_lengths(tf.zeros([0, 2], polygons.dtype),
                                                    [tf.zeros([pad], tf.int64), tf.zeros([0], tf.int64)])
    return tf.concat([polygons.with_row_splits_dtype(tf.int64), empty], axis=0)


def fit_keypoints(points: tf.Tensor, vis: tf.Tensor, transform, mode: str):
    """Keypoints of the resized image, moved as the boxes are; after a crop, a point outside it becomes not
    visible (visibility 0, coordinates 0), as in the records."""
    ay, by, ax, bx = transform
    if mode == "stretch":
        return points, vis
    points = points * tf.stack([ay, ax]) + tf.stack([by, bx])
    inside = tf.reduce_all((points >= 0.0) & (points <= 1.0), axis=-1) & (vis > 0)
    return tf.where(inside[..., None], points, 0.0), tf.where(inside, vis, 0)


def pad_keypoints(points: tf.Tensor, vis: tf.Tensor, max_boxes: int, k: int):
    """[max_boxes, k, 2] and [max_boxes, k], zeros after the real objects (pad_boxes checked their count)."""
    pad = max_boxes - tf.shape(points)[0]
    points = tf.pad(points, [[0, pad], [0, 0], [0, 0]])
    vis = tf.pad(vis, [[0, pad], [0, 0]])
    return tf.ensure_shape(points, [max_boxes, k, 2]), tf.ensure_shape(vis, [max_boxes, k])


def pad_oriented(corners: tf.Tensor, max_boxes: int) -> tf.Tensor:
    """[max_boxes, 4, 2] corners, -1 after the real ones as pad_boxes pads (which checked their count)."""
    corners = tf.pad(corners, [[0, max_boxes - tf.shape(corners)[0]], [0, 0], [0, 0]], constant_values=-1.0)
    return tf.ensure_shape(corners, [max_boxes, 4, 2])


def pad_boxes(boxes: tf.Tensor, classes: tf.Tensor, max_boxes: int, message: str):
    """[max_boxes, 4] boxes and [max_boxes] classes, padded with -1 as keras.layers.MaxNumBoundingBoxes pads;
    more boxes is an error (never silently truncated)."""
    n = tf.shape(boxes)[0]
    check = tf.debugging.assert_less_equal(n, max_boxes, message=message)
    with tf.control_dependencies([check]):
        pad = max_boxes - n
        boxes = tf.pad(boxes, [[0, pad], [0, 0]], constant_values=-1.0)
        classes = tf.pad(classes, [[0, pad]], constant_values=-1)
    return tf.ensure_shape(boxes, [max_boxes, 4]), tf.ensure_shape(classes, [max_boxes])
