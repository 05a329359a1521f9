"""LabelMe: one JSON beside each image, with the image's stem (`shapes`: each a `label`, a `shape_type` and its
`points` in pixels, pixel-edge units). A `rectangle` (two opposite corners) is a box, a `polygon` a polygon, a
`rotation` (X-AnyLabeling's rotated rectangle, in LabelMe's JSON: its 4 corners) a 4-corner polygon until augd has
an oriented-box kind (augd.annotations.shapes). A `point` that shares its `group_id` with exactly one rectangle,
polygon or rotation is a keypoint of that object, named by its label (the job's keypoints: every point label, sorted;
a mirror swaps left_ and right_ names, as COCO's); any other point, a `points` shape, circles, lines and masks
reject their image with a reason: augd carries none of them as an object. `difficult: true` (X-AnyLabeling) is
VOC's flag.
`imagePath` and `imageData` are not read: pairing is by stem (as VOC's <filename>, tools write stale ones);
`imageHeight`/`imageWidth` are checked against the image. TensorFlow-free.
"""
from __future__ import annotations

from augd.annotations.exports import json_file, keypoint_schema, number, with_keypoints
from augd.annotations.model import Annotation, AnnotationError
from augd.annotations.paired import Paired, paired_format
from augd.annotations.reading import Reading
from augd.annotations.shapes import box_object, oriented_object, polygon_object, refused_shape
from augd.annotations.tree import Tree
from augd.errors import UntrustedFileError
from augd.parsing.jsonxml import load_json

__all__ = ["FORMAT", "read_labelme"]

_TOOL = "LabelMe"


def _points(shape: dict, at: str) -> list[tuple[float, float]]:
    raw = shape.get("points")
    if not isinstance(raw, list) or not all(isinstance(p, list) and len(p) == 2 for p in raw):
        raise AnnotationError(f"{at}: points is {str(raw)[:80]}; it must be a list of [x, y] pairs")
    return [(number(x, at, f"points[{k}] x"), number(y, at, f"points[{k}] y")) for k, (x, y) in enumerate(raw)]


def _size(doc: dict, where: str) -> tuple[int, int] | None:
    h, w = doc.get("imageHeight"), doc.get("imageWidth")
    if h is None and w is None:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (h, w)):
        raise AnnotationError(f"{where}: imageHeight {h!r} and imageWidth {w!r} must be whole numbers > 0")
    return h, w


def read_labelme(path: str, where: str) -> Annotation:
    """One LabelMe JSON's objects; extra["where"] labels each ("shapes[2] (dog)"); AnnotationError on the first
    thing wrong."""
    doc = json_file(path, where)
    if not isinstance(doc, dict) or not isinstance(doc.get("shapes"), list):
        raise AnnotationError(f"{where}: no `shapes` list; not a LabelMe file")
    objects, labels = [], []
    groups: dict = {}    # group_id -> {"objects": [object index, ...], "points": {name: (x, y)}, "at": [...]}
    for i, shape in enumerate(doc["shapes"]):
        at = f"{where}: shapes[{i}]"
        if not isinstance(shape, dict):
            raise AnnotationError(f"{at}: a shape must be an object with a label, a shape_type and points")
        name = shape.get("label")
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise AnnotationError(f"{at}: label is {name!r}; it must be a class name without surrounding spaces")
        at = f"{at} ({name})"
        kind = shape.get("shape_type", "polygon")   # LabelMe 3 wrote no shape_type: polygons
        difficult = shape.get("difficult", False)
        if not isinstance(difficult, bool):
            raise AnnotationError(f"{at}: difficult is {difficult!r}; it must be true or false")
        if kind == "rectangle":
            pts = _points(shape, at)
            if len(pts) != 2:
                raise AnnotationError(f"{at}: a rectangle of {len(pts)} points; LabelMe's has 2 opposite corners")
            (xa, ya), (xb, yb) = pts
            objects.append(box_object(name, min(xa, xb), min(ya, yb), max(xa, xb), max(ya, yb), at, difficult))
        elif kind in ("polygon", "rotation"):
            pts = _points(shape, at)
            if kind == "rotation" and len(pts) != 4:
                raise AnnotationError(f"{at}: a rotated rectangle of {len(pts)} points; it has 4 corners")
            objects.append(oriented_object(name, pts, at, "rotated rectangle", difficult) if kind == "rotation"
                           else polygon_object(name, pts, at, "polygon", difficult))
        elif kind == "point" and _group(shape, at) is not None:
            pts = _points(shape, at)
            if len(pts) != 1:
                raise AnnotationError(f"{at}: a point of {len(pts)} points; it has 1")
            group = groups.setdefault(_group(shape, at), {"objects": [], "points": {}, "at": at})
            if name in group["points"]:
                raise AnnotationError(f"{at}: group_id {_group(shape, at)} has two points named {name!r}")
            group["points"][name] = (*pts[0], 2)   # LabelMe has no occlusion flag: a point drawn is visible
            continue
        else:
            raise refused_shape(at, str(kind)[:40], _TOOL, "give a point the group_id of its object's rectangle "
                                                           "or polygon" if kind == "point" else "")
        if _group(shape, at) is not None:
            groups.setdefault(_group(shape, at), {"objects": [], "points": {}, "at": at})["objects"].append(
                len(objects) - 1)
        labels.append(f"shapes[{i}] ({name})")
    points = {}
    for gid, group in groups.items():
        if group["points"] and len(group["objects"]) != 1:
            raise AnnotationError(f"{where}: group_id {gid} holds {len(group['points'])} point(s) and "
                                  f"{len(group['objects'])} rectangles or polygons; a group's points are the "
                                  f"keypoints of its one object ({group['at']})")
        if group["points"]:
            points[group["objects"][0]] = group["points"]
    return Annotation(objects=tuple(objects), source=where,
                      extra={"size": _size(doc, where), "where": tuple(labels), "points": points})


def _group(shape: dict, at: str):
    gid = shape.get("group_id")
    if gid is not None and (isinstance(gid, bool) or not isinstance(gid, (int, str))):
        raise AnnotationError(f"{at}: group_id is {gid!r}; it must be a number, a string or null")
    return gid


def _keypoints(reading: Reading, got: dict) -> None:
    """The job's keypoints, once every file is read: every grouped point's label, sorted; each object with points
    gets them in that order (a name it lacks: not labelled, 0 0 0)."""
    anns = {f: a for f, a in got.items() if isinstance(a, Annotation) and a.extra.get("points")}
    names = tuple(sorted({n for a in anns.values() for pts in a.extra["points"].values() for n in pts}))
    if not names:
        return
    classes = {a.objects[k].name for a in anns.values() for k in a.extra["points"]}
    reading.keypoints = keypoint_schema(names, classes, "LabelMe point labels")
    for f, a in anns.items():
        got[f] = with_keypoints(a, names)


def _is_labelme(tree: Tree, rel: str) -> bool:
    try:
        doc = load_json(tree.path(rel))
    except UntrustedFileError:
        return False
    return isinstance(doc, dict) and isinstance(doc.get("shapes"), list)


FORMAT = paired_format(
    "labelme", Paired(".json", reader=lambda reading: (read_labelme, None), looks_right=_is_labelme,
                      finish=_keypoints),
    ranks=(None, 65), title="LabelMe", expected="expected a LabelMe .json beside each image, with its stem")
