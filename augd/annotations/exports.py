"""What the annotation tools' exports share (DOTA, YOLO-OBB, LabelMe, CVAT, Label Studio): their files read under
the project's bounds (augd.parsing.jsonxml: size, depth, no DTD or entity; text under a byte cap), numbers taken
only when finite, the image an export names found inside the job, never outside it, and a job's keypoints (one
schema of names for every object that has points). TensorFlow-free.
"""
from __future__ import annotations

import math
import posixpath
import re
from urllib.parse import parse_qs, unquote, urlsplit

from dataclasses import replace

from augd.annotations.model import Annotation, AnnotationError, KeypointSchema, file_message, flip_from_names
from augd.annotations.tree import Tree, extension
from augd.errors import UntrustedFileError
from augd.files import inside, read_capped
from augd.jobfolder import CONTROL_FILES
from augd.parsing.jsonxml import load_json, parse_xml

__all__ = ["EXPORT_TEXT_MAX_BYTES", "ImageIndex", "export_path", "job_path", "json_file", "keypoint_schema", "number",
           "root_exports", "text_file", "with_keypoints", "xml_file"]

#: A text label file holds a line per object: 16 MiB is over 200,000 objects (as YOLO_MAX_BYTES).
EXPORT_TEXT_MAX_BYTES = 16 * 1024 * 1024


def text_file(path: str, where: str, what: str, cap: int = EXPORT_TEXT_MAX_BYTES,
              cap_name: str = "EXPORT_TEXT_MAX_BYTES") -> str:
    """A UTF-8 text file of at most `cap` bytes (`cap_name` names the bound in the refusal); AnnotationError
    naming `where` for one too big, unreadable or not UTF-8."""
    try:
        return read_capped(path, cap, what, cap_name).decode("utf-8-sig")
    except UntrustedFileError as exc:
        raise AnnotationError(file_message(exc, path, where)) from None
    except OSError as exc:
        raise AnnotationError(f"{where}: cannot read the {what} file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise AnnotationError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def json_file(path: str, where: str):
    try:
        return load_json(path)
    except UntrustedFileError as exc:
        raise AnnotationError(file_message(exc, path, where)) from None


def xml_file(path: str, where: str):
    try:
        return parse_xml(path)
    except UntrustedFileError as exc:
        raise AnnotationError(file_message(exc, path, where)) from None


def number(value, at: str, what: str) -> float:
    """A JSON value that must be a finite number (a bool, a string or null is not one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise AnnotationError(f"{at}: {what} is {value!r}; it must be a finite number")
    return float(value)


def job_path(raw, at: str, what: str = "image path") -> str:
    """A path an export names, relative to the job: refused when it is not text, absolute, or climbs out (`..`)."""
    if not isinstance(raw, str) or not raw.strip():
        raise AnnotationError(f"{at}: the {what} is {raw!r}; it must be a path relative to the job folder")
    parts = raw.replace("\\", "/").split("/")
    if raw.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", raw) or ".." in parts:
        raise AnnotationError(f"{at}: the {what} {raw!r} is not a path inside the job folder (absolute, or "
                              f"climbing out with ..)")
    norm = posixpath.normpath("/".join(parts))
    if norm in (".", ""):
        raise AnnotationError(f"{at}: the {what} {raw!r} names no file")
    return norm


#: Label Studio prefixes an uploaded file's name with 8 hex digits and a dash ("1a2b3c4d-cat.jpg").
_UPLOAD_PREFIX = re.compile(r"^[0-9a-f]{8}-")


class ImageIndex:
    """The job's images by every tail of their paths ("images/train/a.png": that, "train/a.png", "a.png"), so that
    a reference made on another machine (a URL, Label Studio's /data/upload/1/..., a local-files ?d= path) finds
    the one image whose path ends the same way: the longest tail that names exactly one image wins."""

    def __init__(self, images):
        self.by_tail: dict[str, list[str]] = {}
        for img in images:
            parts = img.split("/")
            for k in range(len(parts)):
                self.by_tail.setdefault("/".join(parts[k:]), []).append(img)

    def find(self, ref, at: str) -> str:
        """The job image `ref` names; AnnotationError naming `ref` when none or several do, or when it climbs."""
        if not isinstance(ref, str) or not ref.strip():
            raise AnnotationError(f"{at}: the image reference is {ref!r}; it must be a path or URL of the image")
        url = urlsplit(ref)
        path = unquote(parse_qs(url.query).get("d", [url.path])[0])   # /data/local-files/?d=dir/a.png
        parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
        if ".." in parts:
            raise AnnotationError(f"{at}: the image reference {ref!r} climbs with ..; augd takes only images "
                                  f"inside the job folder")
        tails = ["/".join(parts[k:]) for k in range(len(parts))]
        if parts and _UPLOAD_PREFIX.match(parts[-1]):
            tails.append(_UPLOAD_PREFIX.sub("", parts[-1]))
        for tail in tails:
            found = self.by_tail.get(tail, [])
            if len(found) == 1:
                return found[0]
            if len(found) > 1:
                raise AnnotationError(f"{at}: the image reference {ref!r} fits {len(found)} images of the job "
                                      f"({', '.join(found[:3])}); keep one")
        raise AnnotationError(f"{at}: the image reference {ref!r} names no image in the job folder (its file "
                              f"name, with as many of its folders as the job has, must be there)")


def keypoint_schema(names, classes, source: str) -> KeypointSchema:
    """A tool export's keypoints: `names` in the job's order, paired for a mirror by their left/right names (COCO's
    convention: the tools store no flip), carried by `classes`."""
    names = tuple(names)
    return KeypointSchema(names, flip_from_names(names), (), tuple(sorted(classes)), source)


def with_keypoints(ann: Annotation, names) -> Annotation:
    """`ann` with each object of extra["points"] ({object index: {name: (x, y, visibility)}}) given its points in
    the order of `names`; a name it lacks is not labelled (0 0 0), as COCO writes one."""
    points = ann.extra.get("points") or {}
    if not points:
        return ann
    objects = list(ann.objects)
    for k, pts in points.items():
        objects[k] = replace(objects[k], keypoints=tuple(pts.get(n, (0.0, 0.0, 0)) for n in names))
    return replace(ann, objects=tuple(objects))


def root_exports(tree: Tree, ext: str) -> list[str]:
    """The files of `ext` at the job's root that may be a tool's export (CVAT's XML, Label Studio's JSON): all but
    augd's control files."""
    return [name for name in tree.files.get("", []) if extension(name) == ext and name not in CONTROL_FILES]


def export_path(tree: Tree, name: str) -> str:
    """The path of a file at the job's root; AnnotationError for a link out of the job folder (never followed)."""
    if name in tree.links and not inside(tree.root, tree.path(name)):
        raise AnnotationError(f"{name}: a link to a file outside the job folder")
    return tree.path(name)
