"""The common mask PNG decoded fast: 8-bit class indices (palette or grey), not interlaced, rows unfiltered (what
Pillow and libpng write for palette images). Decoding such a mask is ~90 % inflate, and zlib-ng inflates ~5.6x
faster than zlib on the bench's masks (bench/README.md#detection), so the chunks are read here and the pixels
inflated with zlib-ng. Anything else, or anything unusual (a bad CRC, a short stream, a filtered row, a size or
pixel count the caller would refuse), returns None and Pillow decodes the file with its own checks and errors."""
from __future__ import annotations

import struct
import zlib

import numpy as np

try:    # a wheel on every platform augd runs on; zlib (slower, same bytes) where it is missing
    from zlib_ng import zlib_ng as _inflater
except ImportError:  # pragma: no cover - an optional speed-up
    _inflater = zlib

__all__ = ["index_pixels"]

_ERRORS = (zlib.error, _inflater.error)

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_GREY, _PALETTE = 0, 3


def index_pixels(data: bytes, max_pixels: int, expect_hw: tuple[int, int] | None = None) -> np.ndarray | None:
    """HxW uint8 class indices of a PNG of the common kind, or None (the caller decodes it the general way)."""
    if not data.startswith(_SIGNATURE):
        return None
    pos, header, idat = len(_SIGNATURE), None, []
    while pos + 12 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        end = pos + 12 + length
        if end > len(data) or zlib.crc32(data[pos + 4:end - 4]) != struct.unpack(">I", data[end - 4:end])[0]:
            return None
        body = data[pos + 8:end - 4]
        if header is None and kind != b"IHDR":
            return None
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body) if length == 13 else None
            if header is None:
                return None
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"tRNS":      # transparency: Pillow may change the mode; let it decide
            return None
        elif kind == b"IEND":
            break
        pos = end
    else:
        return None                # no IEND: truncated
    w, h, depth, ctype, compression, filtering, interlace = header
    if depth != 8 or ctype not in (_GREY, _PALETTE) or compression or filtering or interlace or not idat:
        return None
    if not w or not h or w * h > max_pixels or (expect_hw is not None and (h, w) != tuple(expect_hw)):
        return None
    size = h * (w + 1)             # each row: its filter byte, then one byte a pixel
    inflate = _inflater.decompressobj()
    try:
        raw = inflate.decompress(b"".join(idat), size)
    except _ERRORS:                # a corrupt stream: the general path reports it
        return None
    if len(raw) != size or not inflate.eof or inflate.unconsumed_tail:
        return None
    rows = np.frombuffer(raw, np.uint8).reshape(h, w + 1)
    if rows[:, 0].any():           # a filtered row: Pillow undoes filters
        return None
    return np.ascontiguousarray(rows[:, 1:])
