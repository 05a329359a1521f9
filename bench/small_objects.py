"""Issue 44's scene, measured: two 3000x2000 images holding 24 objects of 16-60 px (solid squares, truth in the
pixels), run through the shipped `detection-ssd` and `detection-small-objects` pipelines (PNG records); for each,
the records, the boxes they hold, how many are specks (a side of 4 px or less: the object resized away) and the
median box side, and the tiles block of the manifest. Counts, not timings.

    python -m bench.small_objects
"""
from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

COLOURS = {"car": (220, 40, 40), "person": (40, 190, 60), "boat": (40, 60, 220)}


def scene(root: Path) -> None:
    from tests.annotated import Img, scattered_squares, voc_job
    rng = np.random.default_rng(44)
    voc_job(str(root), [Img(f"big{i}.jpg", 2000, 3000, scattered_squares(rng, 12, 2000, 3000, (16, 60), 8, COLOURS),
                            background=(200, 200, 190)) for i in range(2)])


def main(argv=None) -> int:
    from augd.io.lite import decode_example, iter_records
    from augd.job import JobOptions, run_job
    from augd.schema import builtin_pipelines, load_pipeline
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        scene(root / "voc")
        for name in ("detection-ssd", "detection-small-objects"):
            spec = load_pipeline(builtin_pipelines()[name])
            spec = dataclasses.replace(spec, output=spec.output.model_copy(update={"format": "png"}))
            run_job(str(root / "voc"), spec, str(root / name), JobOptions(workers=2, executor="threads"))
            out = root / name / "voc"
            m = json.loads((out / "manifest.json").read_text())
            sides, n = [], 0
            for path in sorted(out.glob("*.tfrecord*")):
                for raw in iter_records(str(path)):
                    r, n = decode_example(raw), n + 1
                    h, w = r["image/height"], r["image/width"]
                    sides += [min((x1 - x0) * w, (y1 - y0) * h) for x0, y0, x1, y1 in zip(
                        r["image/object/bbox/xmin"], r["image/object/bbox/ymin"], r["image/object/bbox/xmax"],
                        r["image/object/bbox/ymax"])]
            sides = np.array(sides)
            print(f"{name}: {n} records, {len(sides)} boxes, {int((sides <= 4).sum())} specks of 4 px or less "
                  f"({(sides <= 4).mean():.0%}), median side {np.median(sides):.1f} px; objects "
                  f"{m['annotations']['objects']}; tiles {m.get('tiles')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
