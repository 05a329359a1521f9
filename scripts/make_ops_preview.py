#!/usr/bin/env python3
"""Regenerate docs/ops-44.png: `augd preview` of the ops and policies issue 44 added, one row each (the op alone,
3 variants of one sample photo), so docs/pipelines.md shows what each does.

    .venv/bin/python scripts/make_ops_preview.py [OUT.png]
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from augd.preview import main as preview  # noqa: E402

IMAGE = REPO / "augd" / "samples" / "demo" / "animals_food" / "chelsea_0.jpg"
OPS = {
    "random_color": "random_color: {lower: 0.0, upper: 2.0}",
    "random_sharpness": "random_sharpness: {lower: 0.0, upper: 3.0}",
    "autocontrast": "autocontrast: {}",
    "solarize_add": "solarize_add: {addition: [40, 110]}",
    "median_blur": "median_blur: {ksize: [5, 5]}",
    "coarse_dropout": "coarse_dropout: {holes: [3, 8]}",
    "shear_y": "random_affine: {scale: 1, shear_y: 20}",
    "random_perspective": "random_perspective: {scale: [0.08, 0.12]}",
    "motion_blur": "motion_blur: {ksize: [9, 15], angle: [0, 180]}",
    "clahe": "clahe: {clip_limit: [2, 4]}",
    "iso_noise": "iso_noise: {color_shift: [0.03, 0.06], intensity: [0.4, 0.8]}",
    "randaugment": "randaugment: {n: 2, m: 15}",
    "trivial_augment": "trivial_augment: {}",
}


def main() -> int:
    import cv2
    import numpy as np
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "ops-44.png"
    sheets = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, op in OPS.items():
            pipe, png = Path(tmp, f"{name}.yaml"), Path(tmp, f"{name}.png")
            pipe.write_text(f"name: preview-{name.replace('_', '-')}\nseed: 4\nvariants: 3\nops:\n  - {op}\n")
            rc = preview([str(pipe), str(IMAGE), "--tile", "150", "-o", str(png)])
            if rc:
                return rc
            sheets.append(cv2.imread(str(png)))
    width = max(s.shape[1] for s in sheets)
    sheet = np.vstack([cv2.copyMakeBorder(s, 0, 0, 0, width - s.shape[1], cv2.BORDER_CONSTANT) for s in sheets])
    return 0 if cv2.imwrite(str(out), sheet, [cv2.IMWRITE_JPEG_QUALITY, 85] if out.suffix == ".jpg" else
                            [cv2.IMWRITE_PNG_COMPRESSION, 9]) else 1


if __name__ == "__main__":
    sys.exit(main())
