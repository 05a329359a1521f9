"""An image's upright pixels decoded on the host with OpenCV (at the coarsest JPEG DCT scale a tile still needs),
and a canvas handed back to the graph as raw pixels (augd.engine.rawpixels): what a tiled job's cut and a partner
op's canvas (augd.job.tiles, augd.job.mixing) and the preview's overview decode with, outside the graph."""
from __future__ import annotations

import numpy as np

from augd.engine.kernels import box_shrink_matrix
from augd.engine.rawpixels import RawPixelsError, pack_bgr, unpack_rgb
from augd.formats import ImageHeader
from augd.lazycv import cv2

__all__ = ["as_raw", "decode_scaled", "decode_upright"]

#: JPEG DCT scales OpenCV decodes at, with their imread flags (colour, EXIF orientation left to us)
_REDUCED = ((8, 65), (4, 33), (2, 17))
_ORIENT = {2: (0, 0, 1), 3: (0, 1, 1), 4: (0, 1, 0), 5: (1, 0, 0), 6: (1, 0, 1), 7: (1, 1, 1), 8: (1, 1, 0)}


def decode_scaled(data: bytes, header: ImageHeader, m: np.ndarray):
    """(upright BGR pixels, m re-expressed for them): a JPEG at the coarsest DCT scale whose pixels are still no
    larger than the tile's. None when OpenCV cannot decode it, or decodes a size other than the scan's (a file
    changed since: its placement would be wrong). A tile's raw pixels (as_raw: a partner op on a tiled job's tile)
    come back as they went."""
    if header.format == "raw":
        try:
            rgb = unpack_rgb(data)
        except RawPixelsError:
            return None, m
        return (cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR) if rgb.shape[:2] == (header.height, header.width) else None), m
    ratio = min(np.hypot(m[0, 0], m[1, 0]), np.hypot(m[0, 1], m[1, 1]))
    r, flag = next(((r, f) for r, f in _REDUCED if r <= ratio), (1, cv2.IMREAD_COLOR))
    if header.format != "jpeg":
        r, flag = 1, cv2.IMREAD_COLOR
    pixels = cv2.imdecode(np.frombuffer(data, np.uint8), flag | cv2.IMREAD_IGNORE_ORIENTATION)
    if pixels is None or pixels.shape[:2] != (-(-header.height // r), -(-header.width // r)):
        return None, m
    t, fy, fx = _ORIENT.get(header.orientation, (0, 0, 0))
    if t:
        pixels = pixels.transpose(1, 0, 2)
    if fy or fx:
        pixels = cv2.flip(pixels, -1 if fy and fx else 0 if fy else 1)
    if r == 1:
        return np.ascontiguousarray(pixels), m
    # libjpeg's partial last block (a side not a multiple of r) moves to the front on a flipped axis: the
    # reduced pixels then sit that many source pixels further on
    uh, uw = (header.width, header.height) if t else (header.height, header.width)
    pad_x, pad_y = (-uw % r if fx else 0), (-uh % r if fy else 0)
    return np.ascontiguousarray(pixels), box_shrink_matrix(r, -pad_x / r, -pad_y / r) @ m


def decode_upright(data: bytes, header: ImageHeader) -> np.ndarray | None:
    """The image's upright BGR pixels, decoded by OpenCV at full scale; None as decode_scaled says."""
    return decode_scaled(data, header, np.eye(3))[0]


def as_raw(canvas: np.ndarray) -> tuple[bytes, ImageHeader]:
    """The canvas (BGR, as OpenCV holds it; any strides) as the graph's input: raw RGB pixels and their header,
    format "raw" (no source format: the scan never reads one, augd.formats never parses one)."""
    h, w = canvas.shape[:2]
    return pack_bgr(canvas), ImageHeader("raw", w, h, 3, 1, 8)
