#!/usr/bin/env python3
"""Regenerate docs/oriented.jpg: `augd preview` of a tiled pipeline of oriented boxes (a rotation, a shear and a
flip after 512 px tiles) on a synthetic 1400x1000 DOTA-style aerial scene of small rotated rectangles (planes,
ships and vehicles in three saturated hues on a grey-beige ground), so the sheet shows each tile's objects with
their oriented boxes drawn as the records hold them; then the same job run for real (`augd run`, a subprocess),
its manifest's counts printed: images read, tiles cut and kept, records written, objects kept, ignored and dropped
by reason.

    .venv/bin/python scripts/make_obb_preview.py [OUT.jpg]
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from augd.preview import main as preview  # noqa: E402
from tests.annotated import Img  # noqa: E402
from tests.exports import Rot, dota_job  # noqa: E402

COLOURS = {"plane": (225, 35, 35), "ship": (35, 85, 225), "vehicle": (20, 170, 60)}   # none the outlines' yellow
#: length and width ranges (px) per class: long thin ships, squat vehicles
SIZES = {"plane": ((40, 64), (30, 46)), "ship": ((50, 90), (12, 20)), "vehicle": ((18, 28), (9, 14))}
H, W = 1000, 1400
PIPELINE = """name: oriented
seed: 4
variants: 2
output: {format: jpeg, quality: 90, shards: 2}
annotations: {format: dota, min_visibility: 0.3, min_size: 2}
tile: {size: 512, overlap: 0.2, empty: 0.2, full_image: 700}
ops:
  - random_rotation: {degrees: [-30, 30], fill: mean}
  - random_affine: {shear: [-12, 12], scale: [0.9, 1.1], fill: mean}
  - random_flip_left_right: {}
"""


def scene(i: int, n: int = 60) -> Img:
    """n rotated rectangles, each at least 4 px clear of the others, wherever they fall across the tiles; the
    second scene's right third bare (its tiles there empty: tile.empty's share of them kept)."""
    rng = np.random.default_rng(i)
    right = W - 50 if i == 0 else W * 0.6
    shapes: list[Rot] = []
    while len(shapes) < n:
        cls = list(COLOURS)[len(shapes) % len(COLOURS)]
        (l0, l1), (w0, w1) = SIZES[cls]
        r = Rot(cls, rng.uniform(50, right), rng.uniform(50, H - 50), rng.uniform(l0, l1), rng.uniform(w0, w1),
                rng.uniform(-90, 90), COLOURS[cls])
        if all(np.hypot(r.cx - o.cx, r.cy - o.cy) > np.hypot(r.w, r.h) / 2 + np.hypot(o.w, o.h) / 2 + 4
               for o in shapes):
            shapes.append(r)
    return Img(f"aerial_{i}.png", H, W, tuple(shapes), background=(196, 190, 172))


def texture(path: Path) -> None:
    """Ground-like shading and noise over the flat ground (as make_tiles_preview.py does)."""
    import cv2
    img = cv2.imread(str(path)).astype(np.float32)
    yy, xx = np.mgrid[0:img.shape[0], 0:img.shape[1]].astype(np.float32)
    shade = 16 * np.sin(xx / 150.0)[..., None] * np.cos(yy / 210.0)[..., None]
    noise = np.random.default_rng(ord(path.stem[-1])).normal(0, 3, img.shape)   # the same sheet every run
    cv2.imwrite(str(path), np.clip(img + shade + noise, 0, 255).astype(np.uint8))


def counts(manifest: dict) -> str:
    """The manifest's figures a tiled detection job is judged by, in a few lines."""
    ins, recs, tiles, ann = manifest["inputs"], manifest["records"], manifest["tiles"], manifest["annotations"]
    obj, per_class = ann["objects"], ", ".join(f"{c['name']} {c['objects_in']}" for c in ann["classes"])

    def why(reasons: dict) -> str:
        return f" ({', '.join(f'{k} {v}' for k, v in reasons.items())})" if reasons else ""
    return "\n".join([
        f"images: {ins['seen']} read, {ins['written']} written, {ins['rejected']} rejected",
        f"tiles: {tiles['tiles']} cut, {tiles['kept']} kept; {tiles['empty']} empty: {tiles['empty_kept']} kept, "
        f"{tiles['empty'] - tiles['empty_kept']} skipped; {tiles['objects_in_kept_tiles']} objects in the kept tiles "
        f"as cut; {tiles['full_images']} whole-image records",
        f"records: {recs['written']} written (variants {', '.join(map(str, recs['variants']))}) in "
        f"{len(manifest['shards'])} shards",
        f"objects: {obj['in']} read ({per_class}); {obj['out']} written over all records: {obj['kept']} kept, "
        f"{obj['ignored']} ignored{why(obj['ignored_by_reason'])}; {obj['dropped']} dropped"
        f"{why(obj['dropped_by_reason'])}"])


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "oriented.jpg"
    with tempfile.TemporaryDirectory() as tmp:
        job, pipeline = Path(tmp, "aerial"), Path(tmp, "oriented.yaml")
        dota_job(str(job), [scene(i) for i in range(2)])
        for path in (job / "images").glob("*.png"):
            texture(path)
        pipeline.write_text(PIPELINE)
        rc = preview([str(pipeline), str(job / "images" / "aerial_0.png"), "--root", str(job), "--tile", "256",
                      "-n", "2", "-o", str(out)])
        if rc:
            return rc
        print(f"{out}: {out.stat().st_size // 1024} KiB")
        run = subprocess.run([sys.executable, "-m", "augd", "run", str(job), "-p", str(pipeline), "-o",
                              str(Path(tmp, "out")), "--workers", "1", "--executor", "threads", "--quiet"],
                             capture_output=True, text=True, timeout=900)
        if run.returncode:
            print(run.stdout + run.stderr, file=sys.stderr)
            return run.returncode
        print(counts(json.loads(Path(tmp, "out", "aerial", "manifest.json").read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
