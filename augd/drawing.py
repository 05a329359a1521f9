"""Boxes drawn on pictures (`augd preview`'s sheets, `augd inspect --dump`): a kept object's box solid, an ignored
one's (written with weight 0: augd.annotations.occlusion) dashed, so a glance tells the two apart; an oriented box
(image/object/obb/*) as its turned outline. OpenCV, loaded
only when something is drawn."""
from __future__ import annotations

from augd.lazycv import cv2

__all__ = ["box_outline", "corners_outline"]


def box_outline(image, box, colour, thickness: int = 1, dashed: bool = False) -> None:
    """Outline `box` (x0, y0, x1, y1: whole pixels, x1 and y1 included) on `image` in place: solid, or `dashed`
    (pieces three lines long, every other one drawn)."""
    x0, y0, x1, y1 = (int(v) for v in box)
    if not dashed:
        cv2.rectangle(image, (x0, y0), (x1, y1), colour, thickness)
        return
    corners_outline(image, ((x0, y0), (x1, y0), (x1, y1), (x0, y1)), colour, thickness, dashed=True)


def corners_outline(image, corners, colour, thickness: int = 1, dashed: bool = False) -> None:
    """Outline the closed polygon `corners` ((x, y), ... in whole pixels: an oriented box's 4) on `image` in place:
    solid, or `dashed` (pieces three lines long, every other one drawn)."""
    pts = [(int(round(x)), int(round(y))) for x, y in corners]
    if not dashed:
        import numpy as np
        cv2.polylines(image, [np.array(pts, np.int32)], True, colour, thickness, cv2.LINE_AA)
        return
    dash = 3 * max(thickness, 1)
    for a, c in zip(pts, pts[1:] + pts[:1]):
        n = max(int(max(abs(c[0] - a[0]), abs(c[1] - a[1])) // dash), 1)
        for i in range(0, n, 2):
            p = (a[0] + (c[0] - a[0]) * i // n, a[1] + (c[1] - a[1]) * i // n)
            q = (a[0] + (c[0] - a[0]) * min(i + 1, n) // n, a[1] + (c[1] - a[1]) * min(i + 1, n) // n)
            cv2.line(image, p, q, colour, thickness)
