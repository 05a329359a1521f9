"""`random_perspective`: a projective warp (Albumentations' Perspective, keep_size; torchvision's RandomPerspective).
One 3x3 matrix like every geometric op, so it fuses into the chain's one warp, and boxes, polygons and keypoints
go through it projectively (augd.annotations.geometry)."""
from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from augd.ops.base import Fill, GeometryOp, Kind, OpParams, range_of, register_op
from augd.ops.geometry import fill_field
from augd.ops.sampling import uniform

__all__ = ["RandomPerspective", "homography"]

#: A corner moves at most this share of its side: the quadrilateral stays convex and covers most of the image.
MAX_SHIFT = 0.45


def _normal(rng) -> float:
    """A standard normal draw from the image's generator (Box-Muller: two draws, always)."""
    u1, u2 = rng.random(), rng.random()
    return math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)


def homography(src, dst) -> np.ndarray:
    """The 3x3 matrix taking the four points `src` to the four points `dst` (the 8 x 8 linear system)."""
    rows, rhs = [], []
    for (x, y), (u, v) in zip(src, dst):
        rows += [[x, y, 1, 0, 0, 0, -u * x, -u * y], [0, 0, 0, x, y, 1, -v * x, -v * y]]
        rhs += [u, v]
    h = np.linalg.solve(np.array(rows, np.float64), np.array(rhs, np.float64))
    return np.append(h, 1.0).reshape(3, 3)


@register_op("random_perspective", Kind.GEOMETRY)
class RandomPerspective(GeometryOp):
    """Each corner of the image moves inward by a share of its side drawn from |N(0, sigma)| (sigma drawn from
    `scale` once per image, each share at most 0.45), and that quadrilateral is stretched back onto the frame:
    the view of the scene from another angle; size kept. The quadrilateral lies inside the image, so `fill`
    shows only at its edges' last half pixel."""
    label = "perspective"
    example = "- random_perspective: {scale: [0.05, 0.1]}"

    class Params(OpParams):
        scale: range_of(0.0, 0.3) = Field((0.05, 0.1), description="[low, high] sigma of each corner's shift, a "
                                                                   "share of the side (Albumentations' scale)")
        fill: Fill = fill_field()

    @property
    def fill(self):
        return self.params.fill

    def sample(self, rng, h, w):
        sigma = uniform(rng, *self.params.scale)
        dx, dy = [], []
        for _ in range(4):
            dx.append(min(abs(_normal(rng)) * sigma, MAX_SHIFT) * w)
            dy.append(min(abs(_normal(rng)) * sigma, MAX_SHIFT) * h)
        frame = [(0.0, 0.0), (w, 0.0), (w, h), (0.0, h)]   # pixel edges
        quad = [(dx[0], dy[0]), (w - dx[1], dy[1]), (w - dx[2], h - dy[2]), (dx[3], h - dy[3])]
        edges = homography(frame, quad)   # output edge coordinates -> input edge coordinates
        half = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])
        back = np.array([[1.0, 0.0, -0.5], [0.0, 1.0, -0.5], [0.0, 0.0, 1.0]])
        return back @ edges @ half, h, w   # the same in pixel centres, as every op's matrix is

    def describe(self, drawn):
        # the corners read back from the matrix the graph warps with: the largest shift, as a share of its side
        ih, iw = drawn.in_size
        m = drawn.matrix
        shifts = []
        for x, y in ((0.0, 0.0), (iw, 0.0), (iw, ih), (0.0, ih)):
            p = m @ np.array([x - 0.5, y - 0.5, 1.0])
            u, v = p[0] / p[2] + 0.5, p[1] / p[2] + 0.5
            shifts += [abs(u - x) / iw, abs(v - y) / ih]
        return [f"{self.label} corners in ≤{max(shifts):.0%}"]
