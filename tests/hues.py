"""Scenes of solid shapes, one hue per class on black, and their pixels as the tests of oriented boxes and polygons
judge them (tests/test_oriented_boxes.py, tests/test_polygon_keys.py). TensorFlow-free."""
from __future__ import annotations

import cv2
import numpy as np

__all__ = ["CLASSES", "HUES", "class_pixels", "coverage"]

#: one hue per class (OpenCV's H, 0-180), saturated, on a black background
CLASSES = {"red": (220, 0, 0), "yellow": (220, 220, 0), "green": (0, 220, 0), "blue": (0, 0, 220)}
HUES = {"red": 0, "yellow": 30, "green": 60, "blue": 120}


def class_pixels(rgb: np.ndarray) -> dict[str, np.ndarray]:
    """Each class' pixels by hue (saturated, at least half as bright as drawn: a warp's edge blends with black)."""
    hsv = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2HSV).astype(int)
    out = {}
    for cls, hue in HUES.items():
        d = np.abs(hsv[..., 0] - hue)
        out[cls] = (np.minimum(d, 180 - d) <= 8) & (hsv[..., 1] >= 150) & (hsv[..., 2] >= 110)
    return out


def coverage(rgb: np.ndarray, cls: str, piece: np.ndarray) -> float:
    """A piece's area in pixels as its pixels show it: each pixel of its hue within a pixel of it weighs what share
    of it the object covers (its brightness over the drawn one's: the scenes are drawn on black, so a warp's
    edge pixel is the object's colour scaled by its share). A count of the pixels past a threshold would give each
    edge pixel at the threshold a whole pixel (an upscale makes many exactly half)."""
    hsv = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2HSV).astype(np.float64)
    d = np.abs(hsv[..., 0] - HUES[cls])
    near = cv2.dilate(piece.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
    hue = (np.minimum(d, 180 - d) <= 8) & (hsv[..., 1] >= 150) & (hsv[..., 2] >= 8)
    return float(np.minimum(hsv[..., 2][near & hue] / max(CLASSES[cls]), 1.0).sum())
