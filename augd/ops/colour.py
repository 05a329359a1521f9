"""Colour ops (augd.ops.base.ColourOp). They run on float32 images in [0, 1] (the engine converts once per
run of colour ops, not once per op as tf.image does) and clip after every op so each keeps tf.image's
meaning. gaussian_noise and gaussian_blur draw per pixel in the graph: SeededOps on the same float domain.

Sampling is split from applying (as Keras does): `draw(rng)` returns the op's random parameters (NumPy,
in the engine's per-image plan), `apply_tf` and `apply_np` apply them. On CPU hosts the engine hands a
whole run of colour ops to OpenCV/NumPy in one call (`apply_np`), on GPUs it keeps `apply_tf`.

`colour: fast` (a pipeline setting) folds every op that has an `affine` into ONE 3x4 colour matrix per
run, applied in one pass over uint8 pixels: brightness and contrast keep their meaning, saturation is a
blend with the luma (as PIL / torchvision do), hue a rotation about the grey axis in YIQ space, and the
image is clipped once at the end instead of after each op."""
from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from augd.lazycv import cv2
from augd.ops._tf import tf
from augd.ops.base import ColourOp, Domain, Kind, OpParams, SeededOp, range_of, register_op
from augd.ops.sampling import log_uniform, uniform
from augd.ops.tfrand import split as tf_split, uniform as tf_uniform
from augd.ops.words import signed

#: ITU-R 601 luma weights (tf.image.rgb_to_grayscale's).
LUMA = np.array([0.2989, 0.5870, 0.1140])
_YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]])
_YIQ_INV = np.linalg.inv(_YIQ)


def _const(a) -> np.ndarray:
    a = np.asarray(a, np.float64)
    a.setflags(write=False)  # shared by every image's fold: never modified in place
    return a


# `colour: fast` matrices, precomputed: the fold runs per image on the host, under the GIL.
_EYE3, _ZERO3 = _const(np.eye(3)), _const(np.zeros(3))
_LUMA_ROWS = _const(np.outer(np.ones(3), LUMA))
_LUMA_BLEND = _const(np.outer(np.ones(3), LUMA / LUMA.sum()))  # normalised: greys stay exactly grey
# A hue turn by angle a is _YIQ_INV @ R(a) @ _YIQ = _HUE_0 + cos(a) _HUE_C + sin(a) _HUE_S.
_HUE_0 = _const(_YIQ_INV @ np.diag([1.0, 0.0, 0.0]) @ _YIQ)
_HUE_C = _const(_YIQ_INV @ np.diag([0.0, 1.0, 1.0]) @ _YIQ)
_HUE_S = _const(_YIQ_INV @ np.array([[0.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]]) @ _YIQ)


def _clip(x):
    return tf.clip_by_value(x, 0.0, 1.0)


def _np_clip(x):
    """Clamp a float32 image to [0, 1] in place with two OpenCV passes (much faster than np.clip)."""
    cv2.threshold(x, 1.0, 1.0, cv2.THRESH_TRUNC, dst=x)
    cv2.threshold(x, 0.0, 0.0, cv2.THRESH_TOZERO, dst=x)
    return x


def _hsv_adjust_np(x, saturation: float = 1.0, hue_turns: float = 0.0):
    """tf.image.adjust_saturation / adjust_hue on a float32 RGB image with OpenCV's SIMD kernels.
    Only the plane being adjusted is pulled out (contiguous), changed, and put back."""
    hsv = cv2.cvtColor(x, cv2.COLOR_RGB2HSV)  # H in [0, 360), S and V in [0, 1]
    if saturation != 1.0:
        s = cv2.extractChannel(hsv, 1)
        cv2.multiply(s, saturation, dst=s)
        cv2.min(s, 1.0, dst=s)  # saturation is clipped to 1, as tf.image does
        cv2.insertChannel(s, hsv, 1)
    if hue_turns:
        h = cv2.extractChannel(hsv, 0)
        cv2.add(h, hue_turns * 360.0, dst=h)
        # OpenCV's HSV2RGB does not wrap hue outside [0, 360): wrap it with two masked passes.
        cv2.subtract(h, 360.0, dst=h, mask=cv2.compare(h, 360.0, cv2.CMP_GE))
        cv2.add(h, 360.0, dst=h, mask=cv2.compare(h, 0.0, cv2.CMP_LT))
        cv2.insertChannel(h, hsv, 0)
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)


class DeltaOp(ColourOp):
    """A colour op that draws one delta from [-max_delta, max_delta] (its Params' max_delta): brightness, hue. Its
    describe is the delta drawn."""
    n_params = 1

    def describe(self, drawn):
        return [f"{self.label} {signed(drawn.values[0], 3)}"]

    def draw(self, rng):
        return (uniform(rng, -self.params.max_delta, self.params.max_delta),)


@register_op("random_brightness", Kind.COLOUR)
class RandomBrightness(DeltaOp):
    """Add a random delta in [-max_delta, max_delta] to every channel (tf.image.random_brightness)."""
    class Params(OpParams):
        max_delta: float = Field(0.125, ge=0.0, le=1.0, description="largest brightness shift, in [0, 1] units")

    label = "brightness"
    affine_exact = True

    def apply_tf(self, image, params):
        return _clip(image + params[0])

    def affine(self, params, mean):
        return _EYE3, np.full(3, params[0])

    def apply_np(self, x, params):
        d = float(params[0])
        return _np_clip(cv2.add(x, (d, d, d, 0.0), dst=x))


class FactorRange(OpParams):
    """A multiplicative factor drawn from [lower, upper] (tf.image's contrast and saturation)."""
    lower: float = Field(0.8, ge=0.0, le=10.0)
    upper: float = Field(1.2, ge=0.0, le=10.0)
    ordered = (("lower", "upper"),)


class FactorOp(ColourOp):
    """A colour op that draws one multiplicative factor from its [lower, upper] (FactorRange): contrast, saturation
    and PIL's enhancers. Its describe is the factor drawn."""
    Params = FactorRange
    n_params = 1

    def describe(self, drawn):
        return [f"{self.label} ×{drawn.values[0]:.2f}"]

    def draw(self, rng):
        return (uniform(rng, self.params.lower, self.params.upper),)


@register_op("random_contrast", Kind.COLOUR)
class RandomContrast(FactorOp):
    """Scale each channel's distance from its mean by a factor in [lower, upper] (tf.image.random_contrast)."""
    label = "contrast"
    needs_mean = affine_exact = True

    def apply_tf(self, image, params):
        mean = tf.reduce_mean(image, axis=[0, 1], keepdims=True)
        return _clip((image - mean) * params[0] + mean)

    def affine(self, params, mean):
        f = params[0]
        return f * _EYE3, (1.0 - f) * np.asarray(mean, np.float64)

    def apply_np(self, x, params):
        f = float(params[0])
        mean = cv2.mean(x)[:3]
        m = np.array([[f, 0, 0, mean[0] * (1 - f)], [0, f, 0, mean[1] * (1 - f)], [0, 0, f, mean[2] * (1 - f)]],
                     np.float32)
        return _np_clip(cv2.transform(x, m))


@register_op("random_saturation", Kind.COLOUR)
class RandomSaturation(FactorOp):
    """Multiply HSV saturation by a factor in [lower, upper] (tf.image.random_saturation)."""
    label = "saturation"

    def apply_tf(self, image, params):
        return _clip(tf.image.adjust_saturation(image, params[0]))

    def affine(self, params, mean):
        s = params[0]  # fast mode: blend with the luma (weights normalised so greys stay exactly grey)
        return s * _EYE3 + (1.0 - s) * _LUMA_BLEND, _ZERO3

    def apply_np(self, x, params):
        return _hsv_adjust_np(x, saturation=float(params[0]))


@register_op("random_hue", Kind.COLOUR)
class RandomHue(DeltaOp):
    """Rotate HSV hue by a delta in [-max_delta, max_delta] turns (tf.image.random_hue)."""
    class Params(OpParams):
        max_delta: float = Field(0.2, ge=0.0, le=0.5, description="largest hue shift, in turns")

    label = "hue"

    def apply_tf(self, image, params):
        return _clip(tf.image.adjust_hue(image, params[0]))

    def affine(self, params, mean):
        # fast mode: rotate the chroma plane of YIQ; -angle turns the same way as HSV hue (red -> yellow)
        a = -2.0 * math.pi * params[0]
        return _HUE_0 + math.cos(a) * _HUE_C + math.sin(a) * _HUE_S, _ZERO3

    def apply_np(self, x, params):
        return _hsv_adjust_np(x, hue_turns=float(params[0]))


@register_op("random_gamma", Kind.COLOUR)
class RandomGamma(ColourOp):
    """out = gain * in ** gamma, gamma drawn log-uniformly from the range (tf.image.adjust_gamma)."""
    class Params(OpParams):
        gamma: range_of(0.05, 20.0) = Field((0.8, 1.25), description="[low, high] gamma")
        gain: float = Field(1.0, gt=0.0, le=10.0)

    label = "gamma"
    n_params = 1

    def describe(self, drawn):
        gain = self.params.gain  # fixed, not drawn, but it changes what the gamma means: said unless 1
        return [f"{self.label} {drawn.values[0]:.2f}" + (f" gain {gain:g}" if gain != 1.0 else "")]

    def draw(self, rng):
        return (log_uniform(rng, *self.params.gamma),)

    def apply_tf(self, image, params):
        return _clip(self.params.gain * tf.pow(image, params[0]))

    def apply_np(self, x, params):
        x = cv2.pow(x, float(params[0]))
        if self.params.gain != 1.0:
            x *= self.params.gain
        return _np_clip(x)


@register_op("random_grayscale", Kind.COLOUR)
class RandomGrayscale(ColourOp):
    """Replace the image by its luma (ITU-R 601) in all three channels; use p for how often."""
    label = "grayscale"
    affine_exact = True

    class Params(OpParams):
        pass

    def describe(self, drawn):
        return [self.label]  # nothing drawn: that it applied is all there is

    def apply_tf(self, image, params):
        grey = tf.image.rgb_to_grayscale(image)
        # not tf.image.grayscale_to_rgb: its shape checks are Assert ops, a device-to-host wait per image on a GPU
        return tf.concat([grey, grey, grey], -1)

    def affine(self, params, mean):
        return _LUMA_ROWS, _ZERO3

    def apply_np(self, x, params):
        return cv2.cvtColor(cv2.cvtColor(x, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB)


@register_op("gaussian_noise", Kind.COLOUR)
class GaussianNoise(SeededOp):
    """Add zero-mean Gaussian noise whose std is drawn from the range ([0, 1] pixel units)."""
    class Params(OpParams):
        std: range_of(0.0, 1.0) = Field((0.01, 0.05), description="[low, high] noise std")
        per_channel: bool = Field(True, description="independent noise per channel (else the same for R, G, B)")

    domain = Domain.FLOAT

    def apply(self, image, seed):
        s_std, s_noise = tf_split(seed, 2)
        std = tf_uniform(s_std, *self.params.std)
        shape = tf.shape(image)
        if not self.params.per_channel:
            shape = tf.concat([shape[:2], [1]], 0)
        return _clip(image + std * tf.random.stateless_normal(shape, s_noise, dtype=tf.float32))


@register_op("random_pixel_value_scale", Kind.COLOUR)
class RandomPixelValueScale(SeededOp):
    """The Object Detection API's random_pixel_value_scale: every value (each pixel, each channel) times its own
    factor drawn from [minval, maxval], clipped to [0, 1]: multiplicative noise."""
    example = "- random_pixel_value_scale: {minval: 0.9, maxval: 1.1}"

    class Params(OpParams):
        minval: float = Field(0.9, ge=0.0, le=10.0, description="lowest factor")
        maxval: float = Field(1.1, ge=0.0, le=10.0, description="highest factor")
        ordered = (("minval", "maxval"),)

    domain = Domain.FLOAT

    def apply(self, image, seed):
        p = self.params
        return _clip(image * tf.random.stateless_uniform(tf.shape(image), seed, p.minval, p.maxval))


@register_op("gaussian_blur", Kind.COLOUR)
class GaussianBlur(SeededOp):
    """Separable Gaussian blur with sigma drawn from the range; borders renormalised (no dark edges)."""
    class Params(OpParams):
        sigma: range_of(0.05, 20.0) = Field((0.1, 2.0), description="[low, high] sigma in pixels")
        kernel_size: int = Field(0, ge=0, le=99, description="odd size; 0 = 2*ceil(3*max sigma)+1")

        def model_post_init(self, _):
            if self.kernel_size and self.kernel_size % 2 == 0:
                raise ValueError(f"kernel_size must be 0 (auto) or odd; got {self.kernel_size}")

    domain = Domain.FLOAT

    def apply(self, image, seed):
        k = self.params.kernel_size or 2 * math.ceil(3 * self.params.sigma[1]) + 1
        sigma = tf_uniform(seed, *self.params.sigma)
        x = tf.range(k, dtype=tf.float32) - (k - 1) / 2
        g = tf.exp(-0.5 * tf.square(x / sigma))
        g = g / tf.reduce_sum(g)
        gx = tf.tile(tf.reshape(g, [1, k, 1, 1]), [1, 1, 3, 1])
        gy = tf.tile(tf.reshape(g, [k, 1, 1, 1]), [1, 1, 3, 1])
        blur = lambda t, c: tf.nn.depthwise_conv2d(  # noqa: E731
            tf.nn.depthwise_conv2d(t, gx[:, :, :c], [1, 1, 1, 1], "SAME"), gy[:, :, :c], [1, 1, 1, 1], "SAME")
        img = image[tf.newaxis]
        # Zero padding darkens borders; dividing by the blurred all-ones image renormalises the weights.
        norm = blur(tf.ones_like(img[..., :1]), 1)
        return _clip((blur(img, 3) / norm)[0])
