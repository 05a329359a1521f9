"""The `annotations:` setting of a pipeline, a job's augd.yaml, the daemon's config and `augd run`: how a
detection or segmentation job reads its boxes and masks. TensorFlow-free.

Each place says only the keys it sets; `Annotations.over` layers them (job > pipeline > daemon, the CLI over
all), so a daemon can fix the label map for every job while a job names its own format. A pipeline holds the
block in its normalized form (every default filled in) and its sha256 only when it sets one, so pipelines
without it keep their bytes.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from augd.annotations.layout import FORMATS, in_words
from augd.annotations.occlusion import LOW_VISIBILITY

__all__ = ["ANNOTATION_FORMATS", "Annotations", "AnnotationsConfig", "DEFAULTS"]

#: What `format:` may say: auto detects the layout (nothing detected: a classification job), none forces
#: a classification job, tfrecord: TFRecord shards (augd.annotations.tfrecords; auto finds them too), the rest
#: name a format of augd.annotations.layout.REGISTRY.
ANNOTATION_FORMATS = ("auto", *FORMATS, "tfrecord", "none")


class AnnotationsConfig(BaseModel):
    """The YAML form of `annotations:`; a key left out is not set here (a lower layer, or the default, holds)."""
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal[ANNOTATION_FORMATS] | None = Field(
        None, description=f"auto (default): detect TFRecord shards or a {in_words()} layout (nothing detected: a "
                          f"classification job); none: always a classification job")
    label_map: str | list[str] | None = Field(
        None, description="fixed label map: a TF Object Detection API label_map.pbtxt (relative to the job), or "
                          "class names (ids 1..N in order); an object of another class rejects its image")
    min_visibility: float | None = Field(None, ge=0.0, le=1.0, description="drop an object showing less than this "
                                                                           "fraction of itself after the transform "
                                                                           "and cutouts (default 0.3)")
    min_size: float | None = Field(None, ge=0.0, description="drop a box narrower or shorter than this many pixels "
                                                             "after the transform; thinner remnants beside a cutout "
                                                             "do not count as showing (default 2)")
    low_visibility: Literal[LOW_VISIBILITY] | None = Field(
        None, description="an object that still shows but under min_visibility (or min_keypoints): ignore (default: "
                          "written with weight 0 and is_crowd 1, learned neither as object nor as background), drop "
                          "(the OD API's behaviour: no box, though its pixels stay) or keep (an ordinary box)")
    negatives: Literal["keep", "reject"] | None = Field(None, description="images with no object: keep "
                                                                          "(default) or reject")
    box_rotation: Literal["corners", "ellipse"] | None = Field(
        None, description="a box alone (no polygon or mask) through a rotation or shear: corners (default: the box "
                          "of its turned corners, which holds the object whatever its shape but grows) or ellipse "
                          "(the box of its inscribed ellipse turned: tighter for round objects; Kalra et al. 2021)")
    keypoint_rotation: list[int] | None = Field(None, min_length=1, description="keypoint jobs: at each quarter "
                                                "turn (random_rotation90) point i takes point keypoint_rotation[i]'s "
                                                "place (the OD API's keypoint_rot_permutation); default: none")
    repair: Literal["standard", "none"] | None = Field(
        None, description="near-miss annotations: standard (default) clips a box up to 4 px or 0.5 % of a side "
                          "past the border, drops exact duplicates and empty boxes, and counts each repair; none "
                          "rejects their images")
    min_keypoints: int | None = Field(None, ge=0, description="keypoint jobs: drop an object left with fewer "
                                                              "labelled keypoints than this (default 0)")
    keypoint_flip: list[int] | None = Field(None, min_length=1, description="keypoint jobs: keypoint_flip[i] is "
                                            "the point whose position point i takes on a horizontal mirror (the "
                                            "OD API's keypoint_flip_permutation); default: COCO's left_/right_ "
                                            "names, or YOLO's flip_idx")

    polygon_keys: bool | None = Field(
        None, description="detection jobs: also write what shows of each object as polygons, the moved rings "
                          "themselves (image/object/polygon/*: docs/records.md#polygons), for models that train "
                          "on polygons (YOLO-seg); default false: its instance mask alone")

    @field_validator("label_map", mode="before")
    @classmethod
    def _label_map(cls, v):
        if v is None or isinstance(v, str) and v or isinstance(v, list) and v and all(
                isinstance(n, str) and n and n == n.strip() for n in v):
            return v
        raise ValueError("must be a label_map.pbtxt file or a non-empty list of class names")

    @field_validator("label_map", mode="after")
    @classmethod
    def _unique(cls, v):
        if isinstance(v, list) and len(set(v)) != len(v):
            twice = sorted({n for n in v if v.count(n) > 1})
            raise ValueError(f"class {twice[0]!r} is listed twice")
        return v


@dataclass(frozen=True)
class Annotations:
    """One layer of annotation settings (None: not set in this layer). `value(key)` reads a key with the
    default filled in; `normalized()` is the form a pipeline's sha256 covers."""
    format: str | None = None
    label_map: str | tuple[str, ...] | None = None   # a pbtxt path, or class names (ids 1..N)
    min_visibility: float | None = None
    min_size: float | None = None
    negatives: str | None = None
    low_visibility: str | None = None
    min_keypoints: int | None = None
    box_rotation: str | None = None
    keypoint_flip: tuple[int, ...] | None = None
    repair: str | None = None
    keypoint_rotation: tuple[int, ...] | None = None
    polygon_keys: bool | None = None

    @classmethod
    def from_config(cls, cfg: AnnotationsConfig, base_dir: str | None = None) -> "Annotations":
        """From validated YAML. `base_dir`: a relative label_map path is made absolute against it (the daemon's
        config folder); None keeps it relative (a pipeline's or a job's: read against the job folder)."""
        lm = cfg.label_map
        if isinstance(lm, list):
            lm = tuple(lm)
        elif isinstance(lm, str) and base_dir is not None and not os.path.isabs(lm):
            lm = os.path.normpath(os.path.join(base_dir, lm))
        return cls(format=cfg.format, label_map=lm, min_visibility=cfg.min_visibility, min_size=cfg.min_size,
                   negatives=cfg.negatives, min_keypoints=cfg.min_keypoints, box_rotation=cfg.box_rotation,
                   keypoint_flip=None if cfg.keypoint_flip is None else tuple(cfg.keypoint_flip),
                   repair=cfg.repair, low_visibility=cfg.low_visibility,
                   keypoint_rotation=None if cfg.keypoint_rotation is None else tuple(cfg.keypoint_rotation),
                   polygon_keys=cfg.polygon_keys)

    def over(self, base: "Annotations | None") -> "Annotations":
        """This layer's keys, and `base`'s where this one sets none."""
        if base is None:
            return self
        return Annotations(**{f.name: getattr(self, f.name) if getattr(self, f.name) is not None
                              else getattr(base, f.name) for f in fields(self)})

    def value(self, key: str):
        v = getattr(self, key)
        return DEFAULTS[key] if v is None else v

    @property
    def is_empty(self) -> bool:
        return all(getattr(self, f.name) is None for f in fields(self))

    def normalized(self) -> dict:
        """Every key with its default filled in (a list label map as a list); the keys added since (keypoints,
        box_rotation, repair, low_visibility, polygon_keys) only when set, so pipelines written before them keep
        their sha256."""
        out = {f.name: self.value(f.name) for f in fields(self)
               if f.name not in _WHEN_SET or getattr(self, f.name) is not None}
        for key in ("label_map", "keypoint_flip", "keypoint_rotation"):
            if isinstance(out.get(key), tuple):
                out[key] = list(out[key])
        return out


_WHEN_SET = ("min_keypoints", "keypoint_flip", "box_rotation", "repair", "keypoint_rotation", "low_visibility",
             "polygon_keys")


#: The value of each key no layer sets.
#: min_visibility 0.3 is the OD API's own (random_crop_image's overlap_thresh, in the configs it ships; YOLOv5 drops
#: labels under 0.4 after its cutout): an object showing less is too little of itself to learn from, yet still there,
#: so low_visibility "ignore" writes it with weight 0 rather than leave its pixels as background, as the OD API's drop
#: does. min_size 2: a 1-px strip beside a patch, or a 1-px box, is no object (docs/pipelines.md).
DEFAULTS = {"format": "auto", "label_map": None, "min_visibility": 0.3, "min_size": 2.0, "negatives": "keep",
            "min_keypoints": 0, "keypoint_flip": None, "box_rotation": "corners", "repair": "standard",
            "keypoint_rotation": None, "low_visibility": "ignore", "polygon_keys": False}
