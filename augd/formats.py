"""Sniff image formats and read their headers from the first bytes of a file.

Pure Python on purpose: the scanner runs this on every input before TensorFlow is loaded, and it must reject a
1 GB non-image (or a 40000x40000 decompression bomb) after reading only a prefix. Each parser reads just the
structures it needs; the full decode happens later in the engine.

`read_header` raises `Rejected("bad_header", ...)` for a corrupt header, and the subclass `NeedMoreData` when
the prefix ends before the needed structure (e.g. a JPEG whose SOF sits after a large APP segment): the caller
may retry with more of the file.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from augd.errors import Rejected

__all__ = ["ImageHeader", "NeedMoreData", "jpeg_ends_before_scan", "passthrough_ok", "read_header", "sniff_format",
           "unsupported"]

_PNG_SIG = b"\x89PNG\r\n\x1a\n"
# PNG colour type -> channels after a plain decode; palette (3) decodes to RGB or RGBA depending on tRNS.
_PNG_CHANNELS = {0: 1, 2: 3, 3: None, 4: 2, 6: 4}
# Start-of-frame markers (every 0xC0..0xCF except DHT, JPG and DAC) -> coding process.
_JPEG_SOF = {0xC0: "baseline", 0xC1: "extended", 0xC2: "progressive", 0xC3: "lossless"}
_JPEG_SOF.update({m: "hierarchical" for m in (0xC5, 0xC6, 0xC7)})
_JPEG_SOF.update({m: "arithmetic" for m in (0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF)})
# Markers that stand alone, without a length field: TEM and RST0..RST7.
_JPEG_STANDALONE = frozenset([0x01, *range(0xD0, 0xD8)])


class NeedMoreData(Rejected):
    """The prefix ended before the header did; the same bytes may parse with more of the file."""

    def __init__(self, message: str = "truncated or corrupt header (file ends before the image size)"):
        super().__init__("bad_header", message)


@dataclass(frozen=True)
class ImageHeader:
    format: str
    width: int
    height: int
    channels: int | None
    orientation: int = 1
    #: Bits per sample (JPEG precision, PNG bit depth, BMP bits per pixel); None where not cheap to know.
    bit_depth: int | None = None
    #: PNG Adam7 interlacing or progressive JPEG.
    interlaced: bool = False
    #: Coding process where the format has several: JPEG "baseline", "extended", "progressive", "lossless",
    #: "hierarchical" or "arithmetic"; WebP "lossy", "lossless" or "extended"; BMP "gray" or "palette" (8 bits
    #: or fewer per pixel), "rle8", "rle4", "jpeg", "png" (compressed), None for plain 24/32-bit pixels.
    coding: str | None = None
    #: Frames the decoder will decode (GIF: all of them, each at the full canvas); 1 elsewhere.
    frames: int = 1


def sniff_format(head: bytes) -> str | None:
    """Format name from magic bytes (needs at most 12 bytes), or None when it is none we accept."""
    if head[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if head[:8] == _PNG_SIG:
        return "png"
    if head[:2] == b"BM":
        return "bmp"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    return None


def read_header(data: bytes) -> ImageHeader:
    """Parse format, size, channels and EXIF orientation from `data` (the whole file or a prefix of it)."""
    fmt = sniff_format(data)
    if fmt is None:
        if not data:
            raise Rejected("empty", "file is empty")
        raise Rejected("unknown_format", f"not an image (starts with {bytes(data[:8])!r})")
    try:
        header = _PARSERS[fmt](memoryview(data))
    except (struct.error, IndexError) as e:  # a length field pointed past the end of the prefix
        raise NeedMoreData() from e
    if header.width <= 0 or header.height <= 0:
        raise Rejected("bad_header", f"truncated or corrupt header ({fmt} says {header.width}x{header.height})")
    return header


def passthrough_ok(h: ImageHeader) -> bool:
    """True when the source bytes can be stored as they are: the seed reader decodes them to an upright RGB
    image of the header's size (tf.image.decode_jpeg also decodes PNG)."""
    if h.orientation != 1:
        return False
    if h.format == "jpeg":
        return h.channels == 3 and h.bit_depth == 8 and h.coding in ("baseline", "extended", "progressive")
    if h.format == "png":  # channels == 3 only for colour type 2 (palette reports None)
        return h.channels == 3 and h.bit_depth == 8 and not h.interlaced
    return False


# --- JPEG --------------------------------------------------------------------------------------------------


def _jpeg(b: memoryview) -> ImageHeader:
    pos, orientation = 2, 1
    n = len(b)
    while True:
        # Markers are 0xFF followed by a code; any number of 0xFF fill bytes may come first.
        if pos >= n:
            raise NeedMoreData()
        if b[pos] != 0xFF:
            raise Rejected("bad_header", f"truncated or corrupt header (no JPEG marker at byte {pos})")
        while pos < n and b[pos] == 0xFF:
            pos += 1
        if pos >= n:
            raise NeedMoreData()
        marker = b[pos]
        pos += 1
        if marker in _JPEG_STANDALONE:
            continue
        if marker in (0xD9, 0xDA):  # EOI or start of scan before any frame header
            raise Rejected("bad_header", "truncated or corrupt header (JPEG has no frame header)")
        if pos + 2 > n:
            raise NeedMoreData()
        (length,) = struct.unpack_from(">H", b, pos)
        if length < 2:
            raise Rejected("bad_header", f"truncated or corrupt header (JPEG segment length {length})")
        if marker == 0xE1 and orientation == 1 and pos + length <= n:
            seg = bytes(b[pos + 2 : pos + length])
            if seg.startswith(b"Exif\x00\x00"):
                orientation = exif_orientation(seg[6:])
        elif marker in _JPEG_SOF:
            precision, height, width, comps = struct.unpack_from(">BHHB", b, pos + 2)
            progressive = marker in (0xC2, 0xC6, 0xCA, 0xCE)
            return ImageHeader("jpeg", width, height, comps, orientation, precision, progressive, _JPEG_SOF[marker])
        pos += length


def jpeg_ends_before_scan(data: bytes) -> bool:
    """Whether a JPEG's bytes end before its first scan's header is whole (a file cut inside its tables): TensorFlow
    rejects such a file too, but its libjpeg first prints "Improper call to JPEG library in state 201" on the
    process' stderr, which no caller can catch, so the job rejects it before it reaches the decoder. Bytes that
    are no marker where one is due are skipped, as libjpeg skips them."""
    b, pos, n = memoryview(data), 2, len(data)
    while True:
        while pos < n and b[pos] != 0xFF:
            pos += 1
        while pos < n and b[pos] == 0xFF:
            pos += 1
        if pos >= n:
            return True
        marker, pos = b[pos], pos + 1
        if marker in _JPEG_STANDALONE or marker == 0x00:
            continue
        if marker == 0xD9:   # the end before any scan
            return True
        if pos + 2 > n:
            return True
        (length,) = struct.unpack_from(">H", b, pos)
        if pos + length > n:
            return True
        if marker == 0xDA:
            return False
        pos += max(length, 2)


def exif_orientation(tiff: bytes) -> int:
    """Orientation (1..8) from a TIFF-structured EXIF blob; 1 when absent or garbled."""
    if tiff.startswith(b"Exif\x00\x00"):
        tiff = tiff[6:]
    order = {b"II": "<", b"MM": ">"}.get(tiff[:2])
    if order is None:
        return 1
    try:
        magic, ifd = struct.unpack_from(order + "HI", tiff, 2)
        if magic != 42:
            return 1
        (count,) = struct.unpack_from(order + "H", tiff, ifd)
        for i in range(min(count, 1024)):
            tag, typ, _cnt = struct.unpack_from(order + "HHI", tiff, ifd + 2 + 12 * i)
            if tag == 0x0112:
                # SHORT is the standard type; some writers use LONG. Either way the value sits inline.
                value = struct.unpack_from(order + ("H" if typ == 3 else "I"), tiff, ifd + 2 + 12 * i + 8)[0]
                return value if 1 <= value <= 8 else 1
    except struct.error:
        pass
    return 1


# --- PNG ---------------------------------------------------------------------------------------------------


def _png(b: memoryview) -> ImageHeader:
    if len(b) < 33:
        raise NeedMoreData()
    length, ctype = struct.unpack_from(">I4s", b, 8)
    if ctype != b"IHDR" or length != 13:
        raise Rejected("bad_header", "truncated or corrupt header (PNG does not start with IHDR)")
    width, height, depth, colour, _comp, _filt, interlace = struct.unpack_from(">IIBBBBB", b, 16)
    if colour not in _PNG_CHANNELS:
        raise Rejected("bad_header", f"truncated or corrupt header (PNG colour type {colour})")
    orientation = 1
    pos = 33
    # eXIf may come anywhere before IEND; walk chunk headers (cheap) while the prefix lasts.
    while pos + 8 <= len(b):
        clen, ctype = struct.unpack_from(">I4s", b, pos)
        if ctype == b"eXIf":
            if pos + 8 + clen <= len(b):
                orientation = exif_orientation(bytes(b[pos + 8 : pos + 8 + clen]))
            break
        if ctype == b"IEND":
            break
        pos += 12 + clen
    return ImageHeader("png", width, height, _PNG_CHANNELS[colour], orientation, depth, interlace == 1)


# --- BMP, GIF ----------------------------------------------------------------------------------------------


def _bmp(b: memoryview) -> ImageHeader:
    if len(b) < 26:
        raise NeedMoreData()
    (dib,) = struct.unpack_from("<I", b, 14)
    if dib == 12:  # BITMAPCOREHEADER (OS/2): unsigned 16-bit sizes
        width, height, _planes, bpp = struct.unpack_from("<HHHH", b, 18)
    elif dib in (16, 40, 52, 56, 64, 108, 124):
        width, height, _planes, bpp = struct.unpack_from("<iiHH", b, 18)
        height = abs(height)  # negative height = rows stored top-down
    else:
        raise Rejected("bad_header", f"truncated or corrupt header (BMP info header of {dib} bytes)")
    coding = None  # plain pixels (BI_RGB or BI_BITFIELDS)
    if dib >= 40:
        (compression,) = struct.unpack_from("<I", b, 30)
        coding = _BMP_COMPRESSION.get(compression, f"compression {compression}")
    if bpp <= 8 and coding is None:
        coding = "gray" if _bmp_gray_palette(b, dib, bpp) else "palette"
    return ImageHeader("bmp", width, height, {24: 3, 32: 4}.get(bpp), 1, bpp, coding=coding)


_BMP_COMPRESSION = {0: None, 1: "rle8", 2: "rle4", 3: None, 4: "jpeg", 5: "png", 6: None}


def _bmp_gray_palette(b: memoryview, dib: int, bpp: int) -> bool:
    """True when an 8-bit BMP's colour table maps every index i to grey (i, i, i): TensorFlow's decoder reads
    palette indices as grey levels, so only such files decode to their true colours."""
    if bpp != 8 or dib < 40:
        return False
    (used,) = struct.unpack_from("<I", b, 46)
    n = used or 256
    table = bytes(b[14 + dib : 14 + dib + 4 * n])
    if len(table) < 4 * n:
        raise NeedMoreData()
    return all(table[4 * i] == table[4 * i + 1] == table[4 * i + 2] == i for i in range(n))


def unsupported(h: ImageHeader) -> str | None:
    """Why TensorFlow's decoder cannot decode this file to its true colours, or None when it can. Checked at
    scan time: such files are rejected ("undecodable") instead of being misread or failing later."""
    if h.format == "bmp":
        if h.coding not in (None, "gray") or h.bit_depth not in (8, 24, 32):
            what = f"{h.bit_depth}-bit " + ("colour-table" if h.coding == "palette" else h.coding or "")
            return f"BMP with {what.strip()} pixels is not supported (only 24/32-bit or 8-bit grey); convert it to PNG"
    return None


def _gif(b: memoryview) -> ImageHeader:
    """The canvas TensorFlow decodes to is the largest extent of any frame, not the logical screen, and it
    decodes every frame: so every image descriptor is walked (the whole file if need be), and the header
    gives that canvas and the frame count."""
    width, height = struct.unpack_from("<HH", b, 6)
    if width == 0 or height == 0:
        return ImageHeader("gif", width, height, 3, 1, 8)
    packed = b[10]
    pos = 13 + (3 << ((packed & 7) + 1) if packed & 0x80 else 0)
    frames = 0
    while True:
        if pos >= len(b):
            raise NeedMoreData()
        block = b[pos]
        if block == 0x2C:  # image descriptor
            left, top, w, h, flags = struct.unpack_from("<HHHHB", b, pos + 1)
            width, height, frames = max(width, left + w), max(height, top + h), frames + 1
            pos += 10 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
            pos = _gif_skip_sub_blocks(b, pos + 1)  # + the LZW minimum code size byte
        elif block == 0x21:  # extension: label byte, then sub-blocks
            pos = _gif_skip_sub_blocks(b, pos + 2)
        else:  # 0x3B trailer (or trailing junk, where decoders stop too)
            break
    if frames == 0:
        raise Rejected("bad_header", "truncated or corrupt header (GIF holds no image)")
    return ImageHeader("gif", width, height, 3, 1, 8, frames=frames)


def _gif_skip_sub_blocks(b: memoryview, pos: int) -> int:
    while True:
        if pos >= len(b):
            raise NeedMoreData()
        size = b[pos]
        pos += 1 + size
        if size == 0:
            return pos


# --- WebP --------------------------------------------------------------------------------------------------


def _webp(b: memoryview) -> ImageHeader:
    pos, size, channels, orientation = 12, None, 3, 1
    while pos + 8 <= len(b):
        fourcc, clen = struct.unpack_from("<4sI", b, pos)
        data = pos + 8
        if data + 10 > len(b) and fourcc in (b"VP8 ", b"VP8L", b"VP8X"):
            raise NeedMoreData()
        if fourcc == b"VP8 " and size is None:
            if bytes(b[data + 3 : data + 6]) != b"\x9d\x01\x2a":
                raise Rejected("bad_header", "truncated or corrupt header (bad VP8 start code)")
            w, h = struct.unpack_from("<HH", b, data + 6)
            return ImageHeader("webp", w & 0x3FFF, h & 0x3FFF, channels, orientation, 8, False, "lossy")
        if fourcc == b"VP8L" and size is None:
            if b[data] != 0x2F:
                raise Rejected("bad_header", "truncated or corrupt header (bad VP8L signature)")
            (bits,) = struct.unpack_from("<I", b, data + 1)
            w, h, alpha = (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1, (bits >> 28) & 1
            return ImageHeader("webp", w, h, 4 if alpha else 3, orientation, 8, False, "lossless")
        if fourcc == b"VP8X":
            flags = b[data]
            w = int.from_bytes(b[data + 4 : data + 7], "little") + 1
            h = int.from_bytes(b[data + 7 : data + 10], "little") + 1
            size, channels = (w, h), 4 if flags & 0x10 else 3
            # EXIF, when announced, follows the image data; without it the canvas size is all we need.
            if not flags & 0x08:
                return ImageHeader("webp", w, h, channels, 1, 8, False, "extended")
        elif fourcc == b"EXIF" and size is not None:
            if data + clen > len(b):
                raise NeedMoreData()
            orientation = exif_orientation(bytes(b[data : data + clen]))
            return ImageHeader("webp", size[0], size[1], channels, orientation, 8, False, "extended")
        pos = data + clen + (clen & 1)  # chunks are padded to even sizes
    if size is not None and pos >= struct.unpack_from("<I", b, 4)[0] + 8:
        return ImageHeader("webp", *size, channels, orientation, 8, False, "extended")  # whole file, no EXIF
    raise NeedMoreData()


_PARSERS = {"jpeg": _jpeg, "png": _png, "bmp": _bmp, "gif": _gif, "webp": _webp}
