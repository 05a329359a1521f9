"""What an image's annotations are, whichever format they came from (VOC, COCO, YOLO, mask PNGs).

Coordinates are floats in *pixel-edge* units of the image as augd decodes it (EXIF orientation applied): the
image spans [0, width] x [0, height], the first pixel is [0, 1) x [0, 1). Each reader converts its format's
convention into this one (VOC's 1-based inclusive pixel indices, COCO's [x, y, w, h], YOLO's normalized centres),
so the geometry and the record writer know one convention. TensorFlow-free.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

__all__ = ["Annotation", "AnnotationError", "Object", "Polygon", "file_message", "finite_number"]

#: A polygon as ((x, y), ...) in pixel-edge units; at least 3 points.
Polygon = tuple[tuple[float, float], ...]


class AnnotationError(ValueError):
    """An annotation that cannot be trusted: the image is rejected with reason `bad_annotation` and this message,
    which names the file, the object and what is wrong ("Annotations/a.xml: object 2 (dog): xmax 10 <= xmin 12")."""


def file_message(exc: Exception, path, where: str) -> str:
    """The message of `exc`, an error about the file at `path` (a parser's, a reader's), with the file's absolute
    path replaced by `where`, its path in the job: messages name what the user sees, never this machine's paths."""
    text, path = str(exc), os.fspath(path)
    return where + text[len(path):] if text.startswith(path) else f"{where}: {text}"


def finite_number(raw: str, at: str, what: str) -> float:
    """float(raw), or AnnotationError naming where (`at`) and which value (`what`): NaN and infinities pass every
    range check, so they are refused here."""
    try:
        value = float(raw)
    except ValueError:
        raise AnnotationError(f"{at}: {what} is {raw!r}, not a number") from None
    if not math.isfinite(value):
        raise AnnotationError(f"{at}: {what} is {raw!r}, not a finite number")
    return value


@dataclass(frozen=True)
class Object:
    """One annotated object."""
    name: str                           # its class name (the label map gives its id)
    box: tuple[float, float, float, float]  # xmin, ymin, xmax, ymax in pixel-edge units, xmin < xmax, ymin < ymax
    difficult: bool = False             # VOC's flag (COCO: never); carried into image/object/difficult
    truncated: bool = False             # VOC's flag, or set by augd when a transform clipped the box
    crowd: bool = False                 # COCO's iscrowd
    polygons: tuple[Polygon, ...] = ()  # COCO polygon segmentation: the box becomes the transformed polygon's extent
    rle: dict | None = None             # COCO RLE segmentation ({"size": [h, w], "counts": ...}), an instance mask


@dataclass(frozen=True)
class Annotation:
    """The annotations of one image: its objects, and the path of its semantic mask (a PNG of class indices, the
    same size as the image), if any. An image with no object is a negative."""
    objects: tuple[Object, ...] = ()
    mask: str | None = None             # absolute path of the paired semantic mask PNG
    source: str = ""                    # the annotation file it came from, relative to the job (for messages)
    extra: dict = field(default_factory=dict, compare=False)  # format-specific details readers keep for round trips
