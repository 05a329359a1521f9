"""What reading one job's annotations gathers, whichever format reads them, and the checks every format shares.

A format (augd/annotations/<format>.py) describes itself with an AnnotationFormat: the layouts it detects (each
with a rank: augd.annotations.layout tries every format's layouts in rank order, the first that fits wins), how
it reads a job into a Reading, and what a user must provide when the format is named but not found. Boxes are
checked twice: against the size the annotation file states (VOC's <size>, COCO's width/height; a stated size
differing from the image's is refused), and against the image itself, whose header (EXIF orientation applied)
Reading.settle reads: a box may pass the border by SLACK pixels (then it is clipped to the image), no more, unless
near misses are repaired (augd.annotations.repair: clipped a little further, duplicates and empty boxes dropped). An
image whose header cannot be read is left out of both `annotations` and `rejected`: the scan rejects it with its
own reason. TensorFlow-free.
"""
from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, NamedTuple

from augd.annotations.geometry import clip_polygon
from augd.annotations.labelmap import LabelMap
from augd.annotations.model import Annotation, AnnotationError, KeypointSchema
from augd.annotations.repair import BORDER_PX, BORDER_SHARE, border, without_duplicates
from augd.annotations.tree import Sizes, Tree, read_image_header, stem, under, upright
from augd.errors import UntrustedFileError
from augd.files import inside, read_capped
from augd.io.scan import SPLIT_FOLDERS

__all__ = ["SLACK", "SPLIT_NAMES", "VOC_FOLDERS", "AnnotatedJob", "AnnotationFormat", "FileRead", "FileToRead",
           "Layout", "Marker", "Reading", "folder_splits", "object_label", "read_each", "serial_map", "settle_pairs",
           "skipped", "voc_sets"]

#: Folder names that make a split: the scan's own (Ultralytics and Roboflow write valid/).
SPLIT_NAMES = SPLIT_FOLDERS
#: How far (pixels) a box or polygon may pass the image's border before it is refused.
SLACK = 1.0
#: The VOC devkit's folders besides JPEGImages/: never images, never class folders.
VOC_FOLDERS = ("Annotations", "ImageSets", "SegmentationClass", "SegmentationObject")
_MESSAGES_SHOWN = 10
_LIST_MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Layout:
    """One way a format's files can be laid out in a job folder. `find(tree, named)` says whether the job has it:
    None, or what the format's `read` is told (how it is laid out: a folder, "tree", the files found). `named`:
    the user named this format (a format may then look less strictly, or raise what is wrong). `auto`: False for a
    layout found only when its format is named: its files are another format's too (YOLO-OBB's lines are YOLO
    polygons of 4 corners), which `format: auto` reads them as."""
    rank: int                                   # the order across all formats' layouts: lowest is tried first
    find: Callable[[Tree, bool], Any]
    auto: bool = True


@dataclass(frozen=True)
class Marker:
    """Files that mark a job as annotated in a format before anything is read (augd.job.executors.choice's estimate
    counts a job by its files' names: such a file is no image). `under`: None anywhere, "" the job's root only, a
    name anywhere below the root's folder of that name (with `in_split`: below that folder of a split folder at the
    root, `train/labelTxt/`); `beside`: only beside an image of the same stem."""
    extension: str
    under: str | None = None
    beside: bool = False
    in_split: bool = False

    def marks(self, folder: str, name: str, stems) -> bool:
        """Whether `name` in the job's `folder` ("" the root; "/"-separated) is such a file; `stems`: the stems of
        the images in that folder."""
        if not name.lower().endswith(self.extension):
            return False
        parts = folder.split("/")
        if self.in_split:
            if len(parts) < 2 or parts[0] not in SPLIT_NAMES or parts[1] != self.under:
                return False
        elif self.under is not None and (folder != "" if self.under == "" else parts[0] != self.under):
            return False
        return not self.beside or name[:-len(self.extension)] in stems


@dataclass(frozen=True)
class AnnotationFormat:
    """An annotation format: its name (the `annotations: format:` value), its layouts, how it reads a job laid out
    as one of them (`read(reading, found)`, `found`: what the layout's find returned), and what a user sees when
    the format is named but not there; `title`: how prose names it (help texts, messages); `markers`: the files
    that mark a job as this format's before it is read; `objects`: whether its annotations hold objects (boxes,
    polygons, points), not only a class mask per image."""
    name: str
    layouts: tuple[Layout, ...]
    read: Callable[["Reading", Any], None]
    expected: str
    title: str = ""
    markers: tuple[Marker, ...] = ()
    objects: bool = True


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
    keypoints: KeypointSchema | None = None  # the job's keypoints (COCO person keypoints, YOLO pose), or None
    #: image relpath -> its near misses repaired by reason (augd.annotations.repair), for the images kept
    repaired: dict = field(default_factory=dict)
    #: image relpath -> the header read (augd.formats.ImageHeader), so the scan does not read it again; the
    #: plan empties it before the annotations are sent to the workers
    headers: dict = field(default_factory=dict, compare=False, repr=False)


def serial_map(fn, items: list) -> list:
    """Reading.map's default: fn(items) here."""
    return fn(items)


class FileToRead(NamedTuple):
    """One annotation file for read_each: where it is, or why it may not be opened."""
    path: str | AnnotationError     # its absolute path, or the AnnotationError that refused opening it
    rel: str                        # its path in the job
    image: tuple | None             # its image's Sizes.image_file (path, extension), or None


class FileRead(NamedTuple):
    """What read_each made of a FileToRead."""
    annotation: Annotation | AnnotationError | None   # None: with `sized`, the image's header cannot be read
    header: Any                                       # the image's header (io.scan), or None


def read_each(items: list[FileToRead], read, sized: bool) -> list[FileRead]:
    """Each file read by `read(path, rel)`, or with `sized` `read(path, rel, hw=(height, width))` of the upright
    image, whose header then comes first: FileRead(None, None) when it cannot be read (the scan rejects that
    image). Reading.map's unit, which may run on a worker process."""
    out = []
    for path, rel, image in items:
        header = None if image is None else read_image_header(*image)
        if sized and header is None:
            out.append(FileRead(None, None))
            continue
        try:
            if isinstance(path, AnnotationError):
                raise path
            out.append(FileRead(read(path, rel, hw=upright(header)[:2]) if sized else read(path, rel), header))
        except AnnotationError as exc:
            out.append(FileRead(exc, header))
    return out


class Reading:
    """What a format gathers while it reads one job; `job()` is the result. `map(fn, items)`: how its files are
    read (fn: a module-level function of a list of picklable items, one result per item): the job may run fn on
    its idle worker processes (augd.job.workers.pool.chunked_map)."""

    def __init__(self, root: str, tree: Tree, fmt: str, fixed: LabelMap | None, mapper=serial_map,
                 repair: bool = False):
        self.root, self.tree, self.format, self.fixed, self.map = root, tree, fmt, fixed, mapper
        self.repair = repair
        self.repaired: dict[str, Counter] = {}
        self.sizes = Sizes(tree)
        self.annotations: dict[str, Annotation] = {}
        self.rejected: dict[str, list[str]] = {}
        self.skip: set[str] = set()
        self.splits: dict[str, str] = {}
        self.image_dirs: tuple[str, ...] = ("",)
        self.label_map: LabelMap | None = fixed
        self.keypoints: KeypointSchema | None = None

    def reject(self, key: str, message: str) -> None:
        self.annotations.pop(key, None)
        self.rejected.setdefault(key, []).append(message)

    def open_check(self, rel: str) -> str:
        """The absolute path of an annotation file; refused when it is a link leading out of the job."""
        path = self.tree.path(rel)
        if rel in self.tree.links and not inside(self.root, path):
            raise AnnotationError(f"{rel}: a link to a file outside the job folder")
        return path

    def read_files(self, pairs: dict[str, str], read, sized: bool = False) -> dict:
        """{image: its annotation file} -> {annotation file: its Annotation or AnnotationError (None: the image's
        header cannot be read, with `sized`)}, read by `read` (see read_each) through `map`; each image's header
        is kept in `sizes`."""
        items = []
        for img, rel in pairs.items():
            try:
                path = self.open_check(rel)
            except AnnotationError as exc:
                path = exc
            items.append(FileToRead(path, rel, self.sizes.image_file(img)))
        got = {}
        for (img, rel), done in zip(pairs.items(), self.map(functools.partial(read_each, read=read, sized=sized),
                                                            items)):
            self.sizes.known(img, done.header)
            got[rel] = done.annotation
        return got

    def settle(self, image: str, read) -> None:
        """Read one image's annotation with `read(hw)` (None: a negative), check it against the image, keep it."""
        size = self.sizes(image)
        if size is None:
            return
        h, w, orientation = size
        try:
            ann = read((h, w))
            names = self.keypoints.names if self.keypoints else ()
            ann, repairs = (Annotation(), Counter()) if ann is None else _fit(ann, image, h, w, orientation, names,
                                                                              self.repair)
            if self.fixed is not None:
                for k, obj in enumerate(ann.objects):
                    self.fixed.id_of(obj.name, f"{ann.source}: {object_label(ann, k)}")
        except AnnotationError as exc:
            self.reject(image, str(exc))
            return
        self.annotations[image] = ann
        if repairs:
            self.repaired[image] = repairs

    def job(self) -> AnnotatedJob:
        rejected = {}
        for key, msgs in sorted(self.rejected.items()):
            more = len(msgs) - _MESSAGES_SHOWN
            rejected[key] = "; ".join(msgs[:_MESSAGES_SHOWN]) + (f"; and {more} more" if more > 0 else "")
        label_map = self.label_map if self.label_map is not None else LabelMap({})
        return AnnotatedJob(format=self.format, annotations=dict(sorted(self.annotations.items())),
                            rejected=rejected, label_map=label_map, skip=frozenset(self.skip),
                            image_dirs=self.image_dirs, splits=dict(sorted(self.splits.items())),
                            keypoints=self.keypoints,
                            repaired={k: dict(sorted(v.items())) for k, v in sorted(self.repaired.items())
                                      if k in self.annotations},
                            headers={k: h for k, h in self.sizes.headers.items() if h is not None})


def object_label(ann: Annotation, k: int) -> str:
    """How messages name object k of `ann`: the reader's own words for it, else its number and class."""
    labels = ann.extra.get("where", ())
    return labels[k] if k < len(labels) else f"object {k + 1} ({ann.objects[k].name})"


def _fit(ann: Annotation, image: str, h: int, w: int, orientation: int, names=(),
         repair: bool = False) -> tuple[Annotation, Counter]:
    """(the annotation checked against the image and clipped to it, its repairs by reason). Checked: its stated
    size, each box, polygon and labelled keypoint within SLACK of the border, each RLE's size; clipped to the image
    (the slack is rounding, not truncation: variant 0 and the augmented variants then see the same object, and no
    pixel of the slack counts as its area). `repair` (annotations.repair standard): near misses are repaired by
    augd.annotations.repair's rules and counted, not refused. `names`: the job's keypoint names, for messages."""
    stated = ann.extra.get("size")
    if stated is not None and tuple(stated) != (h, w):
        turned = f" upright (EXIF orientation {orientation})" if orientation in (5, 6, 7, 8) else ""
        raise AnnotationError(f"{ann.source}: states the image is {stated[1]}x{stated[0]} (width x height) but "
                              f"{image} is {w}x{h}{turned}; its boxes would not fit the pixels")
    sx, sy = (border(w), border(h)) if repair else (SLACK, SLACK)
    out, labels, repairs = [], [], Counter()
    for k, obj in enumerate(ann.objects):
        at = f"{ann.source}: {object_label(ann, k)}"
        x0, y0, x1, y1 = obj.box
        if x1 <= x0 or y1 <= y0:   # the readers refuse inverted boxes: this one has no width or no height
            if repair:
                repairs["degenerate"] += 1
                continue
            raise AnnotationError(f"{at}: box ({x0:g}, {y0:g}, {x1:g}, {y1:g}) is empty: width {x1 - x0:g}, height "
                                  f"{y1 - y0:g} (annotations.repair: standard drops such boxes)")
        if x0 < -sx or y0 < -sy or x1 > w + sx or y1 > h + sy:
            raise AnnotationError(f"{at}: box ({x0:g}, {y0:g}, {x1:g}, {y1:g}) passes the border of the {w}x{h} "
                                  f"image by more than {_slack(sx, sy, repair)} (pixel edges: the image spans "
                                  f"0..{w} x 0..{h})")
        far = x0 < -SLACK or y0 < -SLACK or x1 > w + SLACK or y1 > h + SLACK
        polygons = []
        for poly in obj.polygons:
            for px, py in poly:
                if not (-sx <= px <= w + sx and -sy <= py <= h + sy):
                    raise AnnotationError(f"{at}: polygon point ({px:g}, {py:g}) lies outside the {w}x{h} image")
                far = far or not (-SLACK <= px <= w + SLACK and -SLACK <= py <= h + SLACK)
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
        points, moved = _fit_points(obj.keypoints, at, h, w, names, sx, sy)
        repairs["clipped"] += far or moved
        out.append(obj if box == obj.box and polygons == obj.polygons and points == obj.keypoints
                   else replace(obj, box=box, polygons=polygons, keypoints=points))
        labels.append(object_label(ann, k))
    if repair:
        out, labels, twice = without_duplicates(out, labels)
        repairs["duplicate"] += twice
    repairs = +repairs
    if not repairs:
        return replace(ann, objects=tuple(out)), repairs
    return replace(ann, objects=tuple(out), extra={**ann.extra, "where": tuple(labels)}), repairs


def _slack(sx: float, sy: float, repair: bool) -> str:
    if not repair:
        return f"{SLACK:g} pixel"
    return (f"{max(sx, sy):g} pixels (annotations.repair clips up to {BORDER_PX:g} px or {BORDER_SHARE:.1%} of a side, "
            f"whichever is more)")


def _fit_points(points, at: str, h: int, w: int, names, sx: float = SLACK, sy: float = SLACK) -> tuple[tuple, bool]:
    """(the labelled points clipped to the image, whether one lay past SLACK)."""
    out, moved = [], False
    for i, (px, py, v) in enumerate(points):
        if v and not (-sx <= px <= w + sx and -sy <= py <= h + sy):
            name = f" ({names[i]})" if i < len(names) else ""
            raise AnnotationError(f"{at}: keypoint {i + 1}{name} at ({px:g}, {py:g}) lies outside the {w}x{h} image "
                                  f"by more than {_slack(sx, sy, sx != SLACK)} (visibility {v}; a point not labelled "
                                  f"is 0 0 0)")
        moved = moved or bool(v) and not (-SLACK <= px <= w + SLACK and -SLACK <= py <= h + SLACK)
        out.append((min(max(px, 0.0), float(w)), min(max(py, 0.0), float(h)), v) if v else (0.0, 0.0, 0))
    return tuple(out), moved


def folder_splits(reading: Reading, top: str, images: list[str]) -> None:
    """Splits from the folders right below `top` when every one of them names a split."""
    subdirs = reading.tree.subdirs(top)
    if subdirs and all(d in SPLIT_NAMES for d in subdirs):
        for img in images:
            first = under(top, img).split("/", 1)
            if len(first) == 2:
                reading.splits[img] = SPLIT_NAMES[first[0]]


def voc_sets(reading: Reading, images: list[str]) -> None:
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


def settle_pairs(reading: Reading, images: list[str], pairs: dict[str, str], got: dict) -> None:
    """Settle each image not rejected yet with what `Reading.read_files` got for its annotation file in `pairs`
    (an AnnotationError rejects it; no file: a negative)."""
    def read(rel: str):
        if isinstance(got[rel], AnnotationError):
            raise got[rel]
        return got[rel]

    for img in images:
        if img not in reading.rejected:
            rel = pairs.get(img)
            reading.settle(img, lambda hw, rel=rel: None if rel is None else read(rel))


def skipped(rel: str, skip: set[str]) -> bool:
    parts = rel.split("/")
    return any("/".join(parts[:k]) in skip for k in range(1, len(parts) + 1))
