"""Sampling helpers. Every random number of an image comes from one counter-based generator keyed by
the image's seed (`image_seed`: a pure function of the pipeline's seed, the image's relative path and the
variant, so output bytes do not depend on worker count, order or executor), drawn once per image before any
pixel is touched (the engine's plan): the same on every device, with no graph op per number."""
from __future__ import annotations

import hashlib
import math

__all__ = ["ImageRng", "coin", "generator", "image_seed", "log_uniform", "tf_seed", "uniform"]

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_FORK = 0x5DEECE66D2B7E151   # keeps a fork's key apart from the parent's own


def image_seed(pipeline_seed: int, relpath: str, variant: int) -> tuple[int, int]:
    """The seed of one variant of one image: the key of its ImageRng (and of any stateless TF kernel)."""
    h = hashlib.blake2b(digest_size=16, person=b"augd-seed-v1")
    h.update(f"{pipeline_seed}\0{variant}\0".encode())
    h.update(relpath.encode("utf-8", "surrogateescape"))
    d = h.digest()
    mask = (1 << 63) - 1  # non-negative int64s: valid for every stateless RNG kernel
    return int.from_bytes(d[:8], "little") & mask, int.from_bytes(d[8:], "little") & mask


def _mix(z: int) -> int:
    """SplitMix64's finalizer: a bijection of 64-bit words with full avalanche."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


class ImageRng:
    """SplitMix64 in counter mode over a key mixed from both seed words. Plain Python integers: creating
    one and drawing the numbers a chain needs is far cheaper than a NumPy Generator (this runs once per
    image while holding the GIL)."""
    __slots__ = ("_key", "_n")

    def __init__(self, seed):
        s0, s1 = (int(v) & _M64 for v in seed)
        self._key = _mix(_mix(s0) ^ s1)
        self._n = 0

    def next64(self) -> int:
        self._n += 1
        return _mix((self._key + self._n * _GOLDEN) & _M64)

    def advance(self, n: int) -> None:
        """Take n numbers unseen: where they would have gone is not written (the plan's ops that do not apply)."""
        self._n += n

    def fork(self) -> "ImageRng":
        """A generator keyed by this one's key and position that leaves this one where it is: a sampler that
        needs a variable number of draws (random_crop's attempts) takes them from a fork, so the draws of the
        ops after it never depend on how many it took."""
        child = ImageRng.__new__(ImageRng)
        child._key = _mix(self._key ^ _mix((self._n + _FORK) & _M64))
        child._n = 0
        return child

    def random(self, n: int | None = None):
        """A float in [0, 1), or a list of n of them."""
        if n is None:
            return (self.next64() >> 11) * (1.0 / (1 << 53))
        return [self.random() for _ in range(n)]


def generator(seed) -> ImageRng:
    """The image's generator, keyed by its two 63-bit seed words."""
    return ImageRng(seed)


def uniform(rng: ImageRng, lo: float, hi: float) -> float:
    return lo + (hi - lo) * rng.random()


def log_uniform(rng: ImageRng, lo: float, hi: float) -> float:
    """Uniform in log space: aspect ratios and scales are symmetric around 1 this way."""
    return math.exp(uniform(rng, math.log(lo), math.log(hi)))


def coin(rng: ImageRng, p: float) -> bool:
    """True with probability p (always consumes one number, so later draws do not depend on p)."""
    return rng.random() < p


def tf_seed(rng: ImageRng) -> tuple[int, int]:
    """A seed for the stateless TF kernels of ops whose noise is drawn per pixel in the graph."""
    return rng.next64() >> 1, rng.next64() >> 1
