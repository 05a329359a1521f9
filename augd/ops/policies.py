"""Learned and searched-free augmentation policies over augd's ops: `randaugment: {n, m}` (Cubuk et al. 2020) and
`trivial_augment: {}` (Müller & Hutter 2021), and `identity`, the no-op both draw among.

A policy is a composite whose children it writes itself from its parameters (`expand`): the spec parses them as
if they were in the YAML, so they are ordinary ops, fused and box-aware as ever (rotations, shears and shifts move
boxes, masks and keypoints with the pixels; colour ops move nothing), drawn from the image's seed, and the preview
writes which ones each variant drew. The ops and magnitudes are torchvision's (`RandAugment`,
`TrivialAugmentWide`); the serialized form holds the parameters only, so a policy's expansion is part of augd.
"""
from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from augd.ops.base import ColourOp, CompositeOp, Kind, OpParams, register_op

__all__ = ["Identity", "RandAugment", "TrivialAugment"]

#: torchvision's magnitude bins (0 .. 30): RandAugment's m is one of them
BINS = 30


@register_op("identity", Kind.COLOUR)
class Identity(ColourOp):
    """Leave the image as it is: the policies' Identity, so that "no change" is one of their draws."""
    class Params(OpParams):
        pass

    def describe(self, drawn):
        return [self.label]

    def apply_tf(self, image, params):
        return image

    def apply_np(self, x, params):
        return x

    def affine(self, params, mean):
        return np.eye(3), np.zeros(3)


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
        k = min(int(rng.random() * n), n - 1)
        return [i == k for i in range(n)]

    def describe(self, drawn):
        return [f"{self.label} → {', '.join(drawn.chosen) if drawn.chosen else 'nothing'}"]
