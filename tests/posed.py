"""Synthetic people for keypoint tests: each image holds one "person", its keypoints drawn as 5x5 dots of a colour
no other point, the background or a rotation's black fill can take, left and right points in different colours.
The truth is in the pixels: wherever a chain moves a point, its dot is there. Written as a COCO person-keypoints
job or an Ultralytics pose job. TensorFlow-free.
"""
from __future__ import annotations

import json
import os

import cv2
import numpy as np

__all__ = ["COLOURS", "FLIP", "NAMES", "SKELETON", "chirality", "coco_pose_job", "dot_centre", "people",
           "yolo_pose_job"]

NAMES = ("nose", "left_eye", "right_eye", "left_hand", "right_hand")
FLIP = (0, 2, 1, 4, 3)
SKELETON = ((0, 1), (0, 2), (1, 3), (2, 4))
#: Point index -> RGB: each channel 0 or 255, at least 255 away in some channel from every other and from the
#: greys of the background (90-150) and black.
COLOURS = ((255, 255, 0), (255, 0, 0), (0, 0, 255), (255, 0, 255), (0, 255, 255))
TOLERANCE = 70
DOT = 2                  # a dot covers the pixels within DOT of its centre pixel: 5x5


def people(n: int, h: int = 80, w: int = 96, seed: int = 0) -> list[tuple[np.ndarray, list]]:
    """[(RGB image, [(col, row) centre pixel of each point's dot, in NAMES order])] with one person each."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        img = np.empty((h, w, 3), np.uint8)
        img[:] = (90 + 60 * np.arange(w) / w).astype(np.uint8)[None, :, None]
        pts: list = []
        while len(pts) < len(NAMES):
            c, r = int(rng.integers(DOT + 2, w - DOT - 2)), int(rng.integers(DOT + 2, h - DOT - 2))
            if all(abs(c - a) > 2 * DOT + 6 or abs(r - b) > 2 * DOT + 6 for a, b in pts):
                pts.append((c, r))
        for (c, r), colour in zip(pts, COLOURS):
            img[r - DOT:r + DOT + 1, c - DOT:c + DOT + 1] = colour
        out.append((img, pts))
    return out


def _box(pts) -> list[float]:
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    return [min(xs) - DOT, min(ys) - DOT, max(xs) - min(xs) + 2 * DOT + 1, max(ys) - min(ys) + 2 * DOT + 1]


def _save(path: str, rgb: np.ndarray) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    cv2.imwrite(path, cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))


def coco_pose_job(root: str, scenes, *, hidden: dict | None = None) -> dict[str, list]:
    """A COCO person-keypoints job (images/pNN.png, person_keypoints.json) with a 1-based skeleton; `hidden`:
    {image index: [point index, ...]} written as not labelled (0, 0, 0). Returns {relpath: points}."""
    images, anns, truth = [], [], {}
    for k, (rgb, pts) in enumerate(scenes):
        rel = f"images/p{k:02d}.png"
        _save(os.path.join(root, rel), rgb)
        gone = set((hidden or {}).get(k, ()))
        flat = []
        for i, (c, r) in enumerate(pts):
            flat += [0, 0, 0] if i in gone else [c, r, 2]   # COCO: pixel indices
        images.append({"id": k + 1, "file_name": rel, "height": rgb.shape[0], "width": rgb.shape[1]})
        anns.append({"id": k + 1, "image_id": k + 1, "category_id": 1, "bbox": _box(pts), "iscrowd": 0,
                     "keypoints": flat, "num_keypoints": len(pts) - len(gone)})
        truth[rel] = pts
    doc = {"images": images, "annotations": anns,
           "categories": [{"id": 1, "name": "person", "keypoints": list(NAMES),
                           "skeleton": [[a + 1, b + 1] for a, b in SKELETON]}]}
    with open(os.path.join(root, "person_keypoints.json"), "w") as fh:
        json.dump(doc, fh)
    return truth


def yolo_pose_job(root: str, scenes, *, dims: int = 3) -> dict[str, list]:
    """An Ultralytics pose job: images/ + labels/, data.yaml with kpt_shape, flip_idx and kpt_names."""
    truth = {}
    for k, (rgb, pts) in enumerate(scenes):
        h, w = rgb.shape[:2]
        rel = f"images/p{k:02d}.png"
        _save(os.path.join(root, rel), rgb)
        x, y, bw, bh = _box(pts)
        fields = [0, (x + bw / 2) / w, (y + bh / 2) / h, bw / w, bh / h]
        for c, r in pts:
            fields += [(c + 0.5) / w, (r + 0.5) / h] + ([2] if dims == 3 else [])   # normalized, continuous
        os.makedirs(os.path.join(root, "labels"), exist_ok=True)
        with open(os.path.join(root, "labels", f"p{k:02d}.txt"), "w") as fh:
            fh.write(" ".join(f"{v:.6f}" if isinstance(v, float) else str(v) for v in fields) + "\n")
        truth[rel] = pts
    with open(os.path.join(root, "data.yaml"), "w") as fh:
        fh.write(f"names: [person]\nkpt_shape: [{len(NAMES)}, {dims}]\nflip_idx: {list(FLIP)}\n"
                 f"kpt_names: {list(NAMES)}\n")
    return truth


def _mask(rgb: np.ndarray, colour) -> np.ndarray:
    return (np.abs(rgb.astype(np.int32) - np.array(colour)) < TOLERANCE).all(axis=-1)


def dot_centre(rgb: np.ndarray, i: int, least: int = 9):
    """(x, y) in pixel-edge units of point i's dot (the centroid of its colour), or None when fewer than `least`
    of its pixels are in the image."""
    rows, cols = np.nonzero(_mask(rgb, COLOURS[i]))
    if len(rows) < least:
        return None
    return float(cols.mean()) + 0.5, float(rows.mean()) + 0.5


def chirality(centres, least_area: float = 150.0):
    """(the sign of the turn through the three found points that span the largest triangle, their indices), or
    None when no three found points span `least_area` px^2 (near a line, a few pixels of error could flip the
    sign): a mirror flips the sign, a rotation or a scale keeps it."""
    import itertools
    best = None
    for a, b, c in itertools.combinations([i for i, p in enumerate(centres) if p is not None], 3):
        (ax, ay), (bx, by), (cx, cy) = centres[a], centres[b], centres[c]
        cross = (bx - ax) * (cy - ay) - (by - ay) * (cx - ax)
        if best is None or abs(cross) > abs(best[0]):
            best = (cross, (a, b, c))
    if best is None or abs(best[0]) / 2 < least_area:
        return None
    return float(np.sign(best[0])), best[1]
