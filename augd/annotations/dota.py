"""DOTA: a `.txt` per image, a line per object: `x1 y1 x2 y2 x3 y3 x4 y4 class difficult`, the 4 corners of an
oriented box in pixels (pixel-edge units, as augd's). Header lines `imagesource:...` and `gsd:...` (DOTA v1.0) may
open a file. Each box is an oriented object (augd.annotations.shapes.oriented_object): its 4 corners are its
polygon, moved vertex by vertex, and its records carry the oriented box (image/object/obb/*,
augd.annotations.oriented); `difficult` 1 is VOC's difficult flag (image/object/difficult). Class names: those the
files use, sorted (DOTA lists no names).

Two layouts (augd.annotations.paired). DOTA's own, as it is downloaded: `train/images/` + `train/labelTxt/`,
`val/images/` + `val/labelTxt/`, `test/images/`, each split folder's records in that split's shards. DOTA's test
split comes without labels: its images are rejected (bad_annotation, each naming test/ and what would use it),
not written as negatives. An image with no objects teaches "nothing here"; DOTA's test images are full of objects
nobody labelled, so writing them would fill a split with false negatives, and leaving them out silently would
hide a third of the download. (An image of a labelled split without its own `.txt` is a negative, as in YOLO.)
Or the tree: `images/` with `labelTxt/` mirroring it, `images/<split>/` splits. TensorFlow-free.
"""
from __future__ import annotations

from augd.annotations.exports import text_file
from augd.annotations.model import Annotation, AnnotationError, finite_number
from augd.annotations.paired import Paired, paired_format
from augd.annotations.shapes import oriented_object

__all__ = ["FORMAT", "read_dota"]

_HEADERS = ("imagesource:", "gsd:")


def read_dota(path: str, where: str) -> Annotation:
    """One labelTxt file's objects; extra["where"] labels each ("line 3 (plane)"). An empty file is a negative."""
    objects, labels = [], []
    for lineno, line in enumerate(text_file(path, where, "DOTA label").splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        at = f"{where}: line {lineno}"
        if not objects and fields[0].lower().startswith(_HEADERS):
            continue   # a header line: where the image came from and its ground sampling distance, not an object
        if len(fields) not in (9, 10):
            raise AnnotationError(f"{at}: {len(fields)} fields; a DOTA line is `x1 y1 x2 y2 x3 y3 x4 y4 class "
                                  f"difficult` (10 fields; difficult may be left out)")
        name = fields[8]
        at = f"{at} ({name})"
        values = [finite_number(v, at, f"value {k}") for k, v in enumerate(fields[:8], 1)]
        difficult = fields[9] if len(fields) == 10 else "0"
        if difficult not in ("0", "1"):
            raise AnnotationError(f"{at}: difficult is {difficult!r}; it must be 0 or 1")
        corners = list(zip(values[0::2], values[1::2]))
        objects.append(oriented_object(name, corners, at, "oriented box", difficult=difficult == "1"))
        labels.append(f"line {lineno} ({name})")
    return Annotation(objects=tuple(objects), source=where, extra={"where": tuple(labels), "size": None})


FORMAT = paired_format(
    "dota", Paired(".txt", reader=lambda reading: (read_dota, None), looks_right=lambda tree, rel: True,
                   tree=("images", "labelTxt")),
    ranks=(15, None), split_rank=16, title="DOTA",
    expected="expected DOTA's own split folders, train/images/ with train/labelTxt/ (val/ and test/ alike; a .txt "
             "per image), or images/ with labelTxt/")
