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

__all__ = ["IGNORE_REASONS", "Annotation", "AnnotationError", "Keypoint", "KeypointSchema", "Object", "Polygon",
           "Span", "file_message", "finite_number", "flip_from_names"]

#: A polygon as ((x, y), ...) in pixel-edge units; at least 3 points.
Polygon = tuple[tuple[float, float], ...]
#: A keypoint as (x, y, visibility) in pixel-edge units, COCO's visibility: 0 not labelled (x = y = 0),
#: 1 labelled but occluded, 2 labelled and visible.
Keypoint = tuple[float, float, int]


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


#: Why an object that still shows is ignored (Object.ignored; augd.annotations.occlusion decides): cut: a crop, pad,
#: tile or warp left less than min_visibility of it on the canvas; covered: covers (a cutout, a paste) took it under
#: min_visibility; keypoints: fewer than min_keypoints of its labelled points are left; input: a TFRecord input
#: weighed it 0 (image/object/weight).
IGNORE_REASONS = ("cut", "covered", "keypoints", "input")


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
    keypoints: tuple[Keypoint, ...] = ()  # the job's KeypointSchema's points in its order, or () (none for its class)
    #: the share of the object as annotated that still shows after augd's transforms (augd.annotations.occlusion)
    visible: float = 1.0
    #: why the object is ignored (occlusion.IGNORE_REASONS: it shows, but under the rule), or "" (kept)
    ignored: str = ""
    #: an oriented box (DOTA, YOLO-OBB, a tool's rotated rectangle): its 4 corners are its polygon, and its record
    #: adds the minimum-area rectangle of what shows of it (augd.annotations.oriented)
    oriented: bool = False


@dataclass(frozen=True)
class Span:
    """`size` bytes at `offset` of the file at `path`: a semantic mask PNG inside a TFRecord shard, read in place."""
    path: str
    offset: int
    size: int


@dataclass(frozen=True)
class Annotation:
    """The annotations of one image: its objects, and the path of its semantic mask (a PNG of class indices, the
    same size as the image), if any. An image with no object is a negative."""
    objects: tuple[Object, ...] = ()
    mask: str | Span | None = None      # absolute path of the paired semantic mask PNG (a Span: inside a record)
    source: str = ""                    # the annotation file it came from, relative to the job (for messages)
    extra: dict = field(default_factory=dict, compare=False)  # format-specific details readers keep for round trips


@dataclass(frozen=True)
class KeypointSchema:
    """A job's keypoints: their names (the order of every object's points), which point becomes which on a
    horizontal mirror (`flip[i]`: the point whose position point i takes; the Object Detection API's
    keypoint_flip_permutation, YOLO's flip_idx), the skeleton's edges (pairs of 0-based indices, for drawing)
    and the classes whose objects carry them."""
    names: tuple[str, ...]
    flip: tuple[int, ...]
    skeleton: tuple[tuple[int, int], ...] = ()
    classes: tuple[str, ...] = ()
    source: str = ""                    # where it came from, for messages
    #: at each quarter turn (random_rotation90) point i takes point rotation[i]'s place (the OD API's
    #: keypoint_rot_permutation); None: points keep their index through a turn
    rotation: tuple[int, ...] | None = None

    def __post_init__(self):
        check_flip(self.flip, len(self.names), self.source or "keypoints")
        if self.rotation is not None and sorted(self.rotation) != list(range(len(self.names))):
            raise AnnotationError(f"{self.source or 'keypoints'}: the keypoint rotation {list(self.rotation)} is not a "
                                  f"permutation of the {len(self.names)} points (0..{len(self.names) - 1})")
        for a, b in self.skeleton:
            if not (0 <= a < len(self.names) and 0 <= b < len(self.names)):
                raise AnnotationError(f"{self.source or 'keypoints'}: skeleton edge [{a}, {b}] names a point "
                                      f"outside 0..{len(self.names) - 1}")

    def to_dict(self) -> dict:
        return {"names": list(self.names), "flip": list(self.flip), "skeleton": [list(e) for e in self.skeleton],
                "classes": list(self.classes)}


def check_flip(flip, k: int, where: str) -> None:
    """AnnotationError unless `flip` swaps the k points in pairs: a permutation of 0..k-1 that undoes itself
    (mirroring twice gives the points back)."""
    flip = list(flip)
    if sorted(flip) != list(range(k)) or any(flip[flip[i]] != i for i in range(k)):
        raise AnnotationError(f"{where}: the keypoint flip {flip} is not a pairing of the {k} points (a "
                              f"permutation of 0..{k - 1} that is its own inverse, such as [0, 2, 1])")


def _mirrored_name(name: str) -> str:
    for a, b in (("left", "right"), ("Left", "Right"), ("LEFT", "RIGHT")):
        if a in name:
            return name.replace(a, b)
        if b in name:
            return name.replace(b, a)
    return name


def flip_from_names(names) -> tuple[int, ...]:
    """COCO's convention: `left_*` and `right_*` (any case) swap on a mirror, every other point stays."""
    index = {n: i for i, n in enumerate(names)}
    out = []
    for i, n in enumerate(names):
        j = index.get(_mirrored_name(n), i)
        out.append(j if index.get(_mirrored_name(names[j]), j) == i else i)
    return tuple(out)
