"""Stateless sampling helpers: every random number is a pure function of a seed tensor."""
from augd.ops._tf import tf


def split(seed, n: int):
    """n independent seeds from one, as a Python list of shape-[2] tensors."""
    return tf.unstack(tf.random.experimental.stateless_split(seed, num=n))


def uniform(seed, lo: float, hi: float):
    return tf.random.stateless_uniform([], seed, minval=lo, maxval=hi, dtype=tf.float32)


def log_uniform(seed, lo: float, hi: float):
    """Uniform in log space: aspect ratios and scales are symmetric around 1 this way."""
    import math
    return tf.exp(uniform(seed, math.log(lo), math.log(hi)))


def coin(seed, p: float):
    """A boolean that is True with probability p."""
    return uniform(seed, 0.0, 1.0) < p
