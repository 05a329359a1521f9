"""DOTA: `images/` with `labelTxt/` mirroring it, one `.txt` per image, a line per object: `x1 y1 x2 y2 x3 y3 x4 y4
class difficult`, the 4 corners of an oriented box in pixels (pixel-edge units, as augd's). Header lines
`imagesource:...` and `gsd:...` (DOTA v1.0) may open a file. Each box is read as its 4-corner polygon
(augd.annotations.shapes) until augd has an oriented-box kind; `difficult` 1 is VOC's difficult flag (written to
image/object/difficult). Class names: those the files use, sorted (DOTA lists no names). TensorFlow-free.
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
    ranks=(15, None), title="DOTA",
    expected="expected images/ with labelTxt/ (a .txt per image; DOTA's train/images and train/labelTxt go in as "
             "images/train/ and labelTxt/train/)")
