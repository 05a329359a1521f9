"""Boxes drawn on pictures (`augd preview`'s sheets, `augd inspect --dump`): a kept object's box solid, an ignored
one's (written with weight 0: augd.annotations.occlusion) dashed, so a glance tells the two apart. OpenCV, loaded
only when something is drawn."""
from __future__ import annotations

from augd.lazycv import cv2

__all__ = ["box_outline"]


def box_outline(image, box, colour, thickness: int = 1, dashed: bool = False) -> None:
    """Outline `box` (x0, y0, x1, y1: whole pixels, x1 and y1 included) on `image` in place: solid, or `dashed`
    (pieces three lines long, every other one drawn)."""
    x0, y0, x1, y1 = (int(v) for v in box)
    if not dashed:
        cv2.rectangle(image, (x0, y0), (x1, y1), colour, thickness)
        return
    dash = 3 * max(thickness, 1)
    for a, c in (((x0, y0), (x1, y0)), ((x1, y0), (x1, y1)), ((x1, y1), (x0, y1)), ((x0, y1), (x0, y0))):
        n = max(int(max(abs(c[0] - a[0]), abs(c[1] - a[1])) // dash), 1)
        for i in range(0, n, 2):
            p = (a[0] + (c[0] - a[0]) * i // n, a[1] + (c[1] - a[1]) * i // n)
            q = (a[0] + (c[0] - a[0]) * min(i + 1, n) // n, a[1] + (c[1] - a[1]) * min(i + 1, n) // n)
            cv2.line(image, p, q, colour, thickness)
