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

import os
import re
from dataclasses import dataclass, replace

from augd.annotations.labelmap import LabelMap, LabelMapError
from augd.annotations.model import AnnotationError, Span
from augd.annotations.recordobjects import BOX_KEYS, MASK_KEY, ObjectReader, not_utf8
from augd.annotations.reading import SPLIT_NAMES, AnnotatedJob, Reading
from augd.annotations.tree import IMAGE_EXTENSIONS, Tree, extension
from augd.errors import Rejected, UntrustedFileError
from augd.files import read_capped
from augd.labels import LABELS_MAX_BYTES
from augd.formats import NeedMoreData, read_header
from augd.io.inputs import InputImage, RejectedInput, ScanResult
from augd.io.scan import check_header
from augd.io.lite import decode_example, frames, inflate, sniff_shard, value_offsets
from augd.io.limits import ReadLimits
from augd.io.scratch import Scratch

__all__ = ["DETECTION_KEYS", "FORMAT", "RecordsJob", "Scratch", "find_shards", "read_records_job", "shard_split"]

FORMAT = "tfrecord"
#: Files a records job (an augd output, an OD API folder) holds beside its shards that are no input.
SIDE_FILES = frozenset({"label_map.pbtxt", "labels.txt", "manifest.json", "check.json", "_SUCCESS", "README.md",
                        "README.txt"})
#: What names a split in a shard's name, as a word of it ("coco_train.record-00000-of-00100", "job-val-00000-...")
_SPLIT_WORDS = {**SPLIT_NAMES, "trainval": "train"}
_WORD = re.compile(r"[a-z0-9]+")
#: The keys that make a records job a detection job (a classification one without any of them).
DETECTION_KEYS = (*BOX_KEYS, MASK_KEY)
#: The largest image/class/label id a classification record may carry (its classes are listed 0..id).
MAX_LABEL = 100_000


@dataclass(frozen=True)
class RecordsJob:
    """A records job read: the scan's result (its images point into the shards) and, for a detection job, its
    annotations (None: a classification job)."""
    scan: ScanResult
    layout: AnnotatedJob | None
    scratch: Scratch | None


def find_shards(root: str) -> list[tuple[str, str]]:
    """[(name, compression)] of the TFRecord files at the root of the local job folder `root`, by contents; an
    empty file counts when its name says .tfrecord or .record (augd writes empty shards)."""
    out = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return []
    for e in entries:   # an image (by its name) is read by the folder job, not sniffed here
        if e.name.startswith(".") or extension(e.name) in IMAGE_EXTENSIONS or not e.is_file(follow_symlinks=False):
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
    """The split a shard's name gives it ("" for none): the last word of the name that names one, a year or
    number after it aside."""
    words = [_SPLIT_WORDS[w] for w in (re.sub(r"\d+$", "", w) for w in _WORD.findall(name.lower()))
             if w in _SPLIT_WORDS]   # coco_train2017.record: train
    return words[-1] if words else ""


def read_records_job(root: str, *, fmt: str = "auto", label_map: LabelMap | None = None, repair: bool = False,
                     classes: tuple[str, ...] | None = None, max_pixels: int, skip=frozenset(),
                     limits: ReadLimits | None = None) -> RecordsJob | None:
    """Read the records job at `root` (None: no TFRecord file at its root). `fmt` "none" reads it as a
    classification job whatever its keys; `label_map`: a fixed map (else label_map.pbtxt beside the shards, if
    any); `classes`: a classification job's fixed class names; `skip`: file names that are not data; `limits`:
    the job's (the largest record, the beat; default ReadLimits())."""
    shards = find_shards(root)
    if not shards or fmt == "auto" and _folder_job(root, {n for n, _ in shards}):
        return None
    fixed = label_map if label_map is not None else _beside_map(root)
    reading = Reading(root, Tree(root), FORMAT, fixed, repair=repair)
    compressed = sum(_size(os.path.join(root, n)) for n, c in shards if c != "none")
    r = _Reader(root, reading, max_pixels, fmt == "none", limits or ReadLimits(), compressed)
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
        try:
            reading.label_map = fixed if fixed is not None else r.objects.pairs_map(reading.annotations)
        except LabelMapError as exc:
            raise AnnotationError(f"the records' own classes make no label map ({exc}); put a label_map.pbtxt "
                                  f"beside the shards") from None
        reading.keypoints = r.objects.keypoint_schema(root, reading.annotations)
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
    rejected += _beside(root, {n for n, _ in shards} | {p.split("/", 1)[0] for p in skip})
    splits = tuple(s for s in ("train", "validation", "test") if any(i.split == s for i in images))
    return RecordsJob(ScanResult(root, out_classes, tuple(images), tuple(rejected), splits), layout, r.scratch)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _folder_job(root: str, shards: set[str]) -> bool:
    """Whether images or folders lie at the root beside the shards: then `auto` takes the folder job (a stray
    shard in a VOC or class-folder job is one rejected file, not the job); `format: tfrecord` takes the shards."""
    for e in os.scandir(root):
        if not e.name.startswith(".") and e.name not in shards and (
                e.is_dir(follow_symlinks=False) or extension(e.name) in IMAGE_EXTENSIONS):
            return True
    return False


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
    """TF-slim's labels.txt (`0:daisy` per line; augd writes the same), or plain names one per line. A line that
    names no class, an id past MAX_LABEL or text that is not UTF-8 is the whole file's error (it names every
    record's class): AnnotationError naming the line."""
    path = os.path.join(root, "labels.txt")
    if not os.path.isfile(path):
        return {}
    out = {}
    try:
        raw = read_capped(path, LABELS_MAX_BYTES, "labels", "LABELS_MAX_BYTES")
    except (OSError, UntrustedFileError) as exc:
        raise AnnotationError(f"labels.txt beside the shards: {exc}") from None
    for k, line in enumerate(raw.split(b"\n")):
        where = f"labels.txt beside the shards, line {k + 1}"
        try:
            line = line.rstrip(b"\r").decode("utf-8")
        except UnicodeDecodeError as exc:
            raise AnnotationError(f"{where}: {line[:60]!r} is not UTF-8 text (byte {line[exc.start]:#04x} at "
                                  f"{exc.start}); class names are UTF-8") from None
        ident, colon, name = line.partition(":")
        if colon and ident.strip().isascii() and ident.strip().isdigit():
            if int(ident) > MAX_LABEL:
                raise AnnotationError(f"{where}: id {ident.strip()} is over {MAX_LABEL}, the largest label a "
                                      f"classification record may carry")
            if not name.strip():
                raise AnnotationError(f"{where}: {line!r} names no class: `{int(ident)}:name` expected")
            out[int(ident)] = name
        elif line.strip():
            out[k] = line.strip()
    return out


class _Reader:
    """What reading the shards gathers: the images, the rejections, the classes seen."""

    def __init__(self, root: str, reading: Reading, max_pixels: int, classify: bool, limits: ReadLimits,
                 compressed: int):
        self.root, self.reading, self.max_pixels, self.classify = root, reading, max_pixels, classify
        self.limits = limits
        self.compressed = compressed   # bytes of the job's GZIP and ZLIB shards: the scratch budget's measure
        self.scratch_left = limits.scratch_bytes(compressed)
        self.images: list[InputImage] = []
        self.rejected: list[RejectedInput] = []
        self.labels: dict[str, tuple[int, str]] = {}   # relpath -> (image/class/label, image/class/text)
        self.objects = ObjectReader(reading.fixed)
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
            note = inflate(os.path.join(self.root, name), compression, path, self.scratch_left,
                           self.limits.scratch_why(self.compressed), self.limits.beat)
            self.scratch_left = max(0, self.scratch_left - _size(path))   # one budget for all the job's shards
        last = -1
        for fr in frames(path, self.limits.record_bytes, self.limits.record_limit):
            self.limits.beat()
            last = fr.index
            where = f"{name}#{fr.index}"
            if fr.data is None:
                what = f"record {fr.index} and the rest of the shard" if fr.lost else f"record {fr.index}"
                self.rejected.append(RejectedInput(where + ("+" if fr.lost else ""), "bad_record",
                                                   f"{what}: {fr.error}" + (f" ({note})" if note else "")))
                note = ""
                continue
            try:
                self.record(name, fr.index, fr.data, path, root, fr.offset, split)
            except Rejected as exc:
                self.rejected.append(RejectedInput(where, exc.reason, str(exc)))
        if note:
            self.rejected.append(RejectedInput(f"{name}#{last + 1}+", "bad_record", f"the shard's end: {note}"))

    def record(self, shard: str, index: int, data: bytes, path: str, root: str, offset: int, split: str) -> None:
        where = f"{shard}#{index}"
        try:
            ex = decode_example(data)
            found = value_offsets(data, ("image/encoded", MASK_KEY))
        except ValueError as exc:
            raise Rejected("bad_record", f"not a tf.train.Example: {exc}") from None
        spans, mask = found.get("image/encoded", []), found.get(MASK_KEY, [])
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
        self.labels[ident] = (ex.get("image/class/label", -1), ex.get("image/class/text") if
                              isinstance(ex.get("image/class/text"), str) else "")
        if self.classify:
            return
        self.detection = self.detection or any(k in ex for k in DETECTION_KEYS)
        self.reading.sizes.known(ident, header)
        if split:
            self.reading.splits[ident] = split
        self.reading.settle(ident, lambda hw: self.objects.annotation(ex, where, hw, header.orientation, mask,
                                                                      MASK_KEY in ex))

    def _identity(self, ex: dict, shard: str, index: int) -> str:
        name = ex.get("image/filename") if isinstance(ex.get("image/filename"), str) else ""
        source = ex.get("image/source_id") if isinstance(ex.get("image/source_id"), str) else ""
        variant = ex.get("augd/variant")
        if isinstance(variant, int) and name:
            ident = name if variant == 0 else f"{name}#v{variant}"
        else:
            ident = source or name or f"{shard}#{index}"
        if ident in self.seen:
            ident, k = f"{shard}#{index}", 1
            while ident in self.seen:   # a record may name itself as another's fallback
                ident, k = f"{shard}#{index}~{k}", k + 1
        self.seen.add(ident)
        return ident

    def labelled(self, classes, txt: dict[int, str]) -> tuple[list[InputImage], list[RejectedInput], tuple]:
        """A classification job's images with their labels: ids kept (TF-slim's, augd's: class k stays label k),
        named by labels.txt, else by the records' texts, else by the id; a record with a text and no id (-1) takes
        its class by name; `classes` (fixed) rules, by name. A label that is no id from 0 to MAX_LABEL (or -1:
        unlabelled) rejects its record."""
        names, out, rejected = dict(txt), [], []
        bad = {rel: why for rel, (_, text) in self.labels.items() if (why := _bad_class_text(text))}
        for rel, (label, text) in self.labels.items():
            if isinstance(label, int) and 0 <= label <= MAX_LABEL and text and rel not in bad:
                names.setdefault(label, text)
        valid = {rel: lab for rel, (lab, _) in self.labels.items() if isinstance(lab, int) and -1 <= lab <= MAX_LABEL
                 and rel not in bad}
        if classes is None:
            top = max([-1, *valid.values()])
            classes = [names.get(i, str(i)) for i in range(top + 1)]
            classes += sorted({t for rel, (lab, t) in self.labels.items() if valid.get(rel) == -1 and t} - set(classes))
        for img in self.images:
            label, text = self.labels[img.relpath]
            if img.relpath in bad:
                rejected.append(RejectedInput(img.relpath, "bad_annotation", f"{img.relpath}: image/class/text "
                                              f"{bad[img.relpath]}"))
                continue
            if img.relpath not in valid:
                rejected.append(RejectedInput(img.relpath, "bad_annotation", f"{img.relpath}: image/class/label is "
                                              f"{label!r}: one id from 0 to {MAX_LABEL} expected (-1: unlabelled)"))
                continue
            name = names.get(label, text or str(label)) if label >= 0 else text
            if name and name not in classes:
                rejected.append(RejectedInput(img.relpath, "bad_annotation", f"{img.relpath}: class {name!r} (label "
                                              f"{label}) is not in the label map ({', '.join(classes[:20])})"))
                continue
            out.append(_labelled(img, classes.index(name) if name else -1, name))
        return out, rejected, tuple(classes)


def _bad_class_text(text: str) -> str:
    """What makes a record's image/class/text no class name ("" when nothing): labels.txt holds one per line."""
    if why := not_utf8(text):
        return why + "; class names are UTF-8"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        return f"{text[:60]!r} holds a control character (labels.txt holds one name per line)"
    return ""


def _labelled(img: InputImage, label: int, text: str) -> InputImage:
    return replace(img, label=label, label_text=text)
