"""Raw pixels, the way the host hands a canvas (a tile, a mix's canvas) to the job's graph: a 64-byte header, then
height x width x 3 uint8 RGB. The graph takes them with a copy and a reshape (augd.engine.decode.decode_raw_pixels)
where an uncompressed BMP cost an encode on the host and a decode in the graph (issue 60).

The header: RAW_MAGIC (8 bytes), then height, width and channels as little-endian uint32, zero padding to
RAW_HEADER. 64 bytes because TensorFlow's Slice shares the buffer instead of copying when its start is a multiple of
Eigen's widest alignment (64 bytes): the pixels are copied once in the graph. RGB because the host's one copy can
swap the channels on the way (cv2.cvtColor into the buffer), where the graph would spend a pass of its own.

No image format augd accepts starts with a NUL (augd.formats.sniff_format): a job's own file never reads as these."""
from __future__ import annotations

import struct

import numpy as np

from augd.lazycv import cv2

__all__ = ["RAW_HEADER", "RAW_MAGIC", "RAW_MAX_SIDE", "RawPixelsError", "pack_bgr", "unpack_rgb"]

RAW_MAGIC = b"\x00augdraw"
RAW_HEADER = 64
#: the largest side either reader takes: h * w * 3 then stays far inside an int64 (and any real canvas inside it)
RAW_MAX_SIDE = 1 << 20
_FIELDS = struct.Struct("<8sIII")


class RawPixelsError(ValueError):
    """Bytes that are not raw pixels as pack_bgr writes them (a wrong magic, a header that does not fit the bytes)."""


def pack_bgr(bgr: np.ndarray) -> bytes:
    """An OpenCV (BGR uint8, any strides) canvas as raw pixels: one pass swaps its channels into the buffer."""
    h, w = bgr.shape[:2]
    if bgr.dtype != np.uint8 or bgr.shape[2:] != (3,) or not (0 < h <= RAW_MAX_SIDE and 0 < w <= RAW_MAX_SIDE):
        raise RawPixelsError(f"raw pixels hold an h x w x 3 uint8 canvas of sides 1-{RAW_MAX_SIDE}; got {bgr.shape} "
                             f"{bgr.dtype}")
    head = _FIELDS.pack(RAW_MAGIC, h, w, 3).ljust(RAW_HEADER, b"\0")
    return b"".join((head, cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)))


def unpack_rgb(data: bytes) -> np.ndarray:
    """The pixels (h x w x 3 RGB, a read-only view of `data`), or RawPixelsError saying what does not fit."""
    if len(data) < RAW_HEADER or bytes(data[:len(RAW_MAGIC)]) != RAW_MAGIC:
        raise RawPixelsError(f"not raw pixels: {len(data)} bytes, starting {bytes(data[:8])!r}")
    _, h, w, c = _FIELDS.unpack_from(data)
    if c != 3 or not (0 < h <= RAW_MAX_SIDE and 0 < w <= RAW_MAX_SIDE) or h * w * 3 != len(data) - RAW_HEADER:
        raise RawPixelsError(f"raw pixels: a header of {h}x{w}x{c} does not fit its {len(data) - RAW_HEADER} bytes of "
                             f"pixels (sides 1-{RAW_MAX_SIDE}, 3 channels)")
    return np.frombuffer(data, np.uint8, h * w * 3, RAW_HEADER).reshape(h, w, 3)
