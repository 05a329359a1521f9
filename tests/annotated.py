"""Synthetic annotated jobs for tests: images of solid coloured rectangles and polygons on a plain background, and
their annotations in every layout augd reads (VOC, COCO, YOLO, semantic masks), known exactly. TensorFlow-free.

An image is `Img(name, h, w, [shape, ...])`; a shape is `Shape(cls, geom, colour)` (or a plain tuple of those
three), geom a box (x0, y0, x1, y1) in pixel-edge units (integers: the pixels [x0, x1) x [y0, y1) get the colour)
or a polygon [(x, y), ...] (filled with OpenCV; its box is the points' extent). Each builder writes the images
(cv2.imwrite: PNG, or JPEG at quality 95 for names ending .jpg) and the annotation files, and returns
{image relpath: [(class, box), ...]}, the boxes in pixel-edge units, for the tests to compare with.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import cv2
import numpy as np

__all__ = ["Img", "Shape", "box_of", "boxes", "classes_of", "coco_job", "decoded", "draw", "masks_job",
           "region_box", "rle_compress", "rle_counts", "scattered_squares", "voc_job", "yolo_job"]

BACKGROUND = (255, 255, 255)


@dataclass(frozen=True)
class Shape:
    cls: str
    geom: tuple                       # (x0, y0, x1, y1), or a polygon ((x, y), ...)
    colour: tuple = (255, 0, 0)       # RGB
    difficult: bool = False           # VOC
    truncated: bool = False           # VOC
    crowd: bool = False               # COCO iscrowd
    rle: str | None = None            # COCO: "list" or "string" to write the shape as an RLE mask

    @property
    def is_polygon(self) -> bool:
        return len(self.geom) > 0 and isinstance(self.geom[0], (tuple, list))


@dataclass(frozen=True)
class Img:
    name: str                         # file name; its extension picks PNG or JPEG
    h: int
    w: int
    shapes: tuple = ()
    split: str = ""                   # "train", "val", "test" where the layout has splits
    background: tuple = BACKGROUND
    extra: dict = field(default_factory=dict, compare=False)

    def objects(self) -> list[Shape]:
        return [s if isinstance(s, Shape) else Shape(*s) for s in self.shapes]


def scattered_squares(rng, n: int, h: int, w: int, sides: tuple[int, int], gap: int,
                      colours: dict) -> tuple[Shape, ...]:
    """n squares, each of a side drawn from [sides[0], sides[1]] at a uniform place inside an h x w image, at least
    `gap` px from every other (each square its own connected region), their classes taking turns through `colours`
    (class -> RGB): small objects scattered over a large image, drawn from the numpy Generator `rng`."""
    shapes: list[Shape] = []
    while len(shapes) < n:
        s = int(rng.integers(sides[0], sides[1] + 1))
        x, y = int(rng.integers(0, w - s + 1)), int(rng.integers(0, h - s + 1))
        if all(x + s + gap <= b[0] or b[2] + gap <= x or y + s + gap <= b[1] or b[3] + gap <= y
               for b in (t.geom for t in shapes)):
            cls = list(colours)[len(shapes) % len(colours)]
            shapes.append(Shape(cls, (x, y, x + s, y + s), colours[cls]))
    return tuple(shapes)


def box_of(shape: Shape) -> tuple[float, float, float, float]:
    if shape.is_polygon:
        xs, ys = [p[0] for p in shape.geom], [p[1] for p in shape.geom]
        return float(min(xs)), float(min(ys)), float(max(xs)), float(max(ys))
    return tuple(float(v) for v in shape.geom)


def region_box(rgb: np.ndarray, colour, tol: int = 0) -> tuple[float, float, float, float]:
    """The pixel-edge extent of the pixels of `colour` in decoded pixels."""
    hit = np.all(np.abs(rgb.astype(int) - np.asarray(colour)) <= tol, axis=-1)
    ys, xs = np.nonzero(hit)
    return float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)


def decoded(path: str) -> np.ndarray:
    """An image file's RGB pixels as OpenCV decodes them."""
    return cv2.imread(path, cv2.IMREAD_COLOR)[:, :, ::-1]


def boxes(job, rel: str) -> list:
    """[(class, box), ...] of the image `rel` in an AnnotatedJob."""
    return [(o.name, o.box) for o in job.annotations[rel].objects]


def classes_of(images) -> list[str]:
    """Class names in order of first appearance: class k (0-based) is mask index k + 1."""
    out: list[str] = []
    for img in images:
        for s in img.objects():
            if s.cls not in out:
                out.append(s.cls)
    return out


def _region(h: int, w: int, shape: Shape) -> np.ndarray:
    """HxW bool of the pixels the shape covers."""
    m = np.zeros((h, w), np.uint8)
    if shape.is_polygon:
        cv2.fillPoly(m, [np.round(np.asarray(shape.geom, np.float64) * 16).astype(np.int32)], 1,
                     lineType=cv2.LINE_8, shift=4)
    else:
        x0, y0, x1, y1 = (int(v) for v in shape.geom)
        m[max(y0, 0):max(y1, 0), max(x0, 0):max(x1, 0)] = 1
    return m.astype(bool)


def draw(img: Img, classes: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(HxWx3 RGB pixels, HxW uint8 class-index mask: 0 background, class k of `classes` is k + 1)."""
    classes = classes or classes_of([img])
    rgb = np.empty((img.h, img.w, 3), np.uint8)
    rgb[:] = img.background
    mask = np.zeros((img.h, img.w), np.uint8)
    for s in img.objects():
        region = _region(img.h, img.w, s)
        rgb[region] = s.colour
        mask[region] = classes.index(s.cls) + 1
    return rgb, mask


def _write_image(path: str, rgb: np.ndarray) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    params = [cv2.IMWRITE_JPEG_QUALITY, 95] if path.lower().endswith((".jpg", ".jpeg")) else []
    assert cv2.imwrite(path, np.ascontiguousarray(rgb[:, :, ::-1]), params), path


def _write(path: str, text: str | bytes) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as f:
        f.write(text.encode("utf-8") if isinstance(text, str) else text)


def _stem(name: str) -> str:
    return os.path.splitext(name)[0]


def _write_mask(path: str, mask: np.ndarray, mode: str) -> None:
    """A class-index PNG: "P" (palette, VOC's colours, as SegmentationClass/) or "L" (grey)."""
    from PIL import Image

    os.makedirs(os.path.dirname(path), exist_ok=True)
    if mode == "L":
        assert cv2.imwrite(path, mask)
        return
    im = Image.fromarray(mask, "P")
    palette = []
    for i in range(256):  # VOC's colour map: bits of the index spread over R, G, B
        r = g = b = 0
        c = i
        for j in range(8):
            r |= ((c >> 0) & 1) << (7 - j)
            g |= ((c >> 1) & 1) << (7 - j)
            b |= ((c >> 2) & 1) << (7 - j)
            c >>= 3
        palette += [r, g, b]
    im.putpalette(palette)
    im.save(path)


def _expected(rel: str, img: Img) -> tuple[str, list]:
    return rel, [(s.cls, box_of(s)) for s in img.objects()]


def voc_xml(img: Img, *, size: tuple[int, int] | None = None) -> str:
    """VOC XML: 1-based inclusive pixel indices (edge box (x0, y0, x1, y1) -> xmin x0+1, xmax x1)."""
    w, h = size if size is not None else (img.w, img.h)
    objs = []
    for s in img.objects():
        x0, y0, x1, y1 = box_of(s)
        xmin, ymin, xmax, ymax = int(np.floor(x0)) + 1, int(np.floor(y0)) + 1, int(np.ceil(x1)), int(np.ceil(y1))
        objs.append(f"  <object>\n    <name>{s.cls}</name>\n    <pose>Unspecified</pose>\n"
                    f"    <truncated>{int(s.truncated)}</truncated>\n    <difficult>{int(s.difficult)}</difficult>\n"
                    f"    <bndbox><xmin>{xmin}</xmin><ymin>{ymin}</ymin><xmax>{xmax}</xmax><ymax>{ymax}</ymax>"
                    f"</bndbox>\n  </object>\n")
    return (f"<annotation>\n  <folder>JPEGImages</folder>\n  <filename>{img.name}</filename>\n"
            f"  <size><width>{w}</width><height>{h}</height><depth>3</depth></size>\n"
            f"  <segmented>0</segmented>\n{''.join(objs)}</annotation>\n")


def voc_job(root: str, images, *, beside: bool = False, masks: str | None = None, annotate=None) -> dict:
    """A Pascal VOC job: JPEGImages/ + Annotations/ (+ ImageSets/Main/<split>.txt when images have splits,
    + SegmentationClass/ palette masks when masks="P" or "L"), or beside=True: each .xml next to its image
    (images with a split go under <split>/). `annotate`: image names to annotate (default all; the others are
    negatives without an XML)."""
    images = list(images)
    classes = classes_of(images)
    out = {}
    splits: dict[str, list[str]] = {}
    for img in images:
        rgb, mask = draw(img, classes)
        if beside:
            rel = f"{img.split}/{img.name}" if img.split else img.name
            xml = _stem(rel) + ".xml"
        else:
            rel = f"JPEGImages/{img.name}"
            xml = f"Annotations/{_stem(img.name)}.xml"
            if img.split:
                splits.setdefault(img.split, []).append(_stem(img.name))
        _write_image(os.path.join(root, rel), rgb)
        if annotate is None or img.name in annotate:
            _write(os.path.join(root, xml), voc_xml(img))
        if masks and not beside:
            _write_mask(os.path.join(root, "SegmentationClass", _stem(img.name) + ".png"), mask, masks)
        out.update([_expected(rel, img)])
    for split, stems in splits.items():
        _write(os.path.join(root, "ImageSets", "Main", f"{split}.txt"), "".join(f"{s}\n" for s in stems))
    return out


def rle_counts(mask: np.ndarray) -> list[int]:
    """COCO's uncompressed RLE of a 0/1 mask: run lengths in column-major order, starting with zeros."""
    flat = np.asarray(mask, np.uint8).T.reshape(-1)
    counts, value, run = [], 0, 0
    for v in flat:
        if v == value:
            run += 1
        else:
            counts.append(run)
            value, run = int(v), 1
    counts.append(run)
    return counts


def rle_compress(counts: list[int]) -> str:
    """COCO's compressed counts string (maskApi.c rleToString)."""
    out = []
    for i, c in enumerate(counts):
        x = c - counts[i - 2] if i > 2 else c
        more = True
        while more:
            ch = x & 0x1F
            x >>= 5
            more = not ((x == 0 and not ch & 0x10) or (x == -1 and ch & 0x10))
            if more:
                ch |= 0x20
            out.append(chr(ch + 48))
    return "".join(out)


def coco_json(images, rels: list[str], *, categories: list[str] | None = None) -> dict:
    classes = categories or classes_of(images)
    data = {"info": {"description": "augd test"}, "images": [], "annotations": [],
            "categories": [{"id": i, "name": n, "supercategory": "thing"} for i, n in enumerate(classes, 1)]}
    for k, (img, rel) in enumerate(zip(images, rels), 1):
        data["images"].append({"id": k, "file_name": rel, "width": img.w, "height": img.h})
        for s in img.objects():
            x0, y0, x1, y1 = box_of(s)
            ann = {"id": len(data["annotations"]) + 1, "image_id": k, "category_id": classes.index(s.cls) + 1,
                   "bbox": [x0, y0, x1 - x0, y1 - y0], "area": (x1 - x0) * (y1 - y0), "iscrowd": int(s.crowd)}
            if s.rle:
                counts = rle_counts(_region(img.h, img.w, s))
                ann["segmentation"] = {"size": [img.h, img.w],
                                       "counts": counts if s.rle == "list" else rle_compress(counts)}
            elif s.is_polygon:
                ann["segmentation"] = [[float(v) for p in s.geom for v in p]]
            else:
                ann["segmentation"] = [[x0, y0, x1, y0, x1, y1, x0, y1]]
            data["annotations"].append(ann)
    return data


def coco_job(root: str, images, *, json_name: str = "instances.json", image_dir: str = "images") -> dict:
    """A COCO job: the images under `image_dir` (or <image_dir>/<split>/), one instances JSON at the root with
    file_name relative to the root; polygons as polygon segmentation, Shape(rle=...) as RLE."""
    images = list(images)
    rels = []
    for img in images:
        parts = [p for p in (image_dir, img.split, img.name) if p]
        rel = "/".join(parts)
        _write_image(os.path.join(root, rel), draw(img, classes_of(images))[0])
        rels.append(rel)
    _write(os.path.join(root, json_name), json.dumps(coco_json(images, rels)))
    return dict(_expected(rel, img) for img, rel in zip(images, rels))


def yolo_lines(img: Img, classes: list[str], *, polygons: bool = False) -> str:
    lines = []
    for s in img.objects():
        k = classes.index(s.cls)
        if polygons and s.is_polygon:
            lines.append(f"{k} " + " ".join(f"{x / img.w:.6f} {y / img.h:.6f}" for x, y in s.geom))
            continue
        x0, y0, x1, y1 = box_of(s)
        lines.append(f"{k} {(x0 + x1) / 2 / img.w:.6f} {(y0 + y1) / 2 / img.h:.6f} {(x1 - x0) / img.w:.6f} "
                     f"{(y1 - y0) / img.h:.6f}")
    return "".join(f"{ln}\n" for ln in lines)


def yolo_job(root: str, images, *, beside: bool = False, names: str = "classes.txt", polygons: bool = False,
             masks: str | None = None) -> dict:
    """A YOLO job: Ultralytics' images/[<split>/] + labels/[<split>/], or beside=True: each .txt next to its image;
    class names in classes.txt or data.yaml (names=); polygons=True writes polygon shapes as segment lines;
    masks="P"/"L" adds masks/ mirroring images/ (Ultralytics layout only)."""
    images = list(images)
    classes = classes_of(images)
    out = {}
    for img in images:
        sub = f"{img.split}/{img.name}" if img.split else img.name
        rel = sub if beside else f"images/{sub}"
        rgb, mask = draw(img, classes)
        _write_image(os.path.join(root, rel), rgb)
        txt = _stem(rel) + ".txt" if beside else f"labels/{_stem(sub)}.txt"
        _write(os.path.join(root, txt), yolo_lines(img, classes, polygons=polygons))
        if masks and not beside:
            _write_mask(os.path.join(root, "masks", _stem(sub) + ".png"), mask, masks)
        out.update([_expected(rel, img)])
    if names == "classes.txt":
        _write(os.path.join(root, "classes.txt"), "".join(f"{c}\n" for c in classes))
    else:
        _write(os.path.join(root, "data.yaml"), "path: .\ntrain: images/train\nval: images/val\n"
               f"nc: {len(classes)}\nnames:\n" + "".join(f"  {i}: {c}\n" for i, c in enumerate(classes)))
    return out


def masks_job(root: str, images, *, voc: bool = False, mode: str = "P") -> dict:
    """A semantic-mask job: images/ + masks/ (or voc=True: JPEGImages/ + SegmentationClass/), one class-index PNG
    per image, palette ("P") or grey ("L"). Returns {image relpath: HxW uint8 mask}."""
    images = list(images)
    classes = classes_of(images)
    out = {}
    top, masks = ("JPEGImages", "SegmentationClass") if voc else ("images", "masks")
    for img in images:
        sub = f"{img.split}/{img.name}" if img.split and not voc else img.name
        rgb, mask = draw(img, classes)
        _write_image(os.path.join(root, top, sub), rgb)
        _write_mask(os.path.join(root, masks, _stem(sub) + ".png"), mask, mode)
        out[f"{top}/{sub}"] = mask
    return out
