"""Learned and search-free augmentation policies over augd's ops: `autoaugment: {policy: v0-v3}` (AutoAugment for
detection, Zoph et al. 2019), `randaugment: {n, m}` (Cubuk et al. 2020) and `trivial_augment: {}` (Müller & Hutter
2021), and `identity`, the no-op RandAugment and TrivialAugment draw among.

A policy is a composite whose children it writes itself from its parameters (`expand`): the spec parses them as
if they were in the YAML, so they are ordinary ops, fused and box-aware as ever (rotations, shears and shifts move
boxes, masks and keypoints with the pixels; colour ops move nothing), drawn from the image's seed, and the preview
writes which ones each variant drew. The ops and magnitudes are torchvision's (`RandAugment`,
`TrivialAugmentWide`); the serialized form holds the parameters only, so a policy's expansion is part of augd.
"""
from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field, model_serializer

from augd.ops.base import ColourOp, CompositeOp, Kind, OpParams, register_op

__all__ = ["AUTOAUGMENT", "AutoAugment", "Identity", "RandAugment", "TrivialAugment"]

#: torchvision's magnitude bins (0 .. 30): RandAugment's m is one of them
BINS = 30


@register_op("identity", Kind.COLOUR)
class Identity(ColourOp):
    """Leave the image as it is: the policies' Identity, so that "no change" is one of their draws."""
    class Params(OpParams):
        pass

    def describe(self, drawn):
        return [self.label]

    affine_exact = True

    def apply_tf(self, image, params):
        return image

    def apply_np(self, x, params):
        return x

    def affine(self, params, mean):
        return np.eye(3), np.zeros(3)


def _one_uniformly(rng, n: int) -> list[bool]:
    """One child of n, each as likely (the policies' draw of an operation or a sub-policy)."""
    k = min(int(rng.random() * n), n - 1)
    return [i == k for i in range(n)]


def _affine(**params) -> dict:
    """random_affine doing only what `params` say (its own default scale jitter off)."""
    return {"random_affine": {"scale": [1.0, 1.0], **params}}


def _signed(key: str, value) -> dict:
    """An affine at +value or -value of `key`, one of the two (the policies' random sign)."""
    return {"one_of": {"ops": [_affine(**{key: value}), _affine(**{key: _negated(value)})]}}


def _negated(value):
    return [-v for v in value] if isinstance(value, list) else -value


def _factor(op: str, v: float) -> dict:
    """A PIL-style enhancer at 1 + v or 1 - v."""
    return {"one_of": {"ops": [{op: {"lower": 1.0 + v, "upper": 1.0 + v}},
                               {op: {"lower": max(1.0 - v, 0.0), "upper": max(1.0 - v, 0.0)}}]}}


def randaugment_ops(m: int) -> list[dict]:
    """RandAugment's 14 operations at magnitude m (0-30), torchvision's mapping: shears up to 0.3 (tan), shifts up
    to 150/331 of the side, rotations up to 30 degrees, enhancers 1 +- 0.9, posterize 8 -> 4 bits, solarize at
    255 -> 0. Signed ones take a random sign; a shift draws uniformly up to its magnitude (augd's affine shift is a
    range)."""
    f = m / BINS
    shear = round(math.degrees(math.atan(0.3 * f)), 4)
    rotate, shift, enhance = round(30.0 * f, 4), round(150.0 / 331.0 * f, 4), round(0.9 * f, 4)
    return [
        {"identity": {}}, {"autocontrast": {}}, {"equalize": {}},
        _signed("rotate", [rotate, rotate]),
        {"solarize": {"threshold": int(round(255 * (1.0 - f)))}},
        _factor("random_color", enhance), {"posterize": {"bits": 8 - int(4 * f)}},
        _factor("random_contrast", enhance),
        {"random_brightness": {"max_delta": round(enhance / 2, 4)}},   # tf.image's additive brightness
        _factor("random_sharpness", enhance),
        _signed("shear", [shear, shear]), _signed("shear_y", [shear, shear]),
        _affine(translate=[shift, 0.0]), _affine(translate=[0.0, shift]),
    ]


def trivial_augment_ops() -> list[dict]:
    """TrivialAugmentWide's 14 operations, each at a magnitude drawn uniformly from its whole range with a random
    sign, torchvision's: shears up to 0.99 (tan), shifts up to 32 px (here 32/224 of the side), rotations up to
    135 degrees, enhancers 1 +- 0.99, posterize 8 -> 2 bits, solarize 255 -> 0."""
    shear = round(math.degrees(math.atan(0.99)), 4)
    shift = round(32.0 / 224.0, 4)
    return [
        {"identity": {}}, {"autocontrast": {}}, {"equalize": {}},
        _affine(rotate=135.0),
        {"one_of": {"ops": [{"solarize": {"threshold": t}} for t in range(0, 256, 17)]}},
        {"random_color": {"lower": 0.01, "upper": 1.99}},
        {"one_of": {"ops": [{"posterize": {"bits": b}} for b in range(2, 9)]}},
        {"random_contrast": {"lower": 0.01, "upper": 1.99}},
        {"random_brightness": {"max_delta": 0.495}},                  # tf.image's additive brightness
        {"random_sharpness": {"lower": 0.01, "upper": 1.99}},
        _affine(shear=shear), _affine(shear_y=shear),
        _affine(translate=[shift, 0.0]), _affine(translate=[0.0, shift]),
    ]


@register_op("randaugment", Kind.COMPOSITE)
class RandAugment(CompositeOp):
    """RandAugment: n operations, each drawn uniformly (with replacement) from its 14, all at magnitude m (0-30).
    Its children are written by augd (`expand`), not listed in the YAML."""
    example = "- randaugment: {n: 2, m: 9}"
    label = "randaugment"

    class Params(OpParams):
        n: int = Field(2, ge=1, le=8, description="operations applied to each image")
        m: int = Field(9, ge=0, le=BINS, description="their magnitude, 0-30 (torchvision's bins)")

    @staticmethod
    def expand(params) -> list[dict]:
        """The children: n draws, each a one_of over the 14 operations at magnitude m."""
        return [{"one_of": {"ops": randaugment_ops(params.m)}} for _ in range(params.n)]

    def describe(self, drawn):
        return [f"{self.label} n={self.params.n} m={self.params.m}"]


@register_op("trivial_augment", Kind.COMPOSITE)
class TrivialAugment(CompositeOp):
    """TrivialAugment (Wide): one operation drawn uniformly from its 14, at a magnitude drawn uniformly from its
    whole range. Its children are written by augd (`expand`), not listed in the YAML."""
    example = "- trivial_augment: {}"
    label = "trivial_augment"

    class Params(OpParams):
        pass

    @staticmethod
    def expand(params) -> list[dict]:
        return trivial_augment_ops()

    def choose(self, rng, n):
        return _one_uniformly(rng, n)

    def describe(self, drawn):
        return [f"{self.label} → {', '.join(drawn.chosen) if drawn.chosen else 'nothing'}"]


#: AutoAugment's detection policies (the OD API's autoaugment_utils.py, policy_v0 .. policy_v3): sub-policies of
#: (operation, probability, level 0-10), one sub-policy drawn per image, its operations applied in order
AUTOAUGMENT = {
    "v0": [
        [("TranslateX_BBox", 0.6, 4), ("Equalize", 0.8, 10)],
        [("TranslateY_Only_BBoxes", 0.2, 2), ("Cutout", 0.8, 8)],
        [("Sharpness", 0.0, 8), ("ShearX_BBox", 0.4, 0)],
        [("ShearY_BBox", 1.0, 2), ("TranslateY_Only_BBoxes", 0.6, 6)],
        [("Rotate_BBox", 0.6, 10), ("Color", 1.0, 6)],
    ],
    "v2": [
        [("Color", 0.0, 6), ("Cutout", 0.6, 8), ("Sharpness", 0.4, 8)],
        [("Rotate_BBox", 0.4, 8), ("Sharpness", 0.4, 2), ("Rotate_BBox", 0.8, 10)],
        [("TranslateY_BBox", 1.0, 8), ("AutoContrast", 0.8, 2)],
        [("AutoContrast", 0.4, 6), ("ShearX_BBox", 0.8, 8), ("Brightness", 0.0, 10)],
        [("SolarizeAdd", 0.2, 6), ("Contrast", 0.0, 10), ("AutoContrast", 0.6, 0)],
        [("Cutout", 0.2, 0), ("Solarize", 0.8, 8), ("Color", 1.0, 4)],
        [("TranslateY_BBox", 0.0, 4), ("Equalize", 0.6, 8), ("Solarize", 0.0, 10)],
        [("TranslateY_BBox", 0.2, 2), ("ShearY_BBox", 0.8, 8), ("Rotate_BBox", 0.8, 8)],
        [("Cutout", 0.8, 8), ("Brightness", 0.8, 8), ("Cutout", 0.2, 2)],
        [("Color", 0.8, 4), ("TranslateY_BBox", 1.0, 6), ("Rotate_BBox", 0.6, 6)],
        [("Rotate_BBox", 0.6, 10), ("BBox_Cutout", 1.0, 4), ("Cutout", 0.2, 8)],
        [("Rotate_BBox", 0.0, 0), ("Equalize", 0.6, 6), ("ShearY_BBox", 0.6, 8)],
        [("Brightness", 0.8, 8), ("AutoContrast", 0.4, 2), ("Brightness", 0.2, 2)],
        [("TranslateY_BBox", 0.4, 8), ("Solarize", 0.4, 6), ("SolarizeAdd", 0.2, 10)],
        [("Contrast", 1.0, 10), ("SolarizeAdd", 0.2, 8), ("Equalize", 0.2, 4)],
    ],
    "v3": [
        [("Posterize", 0.8, 2), ("TranslateX_BBox", 1.0, 8)],
        [("BBox_Cutout", 0.2, 10), ("Sharpness", 1.0, 8)],
        [("Rotate_BBox", 0.6, 8), ("Rotate_BBox", 0.8, 10)],
        [("Equalize", 0.8, 10), ("AutoContrast", 0.2, 10)],
        [("SolarizeAdd", 0.2, 2), ("TranslateY_BBox", 0.2, 8)],
        [("Sharpness", 0.0, 2), ("Color", 0.4, 8)],
        [("Equalize", 1.0, 8), ("TranslateY_BBox", 1.0, 8)],
        [("Posterize", 0.6, 2), ("Rotate_BBox", 0.0, 10)],
        [("AutoContrast", 0.6, 0), ("Rotate_BBox", 1.0, 6)],
        [("Equalize", 0.0, 4), ("Cutout", 0.8, 10)],
        [("Brightness", 1.0, 2), ("TranslateY_BBox", 1.0, 6)],
        [("Contrast", 0.0, 2), ("ShearY_BBox", 0.8, 0)],
        [("AutoContrast", 0.8, 10), ("Contrast", 0.2, 10)],
        [("Rotate_BBox", 1.0, 10), ("Cutout", 1.0, 10)],
        [("SolarizeAdd", 0.8, 6), ("Equalize", 0.8, 8)],
    ],
}
AUTOAUGMENT["v1"] = AUTOAUGMENT["v0"] + [
    [("Color", 0.0, 0), ("ShearX_Only_BBoxes", 0.8, 4)],
    [("ShearY_Only_BBoxes", 0.8, 2), ("Flip_Only_BBoxes", 0.0, 10)],
    [("Equalize", 0.6, 10), ("TranslateX_BBox", 0.2, 2)],
    [("Color", 1.0, 10), ("TranslateY_Only_BBoxes", 0.4, 6)],
    [("Rotate_BBox", 0.8, 10), ("Contrast", 0.0, 10)],
    [("Cutout", 0.2, 2), ("Brightness", 0.8, 10)],
    [("Color", 1.0, 6), ("Equalize", 1.0, 2)],
    [("Cutout_Only_BBoxes", 0.4, 6), ("TranslateY_Only_BBoxes", 0.8, 2)],
    [("Color", 0.2, 8), ("Rotate_BBox", 0.8, 10)],
    [("Sharpness", 0.4, 4), ("TranslateY_Only_BBoxes", 0.0, 4)],
    [("Sharpness", 1.0, 4), ("SolarizeAdd", 0.4, 4)],
    [("Rotate_BBox", 1.0, 8), ("Sharpness", 0.2, 8)],
    [("ShearY_BBox", 0.6, 10), ("Equalize_Only_BBoxes", 0.6, 8)],
    [("ShearX_BBox", 0.2, 6), ("TranslateY_Only_BBoxes", 0.2, 10)],
    [("SolarizeAdd", 0.6, 8), ("Brightness", 0.8, 10)],
]

#: the OD API's hyperparameters (its autoaugment hparams): pixels and fractions at level 10
_TRANSLATE, _CUTOUT, _TRANSLATE_BOX, _CUTOUT_BOX, _CUTOUT_FRACTION = 250, 100, 120, 50, 0.75
#: the image side the published pixels are for (COCO's images, ~640 x 480, which the policies were searched on):
#: `scale: image` scales them by each image's longer side / this
_PUBLISHED_SIDE = 640
_GREY = 128   # what the OD API's moves and holes leave: replace = [128, 128, 128]
_LEVELS = 10.0


def _grey_affine(key: str, v: float, scaled: dict) -> list[dict]:
    pixels = scaled if key.startswith("shift") else {}
    return [{"random_affine": {"scale": [1.0, 1.0], key: [v, v], "fill": _GREY, **pixels}},
            {"random_affine": {"scale": [1.0, 1.0], key: [-v, -v], "fill": _GREY, **pixels}}]


def autoaugment_op(name: str, prob: float, level: int, reference: int | None = None) -> dict:
    """One operation of an AutoAugment sub-policy as augd's op, with the OD API's level-to-argument mapping.
    Whole-image moves are random_affine about the centre (the OD API shears about the top-left corner, which also
    shifts the image); the boxes, masks and keypoints move with them and lose what leaves the image by the
    occlusion rule. `*_Only_BBoxes` act on each box with prob / 3 (the OD API's scaling), the op itself always.
    Posterize keeps 4 + level * 4 / 10 bits, the paper's range (the OD API's code keeps level * 4 / 10: none at
    level 2, a black image). Contrast is tf.image's (each channel about its mean; PIL's uses the grey mean).
    `reference`: the ops that draw pixels (shifts, cutouts, holes in boxes, shifts in boxes) scale them by each
    image's longer side / reference (augd's `scale: image`); None: the published pixels."""
    f = level / _LEVELS
    scaled = {"reference": reference} if reference is not None else {}
    factor = round(f * 1.8 + 0.1, 4)
    enhancers = {"Color": "random_color", "Contrast": "random_contrast", "Sharpness": "random_sharpness",
                 "Brightness": "random_brightness_scale"}
    moves = {"TranslateX_BBox": ("shift_x", f * _TRANSLATE), "TranslateY_BBox": ("shift_y", f * _TRANSLATE),
             "ShearX_BBox": ("shear", math.degrees(math.atan(f * 0.3))),
             "ShearY_BBox": ("shear_y", math.degrees(math.atan(f * 0.3))), "Rotate_BBox": ("rotate", f * 30.0)}
    inside = {"Rotate_Only_BBoxes": ("rotate", f * 30.0), "ShearX_Only_BBoxes": ("shear_x", f * 0.3),
              "ShearY_Only_BBoxes": ("shear_y", f * 0.3), "TranslateX_Only_BBoxes": ("translate_x", f * _TRANSLATE_BOX),
              "TranslateY_Only_BBoxes": ("translate_y", f * _TRANSLATE_BOX), "Flip_Only_BBoxes": ("flip", 0.0),
              "Solarize_Only_BBoxes": ("solarize", float(int(f * 256))), "Equalize_Only_BBoxes": ("equalize", 0.0)}
    if name in moves:
        key, v = moves[name]
        return {"one_of": {"ops": _grey_affine(key, round(v, 4), scaled), "p": prob}} if v else \
            {"identity": {"p": prob}}
    if name in inside:
        op, v = inside[name]
        return {"in_boxes": {"op": op, "value": round(v, 4), "box_p": round(prob / 3.0, 6), "fill": _GREY,
                             **(scaled if op.startswith("translate") else {})}}
    if name in enhancers:
        return {enhancers[name]: {"lower": factor, "upper": factor, "p": prob}}
    simple = {"Equalize": ("equalize", {}), "AutoContrast": ("autocontrast", {}),
              "Solarize": ("solarize", {"threshold": int(f * 256)}),
              "SolarizeAdd": ("solarize_add", {"addition": int(f * 110), "threshold": 128}),
              "Posterize": ("posterize", {"bits": 4 + int(f * 4)})}
    if name in simple:
        op, params = simple[name]
        return {op: {**params, "p": prob}}
    if name == "Cutout":
        size = 2 * int(f * _CUTOUT)
        return {"cutout": {"size": size, "fill": _GREY, "p": prob, **scaled}} if size else {"identity": {"p": prob}}
    if name == "BBox_Cutout":
        fraction = round(f * _CUTOUT_FRACTION, 4)
        return ({"box_cutout": {"boxes": "one", "fraction": fraction, "fill": _GREY, "p": prob}} if fraction else
                {"identity": {"p": prob}})
    if name == "Cutout_Only_BBoxes":
        return {"box_cutout": {"boxes": "each", "size": max(2 * int(f * _CUTOUT_BOX), 1),
                               "box_p": round(prob / 3.0, 6), "fill": _GREY, **scaled}}
    raise KeyError(f"AutoAugment operation {name!r} unknown")


@register_op("autoaugment", Kind.COMPOSITE)
class AutoAugment(CompositeOp):
    """AutoAugment for detection (Zoph et al. 2019): one sub-policy of the chosen policy drawn per image, its
    operations applied in order, each with its own probability, box-aware throughout (some act only inside
    boxes). v0 is the paper's; v1-v3 the OD API's others. Its children are written by augd (`expand`)."""
    example = "- autoaugment: {policy: v0}"
    label = "autoaugment"

    class Params(OpParams):
        policy: Literal["v0", "v1", "v2", "v3"] = Field("v0", description="the published policy (the OD API's "
                                                                          "policy_v0 .. policy_v3)")
        scale: Literal["published", "image"] = Field(
            "published", description="published: the policy's pixel magnitudes as published, for ~640 px images "
            "(shifts up to 250 px, cutouts up to 200 px); image: augd's own variant, not the published policy: "
            "each pixel magnitude scaled by the image's longer side / 640")

        @model_serializer(mode="wrap")
        def _without_default(self, handler):
            out = handler(self)   # absent when published: a pipeline without it keeps its sha256
            if self.scale == "published":
                out.pop("scale", None)
            return out

    @staticmethod
    def expand(params) -> list[dict]:
        """The children: one sequence per sub-policy."""
        reference = _PUBLISHED_SIDE if params.scale == "image" else None
        return [{"sequence": {"ops": [autoaugment_op(*op, reference=reference) for op in sub]}}
                for sub in AUTOAUGMENT[params.policy]]

    def choose(self, rng, n):
        return _one_uniformly(rng, n)

    def describe(self, drawn):
        picked = getattr(drawn, "picked", ())
        policy = self.params.policy + (" scaled to the image" if self.params.scale == "image" else "")
        if not picked:
            return [f"{self.label} {policy}"]
        sub = AUTOAUGMENT[self.params.policy][picked[0]]
        ops = ", ".join(f"{name} {p:g}/{level}" for name, p, level in sub)
        return [f"{self.label} {policy} #{picked[0] + 1}: {ops}"]
