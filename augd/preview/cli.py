"""`augd preview PIPELINE IMAGE... -o SHEET`: the verb's arguments (shared by augd/cli.py's sub-parser and
`python -m augd.preview`) and its body. Building the parser loads neither TensorFlow nor OpenCV."""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from augd import defaults
from augd.errors import SpecError
from augd.files import inside
from augd.lazycv import cv2
from augd.ops.base import REGISTRY
from augd.preview.render import render_sheet
from augd.preview.sheet import MAX_DEFAULT_VARIANTS, preview_rows, variant_count
from augd.tfenv import load_tensorflow_quietly

__all__ = ["add_preview_arguments", "cmd_preview", "main"]


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
    """`augd preview`'s arguments (augd/cli.py's sub-parser and main() share them)."""
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
                        "`augd run JOB_FOLDER` keys them), and a partner op draws its partners and annotations "
                        "from the job's plan (copy_paste needs it). Default: each image's file name, i.e. the "
                        "records of images placed directly in the job folder; partners from the sheet's images")
    p.add_argument("--seed", type=int, default=None, help="override the pipeline's seed (as `augd run --seed`)")
    p.add_argument("--max-pixels", type=int, default=defaults.MAX_PIXELS,
                   help=f"show larger images as refused, as a job rejects them (default {defaults.MAX_PIXELS})")


def _relpaths(images, root: str | None) -> list[str]:
    if root is None:
        return [os.path.basename(p) for p in images]
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
    from augd.schema import find_pipeline, load_pipeline
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
    if args.root is None and spec.ops and getattr(REGISTRY.get(spec.ops[0].name), "needs_boxes", False):
        # without the job, the sheet's images have no annotations: the op would paste nothing, silently
        from augd.annotations.layout import in_words
        print(f"{prog}: ops[0].{spec.ops[0].name} pastes annotated objects of the job's images: give --root "
              f"JOB_FOLDER, the annotated job ({in_words(objects=True)}) the images are in", file=sys.stderr)
        return 2
    try:
        n = variant_count(spec, args.variants)
        rels = _relpaths(args.images, args.root)
        from augd.engine import EngineOptions
        engine_options = EngineOptions.from_env()
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    if not getattr(args, "verbose", False):  # TensorFlow's start-up noise on CPU hosts (`augd -v` shows it)
        load_tensorflow_quietly()
    from augd.engine import Engine
    rows = preview_rows(spec, args.images, variants=n, relpaths=rels, max_pixels=args.max_pixels,
                        engine=Engine(engine_options), root=args.root)
    sheet = render_sheet(spec, rows, tile=args.tile, variants=n)
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
    what = f"{len(args.images)} image(s) in {len(rows)} rows of tiles" if spec.tile is not None else \
        f"{len(rows)} image(s)"
    print(f"{args.out}: {what} x (input + {n} variant(s)), {sheet.shape[1]}x{sheet.shape[0]} px; "
          f"{spec.name} sha256 {spec.sha256[:12]}, seeds keyed by "
          f"{'the path under ' + args.root if args.root else 'file name'}")
    return 1 if len(bad) == len(rows) else 0


def main(argv=None) -> int:
    """`python -m augd.preview ...`: the same verb as `augd preview`."""
    p = argparse.ArgumentParser(prog="augd preview", description="Draw a contact sheet of a pipeline's "
                                "variants of a few images, with the drawn parameters under each tile.")
    add_preview_arguments(p)
    return cmd_preview(p.parse_args(argv))
