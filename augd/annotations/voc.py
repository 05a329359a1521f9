"""Pascal VOC: one `<annotation>` XML per image (in `Annotations/`, or beside the image).

VOC counts pixels from 1 and both box ends are inclusive: xmin=1 is the first pixel (edge 0), xmax=W the last
(edge W), so the box in pixel-edge units is (xmin - 1, ymin - 1, xmax, ymax) and a box with xmin == xmax is one
pixel wide. The XML's `<filename>` is not trusted (tools write stale ones): pairing is by file stem. TF-free.
"""
from __future__ import annotations

from augd.annotations.labelmap import LabelMap
from augd.annotations.masks import pair_masks
from augd.annotations.model import Annotation, AnnotationError, Object, file_message, finite_number
from augd.annotations.reading import (VOC_FOLDERS, AnnotationFormat, Layout, Reading, folder_splits, settle_pairs,
                                      voc_sets)
from augd.annotations.tree import IMAGE_EXTENSIONS, Tree, annotations_beside, pair, stem
from augd.errors import UntrustedFileError
from augd.parsing.jsonxml import parse_xml

__all__ = ["FORMAT", "read_job", "read_voc"]


def _text(elem, tag: str) -> str | None:
    child = elem.find(tag)
    return None if child is None or child.text is None else child.text.strip()


def _number(elem, tag: str, where: str) -> float:
    raw = _text(elem, tag)
    if raw is None or raw == "":
        raise AnnotationError(f"{where}: no <{tag}>")
    return finite_number(raw, where, f"<{tag}>")


def _flag(elem, tag: str, where: str) -> bool:
    raw = _text(elem, tag)
    if raw is None or raw == "":
        return False
    low = raw.lower()
    if low in ("0", "1", "true", "false"):
        return low in ("1", "true")
    raise AnnotationError(f"{where}: <{tag}> is {raw!r}; it must be 0 or 1")


def _size(root, where: str) -> tuple[int, int] | None:
    """(height, width) from `<size>`, or None when absent or 0 (some tools write 0 for unknown)."""
    size = root.find("size")
    if size is None:
        return None
    w, h = _number(size, "width", f"{where}: size"), _number(size, "height", f"{where}: size")
    if w == 0 or h == 0:
        return None
    if w < 0 or h < 0 or w != int(w) or h != int(h):
        raise AnnotationError(f"{where}: size: width {w:g} and height {h:g} must be whole numbers >= 0")
    return int(h), int(w)


def read_voc(path: str, where: str) -> Annotation:
    """One VOC file's objects in pixel-edge units; `where` is the file's path in the job, for messages.

    The Annotation's extra holds "size" ((height, width) the file states, or None) and "where" (one label per
    object, "object 2 (dog)", for later messages). AnnotationError on the first thing wrong.
    """
    try:
        root = parse_xml(path)
    except UntrustedFileError as exc:
        raise AnnotationError(file_message(exc, path, where)) from None
    if root.tag != "annotation":
        raise AnnotationError(f"{where}: the root element is <{root.tag}>, not VOC's <annotation>")
    stated = _size(root, where)
    objects, labels = [], []
    for i, obj in enumerate(root.findall("object"), 1):
        name = _text(obj, "name") or ""
        label = f"object {i} ({name})" if name else f"object {i}"
        at = f"{where}: {label}"
        if not name:
            raise AnnotationError(f"{at}: no class <name>")
        bndbox = obj.find("bndbox")
        if bndbox is None:
            raise AnnotationError(f"{at}: no <bndbox>")
        xmin, ymin, xmax, ymax = (_number(bndbox, t, at) for t in ("xmin", "ymin", "xmax", "ymax"))
        for lo, hi, a, b in ((xmin, xmax, "xmin", "xmax"), (ymin, ymax, "ymin", "ymax")):
            if hi < lo:
                raise AnnotationError(f"{at}: {b} {hi:g} < {a} {lo:g} (VOC counts pixels from 1, both ends "
                                      f"inclusive: an empty box)")
        objects.append(Object(name=name, box=(xmin - 1.0, ymin - 1.0, xmax, ymax),
                              difficult=_flag(obj, "difficult", at), truncated=_flag(obj, "truncated", at)))
        labels.append(label)
    return Annotation(objects=tuple(objects), source=where, extra={"size": stated, "where": tuple(labels)})


# -- the job: JPEGImages/ + Annotations/, or an .xml beside each image --------------------------------------------

def read_job(reading: Reading, how: str) -> None:
    """A VOC job: `how` is "tree" (JPEGImages/ + Annotations/, splits from ImageSets/) or "beside" (an .xml
    beside each image, splits from split folders); SegmentationClass/ masks pair with the images."""
    beside = how == "beside"
    tree = reading.tree
    if beside:
        images = tree.below("", IMAGE_EXTENSIONS)
        pairs, orphans, ambiguous = pair(tree, "", "", ".xml", images)
        reading.skip.update(tree.below("", {".xml"}))
        folder_splits(reading, "", images)
    else:
        images = tree.below("JPEGImages", IMAGE_EXTENSIONS)
        pairs, orphans, ambiguous = pair(tree, "JPEGImages", "Annotations", ".xml", images)
        reading.skip.update(f for f in VOC_FOLDERS if tree.isdir(f))
        reading.image_dirs = ("JPEGImages",)
        voc_sets(reading, images)
    for ann in orphans:
        where = "beside it" if beside else "in JPEGImages/"
        reading.reject(ann, f"{ann}: an annotation for a missing image: no {stem(ann.rsplit('/', 1)[-1])}.* {where}")
    for img, why in ambiguous.items():
        reading.reject(img, why)
    # Every paired XML is read, whatever becomes of its image (a header that cannot be read, a split conflict):
    # the class names of every file that parses make the ids, so one bad image does not move them.
    parsed: dict[str, Annotation | AnnotationError] = reading.read_files(pairs, read_voc)
    settle_pairs(reading, images, pairs, parsed)
    if reading.fixed is None:
        names = {o.name for a in parsed.values() if isinstance(a, Annotation) for o in a.objects}
        reading.label_map = LabelMap.from_names(sorted(names))
    if not beside and tree.isdir("SegmentationClass"):
        pair_masks(reading, "JPEGImages", "SegmentationClass", images)


def _is_voc_xml(tree: Tree, rel: str) -> bool:
    try:
        return parse_xml(tree.path(rel)).tag == "annotation"
    except UntrustedFileError:
        return False


def _beside(tree: Tree, named: bool) -> str | None:
    xmls = annotations_beside(tree, ".xml")
    return "beside" if xmls and (named or _is_voc_xml(tree, xmls[0])) else None


FORMAT = AnnotationFormat(
    "voc", read=read_job, expected="expected JPEGImages/ with Annotations/*.xml, or an .xml beside each image",
    layouts=(Layout(10, lambda tree, named: "tree" if tree.isdir("JPEGImages") and tree.isdir("Annotations")
                    else None),
             Layout(60, _beside)))
