"""augd's mask PNGs, written and read back (issue 60, item 3): Pillow's adaptively filtered grey PNG at zlib level 1
(before) against mask_png's unfiltered rows (after), on the semantic masks of a shard of augd's records.

    python -m bench.mask_png RECORDS.tfrecord [--n 200]

Each way twice, alternated: the encode, the read (read_mask's two paths: indexpng's fast one, else Pillow), how
many took the fast path, and the mean size. Figures only.
"""
from __future__ import annotations

import argparse
import io
import time

import numpy as np
from PIL import Image

from augd.annotations.masks import mask_png
from augd.indexpng import index_pixels
from augd.io import lite


def _pillow_png(m: np.ndarray) -> bytes:
    """mask_png before issue 60: Pillow's grey PNG at zlib level 1 (rows filtered adaptively)."""
    out = io.BytesIO()
    Image.frombuffer("L", (m.shape[1], m.shape[0]), np.ascontiguousarray(m), "raw", "L", 0, 1).save(
        out, format="PNG", compress_level=1)
    return out.getvalue()


def _read(png: bytes) -> np.ndarray:
    fast = index_pixels(png, 1 << 30)
    return fast if fast is not None else np.asarray(Image.open(io.BytesIO(png)))


def _ms(fn, xs) -> tuple[float, list]:
    t = time.perf_counter()
    out = [fn(x) for x in xs]
    return (time.perf_counter() - t) / len(xs) * 1e3, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shard")
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args(argv)
    masks = []
    for rec in lite.iter_records(args.shard):
        seg = lite.decode_example(rec).get("image/segmentation/class/encoded")
        if seg:
            masks.append(np.asarray(Image.open(io.BytesIO(seg))))
        if len(masks) == args.n:
            break
    for name, encode in (("before: Pillow, filtered", _pillow_png), ("after: mask_png, unfiltered", mask_png)) * 2:
        t_enc, pngs = _ms(encode, masks)
        t_read, back = _ms(_read, pngs)
        assert all(np.array_equal(a, b) for a, b in zip(back, masks))
        fast = sum(index_pixels(p, 1 << 30) is not None for p in pngs)
        print(f"{name:28s} encode {t_enc:.3f} ms  read {t_read:.3f} ms  fast path {fast}/{len(pngs)}  "
              f"mean {np.mean([len(p) for p in pngs]):.0f} bytes ({len(masks)} masks)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
