#!/usr/bin/env python3
"""Regenerate docs/tiles.jpg: `augd preview` of the shipped detection-small-objects pipeline on a synthetic
2000x1500 scene of small squares (a VOC job made here, its own images the partners: --root), so the sheet shows
the image with its tiles outlined, then tiles spread over it and the whole image, each as cut and with two
variants: the records `augd run` writes for them, small objects pasted onto them.

    .venv/bin/python scripts/make_tiles_preview.py [OUT.png]
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from augd.preview import main as preview  # noqa: E402
from tests.annotated import Img, scattered_squares, voc_job  # noqa: E402

COLOURS = {"car": (210, 40, 40), "person": (40, 170, 60), "boat": (40, 70, 210)}


def scene(i: int) -> Img:
    import numpy as np
    shapes = scattered_squares(np.random.default_rng(i), 30, 1500, 2000, (14, 47), 6, COLOURS)
    return Img(f"aerial_{i}.png", 1500, 2000, shapes, background=(205, 200, 185))


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "tiles.jpg"
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp, "job")
        voc_job(str(job), [scene(i) for i in range(4)])
        for k, path in enumerate(sorted((job / "JPEGImages").glob("*.png"))):   # ground-like texture: equalize and
            import cv2                                                          # friends act as on photos
            import numpy as np
            img = cv2.imread(str(path)).astype(np.float32)
            yy, xx = np.mgrid[0:img.shape[0], 0:img.shape[1]].astype(np.float32)
            shade = 18 * np.sin(xx / 170.0)[..., None] * np.cos(yy / 230.0)[..., None]
            noise = np.random.default_rng(k).normal(0, 7, img.shape)   # by its place: the same sheet on every run
            cv2.imwrite(str(path), np.clip(img + shade + noise, 0, 255).astype(np.uint8))
        return preview(["detection-small-objects", str(job / "JPEGImages" / "aerial_0.png"), "--root", str(job),
                        "--tile", "200", "-n", "2", "-o", str(out)])


if __name__ == "__main__":
    sys.exit(main())
