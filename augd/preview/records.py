"""The daemon's hook: a sheet of the last job's first images, made from the records the job wrote (no second
graph, no re-read of the input). The worker feeds a JobSheet each finished image (row_from_outcome) and takes
its PNG once the job is done (sheet_png); the status page shows it at /preview.png."""
from __future__ import annotations

import logging

import numpy as np

from augd.lazycv import cv2
from augd.ops.sampling import image_seed
from augd.ops.words import size
from augd.preview.render import letterbox, render_sheet
from augd.preview.sheet import PreviewRow, Tile, format_decisions

__all__ = ["JobSheet", "row_from_outcome", "sheet_png"]

log = logging.getLogger("augd.daemon")


class JobSheet:
    """The first `images` written images of a running job, as sheet rows; a picture for people, so nothing it
    does may fail the job (a row or a sheet that cannot be made is logged and left out)."""

    def __init__(self, spec, images: int):
        self.spec, self.images, self.rows = spec, images, []
        self._program = None   # the job's Program, built at the first row (its construction probes every op)

    def add(self, outcome) -> None:
        if not outcome.records or len(self.rows) >= self.images:
            return
        try:
            if self._program is None:
                from augd.engine.plan import Program
                self._program = Program(self.spec.ops)
            self.rows.append(row_from_outcome(self.spec, outcome, program=self._program))
        except Exception:  # noqa: BLE001
            log.warning("no preview of %s", outcome.image.relpath, exc_info=True)
            self.rows.append(None)  # tried: only the first images are drawn

    def png(self, job: str) -> bytes | None:
        """The sheet, None without rows (or when it cannot be drawn)."""
        rows = [r for r in self.rows if r is not None]
        if not rows:
            return None
        try:
            return sheet_png(self.spec, rows)
        except Exception:  # noqa: BLE001
            log.warning("job %s: no preview sheet", job, exc_info=True)
            return None


def row_from_outcome(spec, outcome, *, variants: int = 3, tile: int = 160, program=None) -> PreviewRow:
    """One sheet row from an image's ImageOutcome (its records as written), the drawn parameters explained from
    the same plan. Tiles are letterboxed to `tile` at once, so a daemon keeps a few small thumbnails, not a
    job's records. `program`: the spec's augd.engine.plan.Program, where the caller holds one."""
    from augd.engine.explain import explain
    from augd.engine.plan import Program
    from augd.io.lite import decode_example
    img, n = outcome.image, min(variants, spec.variants)
    h, w = img.header.height, img.header.width
    if img.header.orientation in (5, 6, 7, 8):
        h, w = w, h
    program = program if program is not None else Program(spec.ops)
    tiles = [Tile(img.relpath, None, [f"input {size((h, w))}"])]   # dropped below unless v0 was written
    seed_path, shown = img.relpath, None
    for rec in outcome.records:
        ex = decode_example(rec)
        v = ex["augd/variant"]
        if v > n:
            continue
        if "augd/tile/index" in ex:   # a tiled job: its first kept tile's records, drawn from that tile's plan
            if shown is None:
                shown = _tile_of(spec, ex)
                seed_path, (h, w) = shown.seed_path(img.relpath), (shown.out_h, shown.out_w)
                tiles[0] = Tile(f"{img.relpath} tile {shown.index}", None, [f"tile {size((h, w))}"])
            if ex["augd/tile/index"] != shown.index:
                continue
        payload = ex.get("image/encoded", ex.get("image/raw", b""))
        if ex["image/format"] == "raw":
            pixels = np.frombuffer(payload, np.uint8).reshape(ex["image/height"], ex["image/width"], 3)
        else:
            bgr = cv2.imdecode(np.frombuffer(payload, np.uint8), cv2.IMREAD_COLOR)
            pixels = None if bgr is None else bgr[:, :, ::-1]
        thumb = None if pixels is None else letterbox(pixels, tile)
        if v == 0:
            tiles[0] = Tile(tiles[0].title, thumb, [*tiles[0].lines, "v0: written"])
        else:
            lines = format_decisions(explain(program, image_seed(spec.seed, seed_path, v), h, w))
            tiles.append(Tile(f"v{v}  {size((ex['image/height'], ex['image/width']))}", thumb, lines, variant=v))
    if tiles[0].image is None and len(tiles) > 1:
        # The original is not written (keep_original: false), and the sheet is drawn from the records alone: no
        # empty tile for it. The first variant's title names the input instead.
        first = tiles.pop(0)
        tiles[0] = Tile(f"{img.relpath}: {tiles[0].title}", tiles[0].image, [*first.lines, *tiles[0].lines],
                        variant=tiles[0].variant)
    return PreviewRow(img.relpath, img.relpath, tiles)


def _tile_of(spec, ex: dict):
    """The augd.schema.tile.Tile a tiled record was cut from, by its keys."""
    from augd.schema.tile import tiles_of
    index = ex["augd/tile/index"]
    return next(t for t in tiles_of(spec.tile, ex["augd/tile/source_height"], ex["augd/tile/source_width"])
                if t.index == index)


def sheet_png(spec, rows: list[PreviewRow], *, variants: int = 3, tile: int = 160) -> bytes:
    """The rows drawn as one PNG; b"" if OpenCV cannot encode it (the worker then shows no sheet)."""
    sheet = render_sheet(spec, rows, tile=tile, variants=min(variants, spec.variants))
    ok, png = cv2.imencode(".png", np.ascontiguousarray(sheet[:, :, ::-1]))
    return png.tobytes() if ok else b""
