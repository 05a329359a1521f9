#!/usr/bin/env python3
"""Regenerate docs/autoaugment.jpg: `augd preview` of each AutoAugment detection policy (v0-v3) on a sample of the
built-in detection job, with `--root` so that each tile holds the record `augd run` writes, its boxes drawn and
the sub-policy it drew written under it.

    .venv/bin/python scripts/make_autoaugment_preview.py [OUT.jpg]
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from augd.preview import main as preview  # noqa: E402

ROOT = REPO / "augd" / "samples" / "detection"
IMAGE = ROOT / "JPEGImages" / "scene_004.jpg"


def main() -> int:
    import cv2
    import numpy as np
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "autoaugment.jpg"
    sheets = []
    with tempfile.TemporaryDirectory() as tmp:
        for policy in ("v0", "v1", "v2", "v3"):
            pipe, png = Path(tmp, f"{policy}.yaml"), Path(tmp, f"{policy}.png")
            pipe.write_text(f"name: autoaugment-{policy}\nseed: 7\nvariants: 6\nops:\n"
                            f"  - autoaugment: {{policy: {policy}}}\n")
            rc = preview([str(pipe), str(IMAGE), "--root", str(ROOT), "--tile", "180", "-o", str(png)])
            if rc:
                return rc
            sheets.append(cv2.imread(str(png)))
    width = max(s.shape[1] for s in sheets)
    sheet = np.vstack([cv2.copyMakeBorder(s, 0, 0, 0, width - s.shape[1], cv2.BORDER_CONSTANT) for s in sheets])
    return 0 if cv2.imwrite(str(out), sheet, [cv2.IMWRITE_JPEG_QUALITY, 85]) else 1


if __name__ == "__main__":
    sys.exit(main())
