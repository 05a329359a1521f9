"""Colour ops. They run on float32 images in [0, 1] (the engine converts once per run of colour ops,
not once per op as tf.image does) and clip after every op so each keeps tf.image's meaning."""
from __future__ import annotations

from pydantic import Field

from augd.ops._tf import tf
from augd.ops.base import Kind, Op, OpParams, range_of, register_op
from augd.ops.sampling import log_uniform, uniform


def _clip(x):
    return tf.clip_by_value(x, 0.0, 1.0)


@register_op("random_brightness", Kind.COLOUR)
class RandomBrightness(Op):
    """Add a random delta in [-max_delta, max_delta] to every channel (tf.image.random_brightness)."""
    class Params(OpParams):
        max_delta: float = Field(0.125, ge=0.0, le=1.0, description="largest brightness shift, in [0, 1] units")

    def apply(self, image, seed):
        return _clip(image + uniform(seed, -self.params.max_delta, self.params.max_delta))


@register_op("random_contrast", Kind.COLOUR)
class RandomContrast(Op):
    """Scale each channel's distance from its mean by a factor in [lower, upper] (tf.image.random_contrast)."""
    class Params(OpParams):
        lower: float = Field(0.8, ge=0.0, le=10.0)
        upper: float = Field(1.2, ge=0.0, le=10.0)

        def model_post_init(self, _):
            if self.lower > self.upper:
                raise ValueError(f"lower must be <= upper; got lower={self.lower}, upper={self.upper}")

    def apply(self, image, seed):
        f = uniform(seed, self.params.lower, self.params.upper)
        mean = tf.reduce_mean(image, axis=[0, 1], keepdims=True)
        return _clip((image - mean) * f + mean)


@register_op("random_saturation", Kind.COLOUR)
class RandomSaturation(Op):
    """Multiply HSV saturation by a factor in [lower, upper] (tf.image.random_saturation)."""
    class Params(OpParams):
        lower: float = Field(0.8, ge=0.0, le=10.0)
        upper: float = Field(1.2, ge=0.0, le=10.0)

        def model_post_init(self, _):
            if self.lower > self.upper:
                raise ValueError(f"lower must be <= upper; got lower={self.lower}, upper={self.upper}")

    def apply(self, image, seed):
        return _clip(tf.image.adjust_saturation(image, uniform(seed, self.params.lower, self.params.upper)))


@register_op("random_hue", Kind.COLOUR)
class RandomHue(Op):
    """Rotate HSV hue by a delta in [-max_delta, max_delta] turns (tf.image.random_hue)."""
    class Params(OpParams):
        max_delta: float = Field(0.2, ge=0.0, le=0.5, description="largest hue shift, in turns")

    def apply(self, image, seed):
        d = self.params.max_delta
        return _clip(tf.image.adjust_hue(image, uniform(seed, -d, d)))


@register_op("random_gamma", Kind.COLOUR)
class RandomGamma(Op):
    """out = gain * in ** gamma, gamma drawn log-uniformly from the range (tf.image.adjust_gamma)."""
    class Params(OpParams):
        gamma: range_of(0.05, 20.0) = Field((0.8, 1.25), description="[low, high] gamma")
        gain: float = Field(1.0, gt=0.0, le=10.0)

    def apply(self, image, seed):
        g = log_uniform(seed, *self.params.gamma)
        return _clip(self.params.gain * tf.pow(image, g))


@register_op("random_grayscale", Kind.COLOUR)
class RandomGrayscale(Op):
    """Replace the image by its luma (ITU-R 601) in all three channels; use p for how often."""
    class Params(OpParams):
        pass

    def apply(self, image, seed):
        return tf.image.grayscale_to_rgb(tf.image.rgb_to_grayscale(image))


@register_op("gaussian_noise", Kind.COLOUR)
class GaussianNoise(Op):
    """Add zero-mean Gaussian noise whose std is drawn from the range ([0, 1] pixel units)."""
    class Params(OpParams):
        std: range_of(0.0, 1.0) = Field((0.01, 0.05), description="[low, high] noise std")
        per_channel: bool = Field(True, description="independent noise per channel (else the same for R, G, B)")

    def apply(self, image, seed):
        from augd.ops.sampling import split
        s_std, s_noise = split(seed, 2)
        std = uniform(s_std, *self.params.std)
        shape = tf.shape(image)
        if not self.params.per_channel:
            shape = tf.concat([shape[:2], [1]], 0)
        return _clip(image + std * tf.random.stateless_normal(shape, s_noise, dtype=tf.float32))


@register_op("gaussian_blur", Kind.COLOUR)
class GaussianBlur(Op):
    """Separable Gaussian blur with sigma drawn from the range; borders renormalised (no dark edges)."""
    class Params(OpParams):
        sigma: range_of(0.05, 20.0) = Field((0.1, 2.0), description="[low, high] sigma in pixels")
        kernel_size: int = Field(0, ge=0, le=99, description="odd size; 0 = 2*ceil(3*max sigma)+1")

        def model_post_init(self, _):
            if self.kernel_size and self.kernel_size % 2 == 0:
                raise ValueError(f"kernel_size must be 0 (auto) or odd; got {self.kernel_size}")

    def apply(self, image, seed):
        import math
        k = self.params.kernel_size or 2 * math.ceil(3 * self.params.sigma[1]) + 1
        sigma = uniform(seed, *self.params.sigma)
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
