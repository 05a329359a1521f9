"""`augd preview`: a contact sheet of what a pipeline does to a few images, before the job.

One row per input image: the input as the engine decodes it (upright, RGB), then N of its augmented variants,
each with what the plan drew for it written underneath (`rot +7.3°`, `flip LR`, `hue +0.080`, `one_of →
random_flip_up_down`, ops whose p coin said no as `skipped`). Every variant tile is THE record `augd run`
writes for that (image, relative path, variant): it comes from the job's own compiled graph
(augd.engine.Compiled.process), decoded as a reader decodes it, and the text comes from the same plan
(Compiled.explain). The sheet only letterboxes the tiles to one size.

The seed of a variant is keyed by the image's path relative to the job folder, so a preview shows a job's
records only for the same relative path. By default that is the file name (an image directly in the job
folder); `relpaths=` (the CLI's `--root JOB_FOLDER`) gives the paths of images inside class folders.

The module imports neither TensorFlow nor OpenCV until a sheet is made (the CLI builds its parser cheaply).
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field

import numpy as np

from augd import defaults
from augd.errors import Rejected, SpecError, tf_error_message
from augd.ops import REGISTRY
from augd.ops.words import size as _size

__all__ = ["MAX_DEFAULT_VARIANTS", "PreviewRow", "Tile", "add_preview_arguments", "cmd_preview", "contact_sheet",
           "describe_variant", "format_decisions", "letterbox", "main", "preview_rows", "render_sheet"]

#: Without --variants, a preview shows the pipeline's variants, at most this many.
MAX_DEFAULT_VARIANTS = 8
#: Sheet colours (RGB).
_BG, _CELL, _TEXT, _DIM, _BAD = (24, 24, 28), (48, 48, 54), (235, 235, 235), (140, 140, 150), (255, 120, 110)
_TITLE = (150, 200, 255)


@dataclass
class Tile:
    """One cell of the sheet before letterboxing. `image` is the exact pixels (None when there are none);
    `variant` is None for the input tile; `error` says why a tile has no image."""
    title: str
    image: np.ndarray | None = None
    lines: list[str] = field(default_factory=list)
    variant: int | None = None
    error: str | None = None


@dataclass
class PreviewRow:
    path: str
    relpath: str
    tiles: list[Tile]

    @property
    def error(self) -> str | None:
        return self.tiles[0].error


# ---- what the plan decided, in words ----

def format_decisions(decisions) -> list[str]:
    """Short lines for augd.engine.plan.Decision objects (Compiled.explain): what each op that the image
    reached drew, in its own words (Op.describe), indented under its composite; an op whose p coin said no
    is `LABEL: skipped (p=P)`; children a composite did not choose are left out."""
    lines = []
    for d in decisions:
        if not d.reached:
            continue
        pad = "  " * d.depth
        op = REGISTRY[d.name](d.params)  # the plan's own params: the op the graph ran
        if not d.applied:
            lines.append(f"{pad}{op.label}: skipped (p={d.params.p:g})")
        else:
            lines.extend(pad + s for s in op.describe(d))
    return lines


def describe_variant(compiled, relpath: str, variant: int, height: int, width: int) -> list[str]:
    """The drawn parameters of one variant as short lines, from the plan the job's graph receives for
    (relpath, variant) on an upright height × width image (augd.engine.Compiled.explain)."""
    return format_decisions(compiled.explain(relpath, variant, height, width))


# ---- tiles: the engine's own pixels ----

def _source(path: str, max_pixels: int):
    """(bytes, header) of an image file the way a job accepts it, or Rejected naming what is wrong."""
    from augd.formats import read_header
    from augd.io import check_header
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise Rejected("unreadable", f"cannot read: {exc.strerror or exc}") from None
    header = read_header(data)
    check_header(header, max_pixels)
    return data, header


def _decode_record(payload: bytes, fmt: str, height: int, width: int) -> np.ndarray:
    """A record's pixels as a reader gets them (augd.data decodes with tf.io.decode_image)."""
    if fmt == "raw":
        return np.frombuffer(payload, np.uint8).reshape(height, width, 3).copy()
    from augd.ops._tf import tf
    return tf.io.decode_image(payload, channels=3, expand_animations=False).numpy()


def _resolve_spec(spec):
    if isinstance(spec, (str, os.PathLike)):
        from augd.spec import find_pipeline, load_pipeline
        return load_pipeline(find_pipeline(os.fspath(spec)))
    return spec


def _variant_count(spec, variants: int | None) -> int:
    if variants is None:
        return min(spec.variants, MAX_DEFAULT_VARIANTS)
    if not 0 <= variants <= spec.variants:
        raise ValueError(f"variants={variants}: pipeline {spec.name!r} writes {spec.variants} augmented "
                         f"variant(s) per image; ask for 0 to {spec.variants}")
    return variants


def preview_rows(spec, image_paths, *, variants: int | None = None, relpaths=None,
                 max_pixels: int = defaults.MAX_PIXELS, compiled=None, engine=None) -> list[PreviewRow]:
    """The sheet's content before letterboxing: per image, the input tile (decoded, upright, as the graph
    decodes it) and one tile per variant 1..N holding exactly the pixels of the record `augd run` writes for
    (image, relpath, variant), with the drawn parameters as text. `relpaths` (default: each file's name) are
    the paths relative to the job folder the seeds are keyed by. A bad image gives a row whose input tile
    holds the reason instead of pixels. `compiled`: a Compiled of `spec` to reuse; else one is built by `engine`
    (default: an Engine with the default options)."""
    from augd.engine import Engine
    from augd.engine.decode import decode_full

    spec = _resolve_spec(spec)
    n = _variant_count(spec, variants)
    paths = [os.fspath(p) for p in image_paths]
    rels = [os.path.basename(p) for p in paths] if relpaths is None else [str(r) for r in relpaths]
    if len(rels) != len(paths):
        raise ValueError(f"{len(rels)} relpaths for {len(paths)} images")
    own = compiled is None
    compiled = (engine or Engine()).compile(spec) if own else compiled
    try:
        return [_row(compiled, spec, path, rel, n, max_pixels, decode_full) for path, rel in zip(paths, rels)]
    finally:
        if own:
            compiled.close()


def _row(compiled, spec, path, rel, n, max_pixels, decode_full) -> PreviewRow:
    from augd.ops._tf import tf
    try:
        data, header = _source(path, max_pixels)
        upright = decode_full(data, header.orientation).numpy()  # the graph's own decode, run eagerly
    except Rejected as exc:
        return PreviewRow(path, rel, [Tile(rel, error=str(exc))])
    except (tf.errors.OpError, ValueError) as exc:  # what TF's decoders raise for bad data
        return PreviewRow(path, rel, [Tile(rel, error=tf_error_message(exc))])
    h, w = upright.shape[:2]
    from augd.formats import passthrough_ok
    if not spec.keep_original:
        original = "v0: not written (keep_original)"
    elif spec.output.format != "raw" and passthrough_ok(header):  # as the job decides (augd.job.images.graph_variants)
        original = "v0: the file's own bytes"
    else:
        original = f"v0: re-encoded as {spec.output.format}"
    tiles = [Tile(rel, upright, [f"input {_size((h, w))}", original])]
    wanted = list(range(1, n + 1))
    results = compiled.process_many([(data, rel, v, header) for v in wanted])
    for v, r in zip(wanted, results):
        if isinstance(r, Exception):
            tiles.append(Tile(f"v{v}", variant=v, error=tf_error_message(r)))
            continue
        pixels = _decode_record(r.payload, spec.output.format, r.height, r.width)
        # The graph plans from the decoded upright size (re-planning if the header disagreed): so does this.
        tiles.append(Tile(f"v{v}  {_size((r.height, r.width))}", pixels,
                          describe_variant(compiled, rel, v, h, w), variant=v))
    return PreviewRow(path, rel, tiles)


# ---- the sheet ----

def letterbox(image: np.ndarray, tile: int, background=_CELL) -> np.ndarray:
    """`image` scaled to fit a tile × tile square (aspect kept; area-averaged when shrinking, bilinear when
    enlarging), centred on `background`."""
    import cv2
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
        import cv2
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


def render_sheet(spec, rows: list[PreviewRow], *, tile: int = 256, variants: int | None = None) -> np.ndarray:
    """Lay preview_rows() out as one RGB uint8 image: a header (pipeline name, sha256[:12], seed, output),
    then one row per image, every tile letterboxed to tile × tile with its text underneath."""
    import cv2
    spec = _resolve_spec(spec)
    pen = _Pen(tile)
    pad = max(6, tile // 32)
    good = [len(r.tiles) - 1 for r in rows if not r.error]
    cols = 1 + (_variant_count(spec, variants) if variants is not None or not good else max(good))
    text_lines = max([1 + len(t.lines) for r in rows for t in r.tiles] + [3])
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
            for k, s in enumerate(t.lines, 1):
                colour = _DIM if ("skipped" in s or s.endswith("(coin)") or s.startswith("v0:")) else _TEXT
                pen.write(sheet, pen.fit(s, tile), x0, ty + k * pen.line, colour)
    return sheet


def contact_sheet(spec, image_paths, *, variants: int | None = None, tile: int = 256, relpaths=None,
                  max_pixels: int = defaults.MAX_PIXELS, engine=None) -> np.ndarray:
    """The preview contact sheet as an RGB uint8 array: one row per image (the input, then variants 1..N,
    default the pipeline's `variants` capped at MAX_DEFAULT_VARIANTS), the drawn parameters under each tile.
    `spec`: a PipelineSpec, or a pipeline file / shipped pipeline name. `relpaths`: the images' paths
    relative to the job folder (default: their file names), which the seeds are keyed by."""
    spec = _resolve_spec(spec)
    if not 32 <= tile <= 2048:
        raise ValueError(f"tile={tile}: must be 32 to 2048 pixels")
    rows = preview_rows(spec, image_paths, variants=variants, relpaths=relpaths, max_pixels=max_pixels, engine=engine)
    return render_sheet(spec, rows, tile=tile, variants=_variant_count(spec, variants))


# ---- command line ----

def _positive_tile(value: str) -> int:
    try:
        v = int(value)
    except ValueError:
        v = 0
    if not 32 <= v <= 2048:
        raise argparse.ArgumentTypeError(f"must be a whole number of pixels from 32 to 2048; got {value!r}")
    return v


def _count(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0; got {value!r}")
    return int(value)


def add_preview_arguments(p: argparse.ArgumentParser) -> None:
    """`augd preview`'s arguments (cli.py's sub-parser and this module's main() share them)."""
    p.add_argument("pipeline", metavar="PIPELINE", help="pipeline YAML file, or a shipped pipeline name")
    p.add_argument("images", nargs="+", metavar="IMAGE", help="image files, one row each")
    p.add_argument("--out", "-o", required=True, metavar="SHEET",
                   help="contact sheet to write: .png, or .jpg/.jpeg")
    p.add_argument("--variants", "-n", type=_count, default=None, metavar="N",
                   help=f"augmented variants per image (default: the pipeline's, at most {MAX_DEFAULT_VARIANTS})")
    p.add_argument("--tile", type=_positive_tile, default=256, metavar="PX",
                   help="tile size in the sheet; images are letterboxed into it (default 256)")
    p.add_argument("--root", metavar="JOB_FOLDER",
                   help="the job folder the images are in: seeds are keyed by the path relative to it (as "
                        "`augd run JOB_FOLDER` keys them). Default: each image's file name, i.e. the records of "
                        "images placed directly in the job folder")
    p.add_argument("--seed", type=int, default=None, help="override the pipeline's seed (as `augd run --seed`)")
    p.add_argument("--max-pixels", type=int, default=defaults.MAX_PIXELS,
                   help=f"show larger images as refused, as a job rejects them (default {defaults.MAX_PIXELS})")


def _relpaths(images, root: str | None) -> list[str]:
    if root is None:
        return [os.path.basename(p) for p in images]
    from augd.files import inside
    base = os.path.realpath(root)
    out = []
    for p in images:
        if not inside(base, p):
            raise ValueError(f"{p}: not inside --root {root}")
        out.append(os.path.relpath(os.path.realpath(p), base).replace(os.sep, "/"))
    return out


def cmd_preview(args) -> int:
    """`augd preview PIPELINE IMAGE... -o SHEET`: 0 when the sheet is written (bad images shown as tiles
    saying why, and listed on stderr), 1 when no image could be previewed or the sheet cannot be written,
    2 for usage errors (invalid pipeline, bad arguments)."""
    from augd.spec import find_pipeline, load_pipeline
    prog = "augd preview"
    ext = os.path.splitext(args.out)[1].lower()
    if ext not in (".png", ".jpg", ".jpeg"):
        print(f"{prog}: --out {args.out}: write .png, .jpg or .jpeg (got {ext or 'no extension'!r})", file=sys.stderr)
        return 2
    try:
        spec = load_pipeline(find_pipeline(args.pipeline))
    except SpecError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    if args.seed is not None:
        spec = spec.with_seed(args.seed)
    try:
        n = _variant_count(spec, args.variants)
        rels = _relpaths(args.images, args.root)
        from augd.engine import EngineOptions
        engine_options = EngineOptions.from_env()
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    if not getattr(args, "verbose", False):  # TensorFlow's start-up noise on CPU hosts (`augd -v` shows it)
        from augd.tfenv import load_tensorflow_quietly
        load_tensorflow_quietly()
    from augd.engine import Engine
    rows = preview_rows(spec, args.images, variants=n, relpaths=rels, max_pixels=args.max_pixels,
                        engine=Engine(engine_options))
    sheet = render_sheet(spec, rows, tile=args.tile, variants=n)
    import cv2
    ok, buf = cv2.imencode(ext, np.ascontiguousarray(sheet[:, :, ::-1]),
                           [cv2.IMWRITE_JPEG_QUALITY, 92] if ext != ".png" else [cv2.IMWRITE_PNG_COMPRESSION, 6])
    try:
        if not ok:
            raise OSError("the encoder failed")
        with open(args.out, "wb") as fh:
            fh.write(buf.tobytes())
    except OSError as exc:
        print(f"{prog}: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    bad = [r for r in rows if r.error]
    for r in bad:
        print(f"{prog}: {r.path}: {r.error}", file=sys.stderr)
    print(f"{args.out}: {len(rows)} image(s) x (input + {n} variant(s)), {sheet.shape[1]}x{sheet.shape[0]} px; "
          f"{spec.name} sha256 {spec.sha256[:12]}, seeds keyed by "
          f"{'the path under ' + args.root if args.root else 'file name'}")
    return 1 if len(bad) == len(rows) else 0


def main(argv=None) -> int:
    """`python -m augd.preview ...`: the same verb as `augd preview`."""
    p = argparse.ArgumentParser(prog="augd preview", description="Draw a contact sheet of a pipeline's "
                                "variants of a few images, with the drawn parameters under each tile.")
    add_preview_arguments(p)
    return cmd_preview(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())


# ---- the daemon's sheet of its last job, from the records the job wrote ----

def row_from_outcome(spec, outcome, *, variants: int = 3, tile: int = 160) -> PreviewRow:
    """One sheet row from an image's ImageOutcome (its records as written: no second graph, no re-read of the
    input), the drawn parameters explained from the same plan. Tiles are letterboxed to `tile` at once, so
    a daemon keeps a few small thumbnails, not a job's records."""
    import cv2
    from augd.engine.plan import Program
    from augd.engine.seeds import image_seed
    from augd.io.lite import decode_example
    img, n = outcome.image, min(variants, spec.variants)
    h, w = img.header.height, img.header.width
    if img.header.orientation in (5, 6, 7, 8):
        h, w = w, h
    program = Program(spec.ops)
    tiles = [Tile(img.relpath, None, [f"input {_size((h, w))}", "v0: not written (keep_original)"])]
    for rec in outcome.records:
        ex = decode_example(rec)
        v = ex["augd/variant"]
        if v > n:
            continue
        payload = ex.get("image/encoded", ex.get("image/raw", b""))
        if ex["image/format"] == "raw":
            pixels = np.frombuffer(payload, np.uint8).reshape(ex["image/height"], ex["image/width"], 3)
        else:
            bgr = cv2.imdecode(np.frombuffer(payload, np.uint8), cv2.IMREAD_COLOR)
            pixels = None if bgr is None else bgr[:, :, ::-1]
        thumb = None if pixels is None else letterbox(pixels, tile)
        if v == 0:
            tiles[0] = Tile(img.relpath, thumb, [f"input {_size((h, w))}", "v0: written"])
        else:
            lines = format_decisions(program.explain(image_seed(spec.seed, img.relpath, v), h, w))
            tiles.append(Tile(f"v{v}  {_size((ex['image/height'], ex['image/width']))}", thumb, lines, variant=v))
    return PreviewRow(img.relpath, img.relpath, tiles)


def sheet_png(spec, rows: list[PreviewRow], *, variants: int = 3, tile: int = 160) -> bytes:
    import cv2
    sheet = render_sheet(spec, rows, tile=tile, variants=min(variants, spec.variants))
    ok, png = cv2.imencode(".png", np.ascontiguousarray(sheet[:, :, ::-1]))
    return png.tobytes() if ok else b""
