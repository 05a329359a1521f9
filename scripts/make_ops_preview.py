#!/usr/bin/env python3
"""Regenerate docs/ops-44.png: `augd preview` of the ops and policies issue 44 added, one row each (the op alone,
3 variants of one sample photo), so docs/pipelines.md shows what each does.

    .venv/bin/python scripts/make_ops_preview.py [OUT.png]
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from stacked_previews import stacked_previews  # noqa: E402

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
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "ops-44.png"
    pipelines = {name: f"name: preview-{name.replace('_', '-')}\nseed: 4\nvariants: 3\nops:\n  - {op}\n"
                 for name, op in OPS.items()}
    return stacked_previews(pipelines, [str(IMAGE), "--tile", "150"], out)


if __name__ == "__main__":
    sys.exit(main())
