"""YOLO-OBB (Ultralytics' oriented boxes): YOLO's layout and class names (augd.annotations.yolo), each line `class
x1 y1 x2 y2 x3 y3 x4 y4`, the 4 corners normalized to the image. Such a line is also a YOLO polygon of 4 points,
so `format: auto` reads the job as YOLO (the same shape); naming `format: yolo_obb` holds every line to 4 corners.
Each box is an oriented object (augd.annotations.shapes.oriented_object; its records carry image/object/obb/*).
Roboflow's YOLO-OBB export (`train/images/` + `train/labels/`, `valid/...`, `test/...`, data.yaml at the root) is
read as it is (augd.annotations.paired's split layout). TensorFlow-free.
"""
from __future__ import annotations

import functools

from augd.annotations.exports import text_file
from augd.annotations.labelmap import LabelMap
from augd.annotations.model import Annotation, AnnotationError, finite_number
from augd.annotations.paired import Paired, paired_format
from augd.annotations.reading import Reading
from augd.annotations.shapes import oriented_object
from augd.annotations.yolo import NAME_FILES, job_names

__all__ = ["FORMAT", "read_yolo_obb"]


def read_yolo_obb(path: str, where: str, names: tuple[str, ...], hw: tuple[int, int]) -> Annotation:
    """One label file's oriented boxes in pixel-edge units of an image of `hw` (height, width, upright)."""
    h, w = hw
    objects, labels = [], []
    for lineno, line in enumerate(text_file(path, where, "YOLO-OBB label").splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        at = f"{where}: line {lineno}"
        if len(fields) != 9:
            raise AnnotationError(f"{at}: {len(fields)} fields; a YOLO-OBB line is `class x1 y1 x2 y2 x3 y3 x4 y4` "
                                  f"(9 fields, the corners normalized to the image)")
        cls = finite_number(fields[0], at, "the class")
        if cls != int(cls) or not 0 <= cls < len(names):
            raise AnnotationError(f"{at}: class {fields[0]} is not a class index 0..{len(names) - 1} (the "
                                  f"{len(names)} names of the job)")
        name = names[int(cls)]
        at = f"{at} ({name})"
        values = [finite_number(v, at, f"value {k}") for k, v in enumerate(fields[1:], 1)]
        corners = [(x * w, y * h) for x, y in zip(values[0::2], values[1::2])]
        objects.append(oriented_object(name, corners, at, "oriented box"))
        labels.append(f"line {lineno} ({name})")
    return Annotation(objects=tuple(objects), source=where, extra={"where": tuple(labels), "size": None})


def _reader(reading: Reading):
    names = job_names(reading, "yolo_obb")
    return functools.partial(read_yolo_obb, names=names), LabelMap.from_names(names)


FORMAT = paired_format(
    "yolo_obb", Paired(".txt", reader=_reader, looks_right=lambda tree, _: any(tree.isfile(n) for n in NAME_FILES),
                       tree=("images", "labels"), sized=True, others=True),
    ranks=(21, 71), split_rank=26, auto=False, title="YOLO-OBB",
    expected="expected images/ with labels/, Roboflow's split folders (train/images/ with train/labels/, valid/ "
             "and test/ alike), or a .txt beside each image, and data.yaml or classes.txt")
