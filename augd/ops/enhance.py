"""PIL's enhancers, AutoAugment's colour operations and a median blur as colour ops (augd.ops.base.ColourOp):
`random_color` (ImageEnhance.Color), `random_sharpness` (ImageEnhance.Sharpness), `autocontrast`
(ImageOps.autocontrast), `solarize_add` (AutoAugment's SolarizeAdd) and `median_blur` (cv2.medianBlur). Each
has both kernels, TF (the GPU path) and OpenCV/NumPy (the CPU path), on float32 images in [0, 1];
tests/kernel_parity.py holds them to the same pixels. They move no pixel, so boxes, masks and keypoints stay as
they are."""
from __future__ import annotations

import numpy as np
from pydantic import Field, model_validator

from augd.lazycv import cv2
from augd.ops._tf import tf
from augd.ops.base import ColourOp, Kind, OpParams, range_of, register_op
from augd.ops.colour import _LUMA_ROWS, _ZERO3, LUMA, FactorOp, _clip, _np_clip
from augd.ops.sampling import uniform

#: PIL's smoothing kernel for ImageEnhance.Sharpness (ImageFilter.SMOOTH): its blend partner
_SMOOTH = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float32) / 13.0


def _extremes(x) -> tuple[np.ndarray, np.ndarray]:
    """Each channel's least and greatest value, float32, by OpenCV (NumPy's min over the pixel axis walks 3 values a
    step: 10x slower)."""
    lo, hi = (np.array(v, np.float32) for v in zip(*(cv2.minMaxLoc(c)[:2] for c in cv2.split(x))))
    return lo, hi


def _levels() -> np.ndarray:
    """Every uint8 level as the colour run's float image holds it (level * float32(1/255)), 256 x 1 x 3."""
    x = np.repeat(np.arange(256, dtype=np.float32)[:, None, None], 3, axis=2)
    x *= np.float32(1.0 / 255.0)
    return x


def _by_table(img, table):
    """A uint8 image through `table` (_levels() as an op left them), rounded as the colour run rounds its float
    image (augd.engine.chain: cv2.convertScaleAbs): an op on each value alone, as one table lookup."""
    return cv2.LUT(img, cv2.convertScaleAbs(table, alpha=255.0))


@register_op("random_color", Kind.COLOUR)
class RandomColor(FactorOp):
    """Blend with the image's own grey (luma) by a factor in [lower, upper]: 0 grey, 1 unchanged, above 1 more
    colourful (PIL.ImageEnhance.Color; AutoAugment's Color)."""
    label = "color"
    affine_exact = True

    def apply_tf(self, image, params):
        grey = tf.image.rgb_to_grayscale(image)
        return _clip(grey + params[0] * (image - grey))

    def affine(self, params, mean):
        f = params[0]
        return f * np.eye(3) + (1.0 - f) * _LUMA_ROWS, _ZERO3

    def apply_np(self, x, params):
        f = float(params[0])
        grey = cv2.transform(x, np.tile(LUMA.astype(np.float32), (3, 1)))   # the luma in all three channels
        return _np_clip(cv2.addWeighted(x, f, grey, 1.0 - f, 0.0, dst=x))


@register_op("random_brightness_scale", Kind.COLOUR)
class RandomBrightnessScale(FactorOp):
    """Multiply every value by a factor in [lower, upper]: 0 black, 1 unchanged (PIL.ImageEnhance.Brightness;
    AutoAugment's Brightness). random_brightness adds instead, as tf.image does."""
    label = "brightness"
    affine_exact = True

    def apply_tf(self, image, params):
        return _clip(image * params[0])

    def affine(self, params, mean):
        return params[0] * np.eye(3), _ZERO3

    def apply_np(self, x, params):
        x *= np.float32(params[0])
        return _np_clip(x)


@register_op("random_sharpness", Kind.COLOUR)
class RandomSharpness(FactorOp):
    """Blend with a smoothed copy by a factor in [lower, upper]: 0 smoothed, 1 unchanged, above 1 sharper
    (PIL.ImageEnhance.Sharpness: its 3x3 smoothing kernel, the one-pixel border left as it is)."""
    label = "sharpness"

    def apply_tf(self, image, params):
        h, w = tf.shape(image)[0], tf.shape(image)[1]

        def sharpened():
            kernel = tf.constant(np.repeat(_SMOOTH[:, :, None, None], 3, axis=2))
            inner = tf.nn.depthwise_conv2d(image[None], kernel, [1, 1, 1, 1], "VALID")[0]
            interior = tf.pad(tf.ones([h - 2, w - 2, 1]), [[1, 1], [1, 1], [0, 0]])  # the border stays the image's
            smooth = interior * tf.pad(inner, [[1, 1], [1, 1], [0, 0]]) + (1.0 - interior) * image
            return _clip(smooth + params[0] * (image - smooth))
        return tf.cond(tf.logical_and(h > 2, w > 2), sharpened, lambda: image)   # all border: as it is

    def apply_np(self, x, params):
        f = float(params[0])
        smooth = cv2.filter2D(x, -1, _SMOOTH, borderType=cv2.BORDER_REPLICATE)
        smooth[0], smooth[-1], smooth[:, 0], smooth[:, -1] = x[0], x[-1], x[:, 0], x[:, -1]
        return _np_clip(cv2.addWeighted(x, f, smooth, 1.0 - f, 0.0, dst=x))

    #: apply_u8's one filter rounds once where the float run rounds its own sums: a half level may go either way
    u8_exact = False

    def apply_u8(self, img, params):
        # f x + (1 - f) smooth is one 3x3 filter: OpenCV runs it on the uint8 image in float and rounds and
        # saturates once, where the float run converts, filters, blends, clips and converts back (~2 x the time)
        f = float(params[0])
        if img.shape[0] <= 2 or img.shape[1] <= 2:
            return img   # all border: as it is
        kernel = ((1.0 - f) * _SMOOTH).astype(np.float32)
        kernel[1, 1] += np.float32(f)
        out = cv2.filter2D(img, -1, kernel, borderType=cv2.BORDER_REPLICATE)
        out[0], out[-1], out[:, 0], out[:, -1] = img[0], img[-1], img[:, 0], img[:, -1]   # the border as it was
        return out


@register_op("autocontrast", Kind.COLOUR)
class AutoContrast(ColourOp):
    """Stretch each channel so its darkest value becomes 0 and its brightest 1 (PIL.ImageOps.autocontrast, no
    cutoff); a channel of one value stays as it is. Use p for how often."""
    class Params(OpParams):
        pass

    label = "autocontrast"

    def describe(self, drawn):
        return [self.label]

    def apply_tf(self, image, params):
        lo = tf.reduce_min(image, axis=[0, 1], keepdims=True)
        hi = tf.reduce_max(image, axis=[0, 1], keepdims=True)
        span = hi - lo
        stretched = (image - lo) / tf.where(span > 0, span, 1.0)
        return _clip(tf.where(span > 0, stretched, image))

    def apply_np(self, x, params):
        # in place on rows below: a view of another layout (a flip's, a crop's) would reshape to a copy and come back
        # unstretched, so such an input is copied once; the colour run's own float image is contiguous already
        x = np.ascontiguousarray(x)
        return self._stretch(x, *_extremes(x))

    def apply_u8(self, img, params):
        # the float image's extremes are its levels' (x = level * 1/255 is monotone): one table of levels
        lo, hi = (v * np.float32(1.0 / 255.0) for v in _extremes(img))
        return _by_table(img, self._stretch(_levels(), lo, hi))

    @staticmethod
    def _stretch(x, lo, hi):
        span = hi - lo
        live = span > 0
        lo, span = np.where(live, lo, np.float32(0.0)), np.where(live, span, np.float32(1.0))   # (x - 0) / 1 is x
        rows = x.reshape(x.shape[0], -1)   # (x - lo) / span in place, the channels' values tiled along each row
        np.subtract(rows, np.tile(lo, x.shape[1]), out=rows)
        np.divide(rows, np.tile(span, x.shape[1]), out=rows)
        return _np_clip(x)


@register_op("solarize_add", Kind.COLOUR)
class SolarizeAdd(ColourOp):
    """Add a value drawn from `addition` (0-255 levels) to every pixel value below `threshold`, clipped
    (AutoAugment's SolarizeAdd, magnitude up to 110)."""
    class Params(OpParams):
        addition: range_of(-255.0, 255.0) = Field((0.0, 110.0), description="[low, high] levels added, or one "
                                                                             "value")
        threshold: int = Field(128, ge=0, le=256, description="values below it change (0-255; 256: all)")

    label = "solarize_add"
    n_params = 1

    def describe(self, drawn):
        return [f"{self.label} +{drawn.values[0]:.0f} below {self.params.threshold}"]

    def draw(self, rng):
        return (uniform(rng, *self.params.addition),)

    def _cut(self) -> float:
        # halfway between two levels: the float kernels agree on which side every 8-bit value falls
        return (self.params.threshold - 0.5) / 255.0

    def apply_tf(self, image, params):
        return _clip(tf.where(image < self._cut(), image + params[0] / 255.0, image))

    def apply_np(self, x, params):
        np.add(x, np.float32(float(params[0]) / 255.0), out=x, where=x < np.float32(self._cut()))
        return _np_clip(x)

    def apply_u8(self, img, params):
        return _by_table(img, self.apply_np(_levels(), params))


@register_op("median_blur", Kind.COLOUR)
class MedianBlur(ColourOp):
    """Replace each value by the median of its k x k neighbourhood, k drawn from `ksize` (3 or 5; edges
    replicated, as cv2.medianBlur): removes salt-and-pepper noise, keeps edges (Albumentations' MedianBlur)."""
    class Params(OpParams):
        ksize: range_of(3, 5, kind=int) = Field((3, 5), description="[low, high] odd kernel size: 3 or 5")

        @model_validator(mode="after")
        def _odd(self):
            if any(k % 2 == 0 for k in self.ksize):
                raise ValueError(f"ksize must be odd (3 or 5); got {list(self.ksize)}")
            return self

    label = "median_blur"
    n_params = 1

    def describe(self, drawn):
        k = int(drawn.values[0])
        return [f"{self.label} {k}x{k}"]

    def draw(self, rng):
        lo, hi = self.params.ksize
        return (float(lo if lo == hi or uniform(rng, 0.0, 1.0) < 0.5 else hi),)

    def apply_tf(self, image, params):
        return tf.cond(params[0] < 4.0, lambda: _median_tf(image, 3), lambda: _median_tf(image, 5))

    def apply_np(self, x, params):
        return cv2.medianBlur(x, int(params[0]))


def _median_tf(image, k: int):
    """The k x k median of every value, the edges replicated (cv2.medianBlur's border)."""
    r = k // 2
    h, w = tf.shape(image)[0], tf.shape(image)[1]
    padded = tf.concat([tf.repeat(image[:1], r, axis=0), image, tf.repeat(image[-1:], r, axis=0)], 0)
    padded = tf.concat([tf.repeat(padded[:, :1], r, axis=1), padded, tf.repeat(padded[:, -1:], r, axis=1)], 1)
    window = tf.stack([padded[dy:dy + h, dx:dx + w] for dy in range(k) for dx in range(k)], axis=-1)
    return tf.sort(window, axis=-1)[..., k * k // 2]
