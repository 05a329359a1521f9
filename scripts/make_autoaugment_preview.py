#!/usr/bin/env python3
"""Regenerate docs/autoaugment.jpg: `augd preview` of each AutoAugment detection policy (v0-v3) on a sample of the
built-in detection job, with `--root` so that each tile holds the record `augd run` writes, its boxes drawn and
the sub-policy it drew written under it.

    .venv/bin/python scripts/make_autoaugment_preview.py [OUT.jpg]
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from stacked_previews import stacked_previews  # noqa: E402

ROOT = REPO / "augd" / "samples" / "detection"
IMAGE = ROOT / "JPEGImages" / "scene_004.jpg"


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "autoaugment.jpg"
    pipelines = {policy: f"name: autoaugment-{policy}\nseed: 7\nvariants: 6\nops:\n"
                         f"  - autoaugment: {{policy: {policy}}}\n" for policy in ("v0", "v1", "v2", "v3")}
    return stacked_previews(pipelines, [str(IMAGE), "--root", str(ROOT), "--tile", "180"], out)


if __name__ == "__main__":
    sys.exit(main())
