"""Pascal VOC: one `<annotation>` XML per image (in `Annotations/`, or beside the image).

VOC counts pixels from 1 and both box ends are inclusive: xmin=1 is the first pixel (edge 0), xmax=W the last
(edge W), so the box in pixel-edge units is (xmin - 1, ymin - 1, xmax, ymax) and a box with xmin == xmax is one
pixel wide. The XML's `<filename>` is not trusted (tools write stale ones): pairing is by file stem. TF-free.
"""
from __future__ import annotations

from augd.annotations.model import Annotation, AnnotationError, Object, file_message, finite_number
from augd.annotations.paired import Paired, paired_format
from augd.annotations.reading import VOC_FOLDERS, voc_sets
from augd.annotations.tree import Tree
from augd.errors import UntrustedFileError
from augd.parsing.jsonxml import parse_xml

__all__ = ["FORMAT", "read_voc"]


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

def _is_voc_xml(tree: Tree, rel: str) -> bool:
    try:
        return parse_xml(tree.path(rel)).tag == "annotation"
    except UntrustedFileError:
        return False


FORMAT = paired_format(
    "voc", Paired(".xml", reader=lambda reading: (read_voc, None), looks_right=_is_voc_xml,
                  tree=("JPEGImages", "Annotations"), tree_skip=VOC_FOLDERS, tree_splits=voc_sets,
                  masks="SegmentationClass"),
    ranks=(10, 60), title="VOC", expected="expected JPEGImages/ with Annotations/*.xml, or an .xml beside each image")
