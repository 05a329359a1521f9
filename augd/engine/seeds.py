"""Per-image seeds: a pure function of (pipeline seed, relative path, variant). Output bytes therefore
do not depend on worker count, order or runner (local, daemon, Beam)."""
from __future__ import annotations

import hashlib

__all__ = ["image_seed"]


def image_seed(pipeline_seed: int, relpath: str, variant: int) -> tuple[int, int]:
    h = hashlib.blake2b(digest_size=16, person=b"augd-seed-v1")
    h.update(f"{pipeline_seed}\0{variant}\0".encode())
    h.update(relpath.encode("utf-8", "surrogateescape"))
    d = h.digest()
    mask = (1 << 63) - 1  # non-negative int64s: valid for every stateless RNG kernel
    return int.from_bytes(d[:8], "little") & mask, int.from_bytes(d[8:], "little") & mask
