"""Semantic masks: a PNG of class indices per image (a palette PNG's indices, as VOC's SegmentationClass/, or grey
values), read into an HxW uint8 array, and written back as a grey PNG. TensorFlow-free (Pillow, OpenCV)."""
from __future__ import annotations

import io
import os
import stat
import struct
import zlib
from dataclasses import replace

import numpy as np

from augd.indexpng import index_pixels
from augd.annotations.model import AnnotationError, Span
from augd.annotations.reading import VOC_FOLDERS, AnnotationFormat, Layout, Marker, Reading, folder_splits, voc_sets
from augd.annotations.tree import IMAGE_EXTENSIONS, pair, stem, under
from augd.defaults import MAX_PIXELS
from augd.errors import Rejected, UntrustedFileError
from augd.files import read_capped
from augd.formats import read_header

__all__ = ["FORMAT", "MASK_MAX_BYTES", "mask_png", "mask_size", "pair_masks", "read_job", "read_mask"]

#: A mask PNG of class indices compresses far below its pixel count; 64 MiB holds any sane one.
MASK_MAX_BYTES = 64 * 1024 * 1024
#: Pillow modes whose values are class indices as they are ("P": the palette's indices, not its colours).
_INDEX_MODES = ("P", "L", "1", "I;16", "I;16B", "I;16L", "I")


def _read(path, where: str) -> bytes:
    if isinstance(path, Span):   # a mask inside a record
        if path.size > MASK_MAX_BYTES:
            raise AnnotationError(f"{where}: the mask PNG is {path.size} bytes, over MASK_MAX_BYTES ({MASK_MAX_BYTES})")
        try:
            with open(path.path, "rb") as fh:
                data = os.pread(fh.fileno(), path.size, path.offset)
        except OSError as exc:
            raise AnnotationError(f"{where}: cannot read the mask: {exc.strerror or exc}") from None
        if len(data) < path.size:
            raise AnnotationError(f"{where}: the mask's record changed since the plan read it")
        return data
    try:
        return read_capped(path, MASK_MAX_BYTES, "mask", "MASK_MAX_BYTES")
    except UntrustedFileError as exc:
        raise AnnotationError(f"{where}: {str(exc).removeprefix(path + ': ')}") from None
    except OSError as exc:
        raise AnnotationError(f"{where}: cannot read the mask: {exc.strerror or exc}") from None


def mask_size(path: str, where: str) -> tuple[int, int]:
    """(height, width) from the mask's PNG header, without decoding it; AnnotationError if it is no PNG."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise AnnotationError(f"{where}: the mask is not a regular file")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as fh:
            head = fh.read(4096)  # a PNG's size is in its first 33 bytes
    except OSError as exc:
        raise AnnotationError(f"{where}: cannot read the mask: {exc.strerror or exc}") from None
    try:
        header = read_header(head)
    except Rejected as exc:
        raise AnnotationError(f"{where}: not a mask PNG: {exc}") from None
    if header.format != "png":
        raise AnnotationError(f"{where}: the mask is a {header.format.upper()}; a mask must be a PNG (lossy "
                              f"formats change class indices)")
    return header.height, header.width


def read_mask(path: str, expect_hw: tuple[int, int] | None, where: str, *, max_pixels: int = MAX_PIXELS
              ) -> np.ndarray:
    """The mask as HxW uint8 class indices (a palette PNG's indices, a grey PNG's values; 255 is VOC's 'void').
    AnnotationError naming `where` when it is not a one-channel PNG, holds a value outside 0..255, has more than
    `max_pixels` (the job's) or more than Pillow allows, or its size differs from `expect_hw` (the image's upright
    height and width)."""
    from PIL import Image

    data = _read(path, where)
    # the common mask, ~5x faster; None: Pillow decodes it. Pillow's own pixel limit (DecompressionBombError
    # above twice MAX_IMAGE_PIXELS) bounds the fast path too, so both refuse the same masks.
    bomb = 2 * Image.MAX_IMAGE_PIXELS if Image.MAX_IMAGE_PIXELS else max_pixels
    fast = index_pixels(data, min(max_pixels, bomb), expect_hw)
    if fast is not None:
        return fast

    try:
        with Image.open(io.BytesIO(data), formats=["PNG"]) as img:
            w, h = img.size
            if expect_hw is not None and (h, w) != tuple(expect_hw):
                raise AnnotationError(f"{where}: the mask is {w}x{h} but its image is {expect_hw[1]}x{expect_hw[0]}"
                                      f" (width x height); a mask must match its image pixel for pixel")
            if w * h > max_pixels:
                raise AnnotationError(f"{where}: the mask has {w * h} pixels, more than the job's max_pixels="
                                      f"{max_pixels}")
            if img.mode not in _INDEX_MODES:
                raise AnnotationError(f"{where}: the mask is a {img.mode} PNG; save class indices as a palette "
                                      f"(P) or greyscale (L) PNG, one index per pixel")
            arr = np.asarray(img)
    except AnnotationError:
        raise
    except Image.DecompressionBombError as exc:  # a base Exception: Pillow's own pixel limit
        raise AnnotationError(f"{where}: the mask PNG is too large to decode: {exc}") from None
    except (OSError, ValueError, SyntaxError) as exc:  # Pillow's words for a truncated or corrupt file
        raise AnnotationError(f"{where}: the mask PNG cannot be decoded: {exc}") from None
    if arr.dtype == np.bool_:
        return arr.astype(np.uint8)
    if arr.dtype != np.uint8:
        low, top = (int(arr.min()), int(arr.max())) if arr.size else (0, 0)
        if top > 255 or low < 0:
            raise AnnotationError(f"{where}: the mask holds class index {low if low < 0 else top}; indices must "
                                  f"be 0..255")
        arr = arr.astype(np.uint8)
    return np.ascontiguousarray(arr)


def mask_png(mask: np.ndarray) -> bytes:
    """HxW uint8 class indices -> a grey 8-bit PNG whose rows are unfiltered, deflated by zlib at level 1 (the same
    bytes for the same mask: fixed settings, no metadata). Unfiltered rows are the kind indexpng reads without
    Pillow: augd's own masks read back ~5x faster (a records job of augd's records, bench/README.md), for PNGs
    ~1/3 larger than Pillow's adaptively filtered ones (a few KB, against the image's tens), written ~1.8x faster.
    Since issue 60 (before: Pillow's, filtered; the pixels are the same)."""
    mask = np.asarray(mask)
    if mask.ndim != 2 or mask.dtype != np.uint8:
        raise ValueError(f"a mask is HxW uint8; got {mask.dtype} of shape {mask.shape}")
    h, w = mask.shape
    rows = np.zeros((h, w + 1), np.uint8)    # each row: filter type 0 (none), then its pixels
    rows[:, 1:] = mask
    return b"".join((_PNG_SIGNATURE, _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)),
                     _chunk(b"IDAT", zlib.compress(rows.data, 1)), _chunk(b"IEND", b"")))


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(body, zlib.crc32(kind)))


# -- pairing images with their masks, and the job of masks alone ----------------------------------------------------

def pair_masks(reading: Reading, image_top: str, mask_top: str, images: list[str]) -> None:
    """Pair each image with its mask PNG (mask_top mirrors image_top); a mask's size must equal its image's."""
    pairs, orphans, ambiguous = pair(reading.tree, image_top, mask_top, ".png", images)
    reading.skip.add(mask_top)
    for mask in orphans:
        reading.reject(mask, f"{mask}: a mask for a missing image: no {image_top}/{stem(under(mask_top, mask))}.*")
    for img, why in ambiguous.items():
        if img not in reading.rejected:
            reading.reject(img, why)
    for img, mask in pairs.items():
        ann = reading.annotations.get(img)
        if ann is None:
            continue
        h, w, _ = reading.sizes(img)
        try:
            mh, mw = mask_size(reading.open_check(mask), mask)
            if (mh, mw) != (h, w):
                raise AnnotationError(f"{mask}: the mask is {mw}x{mh} but {img} is {w}x{h}; a mask must match "
                                      f"its image pixel for pixel")
        except AnnotationError as exc:
            reading.reject(img, str(exc))
            continue
        reading.annotations[img] = replace(ann, mask=reading.tree.path(mask), source=ann.source or mask)


def read_job(reading: Reading, top: str) -> None:
    """A job of semantic masks alone: every image below `top` (JPEGImages or images) paired with its mask."""
    tree = reading.tree
    masks = "SegmentationClass" if top == "JPEGImages" else "masks"
    images = tree.below(top, IMAGE_EXTENSIONS)
    reading.image_dirs = (top,)
    if top == "JPEGImages":
        reading.skip.update(f for f in VOC_FOLDERS if tree.isdir(f))
        voc_sets(reading, images)
    else:
        folder_splits(reading, top, images)
    for img in images:
        if img not in reading.rejected:
            reading.settle(img, lambda hw: None)
    pair_masks(reading, top, masks, images)


FORMAT = AnnotationFormat(
    "masks", read=read_job, expected="expected JPEGImages/ with SegmentationClass/, or images/ with masks/",
    title="mask PNGs", objects=False,
    markers=(Marker(".png", under="SegmentationClass"), Marker(".png", under="masks")),
    layouts=(Layout(40, lambda tree, named: "JPEGImages" if tree.isdir("JPEGImages") and tree.isdir(
                 "SegmentationClass") else None),
             Layout(50, lambda tree, named: "images" if tree.isdir("images") and tree.isdir("masks") else None)))
