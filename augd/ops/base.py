"""Op registry and the declarative parameter models every op is built from.

An op is a small class: a frozen pydantic `Params` model (the model *is* the YAML form and the
serialized form) plus either `sample()` (geometry: returns a 3x3 matrix, fused by the engine into
one warp), `draw()` + kernels (colour ops) or `apply()` (pixel ops: image -> image). Nothing here
imports TensorFlow.
"""
from __future__ import annotations

import enum
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, WithJsonSchema

__all__ = [
    "Kind", "Op", "OpParams", "REGISTRY", "register_op", "get_op", "range_of", "Probability", "Size",
]


class Kind(str, enum.Enum):
    GEOMETRY = "geometry"    # sample() -> (matrix out->in, out_h, out_w); fused into one warp
    COLOUR = "colour"        # apply() on float32 in [0, 1]
    PIXEL = "pixel"          # apply() on uint8
    COMPOSITE = "composite"  # holds child ops; compiled by the engine


Probability = Annotated[float, Field(ge=0.0, le=1.0, description="probability that the op applies")]


def _check_order(v: tuple) -> tuple:
    if v[0] > v[1]:
        raise ValueError(f"range must be [low, high] with low <= high; got [{v[0]}, {v[1]}]")
    return v


def range_of(lo: float, hi: float, *, symmetric: bool = False, kind: type = float) -> Any:
    """A reusable [low, high] range type bounded by [lo, hi]. A single number is accepted too: with
    symmetric=True d means [-d, d] (as tf.image's max_delta / Keras' factor do), else x means [x, x]
    (a fixed value)."""
    item = Annotated[kind, Field(ge=lo, le=hi)]

    def widen(v):
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return (-abs(v), abs(v)) if symmetric else (v, v)
        return v

    pair = tuple[item, item]
    schema = TypeAdapter(pair).json_schema()
    scalar = ({"type": "number", "minimum": 0, "maximum": max(abs(lo), abs(hi))} if symmetric else
              {"type": "number" if kind is float else "integer", "minimum": lo, "maximum": hi})
    schema = {"anyOf": [scalar, schema]}  # the JSON Schema accepts the scalar shorthand too
    return Annotated[pair, BeforeValidator(widen), AfterValidator(_check_order), WithJsonSchema(schema)]


def _size(v):
    if isinstance(v, int) and not isinstance(v, bool):
        return (v, v)
    return v


_Side = Annotated[int, Field(ge=1, le=65535)]
#: Output size as [height, width]; a single integer means a square.
Size = Annotated[tuple[_Side, _Side], BeforeValidator(_size), WithJsonSchema(
    {"anyOf": [TypeAdapter(_Side).json_schema(), TypeAdapter(tuple[_Side, _Side]).json_schema()]})]


class OpParams(BaseModel):
    """Base of every op's parameters: unknown keys are errors, instances are immutable."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    p: Probability = 1.0


class Op:
    """One registered op. Subclasses set `Params` and `kind` and implement sample() or apply()."""
    name: ClassVar[str]
    kind: ClassVar[Kind]
    Params: ClassVar[type[OpParams]] = OpParams
    example: ClassVar[str | None] = None   # YAML shown by `augd ops` where the syntax is not obvious

    def __init__(self, params: OpParams):
        self.params = params

    @classmethod
    def summary(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""

    # Geometry ops: (NumPy generator, input h, w) -> (3x3 float64 matrix mapping output pixel coords to
    # input coords, out_h, out_w). Runs in the engine's per-image plan, not in the graph.
    def sample(self, rng, h, w):  # pragma: no cover - interface
        raise NotImplementedError

    # Pixel ops (and colour ops that draw per-pixel noise): graph code, image -> image of the same dtype,
    # 3 channels; `seed` is a [2] int64 tensor for TF's stateless kernels. Colour ops with a NumPy
    # draw() subclass augd.ops.colour.ColourOp instead.
    def apply(self, image, seed):  # pragma: no cover - interface
        raise NotImplementedError


REGISTRY: dict[str, type[Op]] = {}


def register_op(name: str, kind: Kind):
    """Class decorator: `@register_op("random_hue", Kind.COLOUR)`."""
    def deco(cls: type[Op]) -> type[Op]:
        if name in REGISTRY:
            raise RuntimeError(f"op {name!r} registered twice")
        cls.name, cls.kind = name, kind
        REGISTRY[name] = cls
        return cls
    return deco


def get_op(name: str) -> type[Op]:
    return REGISTRY[name]
