"""augd.formats: sniffing, header sizes, channels, EXIF orientation, prefixes and garbage."""
import io
import os
import random
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest
from PIL import Image

from augd.errors import Rejected
from augd.formats import NeedMoreData, passthrough_ok, read_header, sniff_format

W, H = 37, 23


def pil_bytes(fmt: str, mode: str = "RGB", size=(W, H), **kw) -> bytes:
    arr = np.random.default_rng(1).integers(0, 255, (size[1], size[0], 4), np.uint8)
    img = Image.fromarray(arr, "RGBA").convert(mode)
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def tiff(order: str, orientation: int, typ: int = 3) -> bytes:
    """A minimal TIFF/EXIF blob holding one Orientation entry, in either byte order."""
    e = "<" if order == "II" else ">"
    value = struct.pack(e + "HH", orientation, 0) if typ == 3 else struct.pack(e + "I", orientation)
    return order.encode() + struct.pack(e + "HI", 42, 8) + struct.pack(e + "H", 1) + struct.pack(
        e + "HHI", 0x0112, typ, 1) + value + b"\0\0\0\0"


def with_app1(jpeg: bytes, payload: bytes) -> bytes:
    return jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload + jpeg[2:]


def png_chunk(ctype: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + ctype + data + struct.pack(">I", zlib.crc32(ctype + data))


def png_header_only(width: int, height: int, colour: int = 2, depth: int = 8, interlace: int = 0) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, interlace)
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr)


def bmp_header(width: int, height: int, dib: int = 40, bpp: int = 24) -> bytes:
    if dib == 12:
        info = struct.pack("<IHHHH", 12, width, height, 1, bpp)
    else:
        info = struct.pack("<IiiHH", dib, width, height, 1, bpp) + b"\0" * (dib - 16)
    return b"BM" + struct.pack("<IHHI", 14 + len(info), 0, 0, 14 + len(info)) + info


def _cv_png16() -> bytes:
    import cv2

    ok, buf = cv2.imencode(".png", np.zeros((H, W, 3), np.uint16))
    return buf.tobytes()


# name -> (bytes, format, channels, bit_depth, coding, passthrough)
SAMPLES = {
    "jpeg_rgb": (lambda: pil_bytes("JPEG"), "jpeg", 3, 8, "baseline", True),
    "jpeg_progressive": (lambda: pil_bytes("JPEG", progressive=True), "jpeg", 3, 8, "progressive", True),
    "jpeg_gray": (lambda: pil_bytes("JPEG", "L"), "jpeg", 1, 8, "baseline", False),
    "jpeg_cmyk": (lambda: pil_bytes("JPEG", "CMYK"), "jpeg", 4, 8, "baseline", False),
    "png_rgb": (lambda: pil_bytes("PNG"), "png", 3, 8, None, True),
    "png_rgba": (lambda: pil_bytes("PNG", "RGBA"), "png", 4, 8, None, False),
    "png_gray": (lambda: pil_bytes("PNG", "L"), "png", 1, 8, None, False),
    "png_palette": (lambda: pil_bytes("PNG", "P"), "png", None, 8, None, False),
    "png_16bit": (_cv_png16, "png", 3, 16, None, False),
    "png_interlaced": (lambda: png_header_only(W, H, interlace=1), "png", 3, 8, None, False),
    "bmp_24": (lambda: pil_bytes("BMP"), "bmp", 3, 24, None, False),
    "bmp_32": (lambda: pil_bytes("BMP", "RGBA"), "bmp", 4, 32, None, False),
    "bmp_top_down": (lambda: bmp_header(W, -H), "bmp", 3, 24, None, False),
    "bmp_v5": (lambda: bmp_header(W, H, dib=124, bpp=32), "bmp", 4, 32, None, False),
    "bmp_os2": (lambda: bmp_header(W, H, dib=12), "bmp", 3, 24, None, False),
    "gif": (lambda: pil_bytes("GIF", "P"), "gif", 3, 8, None, False),
    "webp_lossy": (lambda: pil_bytes("WEBP"), "webp", 3, 8, "lossy", False),
    "webp_lossless": (lambda: pil_bytes("WEBP", lossless=True), "webp", 3, 8, "lossless", False),
    "webp_lossless_alpha": (lambda: pil_bytes("WEBP", "RGBA", lossless=True), "webp", 4, 8, "lossless", False),
    "webp_extended": (lambda: pil_bytes("WEBP", exif=tiff("II", 1)), "webp", 3, 8, "extended", False),
}


@pytest.mark.parametrize("name", SAMPLES)
def test_header_table(name):
    make, fmt, channels, depth, coding, passthrough = SAMPLES[name]
    data = make()
    assert sniff_format(data[:12]) == fmt
    h = read_header(data)
    assert (h.format, h.width, h.height, h.channels, h.bit_depth, h.coding) == (fmt, W, H, channels, depth, coding)
    assert h.orientation == 1
    assert h.interlaced == (name in ("png_interlaced", "jpeg_progressive"))
    assert passthrough_ok(h) is passthrough


@pytest.mark.parametrize("order", ["II", "MM"])
@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("typ", [3, 4])
def test_jpeg_exif_orientation_both_byte_orders(order, orientation, typ):
    h = read_header(with_app1(pil_bytes("JPEG"), b"Exif\0\0" + tiff(order, orientation, typ)))
    assert (h.orientation, h.width, h.height) == (orientation, W, H)
    assert passthrough_ok(h) is (orientation == 1)


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_orientation_from_pillow_written_exif(orientation):
    exif = Image.Exif()
    exif[0x0112] = orientation
    for fmt in ("JPEG", "PNG", "WEBP"):
        h = read_header(pil_bytes(fmt, exif=exif.tobytes()))
        assert (h.format, h.orientation, h.width, h.height) == (fmt.lower(), orientation, W, H)


def test_png_exif_chunk_after_other_chunks():
    data = png_header_only(W, H) + png_chunk(b"tEXt", b"k\0v") + png_chunk(b"eXIf", tiff("MM", 5))
    assert read_header(data).orientation == 5


GARBLED = {
    "no_tiff_header": b"Exif\0\0XX*\0\0\0\0\x08",
    "bad_magic": b"Exif\0\0" + b"II" + struct.pack("<HI", 43, 8) + tiff("II", 6)[8:],
    "ifd_past_end": b"Exif\0\0" + b"II" + struct.pack("<HI", 42, 9999),
    "truncated_entry": b"Exif\0\0" + tiff("II", 6)[:14],
    "orientation_9": b"Exif\0\0" + tiff("MM", 9),
    "orientation_0": b"Exif\0\0" + tiff("II", 0),
    "not_exif_app1": b"http://ns.adobe.com/xap/1.0/\0<x/>",
}


@pytest.mark.parametrize("name", GARBLED)
def test_garbled_exif_means_orientation_1(name):
    h = read_header(with_app1(pil_bytes("JPEG"), GARBLED[name]))
    assert (h.orientation, h.width, h.height) == (1, W, H)


def test_sof_after_a_large_segment_needs_more_than_the_prefix():
    jpeg = pil_bytes("JPEG")
    big = b"".join(b"\xff\xfe\xff\xff" + b"c" * 0xFFFD for _ in range(5))  # 5 COM segments, ~320 KiB
    data = jpeg[:2] + big + jpeg[2:]
    with pytest.raises(NeedMoreData) as e:
        read_header(data[: 256 * 1024])
    assert e.value.reason == "bad_header"
    assert (read_header(data).width, read_header(data).height) == (W, H)


REJECTS = {
    "empty": (b"", "empty", "empty"),
    "pdf": (b"%PDF-1.7\n%\xe2\xe3", "unknown_format", "not an image (starts with b'%PDF-1.7')"),
    "text": (b"hello world", "unknown_format", "not an image"),
    "jpeg_soi_only": (b"\xff\xd8\xff", "bad_header", "truncated or corrupt header"),
    "jpeg_sos_before_sof": (b"\xff\xd8\xff\xda\x00\x02", "bad_header", "no frame header"),
    "jpeg_garbage_after_soi": (b"\xff\xd8\xff\xe0\x00\x04ab\x00\x00\x00", "bad_header", "no JPEG marker"),
    "png_no_ihdr": (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IDAT", b"x" * 30), "bad_header", "IHDR"),
    "png_zero_width": (png_header_only(0, 5), "bad_header", "png says 0x5"),
    "png_bad_colour": (png_header_only(5, 5, colour=5), "bad_header", "colour type 5"),
    "bmp_short": (b"BM\0\0", "bad_header", "truncated"),
    "bmp_odd_dib": (bmp_header(5, 5, dib=20), "bad_header", "BMP info header"),
    "gif_zero": (b"GIF89a\0\0\x05\0", "bad_header", "gif says 0x5"),
    "webp_bad_vp8": (b"RIFF\x20\0\0\0WEBPVP8 \x14\0\0\0" + b"\0" * 20, "bad_header", "VP8 start code"),
}


@pytest.mark.parametrize("name", REJECTS)
def test_rejects_table(name):
    data, reason, message = REJECTS[name]
    with pytest.raises(Rejected) as e:
        read_header(data)
    assert e.value.reason == reason
    assert message in str(e.value)


@pytest.mark.parametrize("name", [n for n in SAMPLES if n.startswith(("jpeg", "png", "webp", "gif", "bmp"))])
def test_truncated_and_corrupted_headers_only_ever_raise_rejected(name):
    data = SAMPLES[name][0]()
    rng = random.Random(name)
    cases = [data[:k] for k in range(0, min(len(data), 200))]
    for _ in range(200):
        b = bytearray(data[:400])
        for _ in range(rng.randint(1, 6)):
            b[rng.randrange(12, len(b))] = rng.randrange(256)  # keep the magic, damage the header
        cases.append(bytes(b))
    for case in cases:
        try:
            h = read_header(case)
        except Rejected as e:
            assert e.reason in ("empty", "unknown_format", "bad_header")
        else:
            assert h.width > 0 and h.height > 0 and 1 <= h.orientation <= 8


def test_formats_and_local_scan_do_not_import_tensorflow_or_numpy(tmp_path):
    (tmp_path / "a.png").write_bytes(png_header_only(4, 4))
    code = (
        "import sys; import augd.formats; from augd.io import scan_job; from augd.jobfolder import CONTROL_FILES, MARKERS;"
        "r = scan_job(sys.argv[1], skip_names=CONTROL_FILES, skip_anywhere=MARKERS);"
        "assert len(r.images) == 1, r; bad = {'tensorflow', 'numpy'} & set(sys.modules); assert not bad, bad"
    )
    env = {**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, env=env, timeout=60)
