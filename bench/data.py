"""The benchmark's data set: real photographs shipped with scikit-image, cropped and rescaled at random so
nearly every image has its own shape (~0.5 MP on average), saved as JPEG q90 into two class folders.

Deterministic for a given (n, seed): the same files, byte for byte, on every run with the same OpenCV.
Built once into a cache folder (bench/.data/n<N>-s<seed>/) that later runs reuse.

    python -m bench.data --n 1000            # build (or reuse) and print the folder
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import warnings

import cv2
import numpy as np

__all__ = ["SOURCES", "CLASSES", "DEFAULT_CACHE", "DET_CLASSES", "build_dataset", "build_voc", "dataset_files",
           "dataset_stats", "link_tree", "voc_files"]

#: scikit-image's colour photographs (skimage.data function names). Any that is missing is skipped.
SOURCES = ("astronaut", "chelsea", "coffee", "rocket", "retina", "hubble_deep_field", "motorcycle_left",
           "motorcycle_right")
CLASSES = ("class_a", "class_b")
DEFAULT_CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".data")

#: Pixel count of each output image: uniform in this range (mean 0.55 MP).
MEGAPIXELS = (0.2, 0.9)
#: Crop window: this fraction of the source's area, with this width/height range (log-uniform).
CROP_AREA = (0.3, 1.0)
CROP_ASPECT = (0.6, 1.7)
JPEG_QUALITY = 90
#: Bump when the recipe changes, so old caches are not reused.
RECIPE = 2
#: The VOC copy (build_voc): random boxes of these classes, this many per image (uniform, mean 5), each side
#: this fraction of the image's; semantic masks are the boxes drawn as filled rectangles, in order.
DET_CLASSES = ("bicycle", "car", "cat", "dog", "person")
BOXES_PER_IMAGE = (3, 7)
BOX_SIDE = (0.08, 0.5)
VOC_RECIPE = 1


def _load_sources() -> list[tuple[str, np.ndarray]]:
    """(name, HxWx3 uint8 BGR) for every shipped photo that loads without a download."""
    import skimage.data

    def stereo(i):  # the motorcycle pair ships as one fetcher returning (left, right, disparity)
        return lambda: skimage.data.stereo_motorcycle()[i]

    special = {"motorcycle_left": stereo(0), "motorcycle_right": stereo(1)}
    out, skipped = [], []
    for name in SOURCES:
        fn = special.get(name) or getattr(skimage.data, name, None)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                img = fn() if fn else None
        except Exception as exc:  # noqa: BLE001 - a fetcher needing the network raises many types
            skipped.append(f"{name} ({type(exc).__name__})")
            continue
        if img is None or img.ndim != 3 or img.shape[2] < 3:
            skipped.append(f"{name} (not a colour image)")
            continue
        out.append((name, cv2.cvtColor(np.ascontiguousarray(img[..., :3]), cv2.COLOR_RGB2BGR)))
    if skipped:
        print(f"bench.data: skipped sources: {', '.join(skipped)}", file=sys.stderr)
    if not out:
        raise SystemExit("bench.data: none of the scikit-image photos could be loaded")
    return out


def _one_image(src: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random crop of `src`, rescaled to a random pixel count in MEGAPIXELS."""
    h, w = src.shape[:2]
    area = rng.uniform(*CROP_AREA) * h * w
    aspect = float(np.exp(rng.uniform(np.log(CROP_ASPECT[0]), np.log(CROP_ASPECT[1]))))
    cw = int(min(w, max(16, round(np.sqrt(area * aspect)))))
    ch = int(min(h, max(16, round(area / cw))))
    y = int(rng.integers(0, h - ch + 1))
    x = int(rng.integers(0, w - cw + 1))
    crop = src[y:y + ch, x:x + cw]
    pixels = rng.uniform(*MEGAPIXELS) * 1e6
    scale = np.sqrt(pixels / (cw * ch))
    ow, oh = max(16, round(cw * scale)), max(16, round(ch * scale))
    interp = cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC
    return cv2.resize(crop, (ow, oh), interpolation=interp)


def dataset_files(root: str) -> list[str]:
    """Every image of a built data set, relative to `root`, sorted."""
    return sorted(os.path.join(c, f) for c in CLASSES if os.path.isdir(os.path.join(root, c))
                  for f in os.listdir(os.path.join(root, c)) if f.endswith(".jpg"))


def dataset_stats(root: str) -> dict:
    with open(os.path.join(root, "dataset.json"), encoding="utf-8") as fh:
        return json.load(fh)


def build_dataset(n: int, seed: int = 0, cache: str = DEFAULT_CACHE, *, quiet: bool = False) -> str:
    """Build (or reuse) the data set of `n` images; returns its folder."""
    root = os.path.join(cache, f"n{n}-s{seed}")
    meta_path = os.path.join(root, "dataset.json")
    if os.path.exists(meta_path):
        meta = dataset_stats(root)
        if meta.get("recipe") == RECIPE and meta.get("images") == n and len(dataset_files(root)) == n:
            return root
    if os.path.exists(root):
        shutil.rmtree(root)
    tmp = root + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for c in CLASSES:
        os.makedirs(os.path.join(tmp, c))
    t0 = time.perf_counter()
    sources = _load_sources()
    rng = np.random.default_rng(seed)
    shapes, megapixels, total_bytes, used = set(), [], 0, {}
    for i in range(n):
        name, src = sources[int(rng.integers(len(sources)))]
        img = _one_image(src, rng)
        cls = CLASSES[int(rng.integers(len(CLASSES)))]
        ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        if not ok:
            raise RuntimeError(f"cv2.imencode failed for image {i}")
        with open(os.path.join(tmp, cls, f"{i:06d}-{name}.jpg"), "wb") as fh:
            fh.write(buf.tobytes())
        shapes.add(img.shape[:2])
        megapixels.append(img.shape[0] * img.shape[1] / 1e6)
        total_bytes += buf.size
        used[name] = used.get(name, 0) + 1
        if not quiet and (i + 1) % 250 == 0:
            print(f"bench.data: {i + 1}/{n} images", file=sys.stderr)
    meta = {"recipe": RECIPE, "images": n, "seed": seed, "distinct_shapes": len(shapes), "bytes": total_bytes,
            "sources": used, "jpeg_quality": JPEG_QUALITY, "megapixel_range": list(MEGAPIXELS),
            "opencv": cv2.__version__, "megapixels": {"mean": round(float(np.mean(megapixels)), 3),
                                                      "min": round(min(megapixels), 3),
                                                      "max": round(max(megapixels), 3)}}
    with open(os.path.join(tmp, "dataset.json"), "w", encoding="utf-8") as fh:
        json.dump(meta, fh, indent=2)
    os.rename(tmp, root)
    if not quiet:
        print(f"bench.data: built {n} images ({len(shapes)} distinct shapes, {total_bytes / 1e6:.1f} MB) "
              f"in {time.perf_counter() - t0:.1f} s -> {root}", file=sys.stderr)
    return root


def _voc_palette() -> list[int]:
    """VOC's colour map: the bits of each index spread over R, G and B (as the devkit's SegmentationClass/)."""
    out = []
    for i in range(256):
        r = g = b = 0
        for j in range(8):
            r |= ((i >> (3 * j)) & 1) << (7 - j)
            g |= ((i >> (3 * j + 1)) & 1) << (7 - j)
            b |= ((i >> (3 * j + 2)) & 1) << (7 - j)
        out += [r, g, b]
    return out


def _voc_xml(name: str, h: int, w: int, boxes: list[tuple[str, int, int, int, int]]) -> str:
    """VOC XML; boxes in pixel edges (x0, y0, x1, y1) are written 1-based and inclusive (xmin x0+1, xmax x1)."""
    objs = "".join(f"  <object><name>{c}</name><pose>Unspecified</pose><truncated>0</truncated><difficult>0"
                   f"</difficult>\n    <bndbox><xmin>{x0 + 1}</xmin><ymin>{y0 + 1}</ymin><xmax>{x1}</xmax><ymax>{y1}"
                   f"</ymax></bndbox></object>\n" for c, x0, y0, x1, y1 in boxes)
    return (f"<annotation>\n  <folder>JPEGImages</folder>\n  <filename>{name}</filename>\n  <size><width>{w}"
            f"</width><height>{h}</height><depth>3</depth></size>\n  <segmented>1</segmented>\n{objs}</annotation>\n")


def build_voc(data_dir: str, seed: int = 0, *, quiet: bool = False) -> str:
    """A Pascal VOC copy of a built data set, next to it (<data_dir>-voc/): the same photos (hard links) in
    JPEGImages/, Annotations/*.xml with BOXES_PER_IMAGE random boxes of DET_CLASSES each (seeded, inside the
    image), and SegmentationClass/*.png palette masks of class indices (the boxes as filled rectangles; index k+1
    for DET_CLASSES[k] in sorted order, 0 background). Built once; returns its folder."""
    from PIL import Image

    root = data_dir.rstrip(os.sep) + "-voc"
    meta_path = os.path.join(root, "voc.json")
    files = dataset_files(data_dir)
    if os.path.exists(meta_path):
        with open(meta_path, encoding="utf-8") as fh:
            meta = json.load(fh)
        if meta.get("recipe") == VOC_RECIPE and meta.get("images") == len(files):
            return root
    shutil.rmtree(root, ignore_errors=True)
    tmp = root + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for d in ("JPEGImages", "Annotations", "SegmentationClass"):
        os.makedirs(os.path.join(tmp, d))
    rng = np.random.default_rng([seed, 16])
    classes = sorted(DET_CLASSES)
    palette, boxes_total = _voc_palette(), 0
    for rel in files:
        name = os.path.basename(rel)
        stem = os.path.splitext(name)[0]
        src, dest = os.path.join(data_dir, rel), os.path.join(tmp, "JPEGImages", name)
        try:
            os.link(src, dest)
        except OSError:
            shutil.copyfile(src, dest)
        with Image.open(src) as im:  # the header only: the size
            w, h = im.size
        mask = np.zeros((h, w), np.uint8)
        boxes = []
        for _ in range(int(rng.integers(BOXES_PER_IMAGE[0], BOXES_PER_IMAGE[1] + 1))):
            cls = DET_CLASSES[int(rng.integers(len(DET_CLASSES)))]
            bw = max(2, int(rng.uniform(*BOX_SIDE) * w))
            bh = max(2, int(rng.uniform(*BOX_SIDE) * h))
            x0, y0 = int(rng.integers(0, w - bw + 1)), int(rng.integers(0, h - bh + 1))
            boxes.append((cls, x0, y0, x0 + bw, y0 + bh))
            mask[y0:y0 + bh, x0:x0 + bw] = classes.index(cls) + 1
        with open(os.path.join(tmp, "Annotations", stem + ".xml"), "w", encoding="utf-8") as fh:
            fh.write(_voc_xml(name, h, w, boxes))
        png = Image.fromarray(mask, "P")
        png.putpalette(palette)
        png.save(os.path.join(tmp, "SegmentationClass", stem + ".png"))
        boxes_total += len(boxes)
    meta = {"recipe": VOC_RECIPE, "images": len(files), "seed": seed, "boxes": boxes_total,
            "boxes_per_image": round(boxes_total / max(1, len(files)), 2), "classes": classes,
            "source": data_dir}
    with open(os.path.join(tmp, "voc.json"), "w", encoding="utf-8") as fh:
        json.dump(meta, fh, indent=2)
    os.rename(tmp, root)
    if not quiet:
        print(f"bench.data: VOC copy of {len(files)} images, {boxes_total} boxes -> {root}", file=sys.stderr)
    return root


def voc_files(voc_dir: str, parts: tuple[str, ...]) -> list[str]:
    """The files of a job over the VOC copy, relative to it, image by image: for each photo its JPEG and, per
    part ("xml", "png"), its annotation and its mask."""
    out = []
    for name in sorted(os.listdir(os.path.join(voc_dir, "JPEGImages"))):
        stem = os.path.splitext(name)[0]
        out.append(f"JPEGImages/{name}")
        if "xml" in parts:
            out.append(f"Annotations/{stem}.xml")
        if "png" in parts:
            out.append(f"SegmentationClass/{stem}.png")
    return out


def link_tree(src_root: str, dest: str, files: list[str], copies: int = 1, prefix: str = "") -> int:
    """A job folder at `dest` holding `files` of `src_root` `copies` times (hard links where the file system
    allows, else copies), each copy under its own file name so every record has its own relative path."""
    count = 0
    for k in range(copies):
        for rel in files:
            cls, name = os.path.split(rel)
            target = os.path.join(dest, cls, f"{prefix}r{k}-{name}")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            try:
                os.link(os.path.join(src_root, rel), target)
            except OSError:
                shutil.copyfile(os.path.join(src_root, rel), target)
            count += 1
    return count


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.data", description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="images (default 1000)")
    ap.add_argument("--seed", type=int, default=0, help="data set seed (default 0)")
    ap.add_argument("--cache", default=DEFAULT_CACHE, help="cache folder (default bench/.data)")
    args = ap.parse_args(argv)
    root = build_dataset(args.n, args.seed, args.cache)
    print(root)
    print(json.dumps(dataset_stats(root), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
