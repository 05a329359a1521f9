#!/usr/bin/env python3
"""Regenerate docs/mixing.png: `augd preview` of one sample of augd/samples/detection under each partner op
(mosaic, mixup, cutmix, copy_paste, each then a flip), keyed by its path in that job (--root), so the tiles are the
records `augd run augd/samples/detection` writes with those pipelines, partners drawn from the job's own split.

    .venv/bin/python scripts/make_mixing_preview.py [OUT.png]
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from stacked_previews import stacked_previews  # noqa: E402

JOB = REPO / "augd" / "samples" / "detection"
OPS = {"mosaic": "mosaic: {size: [240, 320]}", "mixup": "mixup: {}", "cutmix": "cutmix: {area: [0.2, 0.4]}",
       "copy_paste": "copy_paste: {objects: [2, 3], partners: rare}"}


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "mixing.png"
    pipelines = {name: f"name: preview-{name.replace('_', '-')}\nseed: 4\nvariants: 3\n"
                       f"ops:\n  - {op}\n  - random_flip_left_right: {{}}\n" for name, op in OPS.items()}
    return stacked_previews(pipelines, [str(JOB / "JPEGImages" / "scene_001.jpg"), "--root", str(JOB), "--tile",
                                        "180"], out)


if __name__ == "__main__":
    sys.exit(main())
