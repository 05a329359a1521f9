"""The detection part of one record (RecordObjects): an image's objects as its record stores them, built and
checked without TensorFlow (augd.annotations.objects writes them, augd.io.records frames them in an Example); and
its polygon keys read back (polygon_rings: the records reader and `augd inspect`)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from augd.io.lite import POLYGON_KEYS

__all__ = ["RecordObjects", "polygon_rings"]


@dataclass(frozen=True)
class RecordObjects:
    """The detection part of one record, already in the stored image's coordinates."""
    boxes: tuple[tuple[float, float, float, float], ...]   # xmin, ymin, xmax, ymax NORMALIZED to the stored image
    labels: tuple[int, ...]                   # label map ids (1-based)
    texts: tuple[str, ...]                    # class names
    difficult: tuple[int, ...]
    truncated: tuple[int, ...]
    masks: tuple[bytes, ...] = ()             # one PNG per object (instance masks), or ()
    segmentation: bytes | None = None         # the semantic mask PNG, or None
    num_keypoints: int = 0                    # K of a keypoint job (0: no keypoint keys)
    keypoints: tuple = ()                     # per object, K (x, y, visibility), x and y NORMALIZED
    #: per object (image/object/weight): 0 for an ignored one, a blend's share (mixup), else 1; () for none
    weights: tuple[float, ...] = ()
    ignored: tuple[str, ...] = ()             # per object: why it is ignored, "" for a kept one; () when none is
    crowd: tuple[int, ...] = ()               # per object (image/object/is_crowd): COCO's iscrowd or ignored; or ()
    #: per object its oriented box's 4 corners ((x, y), ...) NORMALIZED (image/object/obb/*); () for a record
    #: without an oriented object
    oriented: tuple = ()
    #: per object what shows of it as rings, each ((x, y), ...) NORMALIZED (image/object/polygon/*); None for a
    #: job that did not ask (annotations.polygon_keys), () rings for an object with none
    polygons: tuple | None = None

    @classmethod
    def from_objects(cls, objects, height: int, width: int, ids: Mapping[str, int], *, masks=(),
                     segmentation: bytes | None = None, num_keypoints: int = 0, weights=(),
                     oriented=(), polygons=None) -> "RecordObjects":
        """From augd.annotations.Object values in pixel-edge units of the stored height x width image: boxes
        normalized and clipped to [0, 1]; `ids` maps class names to label ids (a LabelMap's `ids`). A keypoint
        job (`num_keypoints` K) gives each object K points: its own, or K not labelled (0, 0, 0). `weights`: each
        object's (a blend's shares), or () for 1; an ignored object's is 0 whatever it was, and a record holding
        one says why (`ignored`) and marks it is_crowd (`crowd`, as it marks COCO's crowds). `oriented`: each
        object's oriented box (4 corners in pixel-edge units), or () for none; normalized, never clipped (the
        minimum-area rectangle of a cut shape may reach past the image). `polygons`: each object's rings (pixel-edge
        units, within the image: augd.annotations.outlines), or None for no polygon keys; normalized and clamped to
        [0, 1] (a vertex on the border may lie a rounding past it)."""
        def norm(v, size):
            return min(max(float(v) / size, 0.0), 1.0)
        none = ((0.0, 0.0, 0),) * num_keypoints
        points = tuple(tuple((norm(x, width), norm(y, height), v) if v else (0.0, 0.0, 0) for x, y, v in
                             (o.keypoints or none)) for o in objects) if num_keypoints else ()
        return cls(num_keypoints=num_keypoints, keypoints=points,
            boxes=tuple((norm(o.box[0], width), norm(o.box[1], height), norm(o.box[2], width),
                         norm(o.box[3], height)) for o in objects),
            labels=tuple(int(ids[o.name]) for o in objects), texts=tuple(o.name for o in objects),
            difficult=tuple(int(o.difficult) for o in objects), truncated=tuple(int(o.truncated) for o in objects),
            masks=tuple(masks), segmentation=segmentation, **_ignore_keys(objects, weights),
            oriented=tuple(tuple((float(x) / width, float(y) / height) for x, y in c) for c in oriented),
            polygons=None if polygons is None else tuple(tuple(tuple((norm(x, width), norm(y, height)) for x, y in r)
                                                               for r in rings) for rings in polygons))

    def check(self) -> None:
        """ValueError naming the object when the record would not say what the annotations say."""
        n = len(self.boxes)
        for name in ("labels", "texts", "difficult", "truncated"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"RecordObjects: {len(getattr(self, name))} {name} for {n} boxes")
        for name in ("weights", "ignored", "crowd"):
            if getattr(self, name) and len(getattr(self, name)) != n:
                raise ValueError(f"RecordObjects: {len(getattr(self, name))} {name} for {n} boxes")
        if self.masks and len(self.masks) != n:
            raise ValueError(f"RecordObjects: {len(self.masks)} instance masks for {n} boxes")
        for k, box in enumerate(self.boxes):
            if len(box) != 4 or not all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in box):
                raise ValueError(f"RecordObjects: object {k + 1} ({self.texts[k]}): box {box} is not normalized "
                                 "to [0, 1]")
            if box[2] < box[0] or box[3] < box[1]:
                raise ValueError(f"RecordObjects: object {k + 1} ({self.texts[k]}): box {box} has max < min")
        if self.num_keypoints and len(self.keypoints) != n:
            raise ValueError(f"RecordObjects: keypoints for {len(self.keypoints)} of {n} objects")
        for k, pts in enumerate(self.keypoints):
            if len(pts) != self.num_keypoints or not all(math.isfinite(x) and math.isfinite(y) and 0.0 <= x <= 1.0
                                                         and 0.0 <= y <= 1.0 and v in (0, 1, 2) for x, y, v in pts):
                raise ValueError(f"RecordObjects: object {k + 1} ({self.texts[k]}): its keypoints are not "
                                 f"{self.num_keypoints} normalized (x, y, visibility)")
        if self.oriented and (len(self.oriented) != n or not all(
                len(c) == 4 and all(math.isfinite(v) for p in c for v in p) for c in self.oriented)):
            raise ValueError(f"RecordObjects: oriented boxes for {len(self.oriented)} of {n} objects, each 4 finite "
                             "corners")
        if self.polygons is not None and (len(self.polygons) != n or not all(
                len(r) >= 3 and all(math.isfinite(v) and 0.0 <= v <= 1.0 for p in r for v in p)
                for rings in self.polygons for r in rings)):
            raise ValueError(f"RecordObjects: polygons for {len(self.polygons)} of {n} objects, each ring 3 or more "
                             "normalized vertices")
        for k, label in enumerate(self.labels):
            if label < 1:
                raise ValueError(f"RecordObjects: object {k + 1} ({self.texts[k]}): label {label} is not a label "
                                 "map id (ids start at 1)")


def _ignore_keys(objects, weights) -> dict:
    """RecordObjects' weights, ignored and crowd for these objects (see from_objects)."""
    out: dict = {"weights": tuple(float(v) for v in weights)}
    if any(o.ignored for o in objects):
        out["weights"] = tuple(0.0 if o.ignored else float(weights[k]) if weights else 1.0
                               for k, o in enumerate(objects))
        out["ignored"] = tuple(o.ignored for o in objects)
    if any(o.crowd or o.ignored for o in objects):
        out["crowd"] = tuple(int(o.crowd or bool(o.ignored)) for o in objects)
    return out


def polygon_rings(ex: dict) -> list | None:
    """Each object's rings from a decoded record's polygon keys (docs/records.md#polygons): per object a list of
    rings, each a list of normalized (x, y); None for a record without the keys. ValueError, naming the object, the
    ring and the value, for counts that are no integers >= 0 or do not add up, or a vertex that is not finite: a
    record is untrusted."""
    xs, ys, nv, nr = ([] if ex.get(k) is None else ex[k] if isinstance(ex[k], list) else [ex[k]]
                      for k in POLYGON_KEYS)
    if not (xs or ys or nv or nr):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (*nr, *nv)):
        raise ValueError("a ring or vertex count of image/object/polygon/num_rings|num_vertices is no integer >= 0")
    if sum(nr) != len(nv) or sum(nv) != len(xs) or len(xs) != len(ys):
        raise ValueError(f"the image/object/polygon/* keys disagree: {sum(nr)} rings counted, {len(nv)} vertex "
                         f"counts, {sum(nv)} vertices counted, {len(xs)} x and {len(ys)} y values")
    out, ring, at = [], 0, 0
    for k, count in enumerate(nr):
        mine = []
        for j in range(count):
            pts = list(zip(xs[at:at + nv[ring]], ys[at:at + nv[ring]]))
            bad = next((p for p in pts if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in p)), None)
            if bad is not None:
                raise ValueError(f"object {k + 1}: ring {j + 1}: vertex {bad!r} of image/object/polygon/x|y is not "
                                 f"two finite numbers")
            mine.append(pts)
            at, ring = at + nv[ring], ring + 1
        out.append(mine)
    return out
