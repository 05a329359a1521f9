#!/usr/bin/env python3
"""Regenerate docs/mixing.png: `augd preview` of one sample of augd/samples/detection under each partner op
(mosaic, mixup, cutmix, copy_paste, each then a flip), keyed by its path in that job (--root), so the tiles are the
records `augd run augd/samples/detection` writes with those pipelines, partners drawn from the job's own split.

    .venv/bin/python scripts/make_mixing_preview.py [OUT.png]
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from augd.preview import main as preview  # noqa: E402

JOB = REPO / "augd" / "samples" / "detection"
OPS = {"mosaic": "mosaic: {size: [240, 320]}", "mixup": "mixup: {}", "cutmix": "cutmix: {area: [0.2, 0.4]}",
       "copy_paste": "copy_paste: {objects: [2, 3], partners: rare}"}


def main() -> int:
    import cv2
    import numpy as np
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "mixing.png"
    sheets = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, op in OPS.items():
            pipe, png = Path(tmp, f"{name}.yaml"), Path(tmp, f"{name}.png")
            pipe.write_text(f"name: preview-{name.replace('_', '-')}\nseed: 4\nvariants: 3\n"
                            f"ops:\n  - {op}\n  - random_flip_left_right: {{}}\n")
            rc = preview([str(pipe), str(JOB / "JPEGImages" / "scene_001.jpg"), "--root", str(JOB), "--tile", "180",
                          "-o", str(png)])
            if rc:
                return rc
            sheets.append(cv2.imread(str(png)))
    width = max(s.shape[1] for s in sheets)
    sheet = np.vstack([cv2.copyMakeBorder(s, 0, 0, 0, width - s.shape[1], cv2.BORDER_CONSTANT) for s in sheets])
    return 0 if cv2.imwrite(str(out), sheet, [cv2.IMWRITE_PNG_COMPRESSION, 9]) else 1


if __name__ == "__main__":
    sys.exit(main())
