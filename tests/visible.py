"""Truth in the pixels for the three fates of an object (kept, ignored, dropped): synthetic VOC scenes of solid
coloured rectangles (one hue per class, none touching), the chains that cut or hide them, and a judge that reads
each record's pixels and boxes. Shared by tests/test_fates.py and `python -m bench.fates` (issue 55's table).

The judge, per record and per class colour (a pixel is the colour's when its channel leads the others by
LEAD: a resize or JPEG's chroma subsampling keeps a dot's hue, not its RGB):
* the colour's pixels a viewer can see: those of parts 4 px thick both ways (an opening by a 4-px square): JPEG's
  fringe is no object, and a strip 2-3 px thick, after a resample and the 2x2 chroma blocks, is one the rule
  (which counts 3 px under JPEG: augd.job.detection.STRIP) may see either way; those outside every written box of
  its class (kept or ignored), in a connected part of at least `min_area` px, are a *visible object with no box*;
* each written box, kept or ignored, is judged by its own object (objects of a class may touch): on each side its
  colour shows within `tol` px inside the edge, and not in the 3 px just beyond `tol` outside it where no other
  box of its class lies: else it is a *box off its pixels* (a box with no pixel of its colour is one too).
TensorFlow-free but for reading the records (augd.io.lite).
"""
from __future__ import annotations

import collections
import dataclasses
import json
from pathlib import Path

import cv2
import numpy as np

from tests.annotated import Img, Shape, voc_job

__all__ = ["CHAINS", "COLOURS", "ODAPI_SHAPES", "Judged", "judge", "read", "scenes"]

COLOURS = {"car": (220, 40, 40), "person": (40, 190, 60), "boat": (40, 60, 220)}
BACKGROUND = (235, 235, 225)
#: how far a colour's channel leads the other two for a pixel to be that colour's
LEAD = 70

#: The chains of issue 55's table (default annotations), as a detection user writes them.
CHAINS = {
    "crop, rotate, flip": [{"random_crop": {"size": [320, 320], "area": [0.5, 1.0]}},
                           {"random_rotation": {"degrees": 15, "fill": 128}}, {"random_flip_left_right": {}}],
    "mosaic": [{"mosaic": {"size": [640, 640], "scale": [2.0, 2.0]}},
               {"random_affine": {"scale": [0.5, 1.5], "translate": [0.1, 0.1], "fill": 114}},
               {"random_flip_left_right": {}}],
    "random_erasing": [{"random_erasing": {"area": [0.1, 0.3], "value": 128}}],
    "in_boxes translate": [{"in_boxes": {"op": "translate_x", "value": 40}},
                           {"in_boxes": {"op": "translate_y", "value": 30}}],
    "in_boxes rotate, shear": [{"in_boxes": {"op": "rotate", "value": 30, "box_p": 0.7}},
                               {"in_boxes": {"op": "shear_x", "value": 0.3, "box_p": 0.5}}],
    "scale, crop, pad to square; rotation90": [
        {"random_scale_crop_and_pad_to_square": {"output_size": 384}}, {"random_rotation90": {"p": 0.5}}],
    "square crop by scale, flip": [{"random_square_crop_by_scale": {}}, {"random_flip_left_right": {}}],
    "pads and scale jitters": [
        {"random_absolute_pad_image": {"max_height_padding": 100, "max_width_padding": 100, "fill": 128}},
        {"random_expand": {"ratio": [1.0, 1.5], "p": 0.5}}, {"random_image_scale": {}},
        {"random_zoom": {"height_factor": [-0.5, 0.1]}}],
    "tf crop, pad, crop to aspect": [
        {"random_crop": {"sampler": "tf", "min_object_covered": 0.3, "area": [0.1, 1.0], "aspect": [0.5, 2.0]}},
        {"random_pad_image": {"fill": 128}}, {"random_crop_to_aspect_ratio": {"aspect_ratio": 1.0}}],
    "holes (box_cutout, cutout, black patches)": [
        {"box_cutout": {"boxes": "each", "size": 40, "box_p": 0.5}}, {"cutout": {"size": 100}},
        {"random_black_patches": {"max_black_patches": 6, "probability": 0.5, "size_to_image_ratio": 0.2}}],
    "coarse_dropout, cutmix": [
        {"cutmix": {}}, {"coarse_dropout": {"holes": [2, 6], "height": [0.1, 0.3], "width": [0.1, 0.3]}}],
    "copy_paste": [{"copy_paste": {}}],
    "tiles": "tile",
}

#: The OD API's config families as it ships them (tests/test_import_config.py's SHIPPED), their boxes' options.
ODAPI_SHAPES = {
    "ssd": ["random_horizontal_flip {\n    }", "ssd_random_crop {\n    }"],
    "faster_rcnn": ["random_horizontal_flip {\n    }"],
    "centernet": ["random_horizontal_flip {\n    }",
                  "random_crop_image { min_aspect_ratio: 0.5 max_aspect_ratio: 1.7 random_coef: 0.25 }",
                  "random_square_crop_by_scale {\n      scale_min: 0.6\n      scale_max: 1.3\n    }"],
    "efficientdet": ["random_horizontal_flip {\n    }", "random_scale_crop_and_pad_to_square {\n"
                     "      output_size: 512\n      scale_min: 0.1\n      scale_max: 2.0\n    }"],
}


def scenes(root, n: int, *, h: int = 360, w: int = 480, per: int = 6, seed: int = 55, split: bool = False) -> None:
    """A VOC job of n JPEG scenes, each `per` rectangles of 24-140 px (every class in turn), 10 px or more apart.
    `split`: the images alternate between train and val (partner ops draw from one split)."""
    images = []
    rng = np.random.default_rng(seed)
    for i in range(n):
        shapes: list[Shape] = []
        while len(shapes) < per:
            bw, bh = int(rng.integers(24, 141)), int(rng.integers(24, 121))
            x, y = int(rng.integers(0, w - bw + 1)), int(rng.integers(0, h - bh + 1))
            if all(x + bw + 10 <= s.geom[0] or s.geom[2] + 10 <= x or y + bh + 10 <= s.geom[1]
                   or s.geom[3] + 10 <= y for s in shapes):
                cls = list(COLOURS)[len(shapes) % len(COLOURS)]
                shapes.append(Shape(cls, (x, y, x + bw, y + bh), COLOURS[cls]))
        images.append(Img(f"s{i:03d}.jpg", h, w, tuple(shapes), split=("train", "val")[i % 2] if split else "",
                          background=BACKGROUND))
    voc_job(str(root), images)


def read(folder) -> list[dict]:
    """Every record of an output folder, decoded (augd.io.lite), with its pixels under "pixels"."""
    from augd.io.lite import decode_example, iter_records
    out = []
    for path in sorted(Path(folder).glob("*.tfrecord*")):
        for raw in iter_records(str(path)):
            r = decode_example(raw)
            r["pixels"] = cv2.imdecode(np.frombuffer(r["image/encoded"], np.uint8), cv2.IMREAD_COLOR)[:, :, ::-1]
            out.append(r)
    return out


def _colour(px: np.ndarray, colour) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the colour's pixels, those of parts 3 px thick, those of parts 4 px thick)."""
    c = int(np.argmax(colour))
    x = px.astype(np.int16)
    lead = (x[:, :, c] - np.maximum(x[:, :, (c + 1) % 3], x[:, :, (c + 2) % 3]) > LEAD).astype(np.uint8)
    # outside the image is no colour: a strip along its edge is as thin as it looks (OpenCV's default border
    # would count the outside as the colour's)
    return (lead > 0, *(cv2.morphologyEx(lead, cv2.MORPH_OPEN, np.ones((k, k), np.uint8),
                                         borderType=cv2.BORDER_CONSTANT, borderValue=0) > 0 for k in (3, 4)))


@dataclasses.dataclass
class Judged:
    """What the judge found over records: boxes written (kept, ignored), visible objects with no box, boxes off
    their pixels, and a few of each for the message."""
    records: int = 0
    kept: int = 0
    ignored: int = 0
    unboxed: int = 0
    off: int = 0
    largest_unboxed: int = 0
    examples: list = dataclasses.field(default_factory=list)

    def add(self, other: "Judged") -> None:
        for f in ("records", "kept", "ignored", "unboxed", "off"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.largest_unboxed = max(self.largest_unboxed, other.largest_unboxed)
        self.examples += other.examples


def boxes_of(r) -> list[tuple[str, tuple, bool]]:
    """A record's (class, box in its pixels, ignored?) list."""
    h, w = r["pixels"].shape[:2]
    why = r.get("augd/object/ignored") or [""] * len(r["image/object/class/text"])
    return [(c, (x0 * w, y0 * h, x1 * w, y1 * h), bool(i)) for c, x0, y0, x1, y1, i in zip(
        r["image/object/class/text"], r["image/object/bbox/xmin"], r["image/object/bbox/ymin"],
        r["image/object/bbox/xmax"], r["image/object/bbox/ymax"], why)]


def judge(records, *, min_area: int = 150, tol: float = 3.0) -> Judged:
    out = Judged()
    for r in records:
        out.records += 1
        px = r["pixels"]
        h, w = px.shape[:2]
        written = boxes_of(r)
        out.kept += sum(not i for *_, i in written)
        out.ignored += sum(i for *_, i in written)
        where = f"{r['image/filename']} v{r['augd/variant']}"
        for cls, colour in COLOURS.items():
            raw, mine, seen = _colour(px, colour)
            boxes = [(b, i) for c, b, i in written if c == cls]
            # every region of the colour a viewer can see lies in a box of its class
            covered = np.zeros((h, w), bool)
            for (x0, y0, x1, y1), _ in boxes:
                covered[max(int(y0) - 2, 0):int(np.ceil(y1)) + 2, max(int(x0) - 2, 0):int(np.ceil(x1)) + 2] = True
            n, _, stats, _ = cv2.connectedComponentsWithStats((seen & ~covered).astype(np.uint8), connectivity=8)
            for k in range(1, n):
                area = int(stats[k, cv2.CC_STAT_AREA])
                if area >= min_area:
                    out.unboxed += 1
                    out.largest_unboxed = max(out.largest_unboxed, area)
                    out.examples.append((where, cls, "no box", tuple(int(v) for v in stats[k, :4]), area))
            for k, (box, ignored) in enumerate(boxes):
                why = _off(raw, mine, box, [b for j, (b, _) in enumerate(boxes) if j != k], tol)
                if why:
                    out.off += 1
                    out.examples.append((where, cls, why, np.round(box, 1).tolist(), "ignored" if ignored else "kept"))
    return out


def _off(raw: np.ndarray, mine: np.ndarray, box, others, tol: float) -> str | None:
    """Why a box disagrees with its object's pixels, judged by its own object where objects of its class may
    touch: on each side, its colour (`raw`: a sharp corner's tip is thin) within `tol` px inside the edge (the box
    is no larger than what shows), and none of what a viewer sees of it (`mine`) in the 3 px just beyond `tol`
    outside, where no other box of its class lies (no smaller)."""
    h, w = mine.shape
    x0, y0, x1, y1 = box
    t = int(np.ceil(tol))
    c0, r0, c1, r1 = int(np.floor(x0)), int(np.floor(y0)), int(np.ceil(x1)), int(np.ceil(y1))
    if not raw[max(r0, 0):r1, max(c0, 0):c1].any():
        return "a box without its object"
    elsewhere = np.zeros((h, w), bool)
    for a0, b0, a1, b1 in others:
        elsewhere[max(int(b0) - 2, 0):int(np.ceil(b1)) + 2, max(int(a0) - 2, 0):int(np.ceil(a1)) + 2] = True
    free = mine & ~elsewhere
    sides = {"left": (np.s_[r0:r1, c0:c0 + t + 1], np.s_[r0:r1, c0 - t - 3:c0 - t]),
             "right": (np.s_[r0:r1, c1 - t - 1:c1], np.s_[r0:r1, c1 + t:c1 + t + 3]),
             "top": (np.s_[r0:r0 + t + 1, c0:c1], np.s_[r0 - t - 3:r0 - t, c0:c1]),
             "bottom": (np.s_[r1 - t - 1:r1, c0:c1], np.s_[r1 + t:r1 + t + 3, c0:c1])}
    for side, (inner, outer) in sides.items():
        if not _clip(raw, inner).any():
            return f"box larger than its object ({side})"
        if _clip(free, outer).sum() >= 3:
            return f"box smaller than its object ({side})"
    return None


def _clip(a: np.ndarray, s) -> np.ndarray:
    """a[s] with the slices' starts clipped at 0 (a negative start would wrap)."""
    return a[tuple(slice(max(x.start, 0), max(x.stop, 0)) for x in s)]


def fates(manifest_path) -> dict:
    """The manifest's objects block: in, kept, ignored, dropped and why."""
    return json.loads(Path(manifest_path).read_text())["annotations"]["objects"]


def counted(judged: Judged) -> dict:
    return collections.OrderedDict(records=judged.records, kept=judged.kept, ignored=judged.ignored,
                                   unboxed=judged.unboxed, largest_unboxed=judged.largest_unboxed, off=judged.off)
