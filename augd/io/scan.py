"""Scan a job folder: find the images, give them labels, reject what cannot be used (with a reason).

Layout. Every non-hidden sub-folder directly under the job root is a class: label = its index among the sorted
class folder names (empty class folders count too, so labels depend only on the folder names), label_text = the
folder name; images anywhere below it belong to it. Image files directly at the root are unlabeled (label -1,
label_text ""), whether or not class folders exist beside them: a mixed drop is kept, not guessed at.

A detection layout (VOC, COCO, YOLO, masks: augd.annotations.layout) has no class folders: its images are found in
the layout's image folders, all unlabeled, each in the split the layout gives it; the layout's own files (its
`skip`) are never read as images, and the images whose annotation is bad are rejected with `bad_annotation`.

Skipped silently: anything hidden (a path part starting with "."), and the names the caller says are not data
(`skip_names` in the root and the split folders, `skip_anywhere` at any depth). Everything else that is not a
usable image becomes a RejectedInput with one of REJECT_REASONS and a message the user can act on. Only a
prefix of each file is read here; the engine reads the whole file later.

The folder itself is read through augd.io.jobfs: locally without following an escape or blocking on a special
file, and through tf.io.gfile for URL roots.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Callable, Iterator

from augd.defaults import MAX_PIXELS
from augd.errors import FailureReason, JobFailed, Rejected, RejectReason
from augd.formats import ImageHeader, NeedMoreData, read_header, unsupported
from augd.io.inputs import ImageLayout, InputImage, RejectedInput, ScanResult
from augd.io.jobfs import GFileTree, LocalTree, OutsideJob, is_url, local_path, vanished
from augd.io.limits import no_beat

__all__ = [
    "REJECT_REASONS", "SPLITS", "SPLIT_FOLDERS", "InputImage", "RejectedInput", "ScanResult",
    "check_header", "scan_job", "split_of",
]

REJECT_REASONS = tuple(r.value for r in RejectReason)
#: Top folders that make a job hold several splits (TFDS ImageFolder's layout; Roboflow's and Ultralytics' valid/),
#: and the split each names; the annotation layouts' split folders are these too (annotations.reading.SPLIT_NAMES).
SPLIT_FOLDERS = {"train": "train", "validation": "validation", "val": "validation", "valid": "validation",
                 "test": "test"}
#: Splits in the order their shards are written and listed.
SPLITS = ("train", "validation", "test")
#: Bytes read for the header: first a little (most headers sit in the first few hundred bytes, so the
#: scan does not read every file twice), then HEADER_PREFIX, enough for any header short of a JPEG with
#: huge APP segments before its SOF.
HEADER_FIRST = 16 * 1024
HEADER_PREFIX = 256 * 1024
#: Room for metadata in a file beyond its pixels (see _check): generous for EXIF, ICC profiles and XMP.
MAX_METADATA_BYTES = 16 * 1024 * 1024
#: When the prefix is not enough, the whole file is read, but only up to this size.
HEADER_RETRY_MAX = 64 * 1024 * 1024

@dataclass(frozen=True)
class _Candidate:
    relpath: str
    path: str
    size: int
    label: int
    label_text: str
    split: str = ""


@dataclass(frozen=True)
class _Skip:
    """What the scan passes over silently: hidden names, the caller's names, and what `ignore` says."""
    names: frozenset[str]        # in the root and the split folders
    anywhere: frozenset[str]     # at any depth
    ignore: Callable[[str], bool]

    def at_top(self, name: str, rel: str) -> bool:
        return name.startswith(".") or name in self.names or name in self.anywhere or self.ignore(rel)

    def below(self, name: str, rel: str) -> bool:
        return name.startswith(".") or name in self.anywhere or self.ignore(rel)


def scan_job(root: str, *, max_pixels: int = MAX_PIXELS, ignore: Callable[[str], bool] | None = None,
             classes: tuple[str, ...] | None = None,
             skip_names: frozenset[str] = frozenset(), skip_anywhere: frozenset[str] = frozenset(),
             layout: ImageLayout | None = None, beat: Callable[[], None] = no_beat) -> ScanResult:
    """Scan `root`. Skipped silently: hidden names, `skip_names` in the root and the split folders, `skip_anywhere`
    at any depth, and what `ignore(relpath)` says. `classes`: a fixed label map (a class folder missing from it
    fails the job, a class without a folder keeps its id); without one, the class folders in sorted order.
    `layout`: a detection job's annotations (read by augd.annotations.layout.read_job): no class folders. `beat`:
    called after each file's header is read (augd.io.limits.ReadLimits.beat)."""
    fs = GFileTree(root) if is_url(root) else LocalTree(local_path(root))
    if not fs.isdir(""):
        raise JobFailed(f"{root}: job folder does not exist or is not a folder", reason=FailureReason.INPUT_MISSING)
    skip = _Skip(skip_names, skip_anywhere, ignore or (lambda _rel: False))
    if layout is not None:
        return _scan_layout(root, fs, skip, layout, max_pixels, beat)
    candidates: list[_Candidate] = []
    rejected: list[RejectedInput] = []
    try:
        top = _visible(fs, "", skip)
    except OSError as e:
        raise JobFailed(f"{root}: cannot list the job folder: {e.strerror or e}",
                        reason=FailureReason.INPUT_UNREADABLE) from None
    splits = _split_folders(root, top)
    class_dirs: dict[str, list[str]] = {}    # class name -> the folders holding it (one per split)
    for name, kind, detail in top:
        if kind == "dir":
            if not splits:
                class_dirs.setdefault(name, []).append(name)
        elif kind == "file" and splits:
            rejected.append(RejectedInput(name, "outside_splits", f"a file at the root of a job with split folders "
                                          f"({', '.join(splits)}) belongs to no split; move it into one"))
        elif kind == "file":
            candidates.append(_Candidate(name, fs.path(name), detail, -1, ""))
        else:
            rejected.append(RejectedInput(name, kind, detail))
    for folder in splits:  # train/<class>/..., and train/x.jpg: unlabeled, in its split
        for name, kind, detail in _visible_or_unreadable(fs, folder, skip, rejected):
            rel = f"{folder}/{name}"
            if kind == "dir":
                class_dirs.setdefault(name, []).append(rel)
            elif kind == "file":
                candidates.append(_Candidate(rel, fs.path(rel), detail, -1, "", SPLIT_FOLDERS[folder]))
            else:
                rejected.append(RejectedInput(rel, kind, detail))
    if classes is None:
        classes = tuple(sorted(class_dirs))
    else:
        unknown = sorted(set(class_dirs) - set(classes))
        if unknown:
            raise JobFailed(f"{root}: class folder(s) {', '.join(map(repr, unknown))} not in the label map "
                            f"({', '.join(classes)}); add them to the map, or move them out of the job",
                            reason=FailureReason.BAD_LABELS)
    for label, name in enumerate(classes):
        for folder in class_dirs.get(name, ()):  # a class of the map with no folder keeps its id
            split = SPLIT_FOLDERS[folder.split("/", 1)[0]] if splits else ""
            for rel, kind, detail in _walk(fs, folder, skip):
                if kind == "file":
                    candidates.append(_Candidate(rel, fs.path(rel), detail, label, name, split))
                else:
                    rejected.append(RejectedInput(rel, kind, detail))
    found = tuple(s for s in SPLITS if any(SPLIT_FOLDERS[f] == s for f in splits))
    return _result(root, fs, tuple(classes), candidates, rejected, found, max_pixels, beat=beat)


def _result(root, fs, classes, candidates, rejected, splits, max_pixels, known=None, beat=no_beat) -> ScanResult:
    """Each candidate's header checked; images and rejections in path order. `known`: relpath -> the header
    already read (by the annotations' layout), not read again."""
    images: list[InputImage] = []
    known = known or {}
    for c in candidates:
        beat()
        try:
            # past HEADER_RETRY_MAX the scan's own reads decide (it does not look beyond its prefixes there)
            header = _check(fs, c, max_pixels, known.get(c.relpath) if c.size <= HEADER_RETRY_MAX else None)
        except Rejected as e:
            rejected.append(RejectedInput(c.relpath, e.reason, str(e)))
        else:
            images.append(InputImage(c.relpath, c.path, c.size, c.label, c.label_text, header, root, c.split))
    images.sort(key=lambda i: i.relpath)
    rejected.sort(key=lambda r: r.relpath)
    return ScanResult(root, classes, tuple(images), tuple(rejected), splits)


def _scan_layout(root: str, fs, skip: _Skip, layout: ImageLayout, max_pixels: int, beat=no_beat) -> ScanResult:
    """A detection job: every file below the layout's image folders that is not one of its own files is an
    unlabeled image in the split the layout gives it; the images the layout rejected are `bad_annotation`."""
    own = frozenset(p.rstrip("/") for p in layout.skip)
    outer = skip.ignore
    skip = _Skip(skip.names, skip.anywhere, lambda rel: rel in own or outer(rel))
    rejected = [RejectedInput(rel, "bad_annotation", msg) for rel, msg in layout.rejected.items()]
    found: dict[str, tuple[str, object]] = {}   # relpath -> (kind, detail), each file once
    dirs = [""] if "" in layout.image_dirs else sorted(set(layout.image_dirs))
    for d in dirs:
        if d and (skip.below(d.rsplit("/", 1)[-1], d) or not fs.isdir(d)):
            continue
        entries = _visible_or_unreadable(fs, "", skip, rejected) if not d else [(d, "dir", None)]
        for name, kind, detail in entries:
            if kind == "dir":
                found.update((rel, (k, det)) for rel, k, det in _walk(fs, name, skip))
            else:
                found[name] = (kind, detail)
    candidates = []
    for rel, (kind, detail) in sorted(found.items()):
        split = layout.splits.get(rel, "")
        if rel in layout.rejected:
            continue
        if kind != "file":
            rejected.append(RejectedInput(rel, kind, detail))
        elif layout.splits and not split:
            rejected.append(RejectedInput(rel, "outside_splits", f"the {layout.format} layout's splits do not "
                                          f"list this image; add it to one, or move it out of the job"))
        else:
            candidates.append(_Candidate(rel, fs.path(rel), detail, -1, "", split))
    splits = tuple(s for s in SPLITS if any(c.split == s for c in candidates))
    result = _result(root, fs, (), candidates, rejected, splits, max_pixels, layout.headers, beat)
    # The layout's rejections the walk did not find (its own files, skipped above) are annotation files.
    return replace(result, not_inputs=frozenset(rel for rel in layout.rejected if rel not in found))


def split_of(relpath: str, fractions) -> str:
    """The split a `split: {train: 0.9, validation: 0.1}` setting puts a file in: a stable hash of its path alone
    (not the seed), so re-runs and added images never move an image between splits."""
    u = int.from_bytes(hashlib.sha256(relpath.encode("utf-8", "surrogateescape")).digest()[:8], "big") / 2.0**64
    acc = 0.0
    for name, share in fractions:
        acc += share
        if u < acc:
            return name
    return fractions[-1][0]


def _visible(fs, rel_dir: str, skip: _Skip) -> list:
    """The entries of a top folder (the root, a split folder) that are data: not hidden, not skipped."""
    return [(n, k, d) for n, k, d in fs.entries(rel_dir) if not skip.at_top(n, f"{rel_dir}/{n}" if rel_dir else n)]


def _visible_or_unreadable(fs, rel_dir: str, skip: _Skip, rejected: list) -> list:
    try:
        return _visible(fs, rel_dir, skip)
    except OSError as e:
        rejected.append(RejectedInput(rel_dir + "/", *_unlisted(e)))
        return []


def _unlisted(e: OSError) -> tuple[str, str]:
    """(reason, message) of a folder that cannot be listed: gone (the job changed under it) or unreadable."""
    return ("missing" if vanished(e) else "unreadable"), f"cannot list folder: {e.strerror or e}"


def _split_folders(root: str, top) -> list[str]:
    """The top folders when they make a split layout, decided by their names alone (so an empty or
    class-less split folder cannot turn the layout into classes named after splits): every top folder is one of
    SPLIT_FOLDERS. Else []. Two names of one split (`val/` beside `validation/` or `valid/`) are refused."""
    dirs = [n for n, k, _ in top if k == "dir"]
    if not dirs or any(n not in SPLIT_FOLDERS for n in dirs):
        return []
    twice = sorted(n for n in dirs if SPLIT_FOLDERS[n] == "validation")
    if len(twice) > 1:
        raise JobFailed(f"{root}: {'both' if len(twice) == 2 else 'all of'} {' and '.join(f'{n}/' for n in twice)} "
                        f"hold the validation split; merge them into one", reason=FailureReason.BAD_LABELS)
    return sorted(dirs, key=lambda n: SPLITS.index(SPLIT_FOLDERS[n]))


def _walk(fs, rel_dir: str, skip: _Skip) -> Iterator[tuple[str, str, object]]:
    try:
        entries = fs.entries(rel_dir)
    except OSError as e:
        yield rel_dir + "/", *_unlisted(e)
        return
    for name, kind, detail in entries:
        rel = f"{rel_dir}/{name}"
        if skip.below(name, rel):
            continue
        if kind == "dir":
            yield from _walk(fs, rel, skip)
        else:
            yield rel, kind, detail


def check_header(header: ImageHeader, max_pixels: int) -> int:
    """The pixels TensorFlow will decode for this header; Rejected when a job cannot take the image (a coding
    TensorFlow lacks, more than max_pixels)."""
    why = unsupported(header)
    if why:
        raise Rejected("undecodable", why)
    pixels = header.width * header.height * header.frames
    if pixels > max_pixels:
        frames = f" × {header.frames} frames" if header.frames > 1 else ""
        raise Rejected("too_many_pixels", f"{header.width}×{header.height}{frames} = {pixels} pixels exceeds "
                                          f"max_pixels={max_pixels}")
    return pixels


def _check(fs, c: _Candidate, max_pixels: int, header: ImageHeader | None = None) -> ImageHeader:
    """The candidate's header (`header`: as read already from this file's bytes, through open_inside as here),
    checked; Rejected when the job cannot take it."""
    if c.size == 0:
        raise Rejected("empty", "file is empty (0 bytes)")
    try:
        for n in (HEADER_FIRST, HEADER_PREFIX) if header is None else ():
            head = fs.read(c.relpath, n)
            try:
                header = read_header(head)
                break
            except NeedMoreData:
                if len(head) < n:  # that was the whole file
                    raise
        if header is None:
            if c.size > HEADER_RETRY_MAX:
                raise Rejected(
                    "bad_header", f"no image size in the first {HEADER_RETRY_MAX} bytes of a {c.size}-byte file"
                ) from None
            header = read_header(fs.read(c.relpath, -1))
    except OutsideJob as e:
        raise Rejected("outside_job", e.strerror) from None
    except OSError as e:
        if vanished(e):
            raise Rejected("missing", f"listed, then gone before its header was read: {e.strerror or e}") from None
        raise Rejected("unreadable", f"cannot read file: {e.strerror or e}") from None
    pixels = check_header(header, max_pixels)
    # The engine reads a file whole. One far bigger than its image can need (a small header glued onto
    # gigabytes of anything) is refused here, before it can exhaust memory: 8 bytes a pixel is raw 16-bit
    # RGBA, the worst encoding, and metadata (EXIF, ICC, XMP) gets MAX_METADATA_BYTES on top.
    limit = 8 * pixels + MAX_METADATA_BYTES
    if c.size > limit:
        raise Rejected("bad_header", f"file is {c.size} bytes, more than a {header.width}×{header.height} "
                                     f"{header.format} can hold (at most {limit}); not reading it whole")
    return header
