"""The chaos soak, longer (issue 23): one big job through `augd serve` on worker processes, with workers killed
several times, the resource tracker and the daemon once; the output compared byte for byte with the job run
without faults. Figures, no timing targets; it fails (exit 1) on any difference, loss or duplicate.

    python -m bench.chaos                          # 50,000 images, 6 worker kills
    python -m bench.chaos --images 10000 --kills 3 --seed 23 --json chaos.json

CI runs the same soak at 10,000 images (tests/test_chaos_soak.py; AUGD_SOAK_IMAGES and AUGD_SOAK_KILLS there).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from bench.common import write_json


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--images", type=int, default=50_000)
    ap.add_argument("--kills", type=int, default=6, help="worker processes killed with kill -9 (at least 2)")
    ap.add_argument("--seed", type=int, default=0, help="draws the moments of the kills")
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args(argv)
    from tests.chaos import soak
    with tempfile.TemporaryDirectory(prefix="augd-chaos-") as tmp:
        try:
            figures = soak(Path(tmp), images=args.images, worker_kills=max(2, args.kills), seed=args.seed)
        except AssertionError as exc:
            print(f"chaos soak FAILED: {exc}", file=sys.stderr)
            return 1
    print(json.dumps(figures, indent=2))
    if args.json:
        write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
