"""Drawing a preview sheet: tiles letterboxed to one size, the text under each, a header naming the pipeline.
OpenCV only, and only once a sheet is drawn (importing this module loads neither it nor TensorFlow)."""
from __future__ import annotations

import os

import numpy as np

from augd import defaults
from augd.lazycv import cv2
from augd.preview.sheet import PreviewRow, preview_rows, resolve_spec, variant_count

__all__ = ["contact_sheet", "letterbox", "render_sheet"]

#: Sheet colours (RGB).
_BG, _CELL, _TEXT, _DIM, _BAD = (24, 24, 28), (48, 48, 54), (235, 235, 235), (140, 140, 150), (255, 120, 110)
_TITLE = (150, 200, 255)


def letterbox(image: np.ndarray, tile: int, background=_CELL) -> np.ndarray:
    """`image` scaled to fit a tile × tile square (aspect kept; area-averaged when shrinking, bilinear when
    enlarging), centred on `background`."""
    h, w = image.shape[:2]
    s = min(tile / h, tile / w)
    nh, nw = max(1, min(tile, round(h * s))), max(1, min(tile, round(w * s)))
    small = image if (nh, nw) == (h, w) else cv2.resize(
        np.ascontiguousarray(image), (nw, nh), interpolation=cv2.INTER_AREA if s < 1 else cv2.INTER_LINEAR)
    out = np.empty((tile, tile, 3), np.uint8)
    out[:] = background
    y, x = (tile - nh) // 2, (tile - nw) // 2
    out[y:y + nh, x:x + nw] = small
    return out


class _Pen:
    """OpenCV's Hershey font (no font files needed), ASCII only: `°` is drawn as a small ring, `×` and `→`
    become `x` and `->`."""

    def __init__(self, tile: int):
        self.cv2 = cv2
        self.font = cv2.FONT_HERSHEY_SIMPLEX
        self.scale = min(0.8, max(0.36, 0.42 * tile / 256))
        (_, self.cap), base = cv2.getTextSize("Ag", self.font, self.scale, 1)
        self.line = self.cap + base + max(4, round(self.cap * 0.55))
        self.ring = max(1, round(self.cap * 0.22))

    @staticmethod
    def _ascii(text: str) -> str:
        text = text.replace("×", "x").replace("→", "->").replace("−", "-")
        return text.encode("ascii", "replace").decode()

    def width(self, text: str) -> int:
        parts = text.split("°")
        w = sum(self.cv2.getTextSize(self._ascii(p), self.font, self.scale, 1)[0][0] for p in parts)
        return w + (len(parts) - 1) * (2 * self.ring + 3)

    def fit(self, text: str, width: int) -> str:
        if self.width(text) <= width:
            return text
        while text and self.width(text + "..") > width:
            text = text[:-1]
        return text + ".."

    def write(self, img, text: str, x: int, y: int, colour) -> None:
        """Text with its baseline at y."""
        parts = text.split("°")
        for k, part in enumerate(parts):
            part = self._ascii(part)
            self.cv2.putText(img, part, (x, y), self.font, self.scale, colour, 1, self.cv2.LINE_AA)
            x += self.cv2.getTextSize(part, self.font, self.scale, 1)[0][0]
            if k < len(parts) - 1:
                self.cv2.circle(img, (x + self.ring + 1, y - self.cap + self.ring + 1), self.ring, colour, 1,
                                self.cv2.LINE_AA)
                x += 2 * self.ring + 3

    def wrap(self, text: str, width: int) -> list[str]:
        out, cur = [], ""
        for word in text.split():
            trial = f"{cur} {word}".strip()
            if cur and self.width(trial) > width:
                out.append(cur)
                cur = word
            else:
                cur = trial
        return out + ([cur] if cur else [])


def caption_lines(pen: _Pen, lines, width: int) -> list[tuple[str, str]]:
    """(a line as drawn, the line it belongs to) for a tile's text: each line wrapped to `width`, not cut (a
    policy's sub-policy, `ShearY_BBox 1/2, TranslateY_Only_BBoxes 0.6/6`, is wider than a tile)."""
    return [(w, s) for s in lines for w in pen.wrap(s, width) or [""]]


def render_sheet(spec, rows: list[PreviewRow], *, tile: int = 256, variants: int | None = None) -> np.ndarray:
    """Lay preview_rows() out as one RGB uint8 image: a header (pipeline name, sha256[:12], seed, output),
    then one row per image, every tile letterboxed to tile × tile with its text underneath."""
    spec = resolve_spec(spec)
    pen = _Pen(tile)
    pad = max(6, tile // 32)
    good = [len(r.tiles) for r in rows if not r.error]   # the input (when it has a tile) and the variants drawn
    cols = max(good) if good else 1 + variant_count(spec, variants)

    def caption(t) -> list[tuple[str, str]]:
        return caption_lines(pen, t.lines, tile)
    text_lines = max([1 + len(caption(t)) for r in rows for t in r.tiles] + [3])
    cell_w, cell_h = tile, tile + pad + text_lines * pen.line
    by_name = all(r.relpath == os.path.basename(r.path) for r in rows)
    header = [f"augd preview   {spec.name}   sha256 {spec.sha256[:12]}   seed {spec.seed}   "
              f"{spec.variants} variant(s), output {spec.output.format}",
              "tiles: the records `augd run` writes; seeds keyed by " +
              ("file name (images at the job folder's root)" if by_name else "path in the job folder")]
    width = pad + cols * (cell_w + pad)
    header = [pen.fit(s, width - 2 * pad) for s in header]
    top = pad + len(header) * pen.line + pad
    sheet = np.empty((top + len(rows) * (cell_h + pad), width, 3), np.uint8)
    sheet[:] = _BG
    for k, s in enumerate(header):
        pen.write(sheet, s, pad, pad + pen.cap + k * pen.line, _TEXT if k == 0 else _DIM)
    for r, row in enumerate(rows):
        y0 = top + r * (cell_h + pad)
        for c, t in enumerate(row.tiles[:cols]):
            x0 = pad + c * (cell_w + pad)
            box = sheet[y0:y0 + tile, x0:x0 + tile]
            if t.image is not None:
                box[:] = letterbox(t.image, tile)
            elif t.error is None:  # nothing to show, and nothing wrong (an original the job does not write)
                box[:] = _CELL
            else:
                box[:] = _CELL
                cv2.rectangle(sheet, (x0, y0), (x0 + tile - 1, y0 + tile - 1), _BAD, 1)
                msg = pen.wrap(f"cannot preview: {t.error}", tile - 2 * pad)
                for k, s in enumerate(msg[: max(1, (tile - pad) // pen.line)]):
                    pen.write(sheet, pen.fit(s, tile - 2 * pad), x0 + pad, y0 + pad + pen.cap + k * pen.line, _BAD)
            ty = y0 + tile + pad + pen.cap
            pen.write(sheet, pen.fit(t.title, tile), x0, ty, _TITLE)
            for k, (w, s) in enumerate(caption(t), 1):
                colour = _DIM if ("skipped" in s or s.endswith("(coin)") or s.startswith("v0:")) else _TEXT
                pen.write(sheet, pen.fit(w, tile), x0, ty + k * pen.line, colour)
    return sheet


def contact_sheet(spec, image_paths, *, variants: int | None = None, tile: int = 256, relpaths=None,
                  max_pixels: int = defaults.MAX_PIXELS, engine=None) -> np.ndarray:
    """The preview contact sheet as an RGB uint8 array: one row per image (the input, then variants 1..N,
    default the pipeline's `variants` capped at MAX_DEFAULT_VARIANTS), the drawn parameters under each tile.
    `spec`: a PipelineSpec, or a pipeline file / shipped pipeline name. `relpaths`: the images' paths
    relative to the job folder (default: their file names), which the seeds are keyed by."""
    spec = resolve_spec(spec)
    if not 32 <= tile <= 2048:
        raise ValueError(f"tile={tile}: must be 32 to 2048 pixels")
    rows = preview_rows(spec, image_paths, variants=variants, relpaths=relpaths, max_pixels=max_pixels, engine=engine)
    return render_sheet(spec, rows, tile=tile, variants=variant_count(spec, variants))
