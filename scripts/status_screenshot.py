#!/usr/bin/env python3
"""Regenerate docs/status-page.png: the status page of a real `augd serve` (two jobs done, one failed, one held
half-way, two queued, one still settling), screenshotted by headless Chromium at 1200x900.

    .venv/bin/python scripts/status_screenshot.py [OUT.png]

Needs Chromium (Debian: apt-get install chromium; or set $AUGD_CHROMIUM). Takes about half a minute.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.test_status_page import find_chromium, run_chromium, scene  # noqa: E402


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "status-page.png"
    if not find_chromium():
        print("no Chromium found: install Debian's `chromium` package or set $AUGD_CHROMIUM", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="augd-screenshot-") as tmp:
        root = Path(tmp)
        with scene(root, done=("pets", "street-signs"), failed=(("scans-2024", "classify-heavy"),),
                   running="seed-photos", queued=("field-trial-07", "seed-classifier/batch-12"),
                   settling="drone-survey", progress_at=12, slow_images=40) as d:
            shot = root / "shot.png"
            run_chromium(d.url("/"), f"--screenshot={shot}", "--window-size=1200,1300")
            out.write_bytes(shot.read_bytes())
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
