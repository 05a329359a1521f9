"""Formats of one annotation file per image, paired with it by path and stem (VOC's XMLs, YOLO's label files): the
one reader they share. A format says what its files are (`Paired`) and how one of them reads; `paired_format`
makes it an AnnotationFormat with up to three layouts: a tree (the images below one folder, their files below
another that mirrors it, splits from split folders below them: `images/train/` + `labels/train/`), beside (each
file beside its image, splits from split folders) and split (the tree's two folders inside each split folder at
the root, as DOTA and Roboflow ship them: `train/images/` + `train/labels/`, `valid/...`, `test/...`; a split
folder without the annotations folder, DOTA's test/, has its images rejected: unlabelled is not negative).
Pairing, orphans, ambiguous stems, splits, reading each file (on the job's worker processes when it has them),
settling each image against its file, the label map and the tree's masks are done here, once. TensorFlow-free.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from augd.annotations.labelmap import LabelMap
from augd.annotations.masks import pair_masks
from augd.annotations.model import Annotation, AnnotationError
from augd.annotations.reading import (SPLIT_NAMES, AnnotationFormat, Layout, Marker, Reading, folder_splits,
                                      settle_pairs)
from augd.annotations.tree import IMAGE_EXTENSIONS, Tree, annotations_beside, pair, stem, under

__all__ = ["TREE", "BESIDE", "Paired", "paired_format", "read_paired", "split_folders"]

TREE, BESIDE = "tree", "beside"   # what a layout's find returns, and read_paired is told


def _splits_below(top: str) -> Callable[[Reading, list[str]], None]:
    return lambda reading, images: folder_splits(reading, top, images)


@dataclass(frozen=True)
class Paired:
    """What a format of one file per image pairs, and how.

    `reader(reading)` -> (the per-file reader, the label map or None): called once per job before any file is read
    (it may read the job's own files first, as YOLO's class names, or raise AnnotationError: the job cannot be read
    in the format); the per-file reader is `read(path, where)`, or with `sized` `read(path, where, hw=(height,
    width))` of the upright image (it is sent to the job's worker processes: a module-level function or a partial
    of one). A label map of None: the class names of every file that parses, sorted (so that one bad image does
    not move the ids)."""
    extension: str                                 # the annotation files' (".xml")
    reader: Callable[[Reading], tuple]
    looks_right: Callable[[Tree, str], bool]       # beside, format auto: whether the job's first file is one
    tree: tuple[str, str] | None = None            # the tree layout's (images folder, annotations folder)
    tree_skip: tuple[str, ...] = ()                # the tree's other folders, never images (VOC's ImageSets/)
    tree_splits: Callable[[Reading, list[str]], None] | None = None   # default: split folders below the images'
    masks: str | None = None                       # the tree's folder of mask PNGs, paired when it is there
    sized: bool = False
    others: bool = False   # beside: a file of the extension with no image of its stem is no annotation (not refused)
    bare: bool = False     # beside, the format named: a folder without any such file is the format's (all negatives)
    #: `finish(reading, got)`, once every file is read ({file: Annotation, AnnotationError or None}) and before any
    #: image is settled: what only the whole job tells (LabelMe's keypoint names); it may set reading.keypoints
    #: and replace entries of `got`
    finish: Callable[[Reading, dict], None] | None = None


def split_folders(tree: Tree, p: Paired) -> tuple[str, ...] | None:
    """The job's split folders when it has the split layout (`train/images/` + `train/labels/`, ...): every folder
    at its root names a split (reading.SPLIT_NAMES), and one of them at least holds both of the tree's folders. A
    job of class folders named train/ and val/ has neither: it stays a classification job."""
    if p.tree is None:
        return None
    top, files = p.tree
    dirs = tree.subdirs("")
    if not dirs or any(d not in SPLIT_NAMES for d in dirs):
        return None
    return tuple(dirs) if any(tree.isdir(f"{d}/{top}") and tree.isdir(f"{d}/{files}") for d in dirs) else None


def _pair_splits(reading: Reading, p: Paired, dirs: tuple[str, ...]) -> tuple[list[str], dict[str, str]]:
    """The split layout paired: (the images, {image: its file}); each image's split is its split folder's, the
    split folders' own folders are skipped, and an image below a split folder but outside its images folder, an
    annotation file without an image, or an image of a split folder without an annotations folder is rejected."""
    tree, (top, files) = reading.tree, p.tree
    held: dict[str, str] = {}
    for d in dirs:
        split = SPLIT_NAMES[d]
        if split in held:
            raise AnnotationError(f"{reading.root}: both {held[split]}/ and {d}/ hold the {split} split; merge "
                                  f"them into one")
        held[split] = d
    images, pairs = [], {}
    reading.image_dirs = tuple(f"{d}/{top}" for d in dirs if tree.isdir(f"{d}/{top}"))
    for d in dirs:
        own = [f"{d}/{f}" for f in (files, p.masks) if f and tree.isdir(f"{d}/{f}")]
        reading.skip.update(own)
        folder, labels = f"{d}/{top}", f"{d}/{files}"
        mine = []
        for img in tree.below(d, IMAGE_EXTENSIONS):
            if any(img.startswith(f + "/") for f in own):
                continue
            if not img.startswith(folder + "/"):
                reading.reject(img, f"{img}: outside {folder}/; in the split layout {d}/'s images are in "
                                    f"{folder}/ and their {p.extension} files in {labels}/")
                continue
            mine.append(img)
            reading.splits[img] = SPLIT_NAMES[d]
        images.extend(mine)
        if not tree.isdir(labels):
            for img in mine:
                reading.reject(img, f"{img}: {d}/ has no {files}/ folder, so none of its images is labelled: left "
                                    f"out, not written as a negative (an image without objects); add {labels}/ (a "
                                    f"{p.extension} per image) to use them, or move {d}/ out of the job")
            continue
        found, orphans, ambiguous = pair(tree, folder, labels, p.extension, mine)
        pairs.update(found)
        for ann in orphans:
            reading.reject(ann, f"{ann}: an annotation for a missing image: no {stem(under(labels, ann))}.* in "
                                f"{folder}/")
        for img, why in ambiguous.items():
            reading.reject(img, why)
    return images, pairs


def read_paired(reading: Reading, how: str, p: Paired) -> None:
    """Read a job of the format laid out as `how` (TREE, BESIDE, or the split folders split_folders found) into
    `reading`."""
    tree = reading.tree
    read, label_map = p.reader(reading)
    if how == TREE:
        top, files = p.tree
        images = tree.below(top, IMAGE_EXTENSIONS)
        pairs, orphans, ambiguous = pair(tree, top, files, p.extension, images)
        reading.skip.update(f for f in (files, *p.tree_skip) if tree.isdir(f))
        reading.image_dirs = (top,)
        (p.tree_splits or _splits_below(top))(reading, images)
        for ann in orphans:
            reading.reject(ann, f"{ann}: an annotation for a missing image: no {stem(under(files, ann))}.* in {top}/")
    elif how == BESIDE:
        images = tree.below("", IMAGE_EXTENSIONS)
        pairs, orphans, ambiguous = pair(tree, "", "", p.extension, images)
        reading.skip.update(tree.below("", {p.extension}))
        folder_splits(reading, "", images)
        for ann in () if p.others else orphans:
            reading.reject(ann, f"{ann}: an annotation for a missing image: no {stem(ann.rsplit('/', 1)[-1])}.* "
                                f"beside it")
    else:   # the split layout: `how` is its split folders
        images, pairs = _pair_splits(reading, p, how)
        ambiguous = {}
    for img, why in ambiguous.items():
        reading.reject(img, why)
    # Every paired file is read, whatever becomes of its image (a header that cannot be read, a split conflict):
    # the class names of every file that parses make the ids, so one bad image does not move them.
    got = reading.read_files(pairs, read, sized=p.sized)
    if p.finish is not None:
        p.finish(reading, got)
    settle_pairs(reading, images, pairs, got)
    if reading.fixed is None:
        reading.label_map = label_map or LabelMap.from_names(sorted(
            {o.name for a in got.values() if isinstance(a, Annotation) for o in a.objects}))
    if how == TREE and p.masks and tree.isdir(p.masks):
        pair_masks(reading, p.tree[0], p.masks, images)
    elif isinstance(how, tuple) and p.masks:
        for d in how:
            if tree.isdir(f"{d}/{p.masks}"):
                pair_masks(reading, f"{d}/{p.tree[0]}", f"{d}/{p.masks}",
                           [i for i in images if i.startswith(f"{d}/{p.tree[0]}/")])


def paired_format(name: str, p: Paired, *, ranks: tuple[int | None, int | None], title: str, expected: str,
                  objects: bool = True, auto: bool = True, split_rank: int | None = None) -> AnnotationFormat:
    """The AnnotationFormat of a Paired format: its tree layout at ranks[0], its beside layout at ranks[1], its split
    layout (the tree's two folders in each split folder at the root: DOTA's and Roboflow's `train/images/` +
    `train/labels/`) at split_rank (None: no such layout), their markers (a file of the extension below the tree's
    annotations folder, in a split folder or not, or beside an image of its stem). `auto`: Layout.auto of all."""
    def beside(tree: Tree, named: bool):
        files = annotations_beside(tree, p.extension)
        if named:
            return BESIDE if files or p.bare else None
        return BESIDE if files and p.looks_right(tree, files[0]) else None

    layouts, markers = [], []
    if p.tree is not None and ranks[0] is not None:
        top, files = p.tree
        layouts.append(Layout(ranks[0], lambda tree, named: TREE if tree.isdir(top) and tree.isdir(files) else None,
                              auto))
        markers.append(Marker(p.extension, under=files))
    if p.tree is not None and split_rank is not None:
        layouts.append(Layout(split_rank, lambda tree, named: split_folders(tree, p), auto))
        markers.append(Marker(p.extension, under=p.tree[1], in_split=True))
    if ranks[1] is not None:
        layouts.append(Layout(ranks[1], beside, auto))
        markers.append(Marker(p.extension, beside=True))
    return AnnotationFormat(name, layouts=tuple(layouts), read=lambda reading, how: read_paired(reading, how, p),
                            expected=expected, title=title, markers=tuple(markers), objects=objects)
