"""Label Studio's JSON export: a JSON at the job root holding a list of tasks, each with `data` (its image: `image`,
else the one value naming an image file) and `annotations` (one per task: each a `result` list). Coordinates are
percents (0-100) of `original_width`/`original_height`, which are checked against the image. A
`rectanglelabels` result (`x`, `y` its top-left corner, `width`, `height`) is a box, or, with a `rotation`
(degrees, clockwise about that top-left corner), its 4-corner polygon until augd has an oriented-box kind
(augd.annotations.shapes); a `polygonlabels` result (`points`) a polygon. A `keypointlabels` result (`x`, `y`)
is a keypoint of the one rectangle or polygon region it belongs to: a `relation` result between their ids (either
way), or its `parentID` naming that region; named by its label (the job's keypoints: every keypoint label of the
export, sorted; a point an object lacks is not labelled, and a mirror swaps left_ and right_ names, COCO's). Any
other keypoint, brushes, ellipses and image-level results (choices, text) reject their image with a reason; so does
a task with several annotations
(augd reads one), none (not annotated: no negative), or an image turned in the editor (`image_rotation`).
Predictions are not read. An image is found by its reference's file name, with as many of its folders as the job
has (Label Studio's upload prefix `1a2b3c4d-` taken off): augd.annotations.exports.ImageIndex. Class names: those
used, sorted. TensorFlow-free.
"""
from __future__ import annotations

from dataclasses import replace

from augd.annotations.exports import (ImageIndex, export_path, json_file, keypoint_schema, number, root_exports,
                                     with_keypoints)
from augd.annotations.labelmap import LabelMap
from augd.annotations.model import Annotation, AnnotationError
from augd.annotations.reading import AnnotationFormat, Layout, Marker, Reading, folder_splits
from augd.annotations.shapes import box_object, oriented_object, polygon_object, refused_shape, rotated_corners
from augd.annotations.tree import IMAGE_EXTENSIONS, Tree, extension

__all__ = ["FORMAT", "read_result"]

_TOOL = "Label Studio"


def _is_export(doc) -> bool:
    return isinstance(doc, list) and bool(doc) and all(isinstance(t, dict) and "data" in t for t in doc)


def _image_ref(task: dict, at: str):
    data = task.get("data")
    if not isinstance(data, dict):
        raise AnnotationError(f"{at}: `data` must be an object naming the task's image")
    if "image" in data:
        return data["image"]
    refs = [v for v in data.values() if isinstance(v, str) and extension(v.split("?")[0]) in IMAGE_EXTENSIONS]
    if len(refs) != 1:
        raise AnnotationError(f"{at}: `data` has no `image` and {len(refs)} values naming an image; augd reads one")
    return refs[0]


def _size(r: dict, at: str) -> tuple[int, int] | None:
    w, h = r.get("original_width"), r.get("original_height")
    if w is None and h is None:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (w, h)):
        raise AnnotationError(f"{at}: original_width {w!r} and original_height {h!r} must be whole numbers > 0")
    return h, w


def _label(value: dict, key: str, at: str) -> str:
    names = value.get(key)
    if not (isinstance(names, list) and len(names) == 1 and isinstance(names[0], str) and names[0].strip()):
        raise AnnotationError(f"{at}: {key} is {str(names)[:60]}; augd reads one class name per shape")
    return names[0]


def read_result(r, at: str, hw: tuple[int, int]):
    """One result as an Object, in pixel-edge units of an image of `hw` (height, width): the percents are of it
    (the stated original size, checked against the image, must equal it)."""
    if not isinstance(r, dict) or not isinstance(r.get("value"), dict):
        raise AnnotationError(f"{at}: a result must be an object with a `type` and a `value`")
    kind, value = r.get("type"), r["value"]
    h, w = hw
    _unturned(r, at)
    if kind == "rectanglelabels":
        name = _label(value, kind, at)
        at = f"{at} ({name})"
        x, y, bw, bh = (number(value.get(k), at, k) for k in ("x", "y", "width", "height"))
        if bw < 0 or bh < 0:
            raise AnnotationError(f"{at}: width {bw:g} and height {bh:g} must be >= 0")
        x0, y0, x1, y1 = x * w / 100, y * h / 100, (x + bw) * w / 100, (y + bh) * h / 100
        turn = number(value.get("rotation", 0), at, "rotation")
        if turn % 360 == 0:
            return box_object(name, x0, y0, x1, y1, at)
        return oriented_object(name, rotated_corners(x0, y0, x1, y1, turn, about="corner"), at, "rotated rectangle")
    if kind == "polygonlabels":
        name = _label(value, kind, at)
        at = f"{at} ({name})"
        pts = value.get("points")
        if not isinstance(pts, list) or not all(isinstance(p, list) and len(p) == 2 for p in pts):
            raise AnnotationError(f"{at}: points must be a list of [x, y] pairs (percents of the image)")
        return polygon_object(name, [(number(px, at, f"points[{k}] x") * w / 100,
                                      number(py, at, f"points[{k}] y") * h / 100)
                                     for k, (px, py) in enumerate(pts)], at)
    raise refused_shape(at, str(kind)[:40], _TOOL)


def _unturned(r: dict, at: str) -> None:
    turned = r.get("image_rotation", 0)
    if turned not in (0, None):
        raise AnnotationError(f"{at}: image_rotation is {turned!r}: the image was turned in the editor, and its "
                              f"shapes are of the turned image; augd reads shapes of the image as stored")


def _keypoint(r: dict, at: str, hw: tuple[int, int]) -> tuple[str, tuple[float, float, int]]:
    """A keypointlabels result: (its name, (x, y, 2) in pixel-edge units); Label Studio marks no occlusion."""
    if not isinstance(r.get("value"), dict):
        raise AnnotationError(f"{at}: a result must be an object with a `type` and a `value`")
    _unturned(r, at)
    name = _label(r["value"], "keypointlabels", at)
    x, y = (number(r["value"].get(k), f"{at} ({name})", k) for k in ("x", "y"))
    return name, (x * hw[1] / 100, y * hw[0] / 100, 2)


def _ident(r: dict, key: str, at: str) -> str | None:
    """A result's id (or the id it names): Label Studio's are short strings; None when absent."""
    raw = r.get(key)
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (str, int)) or not str(raw) or len(str(raw)) > 100:
        raise AnnotationError(f"{at}: {key} is {str(raw)[:60]!r}; it must be a result's id (a short string)")
    return str(raw)


_KEYPOINT_HINT = ("relate the keypoint to its object's rectangle or polygon (a relation between the two regions), "
                  "or remove it")


def _owners(keypoints: list, links: list, regions: dict[str, list[int]]) -> dict[int, dict]:
    """{object index: {name: point}}: each keypoint given to the one region it is related to or is the child of.
    `regions`: each result id's objects (two control tags labelling one region give it two)."""
    points: dict[int, dict] = {}
    related: dict[str, set] = {}   # each id the ids it is related to, either way: one pass over the relations
    for a, b in links:
        related.setdefault(a, set()).add(b)
        related.setdefault(b, set()).add(a)
    for where, kid, parent, name, point in keypoints:
        owners = {k for other in related.get(kid, ()) for k in regions.get(other, ())}
        owners.update(regions.get(parent, ()) if parent is not None else ())
        if not owners:
            raise refused_shape(where, "keypointlabels", _TOOL, _KEYPOINT_HINT + (
                f" (its parentID {parent!r} names no rectangle or polygon of this annotation)" if parent else ""))
        if len(owners) > 1:
            raise AnnotationError(f"{where} ({name}): a keypoint related to {len(owners)} rectangles or polygons; "
                                  f"it is a point of one: keep one relation")
        got = points.setdefault(owners.pop(), {})
        if name in got:
            raise AnnotationError(f"{where} ({name}): its region has two keypoints named {name!r}; a keypoint "
                                  f"name is one point of an object")
        got[name] = point
    return points


def _annotation(task: dict, at: str, source: str, hw: tuple[int, int], names=()) -> Annotation:
    anns = task.get("annotations", [])
    if not isinstance(anns, list):
        raise AnnotationError(f"{at}: `annotations` must be a list")
    anns = [a for a in anns if not (isinstance(a, dict) and a.get("was_cancelled"))]
    if len(anns) != 1:
        why = "none: it is not annotated (augd takes no task as a negative that nobody labelled)" if not anns else \
            f"{len(anns)}, from several annotators; augd reads one: export one annotation per task"
        raise AnnotationError(f"{at}: annotations (not cancelled): {why}")
    results = anns[0].get("result", []) if isinstance(anns[0], dict) else None
    if not isinstance(results, list):
        raise AnnotationError(f"{at}: annotations[0].result must be a list")
    objects, labels, size = [], [], None
    regions: dict[str, list[int]] = {}   # a rectangle's or polygon's result id -> its objects
    keypoints, links = [], []
    for k, r in enumerate(results):
        where = f"{at}: result[{k}]"
        if isinstance(r, dict) and r.get("type") == "relation":   # {from_id, to_id, direction, labels}: no value
            ends = (_ident(r, "from_id", where), _ident(r, "to_id", where))
            if None in ends:
                raise AnnotationError(f"{where}: a relation without from_id and to_id")
            links.append(ends)
            continue
        stated = _size(r, where) if isinstance(r, dict) else None
        if stated is not None and size is not None and stated != size:
            raise AnnotationError(f"{where}: original size {stated[1]}x{stated[0]} differs from the task's "
                                  f"{size[1]}x{size[0]}")
        size = size or stated
        if isinstance(r, dict) and r.get("type") == "keypointlabels":
            keypoints.append((where, _ident(r, "id", where), _ident(r, "parentID", where),
                              *_keypoint(r, where, size or hw)))
            continue
        obj = read_result(r, where, size or hw)
        rid = r.get("id")   # checked only as a keypoint's or a relation's: a task of regions alone reads as before
        if isinstance(rid, (str, int)) and not isinstance(rid, bool):
            regions.setdefault(str(rid), []).append(len(objects))
        objects.append(obj)
        labels.append(f"result[{k}] ({obj.name})")
    ann = Annotation(objects=tuple(objects), source=source,
                     extra={"size": size, "where": tuple(labels), "points": _owners(keypoints, links, regions)})
    return with_keypoints(ann, names)


def _names(task, keys=("rectanglelabels", "polygonlabels")) -> set[str]:
    """The class names (or, with `keys` ("keypointlabels",), keypoint names) a task's annotations give, whatever
    else is wrong with them."""
    out = set()
    anns = task.get("annotations") if isinstance(task, dict) else None
    for a in anns if isinstance(anns, list) else ():
        for r in a.get("result", ()) if isinstance(a, dict) and isinstance(a.get("result"), list) else ():
            value = r.get("value") if isinstance(r, dict) else None
            for key in keys:
                names = value.get(key) if isinstance(value, dict) else None
                if isinstance(names, list) and len(names) == 1 and isinstance(names[0], str) and names[0].strip():
                    out.add(names[0])
    return out


def _task_name(i: int, task) -> str:
    ident = task.get("id") if isinstance(task, dict) else None
    return f"task {i + 1}" + (f" (id {ident})" if isinstance(ident, (int, str)) and not isinstance(ident, bool)
                              else "")


def _files(tree: Tree, named: bool) -> list | None:
    """Each Label Studio export at the root, read: (its path, its tasks), or the AnnotationError that refused it;
    auto passes over a JSON that is no export (COCO's, a LabelMe file); named, every root JSON must be one."""
    out: list = []
    for name in root_exports(tree, ".json"):
        try:
            doc = json_file(export_path(tree, name), name)
        except AnnotationError as exc:
            if named:
                out.append(exc)
            continue
        if _is_export(doc):
            out.append((name, doc))
        elif named:
            out.append(AnnotationError(f"{name}: not a Label Studio export (a list of tasks, each with `data`)"))
    return out or None


def read_job(reading: Reading, files: list) -> None:
    """A Label Studio job from its exports (what the layout's find read): each task's image found, then settled;
    AnnotationError when an export cannot be read at all."""
    for f in files:
        if isinstance(f, AnnotationError):
            raise f
    tree = reading.tree
    images = tree.below("", IMAGE_EXTENSIONS)
    index = ImageIndex(images)
    listed: dict[str, tuple] = {}
    for source, tasks in files:
        reading.skip.add(source)
        for i, task in enumerate(tasks):
            at = f"{source}: {_task_name(i, task)}"
            try:
                img = index.find(_image_ref(task, at), at)
            except AnnotationError as exc:
                reading.reject(source, str(exc))
                continue
            if img in listed:
                reading.reject(img, f"{at}: {img} is also the image of {listed[img][1]}")
                continue
            listed[img] = (task, at, source)
    # every task's keypoint names, its image kept or not (as the class names): one bad task moves no point
    names = sorted({n for _, tasks in files for t in tasks for n in _names(t, ("keypointlabels",))})
    if names:
        reading.keypoints = keypoint_schema(names, (), "Label Studio keypointlabels")
    for img in images:
        if img in reading.rejected:
            continue
        if img in listed:
            task, at, source = listed[img]
            reading.settle(img, lambda hw, t=task, a=at, s=source: _annotation(t, a, s, hw, names))
        else:
            reading.reject(img, f"{img}: no task of {', '.join(s for s, _ in files)} names it: not annotated")
    if reading.keypoints is not None:   # the classes whose objects carry points, once each task is read
        reading.keypoints = replace(reading.keypoints, classes=tuple(sorted(
            {o.name for a in reading.annotations.values() for o in a.objects if o.keypoints})))
    folder_splits(reading, "", images)
    if not reading.splits and tree.isdir("images"):
        folder_splits(reading, "images", tree.below("images", IMAGE_EXTENSIONS))
    if reading.fixed is None:   # every task's class names, its image kept or not: one bad task moves no id
        reading.label_map = LabelMap.from_names(sorted({n for _, tasks in files for t in tasks for n in _names(t)}))


FORMAT = AnnotationFormat(
    "label_studio", read=read_job, title="Label Studio",
    expected="expected a Label Studio JSON export (a list of tasks) at the job root",
    layouts=(Layout(36, _files),), markers=(Marker(".json", under=""),))
