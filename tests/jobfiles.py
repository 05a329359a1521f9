"""Job folders for the `augd run` tests: real image files of every kind augd accepts or rejects, built with
numpy/PIL/cv2 at test time (no binary blobs), plus the seeds' own record reader and small readers for outputs.

Imported by tests/test_run.py and tests/test_run_cli.py.
"""
from __future__ import annotations

import glob
import io
import os
import struct
import subprocess
import sys
import zlib

import cv2
import numpy as np
from PIL import Image

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Source kinds whose own bytes are variant 0 (RGB JPEG/PNG, no EXIF rotation).
PASSTHROUGH = frozenset({"jpeg", "jpeg_progressive", "png"})
#: Kinds the scan or the decoder must reject, with the reason augd gives.
BAD = {"truncated": "undecodable", "corrupt_png": "undecodable", "random": "unknown_format", "empty": "empty", "text": "unknown_format",
       "bomb": "too_many_pixels"}


def picture(h: int, w: int, seed: int) -> np.ndarray:
    """A smooth, asymmetric RGB picture (gradients plus a few soft shapes, like a slightly blurred photo): JPEG
    at quality 90 keeps it above 30 dB PSNR, and any flip or rotation of it is obvious."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([255 * x / w, 255 * y / h, 128 + 100 * np.sin((x + 2 * y) / 9.0)], -1)
    img = np.ascontiguousarray(img.astype(np.uint8))
    for _ in range(3):
        colour = tuple(int(c) for c in rng.integers(0, 255, 3))
        cx, cy = int(rng.integers(0, w)), int(rng.integers(0, h))
        cv2.circle(img, (cx, cy), int(rng.integers(4, max(5, min(h, w) // 3))), colour, -1, cv2.LINE_AA)
    cv2.rectangle(img, (1, 1), (w // 4, h // 5), (250, 20, 20), -1)  # a marker in the top-left corner
    return cv2.GaussianBlur(img, (0, 0), 1.2)


def _save(im: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def image_bytes(kind: str, h: int, w: int, seed: int) -> bytes:
    """The file content of one source of `kind`; stored (upright) pictures are h x w."""
    arr = picture(h, w, seed)
    rgb = Image.fromarray(arr)
    if kind == "jpeg":
        return _save(rgb, "JPEG", quality=92)
    if kind == "jpeg_progressive":
        return _save(rgb, "JPEG", quality=92, progressive=True)
    if kind == "png":
        return _save(rgb, "PNG")
    if kind == "gray":
        return _save(rgb.convert("L"), "JPEG", quality=92)
    if kind == "rgba":
        rgba = np.dstack([arr, np.full((h, w), 255, np.uint8)])
        return _save(Image.fromarray(rgba, "RGBA"), "PNG")
    if kind == "exif6":  # stored on its side: a viewer rotates it 90 degrees clockwise to show it upright
        exif = Image.Exif()
        exif[0x0112] = 6
        return _save(Image.fromarray(np.ascontiguousarray(np.rot90(arr, 1))), "JPEG", quality=92,
                     exif=exif.tobytes())
    if kind == "bmp":
        return _save(rgb, "BMP")
    if kind == "gif":  # a tinted grey picture: under 256 colours, so the palette holds it without banding
        lum = np.asarray(rgb.convert("L")).astype(np.uint16)
        tinted = np.stack([lum, lum * 3 // 4, 255 - lum], -1).astype(np.uint8)
        return _save(Image.fromarray(tinted).convert("P", palette=Image.Palette.ADAPTIVE), "GIF")
    if kind == "webp":
        return _save(rgb, "WEBP", lossless=True)
    if kind == "truncated":  # the header is intact, the scan data stops half way
        full = image_bytes("jpeg", h, w, seed)
        return full[: len(full) // 2]
    if kind == "corrupt_png":  # a sound header over pixel data that does not inflate
        ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
        return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr)
                + _png_chunk(b"IDAT", np.random.default_rng(seed).bytes(500)) + _png_chunk(b"IEND", b""))
    if kind == "random":
        return np.random.default_rng(seed).bytes(3000)
    if kind == "empty":
        return b""
    if kind == "text":
        return b"label,notes\nF603,taken on a cloudy day\n"
    if kind == "bomb":  # a valid PNG header claiming 40000 x 40000 pixels
        ihdr = struct.pack(">IIBBBBB", 40000, 40000, 8, 2, 0, 0, 0)
        return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr) + _png_chunk(b"IDAT", zlib.compress(b"\0" * 64))
                + _png_chunk(b"IEND", b""))
    raise ValueError(kind)


def make_job(root, layout: dict[str, str]) -> dict[str, str]:
    """Write `layout` ({relpath: kind}) under `root`; image i (in sorted order) is (40 + 2i) x (60 + 2i)
    pixels: sizes all differ and none is square. Returns the layout."""
    for i, (rel, kind) in enumerate(sorted(layout.items())):
        path = os.path.join(str(root), rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(image_bytes(kind, 40 + 2 * i, 60 + 2 * i, seed=i))
    return layout


def upright_rgb(path: str) -> np.ndarray:
    """What a source file shows, by PIL: EXIF orientation applied, first frame, converted to RGB."""
    from PIL import ImageOps
    with Image.open(path) as im:
        return np.asarray(ImageOps.exif_transpose(im).convert("RGB"))


def pipeline_yaml(*, fmt="jpeg", shards=3, compression="none", variants=2, keep_original=True, seed=11,
                  quality=90) -> str:
    return f"""\
name: t
seed: {seed}
variants: {variants}
keep_original: {str(keep_original).lower()}
output: {{format: {fmt}, quality: {quality}, shards: {shards}, compression: {compression}}}
ops:
  - random_brightness: {{max_delta: 0.1}}
  - random_contrast: {{lower: 0.8, upper: 1.2}}
  - random_hue: {{max_delta: 0.05}}
  - random_flip_left_right: {{}}
  - random_rotation: {{degrees: 10, fill: reflect}}
"""


def shard_files(out_dir: str) -> list[str]:
    return sorted(glob.glob(os.path.join(out_dir, "*.tfrecord*")))


def records(out_dir: str) -> list[bytes]:
    """Every record of an output folder, shard by shard, in file order."""
    import tensorflow as tf
    out = []
    for path in shard_files(out_dir):
        ds = tf.data.TFRecordDataset(path, compression_type="GZIP" if path.endswith(".gz") else "")
        out.extend(ds.as_numpy_iterator())
    return out


def seed_reader(serialized):
    """The seeds' own reader, unchanged: parse four features, decode_jpeg, reshape to [h, w, 3]."""
    import tensorflow as tf
    features = tf.io.parse_single_example(serialized, {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/height": tf.io.FixedLenFeature([], tf.int64),
        "image/width": tf.io.FixedLenFeature([], tf.int64),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    })
    image = tf.image.decode_jpeg(features["image/encoded"])
    image = tf.reshape(image, [features["image/height"], features["image/width"], 3])
    return image, features["image/class/label"]


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def tree(root) -> dict[str, tuple[bytes, int]]:
    """{relpath: (bytes, mtime_ns)} of every file under root, hidden ones included."""
    out = {}
    for dirpath, _dirs, files in os.walk(str(root)):
        for name in files:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as f:
                out[os.path.relpath(p, str(root))] = (f.read(), os.stat(p).st_mtime_ns)
    return out


def augd_env() -> dict:
    return {**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "2"}


def augd_cmd(*args) -> list[str]:
    return [sys.executable, "-m", "augd", *map(str, args)]


def augd(*args, timeout=120) -> subprocess.CompletedProcess:
    """Run the real CLI in a fresh process; output captured as text."""
    return subprocess.run(augd_cmd(*args), env=augd_env(), capture_output=True, text=True, timeout=timeout)
