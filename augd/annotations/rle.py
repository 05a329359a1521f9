"""COCO's run-length masks in NumPy (no pycocotools): uncompressed counts (a list) and COCO's compressed string
(LEB128-like 5-bit groups, counts from the third on stored as the difference to the one two before), both
column-major, starting with a run of zeros. Read by the COCO reader, moved by the geometry. TensorFlow-free."""
from __future__ import annotations

import numpy as np

from augd.annotations.model import AnnotationError

__all__ = ["rle_counts", "rle_decode", "rle_encode"]


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def rle_counts(rle, where: str) -> tuple[tuple[int, int], np.ndarray]:
    """((height, width), run lengths) of a COCO RLE dict, checked: the runs are >= 0 and cover h*w pixels."""
    if not isinstance(rle, dict) or "size" not in rle or "counts" not in rle:
        raise AnnotationError(f"{where}: an RLE segmentation needs `size` [h, w] and `counts`")
    size, counts = rle["size"], rle["counts"]
    if not (isinstance(size, list) and len(size) == 2 and all(_is_int(v) and v > 0 for v in size)):
        raise AnnotationError(f"{where}: RLE size is {size!r}; it must be [height, width], both > 0")
    h, w = size
    if isinstance(counts, list):
        if not all(_is_int(c) and c >= 0 for c in counts):
            raise AnnotationError(f"{where}: RLE counts must be integers >= 0")
        runs = np.asarray(counts, dtype=np.int64)
    elif isinstance(counts, str):
        runs = _decode_string(counts, where)
    else:
        raise AnnotationError(f"{where}: RLE counts must be a list of integers or a compressed string")
    if int(runs.sum()) != h * w:
        raise AnnotationError(f"{where}: RLE counts cover {int(runs.sum())} pixels, not {h}x{w} = {h * w}")
    return (h, w), runs


def _decode_string(s: str, where: str) -> np.ndarray:
    """COCO's compressed counts (maskApi.c rleFrString): each count is 5-bit groups, least significant first,
    offset by 48; 0x20 marks a continuation and 0x10 in the last group the sign; from the third count on the
    value is the difference to the count two before."""
    runs: list[int] = []
    p = 0
    while p < len(s):
        x = k = 0
        more = True
        while more:
            if p >= len(s):
                raise AnnotationError(f"{where}: RLE counts string ends inside a count")
            c = ord(s[p]) - 48
            if not 0 <= c < 64:
                raise AnnotationError(f"{where}: RLE counts string holds {s[p]!r}, outside COCO's alphabet")
            x |= (c & 0x1F) << (5 * k)
            more = bool(c & 0x20)
            p += 1
            k += 1
            if not more and c & 0x10:
                x -= 1 << (5 * k)
        if len(runs) > 2:
            x += runs[-2]
        if x < 0:
            raise AnnotationError(f"{where}: RLE count {len(runs)} decodes to {x} < 0")
        runs.append(x)
    return np.asarray(runs, dtype=np.int64)


def rle_decode(rle, where: str = "RLE") -> np.ndarray:
    """A COCO RLE dict -> its HxW uint8 mask of 0 and 1 (runs alternate 0, 1, 0, ... in column-major order)."""
    (h, w), runs = rle_counts(rle, where)
    values = (np.arange(len(runs)) % 2).astype(np.uint8)
    flat = np.repeat(values, runs)
    return np.ascontiguousarray(flat.reshape(w, h).T)


def rle_encode(mask: np.ndarray) -> dict:
    """COCO's uncompressed RLE of an HxW 0/1 mask: run lengths in column-major order, starting with zeros."""
    flat = (np.asarray(mask).ravel(order="F") > 0).astype(np.int8)
    edges = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate([[0], edges, [flat.size]])
    counts = np.diff(bounds).tolist()
    if flat.size and flat[0]:
        counts = [0] + counts
    return {"size": [int(mask.shape[0]), int(mask.shape[1])], "counts": [int(c) for c in counts]}
