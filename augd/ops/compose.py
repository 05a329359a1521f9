"""Composites: one_of, some_of, sequence. Each holds its children (in the spec's OpNode) and chooses
which of them apply to an image; the engine flattens them, so a geometry-only composite stays fusable."""
from __future__ import annotations

import functools

import numpy as np
from pydantic import Field, ValidationInfo, field_validator

from augd.ops.base import CompositeOp, Kind, OpParams, register_op


def _chosen(op: CompositeOp, drawn) -> list[str]:
    """`one_of → a, b`: the children this image's draw picked, by name (the preview writes theirs under it)."""
    return [f"{op.label} → {', '.join(drawn.chosen) if drawn.chosen else 'nothing'}"]


def _n_children(info: ValidationInfo) -> int | None:
    return (info.context or {}).get("n_children")


@functools.lru_cache(maxsize=256)
def _cumulative(weights: tuple[float, ...]) -> np.ndarray:
    """Cumulative choice probabilities, computed once per weighting (choose runs once per image)."""
    cum = np.cumsum(np.asarray(weights, np.float64))
    cum = cum / cum[-1]
    cum.setflags(write=False)  # shared by every image's choice
    return cum


@register_op("one_of", Kind.COMPOSITE)
class OneOf(CompositeOp):
    """Apply exactly one child, chosen at random (optionally weighted)."""
    example = ("- one_of: [{random_flip_left_right: {}}, {random_rotation: {degrees: 10}}]\n"
               "- one_of: {ops: [{random_hue: {max_delta: 0.1}}, {random_gamma: {}}], weights: [3, 1], p: 0.5}")

    class Params(OpParams):
        weights: tuple[float, ...] | None = Field(None, description="relative weights, one per child")

        @field_validator("weights")
        @classmethod
        def _weights(cls, v, info: ValidationInfo):
            n = _n_children(info)
            if v is not None:
                if n is not None and len(v) != n:
                    raise ValueError(f"needs one weight per op ({n}); got {len(v)}")
                if any(x < 0 for x in v) or sum(v) <= 0:
                    raise ValueError(f"weights must be >= 0 with a positive sum; got {list(v)}")
            return v

    def choose(self, rng, n):
        cum = _cumulative(self.params.weights or (1.0,) * n)
        idx = min(int(np.searchsorted(cum, rng.random(), side="right")), n - 1)
        return [k == idx for k in range(n)]

    def describe(self, drawn):
        return _chosen(self, drawn)


@register_op("some_of", Kind.COMPOSITE)
class SomeOf(CompositeOp):
    """Apply n distinct children chosen at random, in the order listed."""
    example = "- some_of: {n: 2, ops: [{random_brightness: {}}, {random_contrast: {}}, {random_hue: {}}]}"

    class Params(OpParams):
        n: int = Field(1, ge=1, description="how many children to apply")

        @field_validator("n")
        @classmethod
        def _n(cls, v, info: ValidationInfo):
            m = _n_children(info)
            if m is not None and v > m:
                raise ValueError(f"n must be <= the number of ops ({m}); got {v}")
            return v

    def choose(self, rng, n):
        # One number per child ranks them; the first params.n in that ranking apply.
        picked = set(sorted(range(n), key=rng.random(n).__getitem__)[:self.params.n])
        return [k in picked for k in range(n)]

    def describe(self, drawn):
        return _chosen(self, drawn)


@register_op("sequence", Kind.COMPOSITE)
class Sequence(CompositeOp):
    """Apply all children in order (use p to apply the whole group or none of it)."""
    example = "- sequence: {p: 0.3, ops: [{random_rotation: {degrees: 5}}, {gaussian_blur: {}}]}"

    class Params(OpParams):
        pass

    def describe(self, drawn):
        return [self.label]  # it chooses every child: naming them again would only repeat the lines below
