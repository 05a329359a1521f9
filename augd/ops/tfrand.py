"""Stateless TF sampling for the few ops that draw per-pixel noise inside the graph (their seed comes
from the image's plan, so they stay a pure function of the image seed)."""
from __future__ import annotations

import math

from augd.ops._tf import tf

__all__ = ["split", "uniform", "log_uniform"]


def split(seed, n: int):
    """n independent seeds from one, as a Python list of shape-[2] tensors."""
    return tf.unstack(tf.random.experimental.stateless_split(seed, num=n))


def uniform(seed, lo: float, hi: float):
    return tf.random.stateless_uniform([], seed, minval=lo, maxval=hi, dtype=tf.float32)


def log_uniform(seed, lo: float, hi: float):
    return tf.exp(uniform(seed, math.log(lo), math.log(hi)))
