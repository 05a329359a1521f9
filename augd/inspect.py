"""`augd inspect`: what is in a TFRecord file or an output folder, and a way to look at the images. Detection
records also get their objects counted per class and per image, and `--dump` draws their boxes (with class names)
and mask overlays onto the images it writes."""
from __future__ import annotations

import collections
import colorsys
import json
import os
import statistics

from augd.drawing import box_outline, corners_outline
from augd.io.jobfs import is_url
from augd.io.lite import OBB_KEYS, POLYGON_KEYS, decode_example, iter_records
from augd.io.objects import polygon_rings
from augd.lazycv import cv2

__all__ = ["inspect_paths"]

_REPAIRS_SHOWN = 10   # images whose repairs inspect lists by name


def _shards(path: str) -> list[str]:
    if is_url(path):  # object stores need tf.io.gfile
        import tensorflow as tf
        isdir, listdir, exists = tf.io.gfile.isdir, tf.io.gfile.listdir, tf.io.gfile.exists
    else:
        isdir, listdir, exists = os.path.isdir, os.listdir, os.path.exists
    if isdir(path):
        files = sorted(f for f in listdir(path) if ".tfrecord" in f)
        if not files:
            raise ValueError(f"{path}: no *.tfrecord files in this folder")
        return [os.path.join(path, f) for f in files]
    if not exists(path):
        raise ValueError(f"{path}: no such file or folder")
    return [path]


def _readers(path: str):
    """(records of a shard, its parser): without TensorFlow for local files, so inspect answers at once."""
    if is_url(path):
        from augd.io import parse_example, read_records  # loads TensorFlow: only for a URL
        return read_records, parse_example
    return iter_records, decode_example


def inspect_paths(paths, *, dump=None, out) -> int:
    n_dump, dump_dir = (int(dump[0]), dump[1]) if dump else (0, None)
    if dump_dir:
        os.makedirs(dump_dir, exist_ok=True)
    dumped = 0
    for path in paths:
        shards = _shards(path)
        read_records, parse_example = _readers(path)
        keys: set = set()
        labels: collections.Counter = collections.Counter()
        formats: collections.Counter = collections.Counter()
        variants: collections.Counter = collections.Counter()
        heights, widths, sizes = [], [], []
        objects: collections.Counter = collections.Counter()   # (label id, class text) -> objects
        ignored: collections.Counter = collections.Counter()   # why -> objects ignored (weight 0)
        boxes_per_image: list[int] = []                          # detection records only
        masked = 0
        points: list[int] = []                                   # keypoint records: labelled points each
        oriented = [0, 0]                                        # oriented boxes, and the records holding them
        polygons = [0, 0, 0]                                     # rings, objects with one, records with the keys
        skeleton = _skeleton(shards)
        per_shard = []
        for shard in shards:
            n = 0
            for rec in read_records(shard):
                ex = parse_example(rec)
                n += 1
                keys.update(ex)
                labels[(ex.get("image/class/label"), ex.get("image/class/text", ""))] += 1
                formats[ex.get("image/format")] += 1
                variants[ex.get("augd/variant")] += 1
                heights.append(ex["image/height"])
                widths.append(ex["image/width"])
                data = ex.get("image/encoded", ex.get("image/raw", b""))
                sizes.append(len(data))
                if "image/object/class/label" in ex:
                    ids, texts = _objects(ex)
                    objects.update(zip(ids, texts))
                    ignored.update(_why_ignored(ex, len(ids)).values())
                    boxes_per_image.append(len(ids))
                    masked += bool(ex.get("image/segmentation/class/encoded") or ex.get("image/object/mask"))
                if _oriented(ex):
                    oriented[0] += len(_oriented(ex))
                    oriented[1] += 1
                if POLYGON_KEYS[3] in ex:
                    rings = _rings(ex)
                    polygons[0] += sum(map(len, rings))
                    polygons[1] += sum(bool(r) for r in rings)
                    polygons[2] += 1
                if "image/object/keypoint/visibility" in ex:
                    points.append(sum(v > 0 for v in _list(ex["image/object/keypoint/visibility"])))
                if dumped < n_dump:
                    _dump(ex, data, dump_dir, dumped, skeleton)
                    dumped += 1
            per_shard.append((os.path.basename(shard), n))
        total = sum(n for _, n in per_shard)
        print(f"{path}: {total} records in {len(shards)} shard(s)", file=out)
        for name, n in per_shard:
            print(f"  {name}: {n}", file=out)
        if path and os.path.isfile(os.path.join(path, "_SUCCESS")):
            print("  _SUCCESS present: output is complete", file=out)
        repairs = (_manifest(path).get("annotations") or {}).get("repairs") or {}
        if repairs.get("objects"):
            images = repairs.get("images") or {}
            print(f"  annotations repaired: {repairs['objects']} object(s) in {len(images)} image(s): "
                  + ", ".join(f"{k}={n}" for k, n in sorted((repairs.get("by_reason") or {}).items())), file=out)
            for name, reasons in list(images.items())[:_REPAIRS_SHOWN]:
                print(f"    {name}: " + ", ".join(f"{k}={n}" for k, n in sorted(reasons.items())), file=out)
            if len(images) > _REPAIRS_SHOWN:
                print(f"    ... and {len(images) - _REPAIRS_SHOWN} more (manifest.json: annotations.repairs)", file=out)
        for split, b in _balance(path).items():
            print(f"  balance ({split}): before " + ", ".join(f"{c}={n}" for c, n in b["before"].items())
                  + "; after " + ", ".join(f"{c}={n}" for c, n in b["after"].items()), file=out)
        if not total:
            continue
        print(f"  keys: {', '.join(sorted(keys))}", file=out)
        # counts of records (an image's variants each one), not of images: said so
        print("  records per label: " + ", ".join(f"{lab}:{txt or '-'}={n}" for (lab, txt), n in
                                                  sorted(labels.items())), file=out)
        print("  formats: " + ", ".join(f"{k}={v}" for k, v in sorted(formats.items())), file=out)
        print("  variants: " + ", ".join(f"{k}={v}" for k, v in sorted(variants.items())), file=out)
        print(f"  height min/median/max: {min(heights)}/{statistics.median(heights):g}/{max(heights)}; "
              f"width: {min(widths)}/{statistics.median(widths):g}/{max(widths)}", file=out)
        print(f"  payload bytes: total {sum(sizes)}, mean {sum(sizes) / total:.0f}", file=out)
        if boxes_per_image:
            print(f"  objects: {sum(objects.values())} in {len(boxes_per_image)} detection records; per class: "
                  + (", ".join(f"{i}:{t}={n}" for (i, t), n in sorted(objects.items())) or "none"), file=out)
            if ignored:
                print(f"  ignored objects (weight 0: they show, too little of themselves to learn from): "
                      f"{sum(ignored.values())}; " + ", ".join(f"{k}={n}" for k, n in sorted(ignored.items())),
                      file=out)
            hist = collections.Counter(boxes_per_image)
            print(f"  boxes per image min/median/max: {min(boxes_per_image)}/"
                  f"{statistics.median(boxes_per_image):g}/{max(boxes_per_image)}; "
                  + ", ".join(f"{k} box{'es' if k != 1 else ''}: {n}" for k, n in sorted(hist.items())), file=out)
            if masked:
                print(f"  records with masks: {masked}", file=out)
            if oriented[1]:
                print(f"  oriented boxes (image/object/obb/*): {oriented[0]} in {oriented[1]} records", file=out)
            if polygons[2]:
                print(f"  polygons (image/object/polygon/*): {polygons[0]} rings of {polygons[1]} objects in "
                      f"{polygons[2]} records", file=out)
            if points:
                print(f"  keypoints: {sum(points)} labelled in {len(points)} records; per record min/median/max: "
                      f"{min(points)}/{statistics.median(points):g}/{max(points)}", file=out)
    if dump_dir:
        print(f"wrote {dumped} image(s) to {dump_dir}", file=out)
    return 0


def _why_ignored(ex: dict, n: int) -> dict[int, str]:
    """{object index: why it is ignored} of a record: augd's augd/object/ignored, or a weight of 0 (an OD API
    record's own ignore) named "weight 0"."""
    why = [t.decode("utf-8", "replace") if isinstance(t, bytes) else str(t)
           for t in _list(ex.get("augd/object/ignored"))]
    weights = _list(ex.get("image/object/weight"))
    return {k: (why[k] if k < len(why) and why[k] else "weight 0") for k in range(n)
            if (k < len(why) and why[k]) or (k < len(weights) and weights[k] == 0.0)}


def _objects(ex: dict) -> tuple[list, list]:
    """(label ids, class texts) of a detection record (either reader: a lone value may come bare)."""
    ids, texts = _list(ex.get("image/object/class/label")), _list(ex.get("image/object/class/text"))
    texts = [t.decode("utf-8", "replace") if isinstance(t, bytes) else t for t in texts]
    return ids, texts + [""] * (len(ids) - len(texts))


def _manifest(path: str | None) -> dict:
    """The output folder's manifest.json, or {} (a shard, a folder without one, or one that cannot be read)."""
    try:
        with open(os.path.join(path, "manifest.json"), encoding="utf-8") as fh:
            found = json.load(fh)
        return found if isinstance(found, dict) else {}
    except (OSError, ValueError, TypeError):
        return {}


def _balance(path: str | None) -> dict:
    """The manifest's class balance block (per split: classes' counts before and after), or {}."""
    found = _manifest(path).get("balance") or {}
    try:
        return {s: b for s, b in found.items() if isinstance(b, dict) and "before" in b and "after" in b}
    except AttributeError:
        return {}


def _skeleton(shards: list[str]) -> tuple:
    """The skeleton's edges from the manifest beside the shards (a keypoint job's), or ()."""
    if not shards:
        return ()
    try:
        found = (_manifest(os.path.dirname(shards[0])).get("annotations") or {}).get("keypoints") or {}
        return tuple(tuple(e) for e in found.get("skeleton", ()))
    except (AttributeError, TypeError, ValueError):
        return ()


def _list(v) -> list:
    return [] if v is None or v == b"" else list(v) if isinstance(v, list) else [v]


def _dump(ex: dict, data: bytes, directory: str, i: int, skeleton=()) -> None:
    import numpy as np
    base = f"{i:05d}-v{ex.get('augd/variant', 0)}-{os.path.basename(str(ex.get('image/filename', 'img')))}"
    fmt = ex.get("image/format")
    if "image/object/class/label" in ex:  # a detection record: decoded, drawn on, written as PNG
        arr = (np.frombuffer(data, np.uint8).reshape(ex["image/height"], ex["image/width"], 3)[:, :, ::-1]
               if fmt == "raw" else cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR))
        if arr is not None:
            cv2.imwrite(os.path.join(directory, base.rsplit(".", 1)[0] + ".png"), _draw(ex, arr, skeleton))
            return
    if fmt == "raw":
        arr = np.frombuffer(data, np.uint8).reshape(ex["image/height"], ex["image/width"], 3)
        cv2.imwrite(os.path.join(directory, base.rsplit(".", 1)[0] + ".png"), arr[:, :, ::-1])
    else:
        with open(os.path.join(directory, base.rsplit(".", 1)[0] + (".png" if fmt == "png" else ".jpg")), "wb") as f:
            f.write(data)


def _colour(k: int) -> tuple[int, int, int]:
    """A distinct BGR colour per class id (golden-angle hues)."""
    r, g, b = colorsys.hsv_to_rgb((k * 0.618034) % 1.0, 0.85, 1.0)
    return int(b * 255), int(g * 255), int(r * 255)


def _draw(ex: dict, bgr, skeleton=()):
    """The image with its masks overlaid (semantic: a colour per class, 255 (ignore) grey; instances: their
    class's colour), its boxes drawn, each labelled with its class name, and its keypoints: the skeleton's
    edges between visible points in white, each point a dot of its index's colour (hollow: occluded)."""
    import numpy as np
    h, w = bgr.shape[:2]
    out = bgr.copy()
    ids, texts = _objects(ex)
    seg = ex.get("image/segmentation/class/encoded")
    if seg:
        m = cv2.imdecode(np.frombuffer(seg, np.uint8), cv2.IMREAD_UNCHANGED)
        if m is not None and m.shape[:2] == (h, w):
            m = m if m.ndim == 2 else m[:, :, 0]
            lut = np.array([_colour(k) if 0 < k < 255 else (128, 128, 128) for k in range(256)], np.uint8)
            on = m > 0
            out[on] = (0.5 * out[on] + 0.5 * lut[m[on]]).astype(np.uint8)
    for k, png in enumerate(_list(ex.get("image/object/mask"))):
        m = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_GRAYSCALE)
        if m is not None and m.shape[:2] == (h, w):
            on = m > 0
            out[on] = (0.5 * out[on] + 0.5 * np.array(_colour(ids[k] if k < len(ids) else k), np.uint8)).astype(
                np.uint8)
    coords = [_list(ex.get(f"image/object/bbox/{c}")) for c in ("xmin", "ymin", "xmax", "ymax")]
    why = _why_ignored(ex, len(coords[0]))
    for k, (x0, y0, x1, y1) in enumerate(zip(*coords)):
        colour = _colour(ids[k] if k < len(ids) else k)
        p0, p1 = (int(round(x0 * w)), int(round(y0 * h))), (int(round(x1 * w)) - 1, int(round(y1 * h)) - 1)
        box_outline(out, (*p0, *p1), colour, 1, dashed=k in why)
        name = (texts[k] if k < len(texts) else "") + (f" (ignored: {why[k]})" if k in why else "")
        if name:
            cv2.putText(out, name, (p0[0] + 2, max(p0[1] - 3, 9)), cv2.FONT_HERSHEY_SIMPLEX, 0.35, colour, 1,
                        cv2.LINE_AA)
    for k, c in enumerate(_oriented(ex)):
        corners_outline(out, [(x * w, y * h) for x, y in c], _colour(ids[k] if k < len(ids) else k), 1,
                        dashed=k in why)
    for k, rings in enumerate(_rings(ex)):
        for ring in rings:
            corners_outline(out, [(x * w, y * h) for x, y in ring], _colour(ids[k] if k < len(ids) else k), 1)
    _draw_points(out, ex, len(ids), skeleton)
    return out


def _rings(ex: dict) -> list:
    """Each object's rings as normalized (x, y) vertices, or [] where the keys are missing or cannot be used (a
    foreign record's: inspect reports what it can read)."""
    try:
        return polygon_rings(ex) or []
    except ValueError:
        return []


def _oriented(ex: dict) -> list:
    """Each object's oriented box as 4 normalized (x, y) corners, or [] for a record without the keys."""
    xy = [_list(ex.get(k)) for k in OBB_KEYS]
    return [] if not xy[0] or len({len(v) for v in xy}) != 1 else \
        [[(xy[2 * c][k], xy[2 * c + 1][k]) for c in range(4)] for k in range(len(xy[0]))]


def _draw_points(out, ex: dict, n: int, skeleton) -> None:
    xs, ys = _list(ex.get("image/object/keypoint/x")), _list(ex.get("image/object/keypoint/y"))
    vis = _list(ex.get("image/object/keypoint/visibility"))
    if not n or not vis or len(vis) % n:
        return
    h, w = out.shape[:2]
    k = len(vis) // n
    for obj in range(n):
        pts = [(int(xs[obj * k + i] * w), int(ys[obj * k + i] * h), vis[obj * k + i]) for i in range(k)]
        for a, b in skeleton:
            if a < k and b < k and pts[a][2] and pts[b][2]:
                cv2.line(out, pts[a][:2], pts[b][:2], (255, 255, 255), 1, cv2.LINE_AA)
        for i, (x, y, v) in enumerate(pts):
            if v:
                cv2.circle(out, (x, y), 2, _colour(i + 1), -1 if v == 2 else 1)
