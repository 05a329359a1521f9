"""`tile:` on the job's side: an image decoded once, cut into its tiles (augd/schema/tile.py), and the tiles kept.

Each kept tile goes to the job's graph as raw pixels of its own (augd.engine.rawpixels: a copy each way, as a mix's
canvas does), with its own seed path, so the rest of the chain runs on it as on any image and its variants are the
same on every executor. A detection job keeps every tile that holds an object (as cut, by the occlusion rule) and
each empty one by a seeded draw of `tile.empty`; the whole image, shrunk, is one more record when `full_image` asks.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from augd.engine.kernels import warp_np
from augd.io import InputImage
from augd.engine.hostdecode import as_raw, decode_upright
from augd.job.report import TileCounts
from augd.ops.sampling import coin, generator, image_seed
from augd.schema import PipelineSpec
from augd.schema.tile import Tile, tiles_of

__all__ = ["Cut", "TilePart", "cut_tiles"]


@dataclass(frozen=True)
class TilePart:
    """One kept tile, ready for the graph: the tile as an image (its seed path, its header), its pixels as raw pixels,
    and in a detection job its objects as cut (augd.annotations.objects.ImageObjects.of_tile)."""
    tile: Tile
    image: InputImage
    data: bytes
    objects: object = None


@dataclass(frozen=True)
class Cut:
    """An image's kept tiles, what was cut and kept, and the seconds decoding and cutting took."""
    parts: tuple[TilePart, ...]
    counts: TileCounts
    seconds: float
    height: int      # the upright source's, as decoded
    width: int


def cut_tiles(spec: PipelineSpec, img: InputImage, data: bytes, objects=None) -> Cut | None:
    """The image's kept tiles, the image decoded once for all of them; None when OpenCV cannot decode it.
    `objects` (augd.annotations.objects.ImageObjects): a detection job's, which decide the empty tiles."""
    t0 = time.perf_counter()
    pixels = decode_upright(data, img.header)
    if pixels is None:
        return None
    h, w = pixels.shape[:2]
    parts, n_empty, n_kept_empty, held, full = [], 0, 0, 0, 0
    tiles = tiles_of(spec.tile, h, w)
    for tile in tiles:
        path = tile.seed_path(img.relpath)
        mine = objects.of_tile(tile, dataclasses.replace(img, relpath=path)) if objects is not None else None
        n = mine.held() if mine is not None else 1
        if not tile.full and n == 0:
            n_empty += 1
            if not coin(generator(image_seed(spec.seed, path, -1)), spec.tile.empty):
                continue
            n_kept_empty += 1
        if tile.full:
            out = warp_np(pixels, tile.step[0], tile.out_h, tile.out_w, "nearest", "bilinear")
        else:
            out = pixels[tile.y0:tile.y1, tile.x0:tile.x1]   # a view: as_raw's one pass reads it in place
        raw, header = as_raw(out)
        image = dataclasses.replace(img, relpath=path, size=len(raw), header=header)
        if mine is not None:
            mine.img = image   # the tile as the graph decodes it (a partner op places it by its header)
        full += tile.full
        held += n if mine is not None and not tile.full else 0
        parts.append(TilePart(tile, image, raw, mine))
    counts = TileCounts(sum(not t.full for t in tiles), sum(not p.tile.full for p in parts), n_empty, n_kept_empty,
                        held, full)
    return Cut(tuple(parts), counts, time.perf_counter() - t0, h, w)
