"""YOLO: one `.txt` per image, a line per object, `class cx cy w h` normalized to the image (Ultralytics'
segmentation lines, `class x1 y1 x2 y2 ...`, give a polygon); class names from `classes.txt` (one per line) or
`data.yaml` (`names:` as a list or {index: name}). Ultralytics' pose lines, `class cx cy w h x1 y1 [v1] ...`,
carry keypoints when data.yaml has `kpt_shape: [K, 2 or 3]` (with `flip_idx`, and augd's optional `kpt_names`).
Boxes touching or crossing the border by up to a pixel are fine (the layout checks and clips them against the
real image). Layouts: `images/` + `labels/` (Ultralytics; `images/<split>/` splits), Roboflow's export as it is
(`train/images/` + `train/labels/`, `valid/...`, `test/...`, data.yaml at the root; the folder names the split,
valid/ is validation, data.yaml's `train:`/`val:` paths are not read), or a `.txt` beside each image. An image
without its label file is a negative; a split folder without `labels/` has its images rejected
(augd.annotations.paired). TensorFlow-free.
"""
from __future__ import annotations

import functools
import os

from augd.annotations.exports import text_file
from augd.annotations.labelmap import LabelMap
from augd.annotations.model import Annotation, AnnotationError, KeypointSchema, Object, file_message, finite_number
from augd.annotations.paired import Paired, paired_format
from augd.annotations.reading import Reading
from augd.errors import SpecError
from augd.parsing.yamlsrc import read_yaml_file

__all__ = ["FORMAT", "NAME_FILES", "YOLO_MAX_BYTES", "job_names", "read_names", "read_pose", "read_yolo"]

#: The files that name a YOLO job's classes, in the order they are looked for at the job root.
NAME_FILES = ("data.yaml", "classes.txt")
#: A label file holds a line per object: 16 MiB is over 200,000 objects.
YOLO_MAX_BYTES = 16 * 1024 * 1024


def _text(path: str, where: str, what: str) -> str:
    return text_file(path, where, what, YOLO_MAX_BYTES, "YOLO_MAX_BYTES")


def _checked(names: list, where: str) -> tuple[str, ...]:
    if not names:
        raise AnnotationError(f"{where}: names no class")
    for i, n in enumerate(names):
        if not isinstance(n, str) or not n.strip() or n != n.strip():
            raise AnnotationError(f"{where}: class {i} is {n!r}; a class name is a non-empty string without "
                                  f"surrounding spaces")
        if names.index(n) != i:
            raise AnnotationError(f"{where}: class {n!r} is listed twice (classes {names.index(n)} and {i})")
    return tuple(names)


def read_names(root: str) -> tuple[tuple[str, ...], str] | None:
    """(class names in index order, the file they came from) from data.yaml or classes.txt at the job root;
    None when neither exists; AnnotationError naming the file when it cannot be used."""
    for name in NAME_FILES:
        path = os.path.join(root, name)
        if not os.path.isfile(path):
            continue
        if name == "classes.txt":
            lines = _text(path, name, "class names").splitlines()
            while lines and not lines[-1].strip():
                lines.pop()
            return _checked([ln.strip() for ln in lines], name), name
        data = _data_yaml(path)
        names = data.get("names")
        if isinstance(names, dict):
            keys = sorted(names, key=lambda k: (not isinstance(k, int), k if isinstance(k, int) else 0))
            if keys != list(range(len(names))):
                raise AnnotationError(f"{name}: names: the keys must be the class indices 0..{len(names) - 1}; "
                                      f"got {list(names)!r}")
            names = [names[k] for k in keys]
        if not isinstance(names, list):
            raise AnnotationError(f"{name}: no `names:` list (or {{index: name}} mapping) of the classes")
        nc = data.get("nc")
        if nc is not None and nc != len(names):
            raise AnnotationError(f"{name}: nc is {nc!r} but names lists {len(names)} classes")
        return _checked(names, name), name
    return None


def _data_yaml(path: str) -> dict:
    try:
        doc = read_yaml_file(path, "data.yaml")
    except SpecError as exc:
        raise AnnotationError(file_message(exc, path, "data.yaml")) from None
    return doc.data if isinstance(doc.data, dict) else {}


def read_pose(root: str) -> tuple[KeypointSchema, int] | None:
    """(the keypoints, 2 or 3 numbers a point) from data.yaml's `kpt_shape: [K, 2|3]`, `flip_idx` (required for
    K > 1: which point a mirror swaps with which) and `kpt_names` (a list, or {class index: list}; default
    kp0, kp1, ...); None when data.yaml has no kpt_shape."""
    path = os.path.join(root, "data.yaml")
    if not os.path.isfile(path):
        return None
    data = _data_yaml(path)
    shape = data.get("kpt_shape")
    if shape is None:
        return None
    if not (isinstance(shape, list) and len(shape) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                                 for v in shape) and shape[0] >= 1
            and shape[1] in (2, 3)):
        raise AnnotationError(f"data.yaml: kpt_shape is {shape!r}; it must be [K, 2] or [K, 3] (K points, each "
                              f"x y or x y visibility)")
    k, dims = shape
    names = data.get("kpt_names")
    if isinstance(names, dict) and len(names) == 1:
        names = next(iter(names.values()))
    if names is None:
        names = [f"kp{i}" for i in range(k)]
    if not (isinstance(names, list) and len(names) == k and all(isinstance(n, str) and n.strip() for n in names)
            and len(set(names)) == k):
        raise AnnotationError(f"data.yaml: kpt_names must list {k} distinct point names (kpt_shape says {k})")
    flip = data.get("flip_idx", list(range(k)) if k == 1 else None)
    if not (isinstance(flip, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in flip)):
        raise AnnotationError(f"data.yaml: flip_idx is {flip!r}; a pose job needs it: a list of {k} point indices, "
                              f"flip_idx[i] the point that point i becomes on a horizontal flip")
    names_cls = data.get("names")
    classes = tuple(names_cls.values() if isinstance(names_cls, dict) else names_cls if isinstance(names_cls, list)
                    else ())   # read_names judges `names`; a bad one is not this reader's to crash on
    return KeypointSchema(tuple(names), tuple(flip), (), classes, "data.yaml"), dims


def _points(values: list, k: int, dims: int, at: str, h: int, w: int) -> tuple:
    out = []
    for i in range(k):
        x, y = values[dims * i], values[dims * i + 1]
        v = values[dims * i + 2] if dims == 3 else (0 if x == 0 and y == 0 else 2)
        if v not in (0, 1, 2):
            raise AnnotationError(f"{at}: keypoint {i + 1}: visibility {v:g}; it must be 0, 1 or 2")
        out.append((x * w, y * h, int(v)) if v else (0.0, 0.0, 0))
    return tuple(out)


def read_yolo(path: str, where: str, names: tuple[str, ...], hw: tuple[int, int],
              pose: tuple[int, int] | None = None) -> Annotation:
    """One label file's objects in pixel-edge units of an image of `hw` (height, width, upright); an empty file
    is a negative. extra["where"] labels each object ("line 3 (dog)") for later messages. `pose`: (K, 2 or 3)
    when each line is a box and K keypoints."""
    h, w = hw
    objects, labels = [], []
    for lineno, line in enumerate(_text(path, where, "YOLO label").splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        at = f"{where}: line {lineno}"
        cls = finite_number(fields[0], at, "the class")
        if cls != int(cls) or not 0 <= cls < len(names):
            raise AnnotationError(f"{at}: class {fields[0]} is not a class index 0..{len(names) - 1} (the "
                                  f"{len(names)} names of the job)")
        name = names[int(cls)]
        at = f"{at} ({name})"
        values = [finite_number(v, at, f"value {k}") for k, v in enumerate(fields[1:], 1)]
        polygon: tuple = ()
        points: tuple = ()
        if pose is not None:
            k, dims = pose
            if len(values) != 4 + k * dims:
                raise AnnotationError(f"{at}: {len(fields)} fields; a pose line is `class cx cy w h` and {k} points "
                                      f"of {dims} numbers ({5 + k * dims} fields, data.yaml's kpt_shape [{k}, {dims}])")
            points = _points(values[4:], k, dims, at, h, w)
            values = values[:4]
        if len(values) == 4:
            cx, cy, bw, bh = values
            if bw < 0 or bh < 0:
                raise AnnotationError(f"{at}: width {bw:g} and height {bh:g} must be >= 0 (0: an empty box, which "
                                      f"annotations.repair drops)")
            box = ((cx - bw / 2) * w, (cy - bh / 2) * h, (cx + bw / 2) * w, (cy + bh / 2) * h)
        elif len(values) >= 6 and len(values) % 2 == 0:
            polygon = tuple((x * w, y * h) for x, y in zip(values[0::2], values[1::2]))
            xs, ys = [p[0] for p in polygon], [p[1] for p in polygon]
            box = (min(xs), min(ys), max(xs), max(ys))
            if box[2] <= box[0] or box[3] <= box[1]:
                raise AnnotationError(f"{at}: the polygon encloses no area")
        else:
            raise AnnotationError(f"{at}: {len(fields)} fields; a YOLO line is `class cx cy w h` (normalized) or "
                                  f"`class x1 y1 x2 y2 x3 y3 ...` (a polygon)")
        objects.append(Object(name=name, box=box, polygons=(polygon,) if polygon else (), keypoints=points))
        labels.append(f"line {lineno} ({name})")
    return Annotation(objects=tuple(objects), source=where, extra={"where": tuple(labels), "size": None})


# -- the job: images/ + labels/, split folders, or a .txt beside each image --------------------------------------------

def job_names(reading: Reading, fmt: str) -> tuple[str, ...]:
    """The job's class names (data.yaml or classes.txt at its root), those files left out of the images' pairing;
    AnnotationError, naming the format `fmt`, without them."""
    found = read_names(reading.root)
    if found is None:
        raise AnnotationError(f"{fmt}: no class names; put data.yaml (names: [...]) or classes.txt (one name per "
                              "line) at the job root")
    reading.skip.update(n for n in NAME_FILES if reading.tree.isfile(n))
    return found[0]


def _reader(reading: Reading):
    """read_yolo with the job's class names (and pose shape), and their label map; AnnotationError without names."""
    names = job_names(reading, "yolo")
    pose = read_pose(reading.root)
    shape = None
    if pose is not None:
        reading.keypoints, dims = pose
        shape = (len(reading.keypoints.names), dims)
    # a label file's boxes are fractions of its image: it is read with the image's size (Paired.sized)
    return functools.partial(read_yolo, names=names, pose=shape), LabelMap.from_names(names)


FORMAT = paired_format(
    "yolo", Paired(".txt", reader=_reader, looks_right=lambda tree, _: any(tree.isfile(n) for n in NAME_FILES),
                   tree=("images", "labels"), masks="masks", sized=True, others=True, bare=True),
    # other .txt files beside the images are no labels: not read
    ranks=(20, 70), split_rank=25, title="YOLO",
    expected="expected images/ with labels/, Roboflow's split folders (train/images/ with train/labels/, valid/ "
             "and test/ alike), or a .txt beside each image")
