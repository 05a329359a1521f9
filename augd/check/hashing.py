"""Perceptual hashes of images, and the pairs that are near-duplicates. TensorFlow-free.

The hash is the DCT hash (pHash): the image upright (EXIF orientation applied), grey, area-resized to 32 x 32; the
top-left 8 x 8 of its 2-D DCT (the lowest frequencies) compared with their median, 64 bits. A JPEG is decoded at
the coarsest DCT scale that keeps at least 64 px a side (OpenCV's reduced decode: the low frequencies are what
the hash reads). Re-encoding and resizing move a hash by a few bits (the shipped demo photos: at most 6 of 64
through a resize by 0.3-2.5 and JPEG quality 40-90), two overlapping crops of one Hubble field lie 8 apart, other
photos 16 or more (tests/test_check.py): MAX_DISTANCE 8 calls a pair a near-duplicate.
"""
from __future__ import annotations

import os

import numpy as np

from augd.lazycv import cv2

__all__ = ["MAX_DISTANCE", "hash_file", "hash_files", "near_pairs"]

MAX_DISTANCE = 8
_SIDE = 64   # the least side a reduced decode keeps


def _reduce_flag(h: int, w: int) -> int:
    side = min(h, w)
    for k, flag in ((8, cv2.IMREAD_REDUCED_GRAYSCALE_8), (4, cv2.IMREAD_REDUCED_GRAYSCALE_4),
                    (2, cv2.IMREAD_REDUCED_GRAYSCALE_2)):
        if side // k >= _SIDE:
            return flag
    return cv2.IMREAD_GRAYSCALE


def hash_file(path: str, h: int = 0, w: int = 0, span: tuple[int, int] | None = None) -> int | None:
    """The image's 64-bit hash (an int), or None when it cannot be decoded. (h, w): its size from its header, to
    decode it reduced (0: full size). `span`: (offset, size) of the image in the file (a TFRecord shard's record)."""
    try:
        if span is None:
            data = np.fromfile(path, np.uint8)
        else:
            with open(path, "rb") as fh:
                data = np.frombuffer(os.pread(fh.fileno(), span[1], span[0]), np.uint8)
    except OSError:
        return None
    grey = cv2.imdecode(data, _reduce_flag(h, w) if h and w else cv2.IMREAD_GRAYSCALE)
    if grey is None or grey.size == 0:
        return None
    small = cv2.resize(grey, (32, 32), interpolation=cv2.INTER_AREA).astype(np.float32)
    low = cv2.dct(small)[:8, :8].ravel()
    bits = low > np.median(low[1:])   # the DC term (the mean) left out of the median
    return int.from_bytes(np.packbits(bits).tobytes(), "big")


def hash_chunk(items: list) -> list:
    """hash_file over [(path, h, w[, span])]: a mapper's unit (a module-level function of picklable items)."""
    cv2.setNumThreads(1)   # one image per process at a time: no thread pool under the pool
    return [hash_file(*it) for it in items]


#: Images hashed between two beats at most (through a mapper, or here).
BEAT_ITEMS = 512


def hash_files(items: list[tuple], workers: int = 1, mapper=None, beat=lambda: None) -> list[int | None]:
    """hash_file over [(path, h, w[, span])]: through `mapper(fn, items)` when given (a job's warm pool:
    augd.job.workers.pool.chunked_map), else on `workers` processes of its own (each reads and decodes its share
    once), else here; `beat()` after each slice or chunk done (it may raise: nothing is left in flight but a
    pool of its own, which its `with` ends)."""
    if mapper is not None or workers <= 1 or len(items) < 64:
        out: list[int | None] = []
        for i in range(0, len(items), BEAT_ITEMS):
            part = items[i:i + BEAT_ITEMS]
            out += mapper(hash_chunk, part) if mapper is not None else hash_chunk(part)
            beat()
        return out
    import multiprocessing as mp
    n = max(16, min(BEAT_ITEMS, len(items) // (workers * 8)))
    chunks = [items[i:i + n] for i in range(0, len(items), n)]
    out = []
    with mp.get_context("forkserver").Pool(workers) as pool:
        for part in pool.imap(hash_chunk, chunks):
            out += part
            beat()
    return out


def near_pairs(hashes: list[int | None], max_distance: int = MAX_DISTANCE) -> list[tuple[int, int, int]]:
    """(i, j, distance) for every pair i < j of hashes within max_distance bits (None: not compared)."""
    idx = [k for k, h in enumerate(hashes) if h is not None]
    if len(idx) < 2:
        return []
    arr = np.array([hashes[k] for k in idx], np.uint64)
    out = []
    block = 512   # a block of rows against every later hash: ~9 x block x n bytes at a time
    for start in range(0, len(arr), block):
        rows = arr[start:start + block]
        d = _popcount(rows[:, None] ^ arr[None, start:])
        for a, b in zip(*np.nonzero(d <= max_distance)):
            if b > a:
                out.append((idx[start + int(a)], idx[start + int(b)], int(d[a, b])))
    return sorted(out)


def _popcount(x: np.ndarray) -> np.ndarray:
    if hasattr(np, "bitwise_count"):   # NumPy 2
        return np.bitwise_count(x)
    table = np.array([bin(i).count("1") for i in range(256)], np.uint8)
    return table[x.view(np.uint8).reshape(*x.shape, 8)].sum(axis=-1)
