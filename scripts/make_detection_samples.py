#!/usr/bin/env python3
"""Write augd/samples/detection/: a small Pascal VOC detection job drawn by code (no download).

Each image is a soft grey gradient with 1-3 solid rectangles of three classes (red, green, blue); its
Annotations/<name>.xml gives their boxes in VOC's 1-based inclusive pixel indices, and ImageSets/Main says
which images are train and which val. The same seed always gives the same files, so the sample set is
reproducible:

    .venv/bin/python scripts/make_detection_samples.py [--out augd/samples/detection] [--images 8]
"""
from __future__ import annotations

import argparse
import os
import shutil
from xml.sax.saxutils import escape

import cv2
import numpy as np

#: Class name -> BGR colour (saturated, far apart: each region is easy to find again in a decoded image).
CLASSES = {"red": (40, 40, 220), "green": (60, 200, 60), "blue": (220, 90, 30)}


def draw_scene(seed: int, w: int = 160, h: int = 120) -> tuple[np.ndarray, list[tuple[str, tuple[int, ...]]]]:
    """(BGR image, [(class, (x0, y0, x1, y1))]) with boxes in pixel-edge units: the rectangle covers columns
    x0..x1-1 and rows y0..y1-1. Rectangles never overlap, so each box is exactly its region."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.clip(110 + 50 * xx / w + 30 * yy / h, 0, 255).astype(np.uint8)
    img = np.repeat(img[:, :, None], 3, axis=2)
    objects: list[tuple[str, tuple[int, ...]]] = []
    for _ in range(int(rng.integers(1, 4))):
        for _attempt in range(20):
            bw, bh = int(rng.integers(w // 6, w // 3)), int(rng.integers(h // 6, h // 3))
            x0, y0 = int(rng.integers(4, w - bw - 4)), int(rng.integers(4, h - bh - 4))
            box = (x0, y0, x0 + bw, y0 + bh)
            if all(box[2] + 3 <= b[0] or b[2] + 3 <= box[0] or box[3] + 3 <= b[1] or b[3] + 3 <= box[1]
                   for _, b in objects):
                break
        else:
            continue
        name = list(CLASSES)[int(rng.integers(0, len(CLASSES)))]
        img[box[1]:box[3], box[0]:box[2]] = CLASSES[name]
        objects.append((name, box))
    return img, objects


def voc_xml(filename: str, w: int, h: int, objects) -> str:
    """The VOC annotation of one image: 1-based inclusive pixel indices (pixel-edge x0 -> xmin x0 + 1)."""
    items = "".join(
        f"  <object>\n    <name>{escape(name)}</name>\n    <pose>Unspecified</pose>\n    <truncated>0</truncated>\n"
        f"    <difficult>0</difficult>\n    <bndbox>\n      <xmin>{x0 + 1}</xmin>\n      <ymin>{y0 + 1}</ymin>\n"
        f"      <xmax>{x1}</xmax>\n      <ymax>{y1}</ymax>\n    </bndbox>\n  </object>\n"
        for name, (x0, y0, x1, y1) in objects)
    return (f"<annotation>\n  <folder>JPEGImages</folder>\n  <filename>{escape(filename)}</filename>\n"
            f"  <size>\n    <width>{w}</width>\n    <height>{h}</height>\n    <depth>3</depth>\n  </size>\n"
            f"  <segmented>0</segmented>\n{items}</annotation>\n")


def write_voc(out: str, n: int) -> None:
    if os.path.isdir(out):
        shutil.rmtree(out)
    for sub in ("JPEGImages", "Annotations", os.path.join("ImageSets", "Main")):
        os.makedirs(os.path.join(out, sub))
    names = []
    for i in range(n):
        name = f"scene_{i:03d}"
        img, objects = draw_scene(1000 + i)
        h, w = img.shape[:2]
        assert cv2.imwrite(os.path.join(out, "JPEGImages", name + ".jpg"), img, [cv2.IMWRITE_JPEG_QUALITY, 95])
        with open(os.path.join(out, "Annotations", name + ".xml"), "w", encoding="utf-8") as fh:
            fh.write(voc_xml(name + ".jpg", w, h, objects))
        names.append(name)
    cut = max(1, n * 3 // 4)
    for split, part in (("train", names[:cut]), ("val", names[cut:])):
        with open(os.path.join(out, "ImageSets", "Main", f"{split}.txt"), "w", encoding="utf-8") as fh:
            fh.write("".join(f"{p}\n" for p in part))


def main() -> None:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(here, "augd", "samples", "detection"))
    ap.add_argument("--images", type=int, default=8)
    args = ap.parse_args()
    write_voc(args.out, args.images)
    print(f"wrote {args.images} images with VOC annotations to {args.out}")


if __name__ == "__main__":
    main()
