"""TFRecord shards as a job's input, read in place: the Object Detection API's records (create_pascal_tf_record.py,
create_coco_tf_record.py and their kin), TF-slim's classification records and augd's own outputs.

A job is a records job when files at its root are TFRecord files by their contents (augd.io.lite.sniff_shard: the
first record's length frames with its checksum; GZIP and ZLIB are inflated to see it), whatever their names. Each
record is an input image: its image/encoded bytes are read in place by offset (InputImage.offset), a GZIP or ZLIB
shard's from a copy inflated once into the job's Scratch folder. Its identity (the seeds', the manifest's) is
stable: augd's own image/filename (with `#v<variant>` past variant 0), else image/source_id, else image/filename,
else `<shard>#<index>`; a second record of one identity takes `<shard>#<index>`.

The schema is each record's keys: image/object/bbox/* (normalized), class/text|label, difficult, truncated,
is_crowd, instance masks (image/object/mask as one PNG per object, or as floats, objects x height x width),
keypoints (image/object/keypoint/x|y|visibility) and DeepLab's image/segmentation/class/encoded make a detection
job (format "tfrecord"); image/class/label (TF-slim's, augd's) makes a classification job. Ids: a
label_map.pbtxt beside the shards (or annotations.label_map) fixes them, class texts looked up in it as the OD
API's decoder does; without one, the records' own (label, text) pairs. TF-slim's labels.txt (`0:daisy`) names
classification labels. Splits come from the shard names (the last of train, val, validation, valid, test,
trainval as a word of the name); a shard without one in a job with them is outside the splits.

A record that cannot be used is rejected by name (`shard#index`, the key, what is wrong) and the job goes on: a
data checksum that fails, a record that is no tf.train.Example, no image, keys that disagree (four box lists of
different lengths); a truncated or broken shard rejects its tail. Boxes are then checked and repaired as every
format's are (augd.annotations.reading). TensorFlow-free.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import tempfile
import weakref
from collections import Counter
from dataclasses import dataclass, replace

from augd.annotations.labelmap import LabelMap, LabelMapError
from augd.annotations.model import Annotation, AnnotationError, KeypointSchema, Object, Span, flip_from_names
from augd.annotations.reading import SPLIT_NAMES, AnnotatedJob, Reading
from augd.annotations.tree import IMAGE_EXTENSIONS, Tree, extension
from augd.errors import Rejected
from augd.formats import NeedMoreData, read_header
from augd.io.inputs import InputImage, RejectedInput, ScanResult
from augd.io.scan import check_header
from augd.io.lite import decode_example, frames, inflate, sniff_shard, value_offsets

__all__ = ["FORMAT", "RecordsJob", "Scratch", "find_shards", "read_records_job", "shard_split"]

FORMAT = "tfrecord"
#: Files a records job (an augd output, an OD API folder) holds beside its shards that are no input.
SIDE_FILES = frozenset({"label_map.pbtxt", "labels.txt", "manifest.json", "check.json", "_SUCCESS", "README.md",
                        "README.txt"})
#: What names a split in a shard's name, as a word of it ("coco_train.record-00000-of-00100", "job-val-00000-...")
_SPLIT_WORDS = {**SPLIT_NAMES, "trainval": "train"}
_WORD = re.compile(r"[a-z0-9]+")
_BOX_KEYS = ("image/object/bbox/xmin", "image/object/bbox/ymin", "image/object/bbox/xmax", "image/object/bbox/ymax")
_OBJECT_LISTS = ("image/object/class/label", "image/object/class/text", "image/object/difficult",
                 "image/object/truncated", "image/object/is_crowd")
_MASK_KEY = "image/segmentation/class/encoded"   # DeepLab's semantic mask PNG
_DETECTION_KEYS = (*_BOX_KEYS, _MASK_KEY)


class Scratch:
    """A job's scratch folder (inflated GZIP and ZLIB shards): removed when the last plan
    holding it is dropped, or when the process exits. A pickled copy (a Beam worker's) names it, owns nothing."""

    def __init__(self, path: str | None = None):
        self.path = path or tempfile.mkdtemp(prefix="augd-records-")
        if path is None:
            weakref.finalize(self, shutil.rmtree, self.path, True)

    def __reduce__(self):
        return Scratch, (self.path,)


@dataclass(frozen=True)
class RecordsJob:
    """A records job read: the scan's result (its images point into the shards) and, for a detection job, its
    annotations (None: a classification job)."""
    scan: ScanResult
    layout: AnnotatedJob | None
    scratch: Scratch | None
    shards: tuple[str, ...]


def find_shards(root: str) -> list[tuple[str, str]]:
    """[(name, compression)] of the TFRecord files at the root of the local job folder `root`, by contents; an
    empty file counts when its name says .tfrecord or .record (augd writes empty shards)."""
    out = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return []
    for e in entries:
        if e.name.startswith(".") or not e.is_file(follow_symlinks=False):
            continue
        try:
            kind = sniff_shard(e.path)
            if kind is None and e.stat().st_size == 0 and re.search(r"\.(tf)?record", e.name):
                kind = "none"
        except OSError:
            continue
        if kind is not None:
            out.append((e.name, kind))
    return out


def shard_split(name: str) -> str:
    """The split a shard's name gives it ("" for none): the last word of the name that names one."""
    words = [_SPLIT_WORDS[w] for w in _WORD.findall(name.lower()) if w in _SPLIT_WORDS]
    return words[-1] if words else ""


def read_records_job(root: str, *, fmt: str = "auto", label_map: LabelMap | None = None, repair: bool = False,
                     classes: tuple[str, ...] | None = None, max_pixels: int, skip=frozenset()) -> RecordsJob | None:
    """Read the records job at `root` (None: no TFRecord file at its root). `fmt` "none" reads it as a
    classification job whatever its keys; `label_map`: a fixed map (else label_map.pbtxt beside the shards, if
    any); `classes`: a classification job's fixed class names; `skip`: file names that are not data."""
    shards = find_shards(root)
    if not shards:
        return None
    fixed = label_map if label_map is not None else _beside_map(root)
    reading = Reading(root, Tree(root), FORMAT, fixed, repair=repair)
    r = _Reader(root, reading, max_pixels, fmt == "none")
    split_of = {name: shard_split(name) for name, _ in shards}
    splits_named = any(split_of.values())
    for name, compression in shards:
        if splits_named and not split_of[name]:
            r.rejected.append(RejectedInput(name, "outside_splits", f"the other shards' names give splits "
                                            f"({', '.join(sorted({s for s in split_of.values() if s}))}) and this "
                                            f"one's names none: name it -train-, -val- or -test-"))
            continue
        r.shard(name, compression, split_of[name])
    detection = r.detection and fmt != "none"
    rejected = list(r.rejected)
    if detection:
        reading.label_map = fixed if fixed is not None else r.pairs_map()
        reading.keypoints = r.keypoint_schema()
        layout = reading.job()
        rejected += [RejectedInput(rel, "bad_annotation", msg) for rel, msg in layout.rejected.items()]
        images = [i for i in r.images if i.relpath not in layout.rejected]
        out_classes: tuple[str, ...] = ()
    else:
        layout = None
        images, more, out_classes = r.labelled(classes, _labels_txt(root))
        rejected += more
    images.sort(key=lambda i: i.relpath)
    rejected.sort(key=lambda x: x.relpath)
    rejected += _beside(root, {n for n, _ in shards} | set(skip))
    splits = tuple(s for s in ("train", "validation", "test") if any(i.split == s for i in images))
    return RecordsJob(ScanResult(root, out_classes, tuple(images), tuple(rejected), splits), layout, r.scratch,
                      tuple(n for n, _ in shards))


def _beside(root: str, known: set[str]) -> list[RejectedInput]:
    """What else lies beside the shards, listed, not lost: a records job reads its shards only. `known`: the
    shards, the side files and the names that are not data."""
    out = []
    for e in sorted(os.scandir(root), key=lambda e: e.name):
        if e.name.startswith(".") or e.name in known or e.name in SIDE_FILES:
            continue
        if e.is_dir(follow_symlinks=False):
            out.append(RejectedInput(e.name + "/", "beside_records", "a folder beside the TFRecord shards: a records "
                                     "job reads its shards only; make it a job of its own"))
        elif extension(e.name) in IMAGE_EXTENSIONS:
            out.append(RejectedInput(e.name, "beside_records", "an image beside the TFRecord shards: a records job "
                                     "reads its shards only; make it a job of its own"))
        else:
            out.append(RejectedInput(e.name, "unknown_format", "beside the TFRecord shards, and no TFRecord file: "
                                     "its first record does not frame with its checksum (plain, GZIP or ZLIB)"))
    return out


def _beside_map(root: str) -> LabelMap | None:
    path = os.path.join(root, "label_map.pbtxt")
    if not os.path.isfile(path):
        return None
    try:
        return LabelMap.read_pbtxt(path)
    except LabelMapError as exc:
        raise AnnotationError(f"label_map.pbtxt beside the shards: {exc}") from None


def _labels_txt(root: str) -> dict[int, str]:
    """TF-slim's labels.txt (`0:daisy` per line; augd writes the same), or plain names one per line."""
    path = os.path.join(root, "labels.txt")
    if not os.path.isfile(path):
        return {}
    out = {}
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        for k, line in enumerate(fh):
            line = line.rstrip("\n")
            ident, colon, name = line.partition(":")
            if colon and ident.strip().isdigit():
                out[int(ident)] = name
            elif line.strip():
                out[k] = line.strip()
    return out


def _keypoint_names(root: str) -> dict[str, list[str]]:
    """label_map.pbtxt's `keypoints { id label }` per class (the OD API's keypoint label map), if any."""
    path = os.path.join(root, "label_map.pbtxt")
    if not os.path.isfile(path):
        return {}
    from augd.parsing import pbtxt
    try:
        with open(path, encoding="utf-8") as fh:
            items = [f for f in pbtxt.parse(fh.read(), path) if f.name == "item" and f.is_message]
    except (OSError, UnicodeDecodeError, pbtxt.PbtxtError):
        return {}
    out = {}
    for item in items:
        name = pbtxt.scalars(item).get("name")
        points = sorted((pbtxt.scalars(k).get("id", 0), pbtxt.scalars(k).get("label", "")) for k in item.value
                        if k.name == "keypoints" and k.is_message)
        if isinstance(name, str) and points:
            out[name] = [str(label) for _, label in points]
    return out


class _Reader:
    """What reading the shards gathers: the images, the rejections, the classes seen."""

    def __init__(self, root: str, reading: Reading, max_pixels: int, classify: bool):
        self.root, self.reading, self.max_pixels, self.classify = root, reading, max_pixels, classify
        self.images: list[InputImage] = []
        self.rejected: list[RejectedInput] = []
        self.labels: dict[str, tuple[int, str]] = {}   # relpath -> (image/class/label, image/class/text)
        self.ids: dict[int, Counter] = {}               # label id -> the class texts records give it
        self.points = 0
        self.detection = False
        self.scratch: Scratch | None = None
        self.inflated = 0
        self.seen: set[str] = set()

    def _scratch(self) -> str:
        if self.scratch is None:
            self.scratch = Scratch()
        return self.scratch.path

    def shard(self, name: str, compression: str, split: str) -> None:
        path, root, note = os.path.join(self.root, name), self.root, ""
        if compression != "none":
            root = self._scratch()
            path = os.path.join(root, f"{self.inflated}.tfrecord")
            self.inflated += 1
            note = inflate(os.path.join(self.root, name), compression, path)
        last = -1
        for fr in frames(path):
            last = fr.index
            where = f"{name}#{fr.index}"
            if fr.data is None:
                what = f"records {fr.index} on" if fr.lost else f"record {fr.index}"
                self.rejected.append(RejectedInput(where + ("+" if fr.lost else ""), "bad_record",
                                                   f"{name}: {what}: {fr.error}" + (f" ({note})" if note else "")))
                note = ""
                continue
            try:
                self.record(name, fr.index, fr.data, path, root, fr.offset, split)
            except Rejected as exc:
                self.rejected.append(RejectedInput(where, exc.reason, f"{where}: {exc}"))
        if note:
            self.rejected.append(RejectedInput(f"{name}#{last + 1}+", "bad_record", f"{name}: {note}"))

    def record(self, shard: str, index: int, data: bytes, path: str, root: str, offset: int, split: str) -> None:
        where = f"{shard}#{index}"
        try:
            ex = decode_example(data)
        except ValueError as exc:
            raise Rejected("bad_record", f"not a tf.train.Example: {exc}") from None
        found = value_offsets(data, ("image/encoded", _MASK_KEY))
        spans, mask = found.get("image/encoded", []), found.get(_MASK_KEY, [])
        mask = Span(path, offset + mask[0][0], mask[0][1]) if len(mask) == 1 and mask[0][1] else None
        if len(spans) != 1 or not spans[0][1]:
            why = ("its image is raw pixels (image/raw): augd reads encoded images (image/encoded)" if "image/raw"
                   in ex else "no image: image/encoded is missing or empty" if not spans or not spans[0][1]
                   else f"image/encoded holds {len(spans)} values, not one image")
            raise Rejected("bad_record", why)
        start, size = spans[0]
        encoded = data[start:start + size]
        try:
            header = read_header(encoded)
        except NeedMoreData:
            raise Rejected("bad_header", "image/encoded: its header is truncated") from None
        check_header(header, self.max_pixels)
        ident = self._identity(ex, shard, index)
        self.images.append(InputImage(ident, path, size, -1, "", header, root, split, offset + start))
        self.labels[ident] = (ex.get("image/class/label", -1) if isinstance(ex.get("image/class/label"), int)
                              else -1, ex.get("image/class/text") if isinstance(ex.get("image/class/text"), str)
                              else "")
        if self.classify:
            return
        self.detection = self.detection or any(k in ex for k in _DETECTION_KEYS)
        self.reading.sizes.known(ident, header)
        if split:
            self.reading.splits[ident] = split
        self.reading.settle(ident, lambda hw: self._annotation(ex, where, hw, header.orientation, mask))

    def _identity(self, ex: dict, shard: str, index: int) -> str:
        name = ex.get("image/filename") if isinstance(ex.get("image/filename"), str) else ""
        source = ex.get("image/source_id") if isinstance(ex.get("image/source_id"), str) else ""
        variant = ex.get("augd/variant")
        if isinstance(variant, int) and name:
            ident = name if variant == 0 else f"{name}#v{variant}"
        else:
            ident = source or name or f"{shard}#{index}"
        if ident in self.seen:
            ident = f"{shard}#{index}"
        self.seen.add(ident)
        return ident

    def _annotation(self, ex: dict, where: str, hw: tuple[int, int], orientation: int, mask: Span | None
                    ) -> Annotation:
        h, w = hw
        n = len(ex.get(_BOX_KEYS[0], []))
        for key in (*_BOX_KEYS, *_OBJECT_LISTS):
            got = ex.get(key)
            if got is not None and len(_as_list(got)) not in ((0, n) if key != _BOX_KEYS[0] else (n,)):
                raise AnnotationError(f"{where}: {key} holds {len(_as_list(got))} values for {n} boxes "
                                      f"({_BOX_KEYS[0]}): the record's keys disagree")
        texts, labels = _as_list(ex.get("image/object/class/text", [])), _as_list(ex.get("image/object/class/label",
                                                                                          []))
        if n and not texts and not labels:
            raise AnnotationError(f"{where}: {n} boxes and neither image/object/class/text nor /label")
        if n and orientation != 1:
            raise AnnotationError(f"{where}: its image has EXIF orientation {orientation}, and a record's boxes are of "
                                  f"the stored pixels while augd decodes them upright; strip the orientation")
        names = [self._name(texts[k] if texts else "", labels[k] if labels else None, where, k) for k in range(n)]
        masks = _masks(ex, n, h, w, where)
        points = self._keypoints(ex, n, h, w, where)
        flags = [_as_list(ex.get(k, [])) or [0] * n for k in ("image/object/difficult", "image/object/truncated",
                                                                "image/object/is_crowd")]
        objects = []
        for k in range(n):
            x0, y0, x1, y1 = (float(_as_list(ex[key])[k]) for key in _BOX_KEYS)
            if not all(math.isfinite(v) for v in (x0, y0, x1, y1)):
                raise AnnotationError(f"{where}: object {k + 1} ({names[k]}): its box is not finite")
            if x1 < x0 or y1 < y0:
                raise AnnotationError(f"{where}: object {k + 1} ({names[k]}): box xmin {x0:g} ymin {y0:g} xmax {x1:g} "
                                      f"ymax {y1:g} (normalized) has a max below its min")
            box = (_px(x0, w), _px(y0, h), _px(x1, w), _px(y1, h))
            objects.append(Object(names[k], box, *(bool(f[k]) for f in flags),
                                  rle=masks[k] if masks else None, keypoints=points[k] if points else ()))
        extra = {"where": tuple(f"object {k + 1} ({names[k]})" for k in range(n))}
        if isinstance(ex.get("image/height"), int) and isinstance(ex.get("image/width"), int):
            extra["size"] = (ex["image/height"], ex["image/width"])
        return Annotation(tuple(objects), mask, where, extra)

    def _name(self, text: str, label, where: str, k: int) -> str:
        fixed = self.reading.fixed
        if text:
            name = text
        elif fixed is not None and label is not None:
            by_id = {i: n for n, i in fixed.ids.items()}
            if label not in by_id:
                raise AnnotationError(f"{where}: object {k + 1}: label {label} is not in the label map")
            name = by_id[label]
        else:
            name = str(label)
        if label is not None and fixed is None:
            self.ids.setdefault(int(label), Counter())[name] += 1
        return name

    def _keypoints(self, ex: dict, n: int, h: int, w: int, where: str):
        xs, ys = _as_list(ex.get("image/object/keypoint/x", [])), _as_list(ex.get("image/object/keypoint/y", []))
        if not n or not xs:
            return None
        vis = _as_list(ex.get("image/object/keypoint/visibility", []))
        if len(xs) != len(ys) or len(xs) % n or (vis and len(vis) != len(xs)):
            raise AnnotationError(f"{where}: image/object/keypoint/x|y|visibility hold {len(xs)}, {len(ys)}, "
                                  f"{len(vis)} values for {n} objects: the record's keys disagree")
        k = len(xs) // n
        if self.points and k != self.points:
            raise AnnotationError(f"{where}: {k} keypoints per object, where other records have {self.points}")
        self.points = k
        out = []
        for o in range(n):
            pts = []
            for i in range(o * k, o * k + k):
                v = int(vis[i]) if vis else (2 if math.isfinite(xs[i]) and math.isfinite(ys[i]) else 0)
                ok = v > 0 and math.isfinite(xs[i]) and math.isfinite(ys[i])
                pts.append((_px(xs[i], w), _px(ys[i], h), min(v, 2)) if ok else (0.0, 0.0, 0))
            out.append(tuple(pts))
        return out

    def pairs_map(self) -> LabelMap:
        """The records' own ids: each label id named by the text most records give it (or the id itself)."""
        ids: dict[str, int] = {}
        for ident, texts in sorted(self.ids.items()):
            name = texts.most_common(1)[0][0]
            if ident >= 1 and name not in ids:
                ids[name] = ident
        names = {o.name for a in self.reading.annotations.values() for o in a.objects}
        free = max([0, *ids.values()]) + 1
        for name in sorted(names - set(ids)):   # texts without ids, ids < 1: numbered after the others
            ids[name], free = free, free + 1
        return LabelMap(ids)

    def keypoint_schema(self) -> KeypointSchema | None:
        if not self.points:
            return None
        named = _keypoint_names(self.root)
        names = next((tuple(v) for v in named.values() if len(v) == self.points), None) or tuple(
            f"keypoint_{i + 1}" for i in range(self.points))
        classes = tuple(sorted({o.name for a in self.reading.annotations.values() for o in a.objects
                                if o.keypoints}))
        return KeypointSchema(names, flip_from_names(names), classes=classes, source="the records' keypoints")

    def labelled(self, classes, txt: dict[int, str]) -> tuple[list[InputImage], list[RejectedInput], tuple]:
        """A classification job's images with their labels: ids kept (TF-slim's, augd's), named by labels.txt,
        else by the records' texts, else by the id; `classes` (fixed) rules, by name."""
        names = dict(txt)
        for rel, (label, text) in self.labels.items():
            if label >= 0 and text and label not in names:
                names[label] = text
        out, rejected = [], []
        if classes is None:
            top = max([-1, *(lab for lab, _ in self.labels.values())])
            classes = tuple(names.get(i, str(i)) for i in range(top + 1))
        for img in self.images:
            label, text = self.labels[img.relpath]
            name = text or names.get(label, str(label)) if label >= 0 else ""
            if label >= 0 and name not in classes:
                rejected.append(RejectedInput(img.relpath, "bad_annotation", f"{img.relpath}: class {name!r} (label "
                                              f"{label}) is not in the label map ({', '.join(classes[:20])})"))
                continue
            out.append(_labelled(img, classes.index(name) if label >= 0 else -1, name))
        return out, rejected, tuple(classes)


def _labelled(img: InputImage, label: int, text: str) -> InputImage:
    return replace(img, label=label, label_text=text)


def _px(v: float, size: int) -> float:
    """A normalized float32 coordinate in pixels, rounded to 1/1000 px: what float32 lost (under 5e-4 px up to
    8000 px a side), so an integer (VOC) or two-decimal (COCO) coordinate comes back exactly and an augd output
    re-read gives the boxes its source gave."""
    return round(float(v) * size, 3)


def _as_list(v) -> list:
    return v if isinstance(v, list) else [v]


def _masks(ex: dict, n: int, h: int, w: int, where: str):
    """Each object's instance mask as COCO RLE: PNG strings (create_coco_tf_record's include_masks) or floats,
    objects x height x width (the OD API's NUMERICAL_MASKS)."""
    raw = ex.get("image/object/mask")
    if raw is None or raw == [] or not n:
        return None
    import numpy as np

    from augd.annotations.rle import rle_encode
    values = _as_list(raw)
    if values and isinstance(values[0], bytes):
        if len(values) != n:
            raise AnnotationError(f"{where}: image/object/mask holds {len(values)} PNGs for {n} boxes: the record's "
                                  f"keys disagree")
        import cv2
        out = []
        for k, png in enumerate(values):
            m = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_UNCHANGED)
            if m is None or m.ndim != 2 or m.shape != (h, w):
                got = "not a one-channel PNG" if m is None or m.ndim != 2 else f"{m.shape[1]}x{m.shape[0]}"
                raise AnnotationError(f"{where}: object {k + 1}: its mask is {got}, the image {w}x{h}")
            out.append(rle_encode(m > 0))
        return out
    if len(values) != n * h * w:
        raise AnnotationError(f"{where}: image/object/mask holds {len(values)} floats, not {n} masks of {w}x{h}")
    arr = np.asarray(values, np.float32).reshape(n, h, w)
    return [rle_encode(arr[k] > 0.5) for k in range(n)]
