"""`tile:`: each image sliced into overlapping tiles, each tile a record of its own that the chain then runs on.

Small objects in large images vanish when a detector resizes the image; training on tiles (SAHI's slicing-aided
fine-tuning) keeps them. Where the tiles lie is a pure function of the image's upright size and this block, so
every executor cuts the same ones. TensorFlow-free.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Tile", "TileSpec", "source_path", "tiles_of", "tiles_of_header"]

_SEED_SUFFIX = re.compile(r"#(?:tile\d+|full)$")


def source_path(relpath: str) -> str:
    """The image a tile's seed path (Tile.seed_path) was cut from; any other path as it is."""
    return _SEED_SUFFIX.sub("", relpath)


class TileSpec(BaseModel):
    """How each image is sliced: tiles of `size` (or a `grid` of rows and columns) that share `overlap` of their
    side with their neighbours, the last one flush with the image's edge."""
    model_config = ConfigDict(extra="forbid", frozen=True)

    size: int | tuple[int, int] | None = Field(
        None, description="a tile's [height, width] in pixels, or one number for square tiles (an image smaller "
                          "than a tile on a side gives tiles as large as it there)")
    grid: tuple[int, int] | None = Field(None, description="[rows, columns] instead of size: the tiles then cover "
                                                           "the image in that many, whatever its size")
    overlap: float = Field(0.2, ge=0.0, le=0.9, description="share of a tile's side that its neighbour also "
                                                            "covers (SAHI's overlap ratio)")
    empty: float = Field(0.1, ge=0.0, le=1.0, description="share of the tiles with no object left in them that "
                                                          "are kept, each by its own seeded draw (detection jobs; "
                                                          "a classification job keeps every tile)")
    full_image: int | None = Field(None, ge=16, le=16384, description="also write the whole image, its longer "
                                   "side shrunk to this many pixels (never enlarged), as one more record "
                                   "(SAHI's full-image pass)")

    @model_validator(mode="after")
    def _one_of_size_and_grid(self):
        if (self.size is None) == (self.grid is None):
            raise ValueError(f"give exactly one of size (pixels) and grid ([rows, columns]); got size: "
                             f"{_shown(self.size)}, grid: {_shown(self.grid)}")
        if self.size is not None and not all(16 <= s <= 16384 for s in self.sides):
            raise ValueError(f"size must be 16 to 16384 pixels a side; got {self.size}")
        if self.grid is not None and not all(1 <= n <= 64 for n in self.grid):
            raise ValueError(f"grid must be 1 to 64 rows and columns; got {list(self.grid)}")
        return self

    @property
    def sides(self) -> tuple[int, int]:
        return (self.size, self.size) if isinstance(self.size, int) else tuple(self.size)

    def normalized(self) -> dict:
        return self.model_dump(mode="json")


@dataclass(frozen=True)
class Tile:
    """One tile of an image: its window [x0, x1) x [y0, y1) of the upright source, its place in the grid
    (`index`, row-major; -1 for the whole image) and the size it is stored at (the window's, or the whole
    image's shrunk size)."""
    index: int
    x0: int
    y0: int
    x1: int
    y1: int
    out_h: int
    out_w: int

    @property
    def full(self) -> bool:
        return self.index < 0

    @property
    def scale(self) -> float:
        """Record pixels per source pixel (1 for a tile)."""
        return self.out_w / (self.x1 - self.x0)

    @property
    def step(self) -> tuple[np.ndarray, float, float]:
        """The tile as an annotation step (Program.geometry's form): output pixel -> source pixel, half-pixel
        centres (augd.ops.geometry.window)."""
        sx, sy = (self.x1 - self.x0) / self.out_w, (self.y1 - self.y0) / self.out_h
        m = np.array([[sx, 0, self.x0 + 0.5 * sx - 0.5], [0, sy, self.y0 + 0.5 * sy - 0.5], [0, 0, 1]], np.float64)
        return m, float(self.out_h), float(self.out_w)

    def seed_path(self, relpath: str) -> str:
        """The path its variants' seeds are keyed by: each tile draws its own (source_path undoes it)."""
        return f"{relpath}#full" if self.full else f"{relpath}#tile{self.index}"

    def record_keys(self, h: int, w: int) -> dict:
        """make_example's `tile`: where the record's pixels lie in the upright source (docs/pipelines.md#tile)."""
        return {"index": self.index, "x": self.x0, "y": self.y0, "scale": self.scale, "source_height": h,
                "source_width": w}


def _shown(v):
    return list(v) if isinstance(v, tuple) else v


def _starts(length: int, side: int, overlap: float) -> list[int]:
    """Starts along one axis of tiles `side` long (at most the axis) overlapping by `overlap`, the last flush."""
    side = min(side, length)
    if side >= length:
        return [0]
    stride = max(1, round(side * (1.0 - overlap)))
    n = math.ceil((length - side) / stride) + 1
    return [min(k * stride, length - side) for k in range(n)]


def _grid_side(length: int, n: int, overlap: float) -> int:
    """The side of n tiles overlapping by `overlap` that cover `length`."""
    n = min(n, length)
    return length if n <= 1 else min(length, math.ceil(length / (n - (n - 1) * overlap)))


def _grid_starts(length: int, n: int, side: int) -> list[int]:
    n = min(n, length)
    if n <= 1 or side >= length:
        return [0]
    return [round(k * (length - side) / (n - 1)) for k in range(n)]


def tiles_of(spec: TileSpec, h: int, w: int) -> tuple[Tile, ...]:
    """An upright h x w image's tiles, row-major, then the whole image when `full_image` asks for it (and it is
    not already the one tile)."""
    if spec.size is not None:
        th, tw = (min(s, n) for s, n in zip(spec.sides, (h, w)))
        ys, xs = _starts(h, th, spec.overlap), _starts(w, tw, spec.overlap)
    else:
        th, tw = _grid_side(h, spec.grid[0], spec.overlap), _grid_side(w, spec.grid[1], spec.overlap)
        ys, xs = _grid_starts(h, spec.grid[0], th), _grid_starts(w, spec.grid[1], tw)
    out = [Tile(r * len(xs) + c, x, y, x + tw, y + th, th, tw) for r, y in enumerate(ys) for c, x in enumerate(xs)]
    s = min(1.0, spec.full_image / max(h, w)) if spec.full_image is not None else 1.0
    if spec.full_image is not None and not (len(out) == 1 and s == 1.0):   # else the one tile is the whole image
        out.append(Tile(-1, 0, 0, w, h, max(1, round(h * s)), max(1, round(w * s))))
    return tuple(out)


def tiles_of_header(spec: TileSpec, height: int, width: int, orientation: int = 1) -> tuple[Tile, ...]:
    """tiles_of for an image as its header gives it (EXIF orientations 5-8 swap the stored sides): what batching,
    memory and the cost model count; the job cuts from the decoded size."""
    h, w = (width, height) if orientation in (5, 6, 7, 8) else (height, width)
    return tiles_of(spec, max(1, h), max(1, w))
