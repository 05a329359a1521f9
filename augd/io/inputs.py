"""What a job's scan finds: its images, the files it rejected, and the whole result. A leaf of augd.io, so that
the job-folder reader (jobfs.py), the scan (scan.py) and everything downstream share the types without importing
each other."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol

from augd.formats import ImageHeader

__all__ = ["ImageLayout", "InputImage", "RejectedInput", "ScanResult"]


class ImageLayout(Protocol):
    """Where a detection job's images are, as its annotations say (augd.annotations.layout.AnnotatedJob is one):
    what the scan needs of them, so that io does not import the annotation readers above it."""
    format: str
    rejected: Mapping[str, str]        # image relpath (or an annotation file's) -> bad_annotation message
    skip: frozenset[str]               # relpaths that are the layout's own files, not images
    image_dirs: tuple[str, ...]        # where the images are ("" for the whole job)
    splits: Mapping[str, str]          # image relpath -> its split; {} without splits
    headers: Mapping[str, ImageHeader]  # image relpath -> its header, where the layout read it (not read again)


@dataclass(frozen=True)
class InputImage:
    relpath: str  # posix, relative to the job root; may hold surrogate escapes for non-UTF-8 names
    path: str
    size: int
    label: int
    label_text: str
    header: ImageHeader
    root: str = ""  # the job folder: a local read must resolve inside it
    split: str = ""  # "train", "validation" or "test" in a job with split folders (or a `split:` setting)
    #: a record of a TFRecord shard (augd.annotations.tfrecords): its image's bytes are `size` bytes from here in
    #: `path` (the shard, or its inflated copy); -1: the whole file at `path`
    offset: int = -1


@dataclass(frozen=True)
class RejectedInput:
    relpath: str
    reason: str
    message: str
    split: str = ""   # the split the input would have been in (counted there in the manifest and augd check)


@dataclass(frozen=True)
class ScanResult:
    root: str
    classes: tuple[str, ...]
    images: tuple[InputImage, ...]
    rejected: tuple[RejectedInput, ...]
    splits: tuple[str, ...] = ()   # the split folders found, in SPLITS order; () for a job without
    #: The rejected relpaths that are no input image (a detection layout's annotation files: an orphan, a broken
    #: COCO JSON): listed with the rejected images, but not counted against max_rejected.
    not_inputs: frozenset[str] = frozenset()
