"""CVAT for images 1.1: an XML at the job root (`annotations.xml`: `<annotations><version>1.1</version><meta>` with
the task's or project's `<labels>`, then an `<image id name width height subset>` per image) and the images, at
their `name` relative to the job or to `images/` (CVAT's export puts them there).

Inside an `<image>`: a `<box xtl ytl xbr ybr>` (pixel-edge units) is a box, or, with a `rotation` (degrees,
clockwise about its centre), its 4-corner polygon until augd has an oriented-box kind (augd.annotations.shapes); a
`<polygon points="x,y;x,y;...">` is a polygon. Keypoints, two ways:
* a `<skeleton label>` is one object of its label; its keypoints are its `<points label points="x,y" outside
  occluded>` children, named by the skeleton's sub-labels (`<meta>` labels with a `<parent>`, in that order):
  outside 1 is not labelled, occluded 1 labelled but occluded (visibility 1), else visible (2). Its box (and
  polygon) is the one box or polygon sharing its `group_id`, which is then no object of its own; with none, the
  extent of its labelled points. A skeleton with no labelled point rejects its image.
* a `<points>` of one point sharing its `group_id` with exactly one box or polygon is a keypoint of that object,
  named by its label (as LabelMe's grouped points).
The job's keypoints: the skeletons' sub-labels in `<meta>`'s order, then the grouped points' labels, sorted; an
object without one of them has it not labelled, and a mirror swaps left_ and right_ names (COCO's). Any other
`<points>` (several points in one, none grouped), polylines, masks, cuboids, ellipses and tags reject their image
with a reason (augd carries none of them as an object). A label not in `<meta>`'s labels rejects its image; the
labels, in `<meta>`'s order, are the label map (ids 1..N; the sub-labels and the labels only grouped points use
are no classes). `subset` Train, Validation or Test gives the split. An image in the job that no `<image>` names
is rejected (not annotated, no negative). TensorFlow-free.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from augd.annotations.exports import export_path, job_path, keypoint_schema, root_exports, with_keypoints, xml_file
from augd.annotations.labelmap import LabelMap
from augd.annotations.model import Annotation, AnnotationError, finite_number
from augd.annotations.reading import SPLIT_NAMES, AnnotationFormat, Layout, Marker, Reading, folder_splits
from augd.annotations.shapes import box_object, oriented_object, polygon_object, refused_shape, rotated_corners
from augd.annotations.tree import IMAGE_EXTENSIONS, Tree, extension
from augd.errors import UntrustedFileError
from augd.parsing.jsonxml import parse_xml

__all__ = ["FORMAT", "CvatFile", "read_cvat"]

_TOOL = "CVAT for images 1.1"


@dataclass
class CvatFile:
    """One CVAT XML, read: its labels (meta's order), each usable <image>'s (name, split, Annotation), and what it
    could not use, keyed by the image's name or by the XML's own path."""
    source: str
    labels: tuple[str, ...]
    parts: dict[str, tuple[str, ...]] = field(default_factory=dict)   # a skeleton's label -> its points' labels
    images: list[tuple[str, str, Annotation]] = field(default_factory=list)
    rejected: list[tuple[str | None, str, str]] = field(default_factory=list)   # (the <image>'s name, split, why)


def _labels(root) -> tuple[str, ...]:
    out: list[str] = []
    meta = root.find("meta")
    for labels in () if meta is None else meta.iter("labels"):
        for label in labels.findall("label"):
            name = (label.findtext("name") or "").strip()
            if name and not (label.findtext("parent") or "").strip() and name not in out:
                out.append(name)   # a skeleton's points (labels with a <parent>) are no classes
    return tuple(out)


def _parts(root) -> dict[str, tuple[str, ...]]:
    """Each skeleton label's points: the `<meta>` labels naming it as their `<parent>`, in their order."""
    out: dict[str, tuple[str, ...]] = {}
    meta = root.find("meta")
    for labels in () if meta is None else meta.iter("labels"):
        for label in labels.findall("label"):
            name, parent = ((label.findtext(t) or "").strip() for t in ("name", "parent"))
            if name and parent and name not in out.get(parent, ()):
                out[parent] = out.get(parent, ()) + (name,)
    return out


def _number(elem, attr: str, at: str) -> float:
    raw = elem.get(attr)
    if raw is None:
        raise AnnotationError(f"{at}: no {attr}")
    return finite_number(raw, at, attr)


def _points(raw, at: str) -> list[tuple[float, float]]:
    if not raw:
        raise AnnotationError(f"{at}: no points")
    out = []
    for k, pair in enumerate(raw.split(";")):
        xy = pair.split(",")
        if len(xy) != 2:
            raise AnnotationError(f"{at}: points[{k}] is {pair[:40]!r}; points are `x,y;x,y;...`")
        out.append((finite_number(xy[0], at, f"points[{k}] x"), finite_number(xy[1], at, f"points[{k}] y")))
    return out


def _object(shape, name: str, at: str):
    if shape.tag == "box":
        x0, y0, x1, y1 = (_number(shape, a, at) for a in ("xtl", "ytl", "xbr", "ybr"))
        turn = finite_number(shape.get("rotation", "0"), at, "rotation")
        if turn % 360 == 0:
            return box_object(name, x0, y0, x1, y1, at)
        if x1 <= x0 or y1 <= y0:
            raise AnnotationError(f"{at}: the box ({x0:g}, {y0:g}, {x1:g}, {y1:g}) has no area to turn")
        return oriented_object(name, rotated_corners(x0, y0, x1, y1, turn), at, "rotated box")
    if shape.tag == "polygon":
        return polygon_object(name, _points(shape.get("points"), at), at)
    raise refused_shape(at, shape.tag, _TOOL)


def _image(elem, i: int, where: str, labels: tuple[str, ...], parts: dict) -> tuple[str, Annotation]:
    at = f"{where}: <image> {i + 1} (id {elem.get('id')})"
    name = job_path(elem.get("name"), at, "name")
    at = f"{where}: {name}"
    size = None
    if elem.get("width") is not None or elem.get("height") is not None:
        w, h = (finite_number(elem.get(a) or "", at, a) for a in ("width", "height"))
        if w <= 0 or h <= 0 or w != int(w) or h != int(h):
            raise AnnotationError(f"{at}: width {w:g} and height {h:g} must be whole numbers > 0")
        size = (int(h), int(w))
    objects, where_each, skeletons = [], [], []
    groups: dict[str, dict] = {}   # group_id -> {"objects": [index], "skeletons": [index], "points": {name: point}}
    for k, shape in enumerate(elem):
        label = (shape.get("label") or "").strip()
        tag = f"<{shape.tag}> {k + 1}" + (f" ({label})" if label else "")
        if shape.tag not in ("box", "polygon", "points", "skeleton"):
            raise refused_shape(f"{at}: {tag}", shape.tag, _TOOL)
        if not label:
            raise AnnotationError(f"{at}: {tag}: no label")
        if labels and label not in labels:
            raise AnnotationError(f"{at}: {tag}: label {label!r} is not one of <meta>'s labels "
                                  f"({', '.join(labels[:20])})")
        gid = _group(shape, f"{at}: {tag}")
        group = groups.setdefault(gid, {"objects": [], "skeletons": [], "points": {}, "at": f"{at}: {tag}"})
        if shape.tag == "points":
            pts = _points(shape.get("points"), f"{at}: {tag}")
            if len(pts) != 1 or gid is None:
                raise refused_shape(f"{at}: {tag}", "points", _TOOL, _POINTS_HINT if len(pts) == 1 else
                                    f"this one holds {len(pts)} points, whose names are unknown; draw a skeleton, "
                                    f"or one point per keypoint grouped with its object's box or polygon")
            if label in group["points"]:
                raise AnnotationError(f"{at}: {tag}: group_id {gid} has two points named {label!r}")
            group["points"][label] = _point(shape, pts[0], f"{at}: {tag}")
            continue
        if shape.tag == "skeleton":
            skeletons.append((len(objects), label, _skeleton(shape, label, parts.get(label, ()), f"{at}: {tag}")))
            objects.append(None)   # its box: its group's shape, or its points' extent (below)
            group["skeletons"].append(len(objects) - 1)
        else:
            objects.append(_object(shape, label, f"{at}: {tag}"))
            group["objects"].append(len(objects) - 1)
        where_each.append(tag)
    points, framing = _groups(groups, at)
    for k, label, pts in skeletons:
        points[k] = pts
        objects[k] = (replace(objects[framing[k]], name=label) if k in framing
                      else _extent(label, pts, f"{at}: {where_each[k]}"))
    frames = set(framing.values())   # a skeleton's frame is no object of its own
    kept = {k: j for j, k in enumerate(k for k in range(len(objects)) if k not in frames)}   # old index -> new
    return name, Annotation(objects=tuple(objects[k] for k in kept), source=where,
                            extra={"size": size, "where": tuple(where_each[k] for k in kept),
                                   "points": {kept[k]: p for k, p in points.items()}})


_POINTS_HINT = ("give the point the group_id of its object's box or polygon (Group in CVAT's editor), or draw the "
                "object's keypoints as a skeleton")


def _group(shape, at: str) -> str | None:
    """The shape's group_id (CVAT writes a whole number; 0 or none: no group)."""
    raw = shape.get("group_id")
    if raw is None or raw.strip() in ("", "0"):
        return None
    if not (raw.strip().isascii() and raw.strip().isdigit()) or len(raw.strip()) > 18:
        raise AnnotationError(f"{at}: group_id is {raw[:40]!r}; CVAT's group_id is a whole number")
    return raw.strip()


def _flag(shape, attr: str, at: str) -> bool:
    raw = shape.get(attr, "0")
    if raw not in ("0", "1"):
        raise AnnotationError(f"{at}: {attr} is {raw[:40]!r}; it must be 0 or 1")
    return raw == "1"


def _point(shape, xy: tuple[float, float], at: str) -> tuple[float, float, int]:
    """COCO's (x, y, visibility): outside 1 is not labelled (0 0 0), occluded 1 labelled but hidden (1), else 2."""
    if _flag(shape, "outside", at):
        return 0.0, 0.0, 0
    return xy[0], xy[1], 1 if _flag(shape, "occluded", at) else 2


def _skeleton(shape, label: str, parts: tuple[str, ...], at: str) -> dict[str, tuple[float, float, int]]:
    """A skeleton's points by name; AnnotationError for a point its label does not declare, one named twice, or a
    skeleton with no labelled point."""
    if not parts:
        raise AnnotationError(f"{at}: <meta> declares no points of skeleton {label!r} (labels with "
                              f"<parent>{label}</parent>); export the task's labels with the annotations")
    out: dict[str, tuple[float, float, int]] = {}
    for j, child in enumerate(shape):
        if child.tag == "attribute":
            continue
        name = (child.get("label") or "").strip()
        cat = f"{at}: <{child.tag}> {j + 1}" + (f" ({name})" if name else "")
        if child.tag != "points":
            raise AnnotationError(f"{cat}: a skeleton holds <points> (one per point of its label), not <{child.tag}>")
        if name not in parts:
            raise AnnotationError(f"{cat}: {name!r} is not a point of skeleton {label!r} in <meta> "
                                  f"({', '.join(parts[:20])})")
        if name in out:
            raise AnnotationError(f"{cat}: the skeleton has two points named {name!r}")
        pts = _points(child.get("points"), cat)
        if len(pts) != 1:
            raise AnnotationError(f"{cat}: a skeleton's point of {len(pts)} points; it has 1")
        out[name] = _point(child, pts[0], cat)
    if not any(v for _, _, v in out.values()):
        raise AnnotationError(f"{at}: a skeleton with no labelled point (each outside or missing): it marks "
                              f"nothing; remove it, or mark its points")
    return out


def _groups(groups: dict, at: str) -> tuple[dict, dict]:
    """({object index: its grouped points}, {skeleton index: the index of the box or polygon framing it}); a group
    is one object: a box or polygon with points, a skeleton, or both."""
    points, framing = {}, {}
    for gid, g in groups.items():
        if gid is None:
            continue
        shapes, skel = g["objects"], g["skeletons"]
        why = (f"{len(skel)} skeletons" if len(skel) > 1 else
               "a skeleton and loose points" if skel and g["points"] else
               f"{len(shapes)} boxes or polygons and a skeleton" if skel and len(shapes) > 1 else
               f"{len(g['points'])} point(s) and {len(shapes)} boxes or polygons"
               if g["points"] and len(shapes) != 1 else "")
        if why:
            raise AnnotationError(f"{at}: group_id {gid} holds {why}; a group is one object: its box or polygon "
                                  f"with its points, or with its skeleton ({g['at']})")
        if skel and shapes:
            framing[skel[0]] = shapes[0]
        elif g["points"]:
            points[shapes[0]] = g["points"]
    return points, framing


def _extent(label: str, pts: dict, at: str):
    xs, ys = [p[0] for p in pts.values() if p[2]], [p[1] for p in pts.values() if p[2]]
    if max(xs) <= min(xs) or max(ys) <= min(ys):
        raise AnnotationError(f"{at}: the extent of its labelled points ({min(xs):g}, {min(ys):g}) to "
                              f"({max(xs):g}, {max(ys):g}) has no area; group the skeleton with its box")
    return box_object(label, min(xs), min(ys), max(xs), max(ys), at)


def _split(elem) -> str:
    return SPLIT_NAMES.get((elem.get("subset") or "").lower(), "")   # CVAT's subsets: Train, Validation, Test


def read_cvat(path: str, where: str) -> CvatFile | None:
    """One CVAT XML; None when its root is not <annotations> (no CVAT file); AnnotationError when it cannot be
    read at all (an image's own trouble rejects that image only)."""
    root = xml_file(path, where)
    if root.tag != "annotations":
        return None
    version = (root.findtext("version") or "").strip()
    if version != "1.1":
        raise AnnotationError(f"{where}: CVAT XML version {version or 'none'!r}; augd reads CVAT for images 1.1")
    out = CvatFile(where, _labels(root), _parts(root))
    if root.find("track") is not None:
        raise AnnotationError(f"{where}: <track> elements: a CVAT for video export; export CVAT for images 1.1")
    for i, elem in enumerate(root.findall("image")):
        try:
            name, ann = _image(elem, i, where, out.labels, out.parts)
        except AnnotationError as exc:
            out.rejected.append((elem.get("name"), _split(elem), str(exc)))
            continue
        out.images.append((name, _split(elem), ann))
    return out


def _files(tree: Tree, named: bool) -> list | None:
    """Each CVAT XML at the root, read: a CvatFile, or the AnnotationError that says why it cannot be read (an XML
    that does not parse counts as CVAT's when the format is named or the file is CVAT's annotations.xml)."""
    out: list = []
    for name in root_exports(tree, ".xml"):
        try:
            got = read_cvat(export_path(tree, name), name)
        except AnnotationError as exc:
            got = exc if named or name == "annotations.xml" or _is_cvat(tree.path(name)) else None
        if got is not None:
            out.append(got)
    return out or None


def _find(tree: Tree, name) -> str | None:
    """The job file an <image>'s name gives: the name relative to the job, else to images/; None: neither."""
    try:
        name = job_path(name, "", "name")
    except AnnotationError:
        return None
    return next((p for p in (name, f"images/{name}") if tree.isfile(p)), None)


def _is_cvat(path: str) -> bool:
    try:
        return parse_xml(path).tag == "annotations"
    except UntrustedFileError:
        return False


def read_job(reading: Reading, files: list) -> None:
    """A CVAT job from its XMLs (what the layout's find read); AnnotationError when one cannot be read at all."""
    tree = reading.tree
    for cf in files:
        if isinstance(cf, AnnotationError):
            raise cf
    labels: list[str] = []
    listed: dict[str, Annotation] = {}
    for cf in files:
        reading.skip.add(cf.source)
        labels.extend(n for n in cf.labels if n not in labels)
        for name, split, msg in cf.rejected:
            img = _find(tree, name)
            reading.reject(img or cf.source, msg)
            if img and split:   # a rejected image still counts in its split
                reading.splits[img] = split
        for name, split, ann in cf.images:
            img = _find(tree, name)
            if img is None:
                reading.reject(cf.source, f"{cf.source}: <image> {name!r} is not in the job folder (CVAT's name is "
                                          f"relative to the job, or to images/)")
            elif extension(img) not in IMAGE_EXTENSIONS:
                reading.reject(img, f"{cf.source}: {img}: augd reads no {extension(img) or 'extensionless'} image "
                                    f"({', '.join(sorted(IMAGE_EXTENSIONS))})")
            elif img in listed:
                reading.reject(img, f"{cf.source}: {img} is listed twice (also in {listed[img].source})")
            else:
                listed[img] = ann
                if split:
                    reading.splits[img] = split
    loose = _keypoints(reading, files, listed)
    tops = sorted({img.split("/", 1)[0] if "/" in img else "" for img in listed}) or [""]
    reading.image_dirs = ("",) if "" in tops else tuple(tops)
    for img in (i for d in reading.image_dirs for i in tree.below(d, IMAGE_EXTENSIONS)):
        if img in reading.rejected:
            continue
        if img in listed:
            reading.settle(img, lambda hw, a=listed[img]: a)
        else:
            reading.reject(img, f"{img}: no <image> of {', '.join(f.source for f in files)} names it: not "
                                f"annotated (CVAT lists every image of a task, those without shapes too)")
    if not reading.splits:
        for top in reading.image_dirs:
            folder_splits(reading, top, tree.below(top, IMAGE_EXTENSIONS))
    if reading.fixed is None:
        names = sorted({o.name for a in listed.values() for o in a.objects})
        reading.label_map = LabelMap.from_names([n for n in labels if n not in loose] or names)


def _keypoints(reading: Reading, files: list, listed: dict[str, Annotation]) -> set[str]:
    """The job's keypoints (the skeletons' points in <meta>'s order, then the grouped points' labels, sorted) set
    on `reading` and given to each listed object with points; returns the labels only grouped points use."""
    used = {n for a in listed.values() for pts in a.extra.get("points", {}).values() for n in pts}
    classes = {a.objects[k].name for a in listed.values() for k in a.extra.get("points", {})}
    names: list[str] = []
    for cf in files:
        for parent, parts in cf.parts.items():
            if parent in classes:
                names.extend(n for n in parts if n not in names)
    names.extend(sorted(used - set(names)))
    if not names:
        return set()
    reading.keypoints = keypoint_schema(names, classes, "CVAT skeletons and grouped points")
    for img, ann in listed.items():
        listed[img] = with_keypoints(ann, names)
    return used - {o.name for a in listed.values() for o in a.objects}


FORMAT = AnnotationFormat(
    "cvat", read=read_job, title="CVAT",
    expected="expected a CVAT for images 1.1 XML (annotations.xml) at the job root",
    layouts=(Layout(35, _files),), markers=(Marker(".xml", under=""),))
