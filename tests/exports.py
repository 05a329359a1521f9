"""Synthetic annotation-tool exports for tests (DOTA, YOLO-OBB, LabelMe, CVAT for images 1.1, Label Studio JSON):
images of solid shapes (tests/annotated.py draws them) and each tool's own file, written as the tool writes it.

A shape is tests.annotated's Shape (a box or a polygon) or a `Rot`: a rectangle of w x h turned `deg` clockwise
about its centre (cx, cy). Its corners are computed here, on their own (not by augd.annotations.shapes), so that a
test comparing augd's polygons with the pixels checks augd's corner arithmetic. A `Keyed` is a shape with
keypoints, each painted as a 4x4 dot of its own colour centred on it, and written as the tool writes keypoints
(CVAT: points grouped with the shape, or a skeleton; Label Studio: keypointlabels related to the region).
TensorFlow-free.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import numpy as np

from tests.annotated import Img, Shape, _write, _write_image, classes_of

__all__ = ["Keyed", "Rot", "corners", "cvat_job", "dota_job", "inside", "label_studio_job", "labelme_job", "paint",
           "yolo_obb_job"]


@dataclass(frozen=True)
class Rot:
    """A rotated rectangle; `.shape` is it as a polygon Shape (what draw() fills)."""
    cls: str
    cx: float
    cy: float
    w: float
    h: float
    deg: float
    colour: tuple = (255, 0, 0)

    @property
    def shape(self) -> Shape:
        return Shape(self.cls, corners(self), self.colour)


@dataclass(frozen=True)
class Keyed:
    """`inner` (a Shape or Rot; None: a CVAT skeleton framed by its points alone) with keypoints, each (name, x, y,
    visibility, RGB): 0 not labelled (CVAT's outside="1"; Label Studio leaves the point out), 1 occluded (CVAT's
    occluded="1"), 2 visible. `skeleton`: CVAT writes the points as a <skeleton> of that label, its children in
    reverse order (the <meta> order is the points' order here), grouped with `inner`; else as one-point <points>
    sharing `inner`'s group_id. `link`: how Label Studio ties a keypoint to its region: "relation" (region -> point),
    "back" (point -> region) or "parent" (the point's parentID)."""
    inner: object
    points: tuple
    skeleton: str = ""
    link: str = "relation"

    @property
    def shape(self):
        return None if self.inner is None else self.inner.shape if isinstance(self.inner, Rot) else self.inner


def corners(r: Rot) -> tuple:
    """The corners, top-left first before turning, clockwise as shown (y down)."""
    a = math.radians(r.deg)
    ux, uy = math.cos(a), math.sin(a)          # the rectangle's x axis, turned
    vx, vy = -math.sin(a), math.cos(a)         # its y axis
    return tuple((r.cx + sx * r.w / 2 * ux + sy * r.h / 2 * vx, r.cy + sx * r.w / 2 * uy + sy * r.h / 2 * vy)
                 for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1)))


def _drawn(img: Img, classes=None) -> Img:
    shapes = (s.shape if isinstance(s, (Rot, Keyed)) else s for s in img.shapes)
    return Img(img.name, img.h, img.w, tuple(s for s in shapes if s is not None), img.split, img.background)


def _shapes(img: Img) -> list:
    return [s if isinstance(s, (Rot, Keyed, Shape)) else Shape(*s) for s in img.shapes]


def inside(h: int, w: int, points) -> np.ndarray:
    """HxW bool: the pixels whose centres (x + 0.5, y + 0.5 in pixel edges) lie inside the polygon (even-odd)."""
    ys, xs = np.mgrid[0:h, 0:w] + 0.5
    hit = np.zeros((h, w), bool)
    n = len(points)
    for k in range(n):
        (xa, ya), (xb, yb) = points[k], points[(k + 1) % n]
        crosses = (ya > ys) != (yb > ys)
        with np.errstate(divide="ignore", invalid="ignore"):
            at = xa + (ys - ya) * (xb - xa) / (yb - ya)
        hit ^= crosses & (xs < at)
    return hit


def paint(img: Img) -> np.ndarray:
    """The image's RGB pixels: each shape's pixels (centre inside it) in its colour; boxes as tests.annotated."""
    rgb = np.empty((img.h, img.w, 3), np.uint8)
    rgb[:] = img.background
    for s in _drawn(img).shapes:
        s = s if isinstance(s, Shape) else Shape(*s)
        if s.is_polygon:
            rgb[inside(img.h, img.w, s.geom)] = s.colour
        else:
            x0, y0, x1, y1 = (int(v) for v in s.geom)
            rgb[y0:y1, x0:x1] = s.colour
    for s in img.shapes:   # the dots on top: a 4x4 square whose centre is the point
        for _, x, y, _, colour in s.points if isinstance(s, Keyed) else ():
            rgb[int(y) - 2:int(y) + 2, int(x) - 2:int(x) + 2] = colour
    return rgb


def _images(root: str, images, top: str) -> dict[str, Img]:
    """Each image painted under `top` (and its split folder); {relpath: image}."""
    out = {}
    for img in images:
        rel = "/".join(p for p in (top, img.split, img.name) if p)
        _write_image(os.path.join(root, rel), paint(img))
        out[rel] = img
    return out


def _quad(s) -> tuple:
    """A shape's 4 corners: a Rot's, a box's, or a 4-point polygon's."""
    if isinstance(s, Rot):
        return corners(s)
    if s.is_polygon:
        assert len(s.geom) == 4, "DOTA and YOLO-OBB shapes have 4 corners"
        return tuple(s.geom)
    x0, y0, x1, y1 = s.geom
    return (x0, y0), (x1, y0), (x1, y1), (x0, y1)


def dota_job(root: str, images, difficult=()) -> dict:
    """images/[<split>/] + labelTxt/[<split>/], DOTA v1.0 headers; `difficult`: class names marked difficult."""
    out = _images(root, images, "images")
    for rel, img in out.items():
        lines = ["imagesource:GoogleEarth", "gsd:0.146343590398"]
        for s in _shapes(img):
            lines.append(" ".join(f"{v:.3f}" for p in _quad(s) for v in p) + f" {s.cls} {int(s.cls in difficult)}")
        _write(os.path.join(root, "labelTxt", os.path.splitext(rel[len("images/"):])[0] + ".txt"), "\n".join(lines))
    return out


def yolo_obb_job(root: str, images) -> dict:
    """Ultralytics OBB: images/[<split>/] + labels/[<split>/], data.yaml's names; corners normalized."""
    out = _images(root, images, "images")
    names = classes_of([_drawn(i, None) for i in images])
    _write(os.path.join(root, "data.yaml"), "names: [" + ", ".join(names) + "]\n")
    for rel, img in out.items():
        lines = [f"{names.index(s.cls)} " + " ".join(f"{x / img.w:.6f} {y / img.h:.6f}" for x, y in _quad(s))
                 for s in _shapes(img)]
        _write(os.path.join(root, "labels", os.path.splitext(rel[len("images/"):])[0] + ".txt"), "\n".join(lines))
    return out


def labelme_job(root: str, images) -> dict:
    """A LabelMe JSON beside each image (under its split folder): rectangles, polygons, X-AnyLabeling's rotation."""
    out = _images(root, images, "")
    for rel, img in out.items():
        shapes = []
        for s in _shapes(img):
            if isinstance(s, Rot):
                shapes.append({"label": s.cls, "shape_type": "rotation", "points": [list(p) for p in corners(s)],
                               "direction": math.radians(s.deg), "group_id": None, "flags": {}})
            elif s.is_polygon:
                shapes.append({"label": s.cls, "shape_type": "polygon", "points": [list(p) for p in s.geom],
                               "group_id": None, "flags": {}})
            else:
                x0, y0, x1, y1 = s.geom
                shapes.append({"label": s.cls, "shape_type": "rectangle", "points": [[x1, y1], [x0, y0]],
                               "group_id": None, "flags": {}})
        doc = {"version": "5.4.1", "flags": {}, "shapes": shapes, "imagePath": os.path.basename(rel),
               "imageData": None, "imageHeight": img.h, "imageWidth": img.w}
        _write(os.path.join(root, os.path.splitext(rel)[0] + ".json"), json.dumps(doc, indent=2))
    return out


def _cvat_shape(s, group: str = "") -> str:
    """One shape as CVAT's dumper writes it (attributes in its order; group_id="n" when grouped)."""
    if isinstance(s, Rot):
        return (f'<box label="{s.cls}" source="manual" occluded="0" xtl="{s.cx - s.w / 2:.3f}" '
                f'ytl="{s.cy - s.h / 2:.3f}" xbr="{s.cx + s.w / 2:.3f}" ybr="{s.cy + s.h / 2:.3f}" '
                f'rotation="{s.deg % 360:.2f}" z_order="0"{group}></box>')
    if s.is_polygon:
        pts = ";".join(f"{x:.2f},{y:.2f}" for x, y in s.geom)
        return f'<polygon label="{s.cls}" source="manual" occluded="0" points="{pts}" z_order="0"{group}></polygon>'
    x0, y0, x1, y1 = s.geom
    return (f'<box label="{s.cls}" source="manual" occluded="0" xtl="{x0:.2f}" ytl="{y0:.2f}" xbr="{x1:.2f}" '
            f'ybr="{y1:.2f}" z_order="0"{group}><attribute name="x">y</attribute></box>')


def _cvat_keyed(s: Keyed, gid: int) -> list[str]:
    """A Keyed as CVAT writes it: its shape with a group_id, then its skeleton (each point outside or not) or its
    labelled points as one-point <points> of the same group."""
    group = f' group_id="{gid}"' if s.inner is not None else ""
    out = [] if s.inner is None else [_cvat_shape(s.inner, group)]
    if s.skeleton:
        kids = "".join(f'<points label="{n}" source="manual" outside="{int(v == 0)}" occluded="{int(v == 1)}" '
                       f'points="{x:.2f},{y:.2f}"></points>' for n, x, y, v, _ in reversed(s.points))
        return out + [f'<skeleton label="{s.skeleton}" source="manual" z_order="0"{group}>{kids}</skeleton>']
    return out + [f'<points label="{n}" source="manual" occluded="{int(v == 1)}" points="{x:.2f},{y:.2f}" '
                  f'z_order="0"{group}></points>' for n, x, y, v, _ in s.points if v]


def cvat_job(root: str, images, name: str = "annotations.xml") -> dict:
    """CVAT for images 1.1: annotations.xml at the root, the images under images/ (names relative to it),
    a Rot as a box with a rotation, the split as its subset; a Keyed's skeleton declared in <meta> (type skeleton,
    its points labels with a <parent>), its grouped points' labels as labels of type points."""
    out = _images(root, images, "images")
    classes = classes_of([_drawn(i, None) for i in images])
    keyed = [s for i in images for s in _shapes(i) if isinstance(s, Keyed)]
    labels = "".join(f"<label><name>{c}</name><color>#ff0000</color><type>any</type><attributes/></label>"
                     for c in classes)
    declared = set(classes)
    for s in keyed:
        if s.skeleton and s.skeleton not in declared:
            declared.add(s.skeleton)
            labels += (f"<label><name>{s.skeleton}</name><color>#00ff00</color><type>skeleton</type><attributes/>"
                       f"<svg>&lt;circle r=\"0.75\" cx=\"50\" cy=\"50\"&gt;&lt;/circle&gt;</svg></label>")
            labels += "".join(f"<label><name>{n}</name><color>#0000ff</color><type>points</type><attributes/>"
                              f"<parent>{s.skeleton}</parent></label>" for n, *_ in s.points)
        for n, *_ in () if s.skeleton else s.points:
            if n not in declared:
                declared.add(n)
                labels += f"<label><name>{n}</name><color>#0000ff</color><type>points</type><attributes/></label>"
    body = []
    for k, (rel, img) in enumerate(out.items()):
        subset = {"train": "Train", "val": "Validation", "test": "Test"}.get(img.split, "default")
        shapes = []
        for j, s in enumerate(_shapes(img)):
            shapes += _cvat_keyed(s, j + 1) if isinstance(s, Keyed) else [_cvat_shape(s)]
        body.append(f'<image id="{k}" name="{rel[len("images/"):]}" subset="{subset}" width="{img.w}" '
                    f'height="{img.h}">{"".join(shapes)}</image>')
    _write(os.path.join(root, name), f'<?xml version="1.0" encoding="utf-8"?>\n<annotations><version>1.1</version>'
                                     f'<meta><task><id>1</id><name>t</name><labels>{labels}</labels></task>'
                                     f'<dumped>2024-01-01</dumped></meta>{"".join(body)}</annotations>\n')
    return out


def _ls_region(s, img: Img, base: dict) -> dict:
    if isinstance(s, Rot):
        (x, y) = corners(s)[0]     # the turned top-left corner: Label Studio's anchor
        value = {"x": 100 * x / img.w, "y": 100 * y / img.h, "width": 100 * s.w / img.w,
                 "height": 100 * s.h / img.h, "rotation": s.deg % 360, "rectanglelabels": [s.cls]}
        return {**base, "type": "rectanglelabels", "value": value}
    if s.is_polygon:
        value = {"points": [[100 * x / img.w, 100 * y / img.h] for x, y in s.geom], "closed": True,
                 "polygonlabels": [s.cls]}
        return {**base, "type": "polygonlabels", "value": value}
    x0, y0, x1, y1 = s.geom
    value = {"x": 100 * x0 / img.w, "y": 100 * y0 / img.h, "width": 100 * (x1 - x0) / img.w,
             "height": 100 * (y1 - y0) / img.h, "rotation": 0, "rectanglelabels": [s.cls]}
    return {**base, "type": "rectanglelabels", "value": value}


def _ls_keyed(s: Keyed, j: int, img: Img, base: dict) -> list[dict]:
    """A Keyed's region, then each labelled point as a keypointlabels result (Label Studio has no occlusion flag)
    tied to the region by a relation result or its parentID."""
    out = [_ls_region(s.inner, img, base)]
    for m, (n, x, y, v, _) in enumerate(s.points):
        if not v:
            continue
        kid = f"k{j}_{m}"
        point = {**base, "id": kid, "type": "keypointlabels",
                 "value": {"x": 100 * x / img.w, "y": 100 * y / img.h, "width": 0.75, "keypointlabels": [n]}}
        if s.link == "parent":
            point["parentID"] = base["id"]
        out.append(point)
        if s.link != "parent":
            ends = (base["id"], kid) if s.link == "relation" else (kid, base["id"])
            out.append({"from_id": ends[0], "to_id": ends[1], "type": "relation", "direction": "right",
                        "labels": []})
    return out


def label_studio_job(root: str, images, name: str = "export.json") -> dict:
    """Label Studio's JSON export at the root, images under images/[<split>/] named as uploads (/data/upload/1/
    <8 hex>-<name>); percents of the image; a Rot as a rectangle turned about its top-left corner; a Keyed's points
    as keypointlabels related to its region."""
    out = _images(root, images, "images")
    tasks = []
    for k, (rel, img) in enumerate(out.items()):
        results = []
        for j, s in enumerate(_shapes(img)):
            base = {"id": f"r{j}", "from_name": "label", "to_name": "image", "original_width": img.w,
                    "original_height": img.h, "image_rotation": 0, "origin": "manual"}
            results += _ls_keyed(s, j, img, base) if isinstance(s, Keyed) else [_ls_region(s, img, base)]
        tasks.append({"id": k + 1, "data": {"image": f"/data/upload/1/{k:08x}-{os.path.basename(rel)}"},
                      "annotations": [{"id": k + 1, "completed_by": 1, "result": results, "was_cancelled": False}],
                      "predictions": []})
    _write(os.path.join(root, name), json.dumps(tasks, indent=1))
    return out
