"""COCO instances JSON: `images` (file_name relative to the job root, width, height), `annotations` (bbox
[x, y, w, h] in pixel-edge units, iscrowd, segmentation as polygons or RLE, person keypoints as x, y, v
triplets) and `categories` (id, name; `keypoints` names and a 1-based `skeleton` for the classes that have them).

RLE is decoded by augd/annotations/rle.py (NumPy, no pycocotools). TensorFlow-free.
"""
from __future__ import annotations

import math
import posixpath
import re
from dataclasses import dataclass, field

from augd.annotations.labelmap import LabelMap
from augd.annotations.masks import pair_masks
from augd.annotations.model import Annotation, AnnotationError, KeypointSchema, Object, file_message, flip_from_names
from augd.annotations.reading import (SPLIT_NAMES, AnnotationFormat, Layout, Marker, Reading, folder_splits,
                                     object_label, skipped)
from augd.annotations.rle import rle_counts, rle_decode
from augd.annotations.tree import IMAGE_EXTENSIONS, Tree, extension
from augd.errors import UntrustedFileError
from augd.jobfolder import CONTROL_FILES
from augd.parsing.jsonxml import load_json

__all__ = ["FORMAT", "CocoFile", "NotCoco", "read_coco", "read_job", "rle_counts", "rle_decode"]


@dataclass(frozen=True)
class CocoFile:
    """One instances JSON, read: each listed image's annotation (keyed by its file_name, a job relpath) and the
    images or annotations it could not use (keyed by file_name, or by the JSON's own path when the entry names
    no usable image) with the reason."""
    source: str                                   # the JSON's path in the job
    categories: dict[int, str]                    # category id -> name
    images: dict[str, Annotation]                 # file_name -> annotation (extra: size, where, id)
    rejected: dict[str, str] = field(default_factory=dict)
    keypoints: dict[str, tuple] = field(default_factory=dict)  # category name -> (point names, 0-based skeleton)


class NotCoco(AnnotationError):
    """A JSON that is no COCO instances file at all (its top level is not an object, or it has no `images`
    list): format auto passes over it. Any other AnnotationError of read_coco is a COCO file that is broken."""


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _file_name(raw, where: str) -> str:
    if not isinstance(raw, str) or not raw:
        raise AnnotationError(f"{where}: file_name is {raw!r}; it must be a path relative to the job folder")
    norm = posixpath.normpath(raw)
    if raw.startswith("/") or norm == ".." or norm.startswith("../") or norm == ".":
        raise AnnotationError(f"{where}: file_name {raw!r} is not a path inside the job folder")
    return norm


#: A file with thousands of broken entries is summed up after this many of them.
_MESSAGES_SHOWN = 10


def _add(rejected: dict, key: str, message: str) -> None:
    rejected.setdefault(key, []).append(message)


def _joined(rejected: dict) -> dict[str, str]:
    out = {}
    for key, msgs in rejected.items():
        more = len(msgs) - _MESSAGES_SHOWN
        out[key] = "; ".join(msgs[:_MESSAGES_SHOWN]) + (f"; and {more} more" if more > 0 else "")
    return out


def _category_points(c: dict, at: str) -> tuple | None:
    """(point names, 0-based skeleton edges) of a category with `keypoints`, else None."""
    names, skeleton = c.get("keypoints"), c.get("skeleton", [])
    if names is None or names == []:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names) \
            or len(set(names)) != len(names):
        raise AnnotationError(f"{at}: `keypoints` must be a list of distinct point names; got {names!r}")
    if not isinstance(skeleton, list) or not all(isinstance(e, list) and len(e) == 2 and all(
            _is_int(v) and 1 <= v <= len(names) for v in e) for e in skeleton):
        raise AnnotationError(f"{at}: `skeleton` must be a list of [a, b] pairs of 1-based keypoint indices "
                              f"1..{len(names)}")
    return tuple(names), tuple((a - 1, b - 1) for a, b in skeleton)


def _categories(data, where: str, points: dict | None = None) -> dict[int, str]:
    cats = data.get("categories", [])
    if not isinstance(cats, list):
        raise AnnotationError(f"{where}: `categories` must be a list")
    out: dict[int, str] = {}
    names: dict[str, int] = {}
    for i, c in enumerate(cats):
        at = f"{where}: categories[{i}]"
        if not isinstance(c, dict) or not _is_int(c.get("id")) or not isinstance(c.get("name"), str) \
                or not c["name"].strip() or c["name"] != c["name"].strip():
            raise AnnotationError(f"{at}: a category needs an integer `id` and a non-empty `name`")
        if c["id"] in out:
            raise AnnotationError(f"{at}: category id {c['id']} is also {out[c['id']]!r}")
        if c["name"] in names:
            raise AnnotationError(f"{at}: category name {c['name']!r} is also id {names[c['name']]}")
        out[c["id"]] = c["name"]
        names[c["name"]] = c["id"]
        found = _category_points(c, at)
        if found is not None and points is not None:
            points[c["name"]] = found
    return out


def _images(data, where: str, rejected: dict) -> tuple[dict[int, str], dict[str, dict], set[int]]:
    """image id -> file_name, and file_name -> {"size", "id", "index"} for the usable entries; and every image id
    listed (usable or rejected), so that an annotation of a rejected image is not called one of a missing one."""
    images = data["images"]
    by_id: dict[int, str] = {}
    info: dict[str, dict] = {}
    id_twice: set[int] = set()
    listed: set[int] = set()
    for i, im in enumerate(images):
        at = f"{where}: images[{i}]"
        if not isinstance(im, dict) or not _is_int(im.get("id")):
            _add(rejected, where, f"{at}: has no integer `id`")
            continue
        at = f"{at} (id {im['id']})"
        listed.add(im["id"])
        try:
            name = _file_name(im.get("file_name"), at)
        except AnnotationError as exc:
            _add(rejected, where, str(exc))
            continue
        w, h = im.get("width"), im.get("height")
        size = None
        if w is not None or h is not None:
            if not (_is_int(w) and _is_int(h) and w > 0 and h > 0):
                _add(rejected, name, f"{at}: width {w!r} and height {h!r} must be integers > 0")
                continue
            size = (h, w)
        if im["id"] in by_id:
            id_twice.add(im["id"])
            first = by_id[im["id"]]
            k = info[first]["index"]
            why = "their annotations cannot be told apart"
            _add(rejected, name, f"{at}: image id {im['id']} is also used by images[{k}] ({first!r}); {why}")
            _add(rejected, first, f"{where}: images[{k}] (id {im['id']}): image id {im['id']} is also used by "
                                  f"images[{i}] ({name!r}); {why}")
            continue
        if name in info:
            _add(rejected, name, f"{at}: {name!r} is listed twice (ids {info[name]['id']} and {im['id']})")
            continue
        by_id[im["id"]] = name
        info[name] = {"size": size, "id": im["id"], "index": i}
    for ident in id_twice:
        info.pop(by_id.pop(ident), None)
    return by_id, info, listed


def _keypoints(raw, names: tuple, at: str) -> tuple:
    """An annotation's `keypoints` (x1, y1, v1, ...; pixel indices) as ((x, y, v), ...) in pixel-edge units and
    the category's order; () when it has none."""
    if raw is None or raw == []:
        return ()
    if not names:
        raise AnnotationError(f"{at}: has keypoints but its category lists no `keypoints` names")
    if not (isinstance(raw, list) and all(_is_num(v) for v in raw)):
        raise AnnotationError(f"{at}: keypoints must be a list of finite numbers x1, y1, v1, ...")
    if len(raw) != 3 * len(names):
        raise AnnotationError(f"{at}: keypoints has {len(raw)} numbers; its category's {len(names)} points "
                              f"need {3 * len(names)} (x, y, v each)")
    out = []
    for k in range(len(names)):
        x, y, v = raw[3 * k:3 * k + 3]
        if v not in (0, 1, 2):
            raise AnnotationError(f"{at}: keypoint {k + 1} ({names[k]}): visibility {v!r}; it must be 0 (not "
                                  f"labelled), 1 (labelled, occluded) or 2 (visible)")
        # COCO's keypoints are pixel indices (detectron2 reads them so): the centre of pixel x is x + 0.5 in edges
        out.append((float(x) + 0.5, float(y) + 0.5, int(v)) if v else (0.0, 0.0, 0))
    return tuple(out)


def _object(a: dict, j: int, name: str, at: str, size, points: tuple = ()) -> Object:
    bbox = a.get("bbox")
    if not (isinstance(bbox, list) and len(bbox) == 4 and all(_is_num(v) for v in bbox)):
        raise AnnotationError(f"{at}: bbox is {bbox!r}; it must be [x, y, width, height], finite numbers")
    x, y, bw, bh = (float(v) for v in bbox)
    if bw < 0 or bh < 0:
        raise AnnotationError(f"{at}: bbox width {bw:g} and height {bh:g} must be >= 0 (0: an empty box, which "
                              f"annotations.repair drops)")
    crowd = a.get("iscrowd", 0)
    if crowd not in (0, 1):
        raise AnnotationError(f"{at}: iscrowd is {crowd!r}; it must be 0 or 1")
    seg = a.get("segmentation")
    polygons: list = []
    rle = None
    if isinstance(seg, list):
        for k, poly in enumerate(seg):
            if not isinstance(poly, list) or not all(_is_num(v) for v in poly):
                raise AnnotationError(f"{at}: segmentation[{k}] must be a list of finite numbers x1, y1, x2, ...")
            if not poly:
                continue  # some exporters write [[]] for "no polygon"
            if len(poly) < 6 or len(poly) % 2:
                raise AnnotationError(f"{at}: segmentation[{k}] has {len(poly)} numbers; a polygon is at least "
                                      f"3 points, x and y each")
            polygons.append(tuple((float(px), float(py)) for px, py in zip(poly[0::2], poly[1::2])))
    elif isinstance(seg, dict):
        (rh, rw), _ = rle_counts(seg, f"{at}: segmentation")
        if size is not None and (rh, rw) != tuple(size):
            raise AnnotationError(f"{at}: the RLE mask is {rw}x{rh} but the image is {size[1]}x{size[0]}")
        rle = {"size": [rh, rw], "counts": seg["counts"]}
    elif seg is not None:
        raise AnnotationError(f"{at}: segmentation must be polygons (a list) or RLE (a dict)")
    return Object(name=name, box=(x, y, x + bw, y + bh), crowd=bool(crowd), polygons=tuple(polygons), rle=rle,
                  keypoints=_keypoints(a.get("keypoints"), points, at))


def read_coco(path: str, where: str) -> CocoFile:
    """Read one instances JSON. What concerns one image rejects that image (in `rejected`). NotCoco when the JSON
    is no instances file (its top level is not an object, or it has no `images` list); AnnotationError when it is
    one that cannot be read as a whole (invalid JSON, `categories` that collide, `annotations` not a list)."""
    try:
        data = load_json(path)
    except UntrustedFileError as exc:
        raise AnnotationError(file_message(exc, path, where)) from None
    if not isinstance(data, dict):
        raise NotCoco(f"{where}: the top level is not an object; not a COCO instances file")
    if not isinstance(data.get("images"), list):
        raise NotCoco(f"{where}: no `images` list; not a COCO instances file")
    points: dict[str, tuple] = {}
    categories = _categories(data, where, points)
    rejected: dict[str, list[str]] = {}
    by_id, info, listed = _images(data, where, rejected)
    anns = data.get("annotations", [])
    if not isinstance(anns, list):
        raise AnnotationError(f"{where}: `annotations` must be a list")
    objects: dict[str, list] = {name: [] for name in info}
    labels: dict[str, list] = {name: [] for name in info}
    for j, a in enumerate(anns):
        if not isinstance(a, dict) or not _is_int(a.get("image_id")):
            _add(rejected, where, f"{where}: annotations[{j}] has no integer `image_id`")
            continue
        ident = f"id {a['id']}, " if "id" in a else ""
        name = by_id.get(a["image_id"])
        if name is None:
            if a["image_id"] not in listed:  # else its image is rejected already
                _add(rejected, where, f"{where}: annotations[{j}] names image id {a['image_id']}, which is not in "
                                      f"`images`")
            continue
        if name in rejected:
            continue
        cat = a.get("category_id")
        category = categories.get(cat) if _is_int(cat) else None   # a list or an object is no key: not looked up
        label = f"annotations[{j}] ({ident}{category or f'category {cat!r}'})"
        at = f"{where}: {label}"
        try:
            if category is None:
                raise AnnotationError(f"{at}: category_id {cat!r} is not in `categories`")
            names = points.get(category, ((),))[0]
            objects[name].append(_object(a, j, category, at, info[name]["size"], names))
            labels[name].append(label)
        except AnnotationError as exc:
            _add(rejected, name, str(exc))
    images = {name: Annotation(objects=tuple(objects[name]), source=where,
                               extra={"size": meta["size"], "where": tuple(labels[name]), "id": meta["id"]})
              for name, meta in info.items() if name not in rejected}
    return CocoFile(source=where, categories=categories, images=images, rejected=_joined(rejected), keypoints=points)


# -- the job: instances JSON(s) at its root ----------------------------------------------------------------------

_SPLIT_IN_NAME = re.compile(r"(?:^|[^a-z])(train|val|valid|validation|test)(?:[^a-z]|$)")


def _coco_files(tree: Tree, strict: bool) -> list[CocoFile]:
    """The instances JSONs at the root. strict (format named): each must read as COCO; auto: a JSON that is no
    COCO file (NotCoco) is passed over, one that is but is broken (invalid JSON, colliding categories) raises."""
    out = []
    for name in tree.files.get("", []):
        if extension(name) != ".json" or name in CONTROL_FILES:
            continue
        try:
            out.append(read_coco(tree.path(name), name))
        except NotCoco:
            if strict:
                raise
    return out


def read_job(reading: Reading, files: list[CocoFile]) -> None:
    """A COCO job from its instances JSONs (`files`): the images they list, and those on disk they do not
    (negatives); splits from the JSONs' names or from split folders; masks/ or SegmentationClass/ beside."""
    tree = reading.tree
    categories: dict[int, str] = {}
    by_name: dict[str, int] = {}
    first: dict[tuple, str] = {}        # ("id", 3) or ("name", "dog") -> the file that gave it first
    listed: dict[str, Annotation] = {}
    for cf in files:
        reading.skip.add(cf.source)
        for cid, cname in cf.categories.items():
            if categories.setdefault(cid, cname) != cname:
                raise AnnotationError(f"{cf.source}: category id {cid} is {cname!r} here but {categories[cid]!r} "
                                      f"in {first[('id', cid)]}")
            if by_name.setdefault(cname, cid) != cid:
                raise AnnotationError(f"{cf.source}: category {cname!r} is id {cid} here but {by_name[cname]} in "
                                      f"{first[('name', cname)]}")
            first.setdefault(("id", cid), cf.source)
            first.setdefault(("name", cname), cf.source)
        for key, msg in cf.rejected.items():
            reading.reject(key, msg)
        m = _SPLIT_IN_NAME.search(cf.source.lower())
        for img, ann in cf.images.items():
            if img in listed:
                reading.reject(img, f"{cf.source}: {img} is also listed in {listed[img].source}")
                continue
            listed[img] = ann
            if m:
                reading.splits[img] = SPLIT_NAMES[m.group(1)]
    reading.keypoints = _schema(files)
    for img, ann in listed.items():
        if img in reading.rejected:
            continue
        if not tree.isfile(img):
            reading.reject(ann.source, f"{ann.source}: image id {ann.extra.get('id')} names {img!r}, which is not "
                                       f"in the job folder (file_name is relative to the job folder)")
            continue
        if reading.fixed is None:
            low = [k for k, o in enumerate(ann.objects) if by_name[o.name] < 1]
            if low:
                o = ann.objects[low[0]]
                reading.reject(img, f"{ann.source}: {object_label(ann, low[0])}: category id {by_name[o.name]}; ids "
                                    f"start at 1 (0 is the background): renumber the categories or give a fixed "
                                    f"label map")
                continue
        reading.settle(img, lambda hw, a=ann: a)
    tops = sorted({img.split("/", 1)[0] if "/" in img else "" for img in listed})
    reading.image_dirs = ("",) if "" in tops or not tops else tuple(tops)
    mask_dirs = [(top, m) for top, m in (("images", "masks"), ("JPEGImages", "SegmentationClass"))
                 if tree.isdir(m) and (top in reading.image_dirs or reading.image_dirs == ("",))]
    reading.skip.update(m for _, m in mask_dirs)
    on_disk = {d: [i for i in tree.below(d, IMAGE_EXTENSIONS) if not skipped(i, reading.skip)]
               for d in reading.image_dirs}
    for img in (i for d in reading.image_dirs for i in on_disk[d]):
        if img not in listed and img not in reading.rejected:
            reading.settle(img, lambda hw: None)   # on disk, in no JSON: unannotated
    if not reading.splits:   # the listed images and those on disk in no JSON (negatives) alike
        for top in reading.image_dirs:
            mine = {img for img in listed if top == "" or img.startswith(top + "/")}
            folder_splits(reading, top, sorted(mine.union(on_disk[top])))
    if reading.fixed is None:
        reading.label_map = LabelMap({n: i for i, n in categories.items() if i >= 1})
    for top, masks in mask_dirs:
        pair_masks(reading, top, masks, tree.below(top, IMAGE_EXTENSIONS))


def _schema(files: list[CocoFile]) -> KeypointSchema | None:
    """The job's keypoints: every category that has them must name the same points (one layout per record)."""
    first = None
    classes = []
    for cf in files:
        for cname, (names, skeleton) in cf.keypoints.items():
            if first is None:
                first = (names, skeleton, cf.source, cname)
            elif names != first[0]:
                raise AnnotationError(f"{cf.source}: category {cname!r} names the keypoints {list(names)} but "
                                      f"{first[3]!r} in {first[2]} names {list(first[0])}; a job has one set of "
                                      f"keypoints")
            if cname not in classes:
                classes.append(cname)
    if first is None:
        return None
    return KeypointSchema(first[0], flip_from_names(first[0]), first[1], tuple(classes), first[2])


FORMAT = AnnotationFormat(
    "coco", read=read_job, expected="expected an instances JSON at the job root", title="COCO",
    layouts=(Layout(30, lambda tree, named: _coco_files(tree, strict=named) or None),),
    markers=(Marker(".json", under=""),))
