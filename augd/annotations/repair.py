"""Near-miss annotations repaired by rule (`annotations.repair`), as the reader checks each one against its image
(augd.annotations.reading). What annotation tools and converters get slightly wrong, and what a user would fix by
hand the same way every time:

- clipped: a box, polygon point or labelled keypoint past the image's border by up to `border(side)` pixels
  (4 px, or 0.5 % of that side where that is more: 20 px on a 4000 px side) is clipped to the image. Within
  reading.SLACK (1 px, rounding) it always was, silently; further out it stays a rejection.
- duplicate: an object equal to an earlier one of its image (class, box, polygons, mask, keypoints, flags) is
  dropped: yolov5 drops duplicate label rows (6 % of Objects365's images held them).
- degenerate: a box of zero width or height (COCO's `bbox` [x, y, 0, h], YOLO's `w 0`) is dropped. A box
  that is inverted (VOC's xmax < xmin) is no near miss: it stays a rejection.

`repair: none` keeps the strict rules: each of these rejects its image. Every repair is counted per image and
reason (the manifest's annotations.repairs, `augd inspect`). TensorFlow-free.
"""
from __future__ import annotations

__all__ = ["BORDER_PX", "BORDER_SHARE", "REASONS", "REPAIR_MODES", "border", "summary", "without_duplicates"]

REPAIR_MODES = ("standard", "none")
REASONS = ("clipped", "duplicate", "degenerate")
#: the most a shape may pass a border and be clipped: BORDER_PX, or BORDER_SHARE of that side where more
BORDER_PX = 4.0
BORDER_SHARE = 0.005


def border(side: float) -> float:
    """How far past the border of a `side`-pixel side a shape may reach and be clipped."""
    return max(BORDER_PX, BORDER_SHARE * side)


def without_duplicates(objects: list, labels: list) -> tuple[list, list, int]:
    """(objects, their labels, how many were dropped): each object equal to an earlier one left out."""
    seen, kept, named = set(), [], []
    for obj, label in zip(objects, labels):
        key = repr(obj)   # Objects hold lists and dicts (an RLE): their repr is their value
        if key in seen:
            continue
        seen.add(key)
        kept.append(obj)
        named.append(label)
    return kept, named, len(objects) - len(kept)


def summary(repaired: dict) -> dict:
    """{image: {reason: n}} as the manifest and `augd check` write it: objects repaired, by reason, per image."""
    by_reason: dict[str, int] = {}
    for reasons in repaired.values():
        for k, n in reasons.items():
            by_reason[k] = by_reason.get(k, 0) + n
    return {"objects": sum(by_reason.values()), "by_reason": dict(sorted(by_reason.items())),
            "images": dict(sorted(repaired.items()))}
