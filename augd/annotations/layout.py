"""Which annotation layout a job folder has, and all of its annotations read and checked against the images.

Layouts, looked for in this order (the first that fits wins; nothing fits: a classification job):

  voc    JPEGImages/ + Annotations/*.xml (+ ImageSets/Main/*.txt splits, + SegmentationClass/ masks)
  yolo   images/ + labels/ (Ultralytics; images/<split>/ splits; names from data.yaml or classes.txt)
  coco   instances JSON(s) at the root with an `images` list (file_name relative to the job)
  masks  JPEGImages/ + SegmentationClass/, or images/ + masks/ (a PNG of class indices per image)
  voc    an .xml beside an image, with the same stem, whose root is <annotation>
  yolo   a .txt beside an image, with data.yaml or classes.txt at the root

Boxes are checked twice: against the size the annotation file states (VOC's <size>, COCO's width/height; a
stated size differing from the image's is refused), and against the image itself, whose header (EXIF orientation
applied) read_job reads: a box may pass the border by 1 pixel (then it is clipped to the image), no more. An image
whose header cannot be read is left out of both `annotations` and `rejected`: the scan rejects it with its own
reason. Local folders only. TensorFlow-free.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from augd.annotations.coco import CocoFile, NotCoco, read_coco
from augd.annotations.geometry import clip_polygon
from augd.annotations.labelmap import LabelMap
from augd.annotations.masks import mask_size
from augd.annotations.model import Annotation, AnnotationError
from augd.annotations.tree import IMAGE_EXTENSIONS, Sizes, Tree, annotations_beside, extension, pair, stem, under
from augd.annotations.voc import read_voc
from augd.annotations.yolo import NAME_FILES, read_names, read_yolo
from augd.errors import UntrustedFileError
from augd.files import inside, read_capped
from augd.parsing.jsonxml import parse_xml
from augd.jobfolder import CONTROL_FILES

__all__ = ["FORMATS", "IMAGE_EXTENSIONS", "SLACK", "SPLIT_NAMES", "AnnotatedJob", "detect_format", "read_job"]

FORMATS = ("voc", "coco", "yolo", "masks")
#: Folder names that make a split (Ultralytics and Roboflow write valid/).
SPLIT_NAMES = {"train": "train", "validation": "validation", "val": "validation", "valid": "validation",
               "test": "test"}
#: How far (pixels) a box or polygon may pass the image's border before it is refused.
SLACK = 1.0
#: The VOC devkit's folders besides JPEGImages/: never images, never class folders.
VOC_FOLDERS = ("Annotations", "ImageSets", "SegmentationClass", "SegmentationObject")
_MESSAGES_SHOWN = 10
_LIST_MAX_BYTES = 64 * 1024 * 1024
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True)
class AnnotatedJob:
    """A detection or segmentation job's annotations, read and checked (see the module docstring)."""
    format: str
    annotations: dict[str, Annotation]   # image relpath -> its annotation (source "": no annotation file/entry)
    rejected: dict[str, str]             # image relpath (or an annotation file's) -> bad_annotation message
    label_map: LabelMap
    skip: frozenset[str]                 # relpaths the scan must not read as images or class folders
    image_dirs: tuple[str, ...]          # where the images are ("" for the whole job)
    splits: dict[str, str]               # image relpath -> "train" | "validation" | "test"; {} without splits


class _Reading:
    """What read_job gathers while it reads one job."""

    def __init__(self, root: str, tree: Tree, fmt: str, fixed: LabelMap | None):
        self.root, self.tree, self.format, self.fixed = root, tree, fmt, fixed
        self.sizes = Sizes(tree)
        self.annotations: dict[str, Annotation] = {}
        self.rejected: dict[str, list[str]] = {}
        self.skip: set[str] = set()
        self.splits: dict[str, str] = {}
        self.image_dirs: tuple[str, ...] = ("",)
        self.label_map: LabelMap | None = fixed

    def reject(self, key: str, message: str) -> None:
        self.annotations.pop(key, None)
        self.rejected.setdefault(key, []).append(message)

    def open_check(self, rel: str) -> str:
        """The absolute path of an annotation file; refused when it is a link leading out of the job."""
        path = self.tree.path(rel)
        if rel in self.tree.links and not inside(self.root, path):
            raise AnnotationError(f"{rel}: a link to a file outside the job folder")
        return path

    def settle(self, image: str, read) -> None:
        """Read one image's annotation with `read(hw)` (None: a negative), check it against the image, keep it."""
        size = self.sizes(image)
        if size is None:
            return
        h, w, orientation = size
        try:
            ann = read((h, w))
            ann = Annotation() if ann is None else _fit(ann, image, h, w, orientation)
            if self.fixed is not None:
                for k, obj in enumerate(ann.objects):
                    self.fixed.id_of(obj.name, f"{ann.source}: {_label(ann, k)}")
        except AnnotationError as exc:
            self.reject(image, str(exc))
            return
        self.annotations[image] = ann

    def job(self) -> AnnotatedJob:
        rejected = {}
        for key, msgs in sorted(self.rejected.items()):
            more = len(msgs) - _MESSAGES_SHOWN
            rejected[key] = "; ".join(msgs[:_MESSAGES_SHOWN]) + (f"; and {more} more" if more > 0 else "")
        label_map = self.label_map if self.label_map is not None else LabelMap({})
        return AnnotatedJob(format=self.format, annotations=dict(sorted(self.annotations.items())),
                            rejected=rejected, label_map=label_map, skip=frozenset(self.skip),
                            image_dirs=self.image_dirs, splits=dict(sorted(self.splits.items())))


def _label(ann: Annotation, k: int) -> str:
    labels = ann.extra.get("where", ())
    return labels[k] if k < len(labels) else f"object {k + 1} ({ann.objects[k].name})"


def _fit(ann: Annotation, image: str, h: int, w: int, orientation: int) -> Annotation:
    """Check the annotation against the image (its stated size, each box and polygon within SLACK of the border,
    each RLE's size) and clip the boxes and polygons to the image (the slack is rounding, not truncation: variant
    0 and the augmented variants then see the same object, and no pixel of the slack counts as its area)."""
    stated = ann.extra.get("size")
    if stated is not None and tuple(stated) != (h, w):
        turned = f" upright (EXIF orientation {orientation})" if orientation in (5, 6, 7, 8) else ""
        raise AnnotationError(f"{ann.source}: states the image is {stated[1]}x{stated[0]} (width x height) but "
                              f"{image} is {w}x{h}{turned}; its boxes would not fit the pixels")
    out = []
    for k, obj in enumerate(ann.objects):
        at = f"{ann.source}: {_label(ann, k)}"
        x0, y0, x1, y1 = obj.box
        if x0 < -SLACK or y0 < -SLACK or x1 > w + SLACK or y1 > h + SLACK:
            raise AnnotationError(f"{at}: box ({x0:g}, {y0:g}, {x1:g}, {y1:g}) passes the border of the {w}x{h} "
                                  f"image by more than {SLACK:g} pixel (pixel edges: the image spans 0..{w} x "
                                  f"0..{h})")
        polygons = []
        for poly in obj.polygons:
            for px, py in poly:
                if not (-SLACK <= px <= w + SLACK and -SLACK <= py <= h + SLACK):
                    raise AnnotationError(f"{at}: polygon point ({px:g}, {py:g}) lies outside the {w}x{h} image")
            inside = clip_polygon(poly, float(w), float(h))
            if len(inside) >= 3 and len({p[0] for p in inside}) > 1 and len({p[1] for p in inside}) > 1:
                polygons.append(tuple(inside))
        if obj.polygons and not polygons:
            raise AnnotationError(f"{at}: its polygons lie outside the {w}x{h} image (on its border at most)")
        if obj.rle is not None and tuple(obj.rle["size"]) != (h, w):
            rh, rw = obj.rle["size"]
            raise AnnotationError(f"{at}: the RLE mask is {rw}x{rh} but {image} is {w}x{h}")
        box = (max(x0, 0.0), max(y0, 0.0), min(x1, float(w)), min(y1, float(h)))
        if box[2] <= box[0] or box[3] <= box[1]:
            raise AnnotationError(f"{at}: box ({x0:g}, {y0:g}, {x1:g}, {y1:g}) lies outside the {w}x{h} image")
        polygons = tuple(polygons)
        out.append(obj if box == obj.box and polygons == obj.polygons else replace(obj, box=box, polygons=polygons))
    return replace(ann, objects=tuple(out))


def _folder_splits(reading: _Reading, top: str, images: list[str]) -> None:
    """Splits from the folders right below `top` when every one of them names a split."""
    subdirs = reading.tree.subdirs(top)
    if subdirs and all(d in SPLIT_NAMES for d in subdirs):
        for img in images:
            first = under(top, img).split("/", 1)
            if len(first) == 2:
                reading.splits[img] = SPLIT_NAMES[first[0]]


def _voc_sets(reading: _Reading, images: list[str]) -> None:
    """Splits from ImageSets/Main (or ImageSets/Segmentation): train.txt, val.txt, test.txt (trainval.txt when
    neither train nor val exists). Ids listed without an image are ignored (VOC's lists cover downloads that
    may be partial); an image in two splits is refused."""
    tree = reading.tree
    folder = next((f for f in ("ImageSets/Main", "ImageSets/Segmentation") if tree.isdir(f)), None)
    if folder is None:
        return
    files = {n[:-4]: f"{folder}/{n}" for n in tree.files[folder] if n.endswith(".txt")}
    if "train" not in files and "val" not in files and "trainval" in files:
        files["train"] = files.pop("trainval")
    by_stem = {stem(under("JPEGImages", img)): img for img in images}
    seen: dict[str, str] = {}
    for name, split in (("train", "train"), ("val", "validation"), ("test", "test")):
        if name not in files:
            continue
        try:
            text = read_capped(reading.open_check(files[name]), _LIST_MAX_BYTES, "split list").decode("utf-8")
        except (OSError, UntrustedFileError, UnicodeDecodeError) as exc:
            raise AnnotationError(f"{files[name]}: cannot read the split list: {exc}") from None
        for line in text.splitlines():
            ident = line.split()[0] if line.split() else ""
            img = by_stem.get(ident)
            if img is None:
                continue
            if img in seen and seen[img] != files[name]:
                reading.reject(img, f"{files[name]}: {ident} is also listed in {seen[img]}; an image belongs to "
                                    f"one split")
            seen[img] = files[name]
            reading.splits[img] = split


def _masks(reading: _Reading, image_top: str, mask_top: str, images: list[str]) -> None:
    """Pair each image with its mask PNG (mask_top mirrors image_top); a mask's size must equal its image's."""
    pairs, orphans, ambiguous = pair(reading.tree, image_top, mask_top, ".png", images)
    reading.skip.add(mask_top)
    for mask in orphans:
        reading.reject(mask, f"{mask}: a mask for a missing image: no {image_top}/{stem(under(mask_top, mask))}.*")
    for img, why in ambiguous.items():
        if img not in reading.rejected:
            reading.reject(img, why)
    for img, mask in pairs.items():
        ann = reading.annotations.get(img)
        if ann is None:
            continue
        h, w, _ = reading.sizes(img)
        try:
            mh, mw = mask_size(reading.open_check(mask), mask)
            if (mh, mw) != (h, w):
                raise AnnotationError(f"{mask}: the mask is {mw}x{mh} but {img} is {w}x{h}; a mask must match "
                                      f"its image pixel for pixel")
        except AnnotationError as exc:
            reading.reject(img, str(exc))
            continue
        reading.annotations[img] = replace(ann, mask=reading.tree.path(mask), source=ann.source or mask)


def _read_pairs(reading: _Reading, images: list[str], pairs: dict, read) -> None:
    for img in images:
        if img in reading.rejected:
            continue
        ann = pairs.get(img)
        reading.settle(img, (lambda hw, a=ann: None if a is None else read(reading.open_check(a), a, hw)))


def _read_voc(reading: _Reading, beside: bool) -> None:
    tree = reading.tree
    if beside:
        images = tree.below("", IMAGE_EXTENSIONS)
        pairs, orphans, ambiguous = pair(tree, "", "", ".xml", images)
        reading.skip.update(tree.below("", {".xml"}))
        _folder_splits(reading, "", images)
    else:
        images = tree.below("JPEGImages", IMAGE_EXTENSIONS)
        pairs, orphans, ambiguous = pair(tree, "JPEGImages", "Annotations", ".xml", images)
        reading.skip.update(f for f in VOC_FOLDERS if tree.isdir(f))
        reading.image_dirs = ("JPEGImages",)
        _voc_sets(reading, images)
    for ann in orphans:
        where = "beside it" if beside else "in JPEGImages/"
        reading.reject(ann, f"{ann}: an annotation for a missing image: no {stem(ann.rsplit('/', 1)[-1])}.* {where}")
    for img, why in ambiguous.items():
        reading.reject(img, why)
    # Every paired XML is read, whatever becomes of its image (a header that cannot be read, a split conflict):
    # the class names of every file that parses make the ids, so one bad image does not move them.
    parsed: dict[str, Annotation | AnnotationError] = {}
    for rel in sorted(set(pairs.values())):
        try:
            parsed[rel] = read_voc(reading.open_check(rel), rel)
        except AnnotationError as exc:
            parsed[rel] = exc

    def read(path, rel, hw):
        if isinstance(parsed[rel], AnnotationError):
            raise parsed[rel]
        return parsed[rel]

    _read_pairs(reading, images, pairs, read)
    if reading.fixed is None:
        names = {o.name for a in parsed.values() if isinstance(a, Annotation) for o in a.objects}
        reading.label_map = LabelMap.from_names(sorted(names))
    if not beside and tree.isdir("SegmentationClass"):
        _masks(reading, "JPEGImages", "SegmentationClass", images)


def _read_yolo(reading: _Reading, tree_layout: bool) -> None:
    tree = reading.tree
    found = read_names(reading.root)
    if found is None:
        raise AnnotationError("yolo: no class names; put data.yaml (names: [...]) or classes.txt (one name per "
                              "line) at the job root")
    names, _ = found
    reading.skip.update(n for n in NAME_FILES if tree.isfile(n))
    read = (lambda path, rel, hw: read_yolo(path, rel, names, hw))
    if tree_layout:
        images = tree.below("images", IMAGE_EXTENSIONS)
        pairs, orphans, ambiguous = pair(tree, "images", "labels", ".txt", images)
        reading.skip.add("labels")
        reading.image_dirs = ("images",)
        _folder_splits(reading, "images", images)
        for ann in orphans:
            reading.reject(ann, f"{ann}: labels for a missing image: no images/"
                                f"{stem(under('labels', ann))}.*")
    else:
        images = tree.below("", IMAGE_EXTENSIONS)
        pairs, _, ambiguous = pair(tree, "", "", ".txt", images)   # other .txt files are no labels: not read
        reading.skip.update(tree.below("", {".txt"}))
        _folder_splits(reading, "", images)
    for img, why in ambiguous.items():
        reading.reject(img, why)
    _read_pairs(reading, images, pairs, read)
    if reading.fixed is None:
        reading.label_map = LabelMap.from_names(names)
    if tree_layout and tree.isdir("masks"):
        _masks(reading, "images", "masks", images)


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


def _read_coco(reading: _Reading, files: list[CocoFile]) -> None:
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
                reading.reject(img, f"{ann.source}: {_label(ann, low[0])}: category id {by_name[o.name]}; ids "
                                    f"start at 1 (0 is the background): renumber the categories or give a fixed "
                                    f"label map")
                continue
        reading.settle(img, lambda hw, a=ann: a)
    tops = sorted({img.split("/", 1)[0] if "/" in img else "" for img in listed})
    reading.image_dirs = ("",) if "" in tops or not tops else tuple(tops)
    mask_dirs = [(top, m) for top, m in (("images", "masks"), ("JPEGImages", "SegmentationClass"))
                 if tree.isdir(m) and (top in reading.image_dirs or reading.image_dirs == ("",))]
    reading.skip.update(m for _, m in mask_dirs)
    on_disk = {d: [i for i in tree.below(d, IMAGE_EXTENSIONS) if not _skipped(i, reading.skip)]
               for d in reading.image_dirs}
    for img in (i for d in reading.image_dirs for i in on_disk[d]):
        if img not in listed and img not in reading.rejected:
            reading.settle(img, lambda hw: None)   # on disk, in no JSON: unannotated
    if not reading.splits:   # the listed images and those on disk in no JSON (negatives) alike
        for top in reading.image_dirs:
            mine = {img for img in listed if top == "" or img.startswith(top + "/")}
            _folder_splits(reading, top, sorted(mine.union(on_disk[top])))
    if reading.fixed is None:
        reading.label_map = LabelMap({n: i for i, n in categories.items() if i >= 1})
    for top, masks in mask_dirs:
        _masks(reading, top, masks, tree.below(top, IMAGE_EXTENSIONS))


def _skipped(rel: str, skip: set[str]) -> bool:
    parts = rel.split("/")
    return any("/".join(parts[:k]) in skip for k in range(1, len(parts) + 1))


def _read_masks(reading: _Reading, top: str) -> None:
    tree = reading.tree
    masks = "SegmentationClass" if top == "JPEGImages" else "masks"
    images = tree.below(top, IMAGE_EXTENSIONS)
    reading.image_dirs = (top,)
    if top == "JPEGImages":
        reading.skip.update(f for f in VOC_FOLDERS if tree.isdir(f))
        _voc_sets(reading, images)
    else:
        _folder_splits(reading, top, images)
    for img in images:
        if img not in reading.rejected:
            reading.settle(img, lambda hw: None)
    _masks(reading, top, masks, images)


def _is_voc_xml(tree: Tree, rel: str) -> bool:
    try:
        return parse_xml(tree.path(rel)).tag == "annotation"
    except UntrustedFileError:
        return False


def _detect(tree: Tree, fmt: str):
    """(format, how) of the job's layout, or None; `fmt` other than "auto" looks only for that format's."""
    isdir, want = tree.isdir, (lambda f: fmt in ("auto", f))
    if want("voc") and isdir("JPEGImages") and isdir("Annotations"):
        return "voc", "tree"
    if want("yolo") and isdir("images") and isdir("labels"):
        return "yolo", "tree"
    if want("coco"):
        files = _coco_files(tree, strict=fmt == "coco")
        if files:
            return "coco", files
    if want("masks") and isdir("JPEGImages") and isdir("SegmentationClass"):
        return "masks", "JPEGImages"
    if want("masks") and isdir("images") and isdir("masks"):
        return "masks", "images"
    if want("voc"):
        xmls = annotations_beside(tree, ".xml")
        if xmls and (fmt == "voc" or _is_voc_xml(tree, xmls[0])):
            return "voc", "beside"
    if want("yolo") and (fmt == "yolo"
                         or (annotations_beside(tree, ".txt") and any(tree.isfile(n) for n in NAME_FILES))):
        return "yolo", "beside"
    return None


def detect_format(root: str) -> str | None:
    """The annotation format of the job at `root` ("voc", "coco", "yolo", "masks"), or None: a classification
    job (class folders). Only the layouts in the module docstring count; nothing is guessed from contents.
    AnnotationError when a JSON at the root is a COCO file that is broken (see read_job)."""
    if _URL.match(root) and not root.startswith("file://"):
        return None
    found = _detect(Tree(root.removeprefix("file://")), "auto")
    return None if found is None else found[0]


def read_job(root: str, fmt: str = "auto", label_map: LabelMap | None = None) -> AnnotatedJob | None:
    """Read and check every annotation of the job at `root`. fmt "auto" detects the layout (None when there is
    none); a named format must be there. `label_map` fixes the ids: an object of another class rejects its image.

    A bad annotation rejects its image only (in `rejected`, with the file, the object and what is wrong).
    AnnotationError is raised only when the job as a whole cannot be read in the format: the format named is not
    there, YOLO without class names, a JSON at the root that is not valid JSON, or a COCO file (an object with
    an `images` list) that is broken: categories that collide within it or across files, `annotations` not a
    list. With fmt "auto" a JSON that is valid but no COCO file is passed over.
    """
    if fmt != "auto" and fmt not in FORMATS:
        raise ValueError(f"annotation format {fmt!r}: expected auto or one of {', '.join(FORMATS)}")
    if _URL.match(root) and not root.startswith("file://"):
        if fmt == "auto":
            return None
        raise AnnotationError(f"{root}: annotations are read from local job folders only")
    root = root.removeprefix("file://")
    tree = Tree(root)
    found = _detect(tree, fmt)
    if found is None:
        if fmt == "auto":
            return None
        raise AnnotationError(f"{root}: no {fmt} annotations: {_EXPECTED[fmt]}")
    name, how = found
    reading = _Reading(root, tree, name, label_map)
    if name == "voc":
        _read_voc(reading, beside=how == "beside")
    elif name == "yolo":
        _read_yolo(reading, tree_layout=how == "tree")
    elif name == "coco":
        _read_coco(reading, how)
    else:
        _read_masks(reading, how)
    return reading.job()


_EXPECTED = {
    "voc": "expected JPEGImages/ with Annotations/*.xml, or an .xml beside each image",
    "coco": "expected an instances JSON at the job root",
    "yolo": "expected images/ with labels/, or a .txt beside each image",
    "masks": "expected JPEGImages/ with SegmentationClass/, or images/ with masks/",
}
