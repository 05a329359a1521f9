"""Which annotation format a job folder has, and all of its annotations read and checked against the images.

Each format is one module that describes itself (an AnnotationFormat: augd/annotations/reading.py); REGISTRY
holds them, in the order `annotations: format:` lists them. Their layouts are tried in rank order (the first
that fits wins; nothing fits: a classification job); docs/pipelines.md#annotation-formats lists them.

A new format: its module (its layouts, how it reads, what it expects, how prose names it, the files that mark it;
a format of one file per image is a `Paired` of augd.annotations.paired, which does the rest), its FORMAT in
REGISTRY below, and a row per layout in the docs' table (tests/test_annotation_layouts.py holds the table and the
docs' lists to the registry). Nothing else names a format: help texts, the schema, `augd check` and the executor's
estimate (`marks_annotated`) ask the registry. Local folders only. TensorFlow-free.
"""
from __future__ import annotations

import re

from augd.annotations import coco, cvat, dota, label_studio, labelme, masks, voc, yolo, yolo_obb
from augd.annotations.labelmap import LabelMap
from augd.annotations.model import AnnotationError
from augd.annotations.reading import SLACK, SPLIT_NAMES, AnnotatedJob, AnnotationFormat, Reading, serial_map
from augd.annotations.tree import IMAGE_EXTENSIONS, Tree

__all__ = ["FORMATS", "IMAGE_EXTENSIONS", "REGISTRY", "SLACK", "SPLIT_NAMES", "AnnotatedJob", "detect_format",
           "in_words", "marks_annotated", "read_job"]

REGISTRY: dict[str, AnnotationFormat] = {f.name: f for f in (
    voc.FORMAT, coco.FORMAT, yolo.FORMAT, yolo_obb.FORMAT, dota.FORMAT, labelme.FORMAT, cvat.FORMAT,
    label_studio.FORMAT, masks.FORMAT)}
FORMATS = tuple(REGISTRY)
#: Every format's layouts, in the order they are tried.
_LAYOUTS = sorted(((lay, f) for f in REGISTRY.values() for lay in f.layouts), key=lambda pair: pair[0].rank)
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def in_words(objects: bool = False) -> str:
    """The formats as prose names them, in the registry's order: "VOC, COCO, YOLO or mask PNGs"; `objects`: only
    those whose annotations hold objects."""
    titles = [f.title or f.name for f in REGISTRY.values() if f.objects or not objects]
    return titles[0] if len(titles) == 1 else f"{', '.join(titles[:-1])} or {titles[-1]}"


def marks_annotated(folder: str, name: str, stems) -> bool:
    """Whether the file `name` in the job's `folder` ("" its root) marks the job as annotated in some format, before
    anything is read (augd.annotations.reading.Marker); `stems`: the stems of the images in that folder."""
    return any(m.marks(folder, name, stems) for f in REGISTRY.values() for m in f.markers)


def _detect(tree: Tree, fmt: str):
    """(format, what its layout found) for the job, or None; `fmt` other than "auto" looks only for that
    format's layouts (and lets them look less strictly)."""
    for layout, f in _LAYOUTS:
        if fmt == f.name or fmt == "auto" and layout.auto:
            found = layout.find(tree, fmt == f.name)
            if found is not None:
                return f, found
    return None


def detect_format(root: str) -> str | None:
    """The annotation format of the job at `root` (one of FORMATS), or None: a classification job (class
    folders). Only the layouts in the module docstring count; nothing is guessed from contents. AnnotationError
    when a JSON at the root is a COCO file that is broken (see read_job)."""
    if _URL.match(root) and not root.startswith("file://"):
        return None
    found = _detect(Tree(root.removeprefix("file://")), "auto")
    return None if found is None else found[0].name


def read_job(root: str, fmt: str = "auto", label_map: LabelMap | None = None, mapper=None,
             repair: bool = False) -> AnnotatedJob | None:
    """Read and check every annotation of the job at `root`. fmt "auto" detects the layout (None when there is
    none); a named format must be there. `label_map` fixes the ids: an object of another class rejects its image.

    A bad annotation rejects its image only (in `rejected`, with the file, the object and what is wrong).
    AnnotationError is raised only when the job as a whole cannot be read in the format: the format named is not
    there, YOLO without class names, a JSON at the root that is not valid JSON, or a COCO file (an object with
    an `images` list) that is broken: categories that collide within it or across files, `annotations` not a
    list. With fmt "auto" a JSON that is valid but no COCO file is passed over. `mapper`: Reading.map (default:
    here, serially). `repair`: near misses repaired and counted (augd.annotations.repair), not refused.
    """
    if fmt != "auto" and fmt not in REGISTRY:
        raise ValueError(f"annotation format {fmt!r}: expected auto or one of {', '.join(FORMATS)}")
    if _URL.match(root) and not root.startswith("file://"):
        if fmt == "auto":
            return None
        raise AnnotationError(f"{root}: annotations are read from local job folders only")
    root = root.removeprefix("file://")
    tree = Tree(root)
    detected = _detect(tree, fmt)
    if detected is None:
        if fmt == "auto":
            return None
        raise AnnotationError(f"{root}: no {fmt} annotations: {REGISTRY[fmt].expected}")
    f, found = detected
    reading = Reading(root, tree, f.name, label_map, mapper or serial_map, repair)
    f.read(reading, found)
    return reading.job()
