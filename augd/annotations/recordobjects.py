"""The objects of one Object Detection API record (boxes, classes, instance masks, keypoints, a semantic mask,
augd's oriented boxes and polygons) as augd.annotations.model values in pixels, and the label map and keypoint
schema the records give a job without their own. Every value of a record is untrusted: what cannot be used is an
AnnotationError naming the record and the key. TensorFlow-free.
"""
from __future__ import annotations

import math
import os
from collections import Counter

import numpy as np

from augd.annotations.geometry import rasterise
from augd.annotations.labelmap import MAX_ID, LabelMap
from augd.annotations.model import (IGNORE_REASONS, Annotation, AnnotationError, KeypointSchema, Object, Span,
                                    flip_from_names)
from augd.annotations.rle import rle_decode, rle_encode
from augd.annotations.shapes import polygon_area
from augd.errors import Rejected, UntrustedFileError
from augd.files import read_capped
from augd.formats import NeedMoreData, read_header
from augd.io.lite import OBB_KEYS
from augd.io.objects import polygon_rings
from augd.labels import LABELS_MAX_BYTES
from augd.lazycv import cv2
from augd.parsing import pbtxt

__all__ = ["MASK_KEY", "ObjectReader", "not_utf8"]

BOX_KEYS = ("image/object/bbox/xmin", "image/object/bbox/ymin", "image/object/bbox/xmax", "image/object/bbox/ymax")
_OBJECT_LISTS = ("image/object/class/label", "image/object/class/text", "image/object/difficult",
                 "image/object/truncated", "image/object/is_crowd", "image/object/weight", "augd/object/ignored",
                 *OBB_KEYS)
MASK_KEY = "image/segmentation/class/encoded"   # DeepLab's semantic mask PNG


def not_utf8(text: str) -> str:
    """"" for text that was UTF-8 in the record, else what is wrong with it (the record's bytes were decoded with
    surrogateescape: each byte that is no UTF-8 became a lone surrogate, which no file augd writes can hold)."""
    for k, ch in enumerate(text):
        if 0xDC80 <= ord(ch) <= 0xDCFF:
            raw = text.encode("utf-8", "surrogateescape")[:60]
            return f"{raw!r} is not UTF-8 text (byte {ord(ch) - 0xDC00:#04x} at character {k})"
    return ""


class ObjectReader:
    """Reads each record's objects; gathers the (label id, class text) pairs and the keypoint count they share.
    `fixed`: the job's label map (texts looked up in it, a label alone named by it), or None."""

    def __init__(self, fixed: LabelMap | None):
        self.fixed = fixed
        self.by_id = {i: n for n, i in fixed.ids.items()} if fixed is not None else {}   # a label alone: its name
        self.ids: dict[int, Counter] = {}   # label id -> the class texts records give it
        self.points = 0

    def annotation(self, ex: dict, where: str, hw: tuple[int, int], orientation: int, mask: Span | None,
                    semantic: bool) -> Annotation:
        """The record's objects in pixels; AnnotationError for whatever a value of the record makes unusable (a
        record is untrusted input: a box of bytes, a NaN visibility, a PNG that does not decode)."""
        try:
            return self._objects(ex, where, hw, orientation, mask, semantic)
        except AnnotationError:
            raise
        except Exception as exc:  # noqa: BLE001 - any value of an untrusted record: its image is rejected, by name
            raise AnnotationError(f"{where}: a value cannot be used ({type(exc).__name__}: {exc})") from None

    def _objects(self, ex: dict, where: str, hw: tuple[int, int], orientation: int, mask: Span | None,
                 semantic: bool) -> Annotation:
        if semantic and mask is None:
            raise AnnotationError(f"{where}: {MASK_KEY} is not one PNG")
        h, w = hw
        n = len(ex.get(BOX_KEYS[0], []))
        for key in (*BOX_KEYS, *_OBJECT_LISTS):
            got = ex.get(key)
            if got is not None and len(_as_list(got)) not in ((0, n) if key != BOX_KEYS[0] else (n,)):
                raise AnnotationError(f"{where}: {key} holds {len(_as_list(got))} values for {n} boxes "
                                      f"({BOX_KEYS[0]}): the record's keys disagree")
        texts, labels = _as_list(ex.get("image/object/class/text", [])), _as_list(ex.get("image/object/class/label",
                                                                                          []))
        if n and not texts and not labels:
            raise AnnotationError(f"{where}: {n} boxes and neither image/object/class/text nor /label")
        if n and orientation != 1:
            raise AnnotationError(f"{where}: its image has EXIF orientation {orientation}, and a record's boxes are of "
                                  f"the stored pixels while augd decodes them upright; strip the orientation")
        names = [self._name(texts[k] if texts else "", labels[k] if labels else None, where, k) for k in range(n)]
        masks = _masks(ex, n, h, w, where)
        points = self._keypoints(ex, n, h, w, where)
        flags = [_as_list(ex.get(k, [])) or [0] * n for k in ("image/object/difficult", "image/object/truncated",
                                                                "image/object/is_crowd")]
        ignored = _ignored(ex, n, where)
        turned = _oriented(ex, n, h, w, where)
        rings = _polygons(ex, n, h, w, where)
        objects = []
        for k in range(n):
            x0, y0, x1, y1 = (float(_as_list(ex[key])[k]) for key in BOX_KEYS)
            if not all(math.isfinite(v) for v in (x0, y0, x1, y1)):
                raise AnnotationError(f"{where}: object {k + 1} ({names[k]}): its box is not finite")
            if x1 < x0 or y1 < y0:
                raise AnnotationError(f"{where}: object {k + 1} ({names[k]}): box xmin {x0:g} ymin {y0:g} xmax {x1:g} "
                                      f"ymax {y1:g} (normalized) has a max below its min")
            box = (_px(x0, w), _px(y0, h), _px(x1, w), _px(y1, h))
            why = ignored[k]
            # its rings (the polygon keys) where they say what its mask says (_agree: moved polygons, exact), else
            # its mask, to the pixel (a cover's hole, an outline traced from a mask); else an oriented box's corners
            ring = rings[k] if rings and rings[k] and (not masks or _agree(rings[k], masks[k])) else ()
            shape = ring or ((turned[k],) if turned and not masks and polygon_area(turned[k]) > 0 else ())
            objects.append(Object(names[k], box, *(bool(f[k]) for f in flags),
                                  rle=masks[k] if masks and not ring else None,
                                  keypoints=points[k] if points else (),
                                  ignored=why, visible=0.0 if why else 1.0, polygons=shape,
                                  oriented=turned is not None))
        extra = {"where": tuple(f"object {k + 1} ({names[k]})" for k in range(n))}
        if isinstance(ex.get("image/height"), int) and isinstance(ex.get("image/width"), int):
            extra["size"] = (ex["image/height"], ex["image/width"])
        return Annotation(tuple(objects), mask, where, extra)

    def _name(self, text: str, label, where: str, k: int) -> str:
        fixed = self.fixed
        if label is not None and not isinstance(label, int):
            raise AnnotationError(f"{where}: object {k + 1}: image/object/class/label {label!r} is no integer")
        if label is not None and label > MAX_ID:
            raise AnnotationError(f"{where}: object {k + 1}: image/object/class/label {label} is out of range: label "
                                  f"map ids are 1 to {MAX_ID} (the OD API reads them as int32)")
        if bad := not_utf8(text):
            raise AnnotationError(f"{where}: object {k + 1}: image/object/class/text {bad}; class names are UTF-8")
        if text and text != text.strip():
            raise AnnotationError(f"{where}: object {k + 1}: class text {text!r} has spaces around it")
        if text:
            name = text
        elif fixed is not None and label is not None:
            if label not in self.by_id:
                raise AnnotationError(f"{where}: object {k + 1}: label {label} is not in the label map")
            name = self.by_id[label]
        elif label is not None:
            name = str(label)
        else:
            raise AnnotationError(f"{where}: object {k + 1}: no class: an empty image/object/class/text and no label")
        if label is not None and fixed is None:
            self.ids.setdefault(int(label), Counter())[name] += 1
        return name

    def _keypoints(self, ex: dict, n: int, h: int, w: int, where: str):
        xs, ys = _as_list(ex.get("image/object/keypoint/x", [])), _as_list(ex.get("image/object/keypoint/y", []))
        if not n or not xs:
            return None
        vis = _as_list(ex.get("image/object/keypoint/visibility", []))
        if len(xs) != len(ys) or len(xs) % n or (vis and len(vis) != len(xs)):
            raise AnnotationError(f"{where}: image/object/keypoint/x|y|visibility hold {len(xs)}, {len(ys)}, "
                                  f"{len(vis)} values for {n} objects: the record's keys disagree")
        k = len(xs) // n
        if self.points and k != self.points:
            raise AnnotationError(f"{where}: {k} keypoints per object, where other records have {self.points}")
        self.points = k
        out = []
        for o in range(n):
            pts = []
            for i in range(o * k, o * k + k):
                if vis and vis[i] not in (0, 1, 2):   # COCO's and YOLO's readers reject the image so too
                    raise AnnotationError(f"{where}: object {o + 1}: keypoint {i - o * k + 1}: visibility {vis[i]!r} "
                                          f"(image/object/keypoint/visibility): COCO's 0, 1 or 2 expected")
                v = int(vis[i]) if vis else (2 if math.isfinite(xs[i]) and math.isfinite(ys[i]) else 0)
                ok = v > 0 and math.isfinite(xs[i]) and math.isfinite(ys[i])
                pts.append((_px(xs[i], w), _px(ys[i], h), v) if ok else (0.0, 0.0, 0))
            out.append(tuple(pts))
        return out

    def pairs_map(self, annotations: dict) -> LabelMap:
        """The records' own ids: each label id named by the text most records give it (or the id itself)."""
        ids: dict[str, int] = {}
        for ident, texts in sorted(self.ids.items()):
            name = texts.most_common(1)[0][0]
            if ident >= 1 and name not in ids:
                ids[name] = ident
        names = {o.name for a in annotations.values() for o in a.objects}
        free = max([0, *ids.values()]) + 1
        for name in sorted(names - set(ids)):   # texts without ids, ids < 1: numbered after the others
            ids[name], free = free, free + 1
        return LabelMap(ids)

    def keypoint_schema(self, root: str, annotations: dict) -> KeypointSchema | None:
        if not self.points:
            return None
        named = _keypoint_names(root)
        names = next((tuple(v) for v in named.values() if len(v) == self.points), None) or tuple(
            f"keypoint_{i + 1}" for i in range(self.points))
        classes = tuple(sorted({o.name for a in annotations.values() for o in a.objects
                                if o.keypoints}))
        return KeypointSchema(names, flip_from_names(names), classes=classes, source="the records' keypoints")


def _keypoint_names(root: str) -> dict[str, list[str]]:
    """label_map.pbtxt's `keypoints { id label }` per class (the OD API's keypoint label map), if any."""
    path = os.path.join(root, "label_map.pbtxt")
    if not os.path.isfile(path):
        return {}
    try:   # the map itself was read (LabelMap.read_pbtxt): an error here only leaves the points unnamed
        text = read_capped(path, LABELS_MAX_BYTES, "label map", "LABELS_MAX_BYTES").decode("utf-8")
        items = [f for f in pbtxt.parse(text, path) if f.name == "item" and f.is_message]
    except (OSError, UntrustedFileError, UnicodeDecodeError, pbtxt.PbtxtError):
        return {}
    out = {}
    for item in items:
        name = pbtxt.scalars(item).get("name")
        points = sorted((int(pbtxt.scalars(k).get("id", 0)), str(pbtxt.scalars(k).get("label", ""))) for k in
                        item.value if k.name == "keypoints" and k.is_message and
                        isinstance(pbtxt.scalars(k).get("id", 0), int))
        if isinstance(name, str) and points:
            out[name] = [label for _, label in points]
    return out


def _px(v: float, size: int) -> float:
    """A normalized float32 coordinate in pixels, rounded to 1/1000 px: what float32 lost (under 5e-4 px up to
    8000 px a side), so an integer (VOC) or two-decimal (COCO) coordinate comes back exactly and an augd output
    re-read gives the boxes its source gave."""
    return round(float(v) * size, 3)


def _oriented(ex: dict, n: int, h: int, w: int, where: str) -> list | None:
    """Each object's oriented box (image/object/obb/*) as 4 corners in pixels, or None for a record without the
    keys: a record holding them holds them for every object (docs/records.md#oriented-boxes)."""
    lists = [_as_list(ex.get(k, [])) for k in OBB_KEYS]
    if not any(lists):
        return None
    if any(len(v) != n for v in lists):
        raise AnnotationError(f"{where}: the image/object/obb/* keys hold {sorted({len(v) for v in lists})} values "
                              f"for {n} boxes: a record with oriented boxes gives every object its 4 corners")
    out = []
    for k in range(n):
        c = [lists[j][k] for j in range(8)]
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in c):
            raise AnnotationError(f"{where}: object {k + 1}: its oriented box (image/object/obb/*) is not finite")
        out.append(tuple((c[2 * i] * w, c[2 * i + 1] * h) for i in range(4)))
    return out


def _polygons(ex: dict, n: int, h: int, w: int, where: str) -> list | None:
    """Each object's rings (image/object/polygon/*) in pixels, () for an object with none, or None for a record
    without the keys (docs/records.md#polygons); a ring of under 3 vertices or no area is left out."""
    try:
        rings = polygon_rings(ex)
    except ValueError as exc:
        raise AnnotationError(f"{where}: {exc}") from None
    if rings is None:
        return None
    if len(rings) != n:
        raise AnnotationError(f"{where}: the image/object/polygon/* keys give {len(rings)} ring counts for {n} boxes: "
                              f"a record with polygons gives every object its ring count")
    return [tuple(pts for pts in (tuple((x * w, y * h) for x, y in r) for r in mine)
                  if len(pts) >= 3 and polygon_area(pts) > 0) for mine in rings]


#: How much of an object its rings and its mask may disagree on, beyond the pixels along the rings' edge (where a
#: mask warped by nearest neighbour and the exact polygon differ by a pixel): a cover's hole is far more.
_DISAGREE = 0.01


def _agree(rings, rle) -> bool:
    """Whether an object's rings say what its mask says: the pixels inside them against the mask's, away from a
    1-px band along the rings' edge, differ in under _DISAGREE of the mask."""
    mask = rle_decode(rle) > 0
    pts = np.concatenate([np.asarray(r, np.float64) for r in rings])   # the work is the rings' window, not the image's
    c0, r0 = np.maximum(np.floor(pts.min(axis=0)) - 2, 0).astype(int)
    c1, r1 = np.ceil(pts.max(axis=0) + 2).astype(int)
    win = mask[r0:r1, c0:c1]
    inside = rasterise([[(x - c0, y - r0) for x, y in r] for r in rings], *win.shape) > 0
    kernel = np.ones((3, 3), np.uint8)
    edge = cv2.dilate(inside.astype(np.uint8), kernel) > cv2.erode(inside.astype(np.uint8), kernel)
    total = int(mask.sum())
    off = total - int(win.sum()) + int(((inside != win) & ~edge).sum())   # the mask's pixels past the window count
    return off <= _DISAGREE * max(total, 1)


def _ignored(ex: dict, n: int, where: str) -> list[str]:
    """Why each object of a record is ignored ("" for one that is not): augd's own augd/object/ignored, or a weight
    of 0 in image/object/weight (an OD API record's "learn it neither way"), then "input". Such an object stays
    ignored through the chain (Object.visible 0: under any min_visibility)."""
    why = [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
           for v in _as_list(ex.get("augd/object/ignored", []))]
    weights = _as_list(ex.get("image/object/weight", []))
    out = []
    for k in range(n):
        w = weights[k] if weights else 1.0
        if not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0.0:
            raise AnnotationError(f"{where}: image/object/weight of object {k + 1} is {w!r}; a weight is a finite "
                                  f"number >= 0")
        reason = why[k] if why else ""
        if reason and reason not in IGNORE_REASONS:
            raise AnnotationError(f"{where}: augd/object/ignored of object {k + 1} is {reason[:40]!r}; allowed: "
                                  f"{', '.join(IGNORE_REASONS)} or empty")
        out.append(reason or ("input" if w == 0.0 else ""))
    return out


def _as_list(v) -> list:
    return v if isinstance(v, list) else [v]


def _masks(ex: dict, n: int, h: int, w: int, where: str):
    """Each object's instance mask as COCO RLE: PNG strings (create_coco_tf_record's include_masks) or floats,
    objects x height x width (the OD API's NUMERICAL_MASKS)."""
    raw = ex.get("image/object/mask")
    if raw is None or raw == [] or not n:
        return None
    values = _as_list(raw)
    if values and isinstance(values[0], bytes):
        if len(values) != n:
            raise AnnotationError(f"{where}: image/object/mask holds {len(values)} PNGs for {n} boxes: the record's "
                                  f"keys disagree")
        out = []
        for k, png in enumerate(values):
            try:
                head = read_header(png)
            except (Rejected, NeedMoreData):
                head = None
            if head is None or head.format != "png" or (head.height, head.width) != (h, w):
                got = "not a PNG" if head is None or head.format != "png" else f"{head.width}x{head.height}"
                raise AnnotationError(f"{where}: object {k + 1}: its mask is {got}, the image {w}x{h}")
            m = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_UNCHANGED)
            if m is None or m.ndim != 2 or m.shape != (h, w):
                got = "not a one-channel PNG" if m is None or m.ndim != 2 else f"{m.shape[1]}x{m.shape[0]}"
                raise AnnotationError(f"{where}: object {k + 1}: its mask is {got}, the image {w}x{h}")
            out.append(rle_encode(m > 0))
        return out
    if len(values) != n * h * w:
        raise AnnotationError(f"{where}: image/object/mask holds {len(values)} floats, not {n} masks of {w}x{h}")
    arr = np.asarray(values, np.float32).reshape(n, h, w)
    return [rle_encode(arr[k] > 0.5) for k in range(n)]
