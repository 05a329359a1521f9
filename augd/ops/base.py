"""Op registry, the declarative parameter models ops are built from, and the one contract of each kind.

An op is a small class: a frozen pydantic `Params` model (the model *is* the YAML form and the
serialized form) on one of four bases, each a contract the engine relies on:

  GeometryOp   sample() -> 3x3 matrix + output size; owns its fill and interpolation (fused into one warp)
  ColourOp     draw() -> parameters, applied by apply_tf / apply_np (and affine for `colour: fast`)
  SeededOp     apply(image, seed) in the graph, on its declared domain (per-pixel noise, pixel ops); an op that
               draws nothing there may also give apply_np, its CPU kernel
  CompositeOp  choose() -> which of its children apply to this image
  PartnerOp    sample() -> how the image and partner images of its split make one canvas (leads the chain)

Nothing here imports TensorFlow.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, WithJsonSchema,
                      model_serializer, model_validator)

__all__ = [
    "ColourOp", "CompositeOp", "Domain", "Fill", "GeometryOp", "Interpolation", "Kind", "Mix", "Op", "OpParams",
    "PartnerOp", "Placement", "Probability", "REGISTRY", "ScaledPixels", "SeededOp", "Size", "range_of",
    "register_op",
]


class Kind(str, enum.Enum):
    """What an op does, for people (`augd ops` groups by it); its base class is its contract."""
    GEOMETRY = "geometry"    # GeometryOp: moves pixels
    COLOUR = "colour"        # ColourOp, or a SeededOp on float [0, 1] (noise, blur): changes values
    PIXEL = "pixel"          # SeededOp on uint8: bit-level, histogram, cutout, JPEG
    COMPOSITE = "composite"  # CompositeOp: holds child ops
    MIX = "mix"              # PartnerOp: combines the image with partner images (mosaic, mixup)


Probability = Annotated[float, Field(ge=0.0, le=1.0, description="probability that the op applies")]


def _check_order(v: tuple) -> tuple:
    if v[0] > v[1]:
        raise ValueError(f"range must be [low, high] with low <= high; got [{v[0]}, {v[1]}]")
    return v


def _check_fields_order(model, pairs) -> None:
    """The same check for a range given as two fields (OpParams.ordered) or as [min, max] fields (pairs of one)."""
    for pair in pairs:
        if len(pair) == 1:
            lo, hi = getattr(model, pair[0])
            if lo > hi:
                raise ValueError(f"{pair[0]} [{lo}, {hi}]: min must not exceed max")
        elif getattr(model, pair[0]) > getattr(model, pair[1]):
            raise ValueError(f"{pair[0]} {getattr(model, pair[0])} is above {pair[1]} {getattr(model, pair[1])}")


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

#: A warp's border: a grey level 0-255 for the area outside the source, the source's mean colour (the OD API's pad
#: colour), or how to extend the border.
Fill = Annotated[int, Field(ge=0, le=255)] | Literal["mean", "reflect", "nearest", "wrap"]
Interpolation = Literal["bilinear", "nearest"]


class OpParams(BaseModel):
    """Base of every op's parameters: unknown keys are errors, instances are immutable. `ordered`: the ranges given
    as two fields, (low, high) names, or as one [min, max] field, (name,), each checked low <= high here."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    ordered: ClassVar[tuple[tuple[str, ...], ...]] = ()
    p: Probability = 1.0

    @model_validator(mode="after")
    def _ordered(self):
        _check_fields_order(self, self.ordered)
        return self


class ScaledPixels(OpParams):
    """Params whose pixel values may be written for images of another size (AutoAugment's, for ~640 px images):
    with `reference`, each image scales them by its longer side / reference as it draws (`pixels`)."""
    reference: int | None = Field(None, ge=16, le=16384, description="the image side (px) the pixel values are "
                                  "written for: each image scales them by its longer side / reference (none: the "
                                  "pixels as given)")

    @model_serializer(mode="wrap")
    def _without_reference(self, handler):
        out = handler(self)   # absent when unset: a pipeline without it keeps its serialized form and sha256
        if self.reference is None:
            out.pop("reference", None)
        return out

    def pixels(self, value: float, h: int, w: int) -> float:
        """`value` pixels as this image (h x w) takes them."""
        return value if self.reference is None else value * max(h, w) / self.reference


class Op:
    """One registered op: `Params`, a `kind` for people, and the contract of the base it subclasses."""
    name: ClassVar[str]
    kind: ClassVar[Kind]
    Params: ClassVar[type[OpParams]] = OpParams
    example: ClassVar[str | None] = None   # YAML shown by `augd ops` where the syntax is not obvious
    #: short name in the lines `augd preview` writes (`rot`, `flip LR`); register_op defaults it to `name`
    label: ClassVar[str]

    def __init__(self, params: OpParams):
        self.params = params

    @classmethod
    def summary(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""

    @property
    def size_limit(self) -> tuple[int, int] | None:
        """The largest (h, w) this op outputs whatever its input (a crop or resize to a fixed size); None when
        its output is no larger than its input (the job's memory check reads this)."""
        return None

    @property
    def growth(self) -> float:
        """The largest factor this op multiplies each side of its input by (random_expand's canvas); 1.0 when its
        output is never larger than its input or than size_limit (the job's memory check reads this)."""
        return 1.0

    def describe(self, drawn) -> list[str]:
        """What this op drew for one image, as one or two short lines (`rot +7.3°`; `augd preview` writes them
        under the tile). `drawn` is the plan's record of this op (augd.engine.explain.Decision, read by duck
        typing so that ops never import the engine): a GeometryOp reads .matrix, .in_size and .out_size, a
        ColourOp .values, a CompositeOp .chosen. Called only when the op applied; an op whose p coin said no
        is written by the preview as `LABEL: skipped`. No default: a new op says its own (tests/test_ops.py)."""
        raise NotImplementedError(f"op {self.name!r} does not describe what it drew")


class GeometryOp(Op):
    """Moves pixels. sample() runs in the engine's per-image plan (plain NumPy, float64); the engine
    multiplies the matrices of consecutive ops that share a border rule and resamples once."""
    @property
    def uses_boxes(self) -> bool:
        """True: sample() takes `boxes=`, the image's annotated boxes where it applies (box-aware crops). The
        plan then tracks the boxes through the earlier ops; for a chain with no such op it never touches them."""
        return False

    #: a quarter turn (random_rotation90): the job's keypoint_rotation permutes keypoints at each one it applies
    quarter_turn: ClassVar[bool] = False

    @property
    def starts_warp(self) -> bool:
        """True for an op that lays its input on a canvas it fills (a pad): it does not fuse into the warp of the
        geometric ops before it, whose output's edges it must keep (fused, the canvas would show the source
        beyond an earlier crop). Ops after it may fuse: beyond its canvas they see its fill."""
        return False

    @property
    def uses_source(self) -> bool:
        """True: sample() takes `source=`, the (h, w) of the image the chain started from (a pad sized by it after
        a crop: the OD API's random_crop_pad_image)."""
        return False

    @property
    def fill(self) -> Fill:
        """What the warp shows outside the source: constant black unless the op takes a `fill`."""
        return 0

    @property
    def interpolation(self) -> Interpolation:
        return "bilinear"

    @property
    def min_visibility(self) -> float:
        """The least share of itself an object must keep when this op applies, above the job's own
        (annotations.min_visibility): a crop's own overlap threshold (the OD API's per-crop overlap_thresh). 0:
        the job's alone. Measured, as the job's is, over the image's whole chain."""
        return float(getattr(self.params, "min_visibility", None) or 0.0)

    def sample(self, rng, h: float, w: float) -> tuple[np.ndarray, float, float]:
        """(3x3 float64 matrix mapping output pixel coordinates to input ones, out_h, out_w) for an
        (h, w) input, drawn from the image's generator. An op with uses_boxes is called as
        sample(rng, h, w, boxes=...): an (N, 4) float64 array of (xmin, ymin, xmax, ymax) in its INPUT's
        pixel-edge coordinates (clipped to it, none empty), or None (no boxes, or the op does not apply: it
        must then draw exactly as without boxes). An op with uses_source also gets `source=(h, w)`."""
        raise NotImplementedError

    def skip(self, rng, h: float, w: float, **extra) -> None:
        """sample's draws for an image the op does not apply to (its p, an unchosen child of a one_of or a
        policy): the same numbers taken from `rng`, in the same order, so that every later op draws what it would
        have, and no matrix made. An op whose matrix costs more than its draws (random_affine: ~20 us, ~15 of them
        unchosen in each image of randaugment) overrides it; tests/test_ops.py holds each to sample's draws.
        The rule of every op's draws for an image it does not apply to (skip, ColourOp.draw, SeededOp.region with no
        boxes): how many numbers it takes from `rng` follows its parameters alone, never the image's size or the
        values drawn; a variable count comes from rng.fork(). The plan then takes them at once (Program._skips)."""
        self.sample(rng, h, w, **extra)


class ColourOp(Op):
    """Changes values, with a NumPy parameter draw shared by its TF and NumPy/OpenCV kernels (float32 in
    [0, 1]; each kernel clips, so an op keeps tf.image's meaning)."""
    #: how many floats draw() returns
    n_params: ClassVar[int] = 0
    #: whether affine() reads the image mean (the fold computes it only for those)
    needs_mean: ClassVar[bool] = False
    #: whether affine() is the op's own meaning too, not only `colour: fast`'s model of it (saturation's and hue's
    #: are models): the op alone in its run on a uint8 image then runs as one matrix pass under `colour: exact`
    #: too, clipped and rounded once, as its float kernel would (within float rounding)
    affine_exact: ClassVar[bool] = False

    def draw(self, rng) -> tuple[float, ...]:
        return ()

    def apply_tf(self, image, params):
        """The TF kernel (the GPU path): `image` a float32 HxWx3 tensor in [0, 1] (earlier ops may have left
        values outside it: the engine clips once, at the end), `params` a float32 tensor of the draw()n values.
        Returns the new image tensor, same shape, no side effects (it is traced into the job's graph once)."""
        raise NotImplementedError

    #: The OpenCV/NumPy kernel (the CPU path), `apply_np(x, params) -> x`: `x` is this image's own float32 HxWx3
    #: array in [0, 1] (as for apply_tf: clipped once at the end), C-contiguous and writable, which the kernel may
    #: change in place and return, or replace; `params` a list of the draw()n values as Python floats. It runs
    #: under the GIL between OpenCV calls, on any thread: no state. It must agree with apply_tf (the registry's
    #: kernel-parity cases, tests/kernel_parity.py, compare them for every op). None when the op has no such
    #: kernel (the engine then keeps it in TF).
    apply_np = None

    #: `apply_u8(img, params) -> img`, or None: the op alone on a uint8 HxWx3 image, as its float kernel then a round
    #: would give it: bit for bit where u8_exact (a per-channel table of levels built by the same float32
    #: arithmetic). `img` may be TF's read-only buffer: return a new array (or `img` itself), never write it. The
    #: engine uses it for an op alone in its run, where no other op sees its float values unrounded.
    apply_u8 = None
    #: False: apply_u8 does the float kernel's arithmetic in another order (one OpenCV filter rounding once), so it
    #: agrees within float rounding: a value on a half level may round the other way (tests/test_np_kernels.py)
    u8_exact: ClassVar[bool] = True

    def affine(self, params, mean) -> tuple[np.ndarray, np.ndarray] | None:
        """(A, b) with out = A @ rgb + b in [0, 1] units, for `colour: fast`; `mean` is the image's
        per-channel mean at this point (None unless the op sets needs_mean). None: the op is not affine
        and runs on its own."""
        return None

    @classmethod
    def foldable(cls) -> bool:
        """Whether `colour: fast` may fold this op into one colour matrix (it defines affine)."""
        return cls.affine is not ColourOp.affine


class Domain(str, enum.Enum):
    """The pixels a SeededOp works on; the engine converts to it before the op."""
    FLOAT = "float"   # float32 in [0, 1]
    UINT8 = "uint8"


class SeededOp(Op):
    """Graph code fed a stateless seed: for ops whose randomness is drawn per pixel (or that need none).

    An op that overwrites rectangles (cutouts) draws them on the host instead, with `region(rng, h, w)`, so that
    the annotations know what it covered (a keypoint under it is not visible): `apply` then also gets them as a
    [4 * holes()] float tensor (x0, y0, x1, y1 each: the pixels [x0, x1) x [y0, y1) of its input; a hole left
    out this time is all zeros)."""
    domain: ClassVar[Domain] = Domain.UINT8
    covers: ClassVar[bool] = False       # True: region() draws a rectangle that apply() receives
    #: True: apply() needs the CPU by nature (TensorFlow's JPEG codec has no GPU kernel): a GPU host runs it there,
    #: pinned and named in the report as a planned host step (augd.engine.placement.host_step)
    host_step: ClassVar[bool] = False

    def apply(self, image, seed, region=None):
        """Image (3 channels, of `domain`'s dtype) -> image of the same dtype; `seed` is a [2] int64 tensor
        for TF's stateless kernels."""
        raise NotImplementedError

    #: The NumPy/OpenCV kernel (the CPU path) of a uint8 op that draws nothing in the graph (its pixels a function
    #: of the image and region() alone), `apply_np(image, region) -> image`: `image` is this image's own uint8
    #: HxWx3 array, C-contiguous and writable, which the kernel may change in place and return, or replace (same
    #: shape); `region` the list of region()'s values as Python floats (None for an op that covers nothing). It
    #: runs under the GIL between OpenCV calls, on any thread, inside the engine's NumPy run with the Geo and
    #: Colour steps around it (no hand-over to TF and back). It must agree with apply (tests/kernel_parity.py;
    #: the integer ops exactly, tests/test_np_kernels.py). None (the default): the engine runs apply on both.
    apply_np = None

    #: True: region() is called as region(rng, h, w, boxes=...), the image's boxes as the chain before it moved
    #: them, (N, 4) float64 (xmin, ymin, xmax, ymax) in pixel edges of its input, or None (no boxes, or the op does
    #: not apply); ops acting inside boxes (augd.ops.boxes). Implies covers (its values reach apply()).
    uses_boxes: ClassVar[bool] = False

    def holes(self) -> int:
        """How many rectangles region() draws (covers=True only): its plan's slots, 4 floats each."""
        return 1

    def region_size(self) -> int:
        """How many floats region() returns: 4 per hole, unless the op lays out more."""
        return 4 * self.holes()

    def region(self, rng, h: int, w: int) -> tuple[float, ...]:
        """The rectangles this image's op covers, in whole pixels of its h x w input (covers=True only): holes()
        times (x0, y0, x1, y1), zeros for a hole it leaves out."""
        raise NotImplementedError

    def hidden(self, values) -> list[tuple]:
        """What of region()'s `values` this op overwrites, in pixel edges of its input: what the annotations lose
        by the occlusion rule. Rectangles (x0, y0, x1, y1), or polygons ((x, y), ...) for an op that hides more
        than rectangles (in_boxes' turned corners). By default its holes, the empty ones (all zeros) left out."""
        rects = np.asarray(values, np.float64).reshape(-1, 4)
        return [tuple(float(v) for v in r) for r in rects if r[2] > r[0] and r[3] > r[1]]

    def moves(self, values) -> list[tuple]:
        """Where this op moves pixels within rectangles of its input (in_boxes: a shift, turn, shear or flip inside
        each box), as augd.planar.Move: (the rectangle (x0, y0, x1, y1), the 6-float map taking a point inside it
        to where its pixel lands), in the order it applies them. What a move leaves empty hides what stood there:
        the plan greys it (augd.planar.left_empty) and carries the grey drawn before it (Program._covers); the
        annotations inside move with them. None by default."""
        return []

    def describe(self, drawn) -> list[str]:
        # Its random values are drawn in the graph from a stateless seed: the plan knows only that it applied.
        return [self.label]


class CompositeOp(Op):
    """Holds child ops (the spec's OpNode carries them); choose() says which apply to an image."""

    def choose(self, rng, n: int) -> list[bool]:
        """One flag per child, drawn from the image's generator: all of them by default."""
        return [True] * n


@dataclass(frozen=True)
class Placement:
    """Where one source image of a mix lands: the tile `rect` (x0, y0, x1, y1: whole pixels of the canvas) shows
    the source through `matrix` (3x3, the tile's pixel centres -> the source's upright pixel centres, as a
    GeometryOp's), with `weight` (1.0 pasted; a blend's share); `obj` >= 0: only that object of the source is
    pasted, through its mask (copy_paste), -1: the whole tile."""
    matrix: np.ndarray
    rect: tuple[int, int, int, int]
    weight: float = 1.0
    obj: int = -1

    @property
    def size(self) -> tuple[int, int]:
        """The tile's (height, width)."""
        return self.rect[3] - self.rect[1], self.rect[2] - self.rect[0]


@dataclass(frozen=True)
class Mix:
    """One image's mix: a height x width canvas of `fill`, the sources placed in order (0: the image itself, k: its
    partner k; None: a partner not used), pasted over one another, or summed with their weights when `blend`;
    `feather`: a pasted object's edge softened over that many pixels (a Gaussian's sigma)."""
    height: int
    width: int
    placements: tuple[Placement | None, ...]
    blend: bool = False
    fill: int = 0
    feather: float = 0.0


class PartnerOp(Op):
    """Combines the image with `partners` other images of its split into one canvas (augd/job/mixing.py draws the
    partners, reads and decodes them, and lays out the canvas). It leads the chain: the ops after it run on the
    canvas, fused as ever; the spec refuses one anywhere else."""
    #: how many partner images one mix takes
    partners: ClassVar[int] = 1

    #: whether sample() needs each source's boxes (copy_paste picks objects)
    needs_boxes: ClassVar[bool] = False

    @property
    def repeats(self) -> int:
        """How many placements each drawn partner gets in a row (copy_paste's copies): augd.job.mixing.draw
        repeats each partner that many times, so sizes and boxes hold it once per placement."""
        return 1

    def sample(self, rng, sizes: list[tuple[float, float]], boxes=None) -> Mix:
        """The mix of an image and its partners, from their upright (h, w): sizes[0] the image's, sizes[k] partner
        k's (and, for an op that `needs_boxes`, their boxes in upright pixel edges); drawn from the mix's own
        generator."""
        raise NotImplementedError


REGISTRY: dict[str, type[Op]] = {}
_CONTRACTS = (GeometryOp, ColourOp, SeededOp, CompositeOp, PartnerOp)


def register_op(name: str, kind: Kind):
    """Class decorator: `@register_op("random_hue", Kind.COLOUR)`."""
    def deco(cls: type[Op]) -> type[Op]:
        if not issubclass(cls, _CONTRACTS):
            raise TypeError(f"op {name!r} must subclass one of {[c.__name__ for c in _CONTRACTS]}")
        if name in REGISTRY:
            raise RuntimeError(f"op {name!r} registered twice")
        cls.name, cls.kind = name, kind
        cls.label = vars(cls).get("label", name)
        REGISTRY[name] = cls
        return cls
    return deco
