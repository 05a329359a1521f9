"""The Object Detection API's pads (augd.ops.base.GeometryOp), read from its core/preprocessor.py: random_pad_image,
random_absolute_pad_image, and the pad of random_crop_pad_image and ssd_random_crop_pad (sized by the image before
the crop: `min_ratio`, `max_ratio`). The image lands unresampled at a whole-pixel place on a larger canvas filled
with its mean colour (`fill: mean`, the API's default pad colour) or a grey; boxes, masks and keypoints move with
it through the same matrix."""
from __future__ import annotations

from pydantic import Field, model_validator

from augd.ops.base import Fill, GeometryOp, Kind, OpParams, Size, register_op
from augd.ops.geometry import translate
from augd.ops.words import size

__all__ = ["RandomAbsolutePadImage", "RandomPadImage"]

_Ratio = tuple[float, float]
#: random_absolute_pad_image's largest padding per side: the memory check counts the op as doubling each side,
#: true for any image this size or larger (a smaller one stays small)
MAX_PADDING = 1024


def _below(u: float, lo: int, hi: int) -> int:
    """The API's _random_integer from one uniform draw u: tf.random.uniform([], lo, hi, tf.int32), hi excluded."""
    return lo + min(int(u * (hi - lo)), hi - lo - 1)


def _pad(rng, h, w, least, most):
    """The API's random_pad_image for an (h, w) input and canvas sizes [least, most) (each clamped to at least the
    input): (matrix, out_h, out_w). Four draws always, whatever applies."""
    u = [rng.random() for _ in range(4)]
    hi, wi = int(round(h)), int(round(w))
    least = (max(least[0], hi), max(least[1], wi))
    most = (max(most[0], hi), max(most[1], wi))
    th = _below(u[0], least[0], most[0]) if most[0] > least[0] else most[0]
    tw = _below(u[1], least[1], most[1]) if most[1] > least[1] else most[1]
    oy = _below(u[2], 0, th - hi) if th > hi else 0
    ox = _below(u[3], 0, tw - wi) if tw > wi else 0
    return translate(-float(ox), -float(oy)), float(th), float(tw)


class _Padded(GeometryOp):
    label = "pad"
    starts_warp = True

    @property
    def fill(self):
        return self.params.fill

    def _lines(self, drawn):
        return [f"{self.label} {size(drawn.in_size)} → {size(drawn.out_size)}"]


def _fill_field():
    return Field("mean", description="the canvas: mean (the input's mean colour, the API's default), a grey "
                                     "0-255, or reflect | nearest | wrap")


@register_op("random_pad_image", Kind.GEOMETRY)
class RandomPadImage(_Padded):
    """The Object Detection API's random_pad_image: a canvas whose height and width are drawn in [min, max) (each at
    least the input's), the image at a uniform whole-pixel place on it, the rest the mean colour. Sizes in pixels
    (min_size, max_size: by default the input's and twice it) or as ratios of the image the chain started from
    (min_ratio, max_ratio: random_crop_pad_image's min/max_padded_size_ratio, the pad after a crop)."""
    example = ("- random_pad_image: {max_size: [640, 640]}\n"
               "- random_pad_image: {min_ratio: [1.0, 1.0], max_ratio: [2.0, 2.0]}    # of the source")

    class Params(OpParams):
        min_size: Size | None = Field(None, description="least canvas [height, width] in pixels (default: the "
                                                        "input's)")
        max_size: Size | None = Field(None, description="canvas [height, width] in pixels it stays under (default: "
                                                        "twice the input's)")
        min_ratio: tuple[float, float] | None = Field(None, description="least canvas [height, width] as multiples "
                                                                        "of the source's (default 1, 1)")
        max_ratio: tuple[float, float] | None = Field(None, description="canvas [height, width] multiples of the "
                                                                        "source's it stays under (default 2, 2)")
        fill: Fill = _fill_field()

        @model_validator(mode="after")
        def _one_way(self):
            if (self.min_size or self.max_size) and (self.min_ratio or self.max_ratio):
                raise ValueError("give sizes (min_size, max_size) or ratios of the source (min_ratio, max_ratio), "
                                 "not both")
            for r in (self.min_ratio, self.max_ratio):
                if r is not None and not all(0.0 < v <= 16.0 for v in r):
                    raise ValueError(f"ratios are in (0, 16]; got {list(r)}")
            return self

    @property
    def uses_source(self):
        return self.params.min_ratio is not None or self.params.max_ratio is not None

    @property
    def growth(self):
        p = self.params
        if self.uses_source:
            return max(p.max_ratio or (2.0, 2.0))
        return 1.0 if p.max_size else 2.0

    @property
    def size_limit(self):
        return self.params.max_size

    def sample(self, rng, h, w, source=None):
        p = self.params
        if source is not None:   # tf.cast(float size x ratio, int32) truncates
            lo, hi = p.min_ratio or (1.0, 1.0), p.max_ratio or (2.0, 2.0)
            least = (int(source[0] * lo[0]), int(source[1] * lo[1]))
            most = (int(source[0] * hi[0]), int(source[1] * hi[1]))
        else:
            least = p.min_size or (0, 0)
            most = p.max_size or (2 * int(round(h)), 2 * int(round(w)))
        return _pad(rng, h, w, least, most)

    def describe(self, drawn):
        return self._lines(drawn)


@register_op("random_absolute_pad_image", Kind.GEOMETRY)
class RandomAbsolutePadImage(_Padded):
    """The Object Detection API's random_absolute_pad_image: up to max_height_padding and max_width_padding pixels
    more per side (drawn in [0, max), the image at a uniform whole-pixel place), the rest the mean colour."""
    example = "- random_absolute_pad_image: {max_height_padding: 200, max_width_padding: 200}"

    class Params(OpParams):
        max_height_padding: int = Field(ge=0, le=MAX_PADDING, description="pixels of height it adds at most "
                                                                          "(excluded)")
        max_width_padding: int = Field(ge=0, le=MAX_PADDING, description="pixels of width it adds at most (excluded)")
        fill: Fill = _fill_field()

    @property
    def growth(self):
        return 2.0   # see MAX_PADDING

    def sample(self, rng, h, w):
        hi, wi = int(round(h)), int(round(w))
        return _pad(rng, h, w, (hi, wi), (hi + self.params.max_height_padding, wi + self.params.max_width_padding))

    def describe(self, drawn):
        return self._lines(drawn)
