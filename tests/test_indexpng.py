"""augd/indexpng.py, the fast path for mask PNGs: for the common mask (8-bit palette or grey, rows
unfiltered) it gives Pillow's own indices; for every other PNG, and every damaged one, it steps aside (None) and
read_mask decodes with Pillow, with Pillow's checks and augd's errors, exactly as before."""
from __future__ import annotations

import io
import struct
import zlib

import cv2
import numpy as np
import pytest
from PIL import Image

from augd.annotations import AnnotationError
from augd.annotations.masks import mask_png, read_mask
from augd.indexpng import index_pixels

RNG = np.random.default_rng(3)
MASK = RNG.integers(0, 21, (37, 53), dtype=np.uint8)
MASK[5:9] = 255                                   # VOC's void


def pil_png(arr: np.ndarray, mode: str, **save) -> bytes:
    out = io.BytesIO()
    if mode == "P":    # indices with a palette, as VOC's SegmentationClass/
        img = Image.frombytes("P", (arr.shape[1], arr.shape[0]), arr.tobytes())
        img.putpalette([v for i in range(256) for v in (i, 255 - i, (7 * i) % 256)])
    else:
        img = Image.fromarray(arr, mode)
    img.save(out, format="PNG", **save)
    return out.getvalue()


def filtered_png(arr: np.ndarray) -> bytes:
    """A grey PNG whose rows use the Sub filter (type 1): valid, but not the fast path's kind."""
    h, w = arr.shape
    rows = b"".join(b"\x01" + bytes(np.diff(r.astype(np.int16), prepend=0).astype(np.uint8)) for r in arr)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def pillow(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)))


CASES = {   # name: (PNG bytes, whether the fast path takes it)
    "palette": (pil_png(MASK, "P"), True),
    "grey": (pil_png(MASK, "L"), None),                                            # Pillow filters grey rows
    "grey, written by OpenCV": (cv2.imencode(".png", MASK)[1].tobytes(), None),   # its filters decide
    "augd's own (mask_png)": (mask_png(MASK), True),                              # what its records hold
    "rows filtered (Sub)": (filtered_png(MASK), False),
    "palette with transparency": (pil_png(MASK, "P", transparency=0), False),
    "1-bit": (pil_png(MASK > 10, "1"), False),
    "16-bit grey": (cv2.imencode(".png", MASK.astype(np.uint16))[1].tobytes(), False),
}


@pytest.mark.parametrize("name", CASES)
def test_the_fast_path_gives_pillows_indices_or_steps_aside(name, tmp_path):
    data, fast = CASES[name]
    got = index_pixels(data, 10**7)
    if fast is not None:
        assert (got is not None) == fast
    if got is not None:
        assert got.dtype == np.uint8 and got.flags.c_contiguous and np.array_equal(got, pillow(data))
    (tmp_path / "m.png").write_bytes(data)
    np.testing.assert_array_equal(read_mask(str(tmp_path / "m.png"), None, "m.png"), pillow(data).astype(np.uint8))


def _broken_crc(data: bytes) -> bytes:
    i = data.index(b"IDAT") + 6
    return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]


@pytest.mark.parametrize("damage,error", [
    (lambda d: d[:len(d) // 2], "cannot be decoded"),
    (_broken_crc, "cannot be decoded"),
])
def test_a_damaged_mask_is_left_to_pillow_and_refused_as_before(damage, error, tmp_path):
    data = damage(CASES["palette"][0])
    assert index_pixels(data, 10**7) is None
    (tmp_path / "m.png").write_bytes(data)
    with pytest.raises(AnnotationError, match=f"m.png: the mask PNG {error}"):
        read_mask(str(tmp_path / "m.png"), None, "m.png")


def test_what_read_mask_refuses_it_still_refuses_on_the_fast_path(tmp_path):
    (tmp_path / "m.png").write_bytes(CASES["palette"][0])
    assert index_pixels(CASES["palette"][0], 37 * 53 - 1) is None and index_pixels(CASES["palette"][0], 10**7,
                                                                                    (53, 37)) is None
    with pytest.raises(AnnotationError, match="more than the job's max_pixels=1960"):
        read_mask(str(tmp_path / "m.png"), None, "m.png", max_pixels=1960)
    with pytest.raises(AnnotationError, match="the mask is 53x37 but its image is 37x53"):
        read_mask(str(tmp_path / "m.png"), (53, 37), "m.png")
    np.testing.assert_array_equal(read_mask(str(tmp_path / "m.png"), (37, 53), "m.png"), MASK)
