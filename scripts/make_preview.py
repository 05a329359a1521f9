#!/usr/bin/env python3
"""Regenerate docs/preview.png: `augd preview` of three shipped sample photos with the seed-classifier
pipeline (its 4 variants), keyed by their paths in augd/samples/demo, so the tiles are the records
`scripts/demo.sh` (`augd run augd/samples/demo --pipeline seed-classifier`) writes for them.

    .venv/bin/python scripts/make_preview.py [OUT.png]

Takes a few seconds on a CPU.
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from augd.preview import main as preview  # noqa: E402

DEMO = REPO / "augd" / "samples" / "demo"
IMAGES = ("animals_food/chelsea_1.jpg", "animals_food/coffee_1.jpg", "space/rocket_2.jpg")


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "preview.png"
    return preview(["seed-classifier", *(str(DEMO / name) for name in IMAGES), "--root", str(DEMO),
                    "--variants", "4", "--tile", "200", "-o", str(out)])


if __name__ == "__main__":
    sys.exit(main())
