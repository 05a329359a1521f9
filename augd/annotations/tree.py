"""What files are in a job folder and which image goes with which annotation: the folder listed once, image
sizes read from their headers, annotation files paired with images by path and stem. TensorFlow-free."""
from __future__ import annotations

import os

from augd.errors import Rejected
from augd.files import inside
from augd.formats import ImageHeader, NeedMoreData, read_header
from augd.io.jobfs import open_inside

__all__ = ["IMAGE_EXTENSIONS", "Sizes", "Tree", "annotations_beside", "extension", "pair", "read_image_header", "stem",
           "under", "upright"]

#: Files paired with annotations by name; other files in the image folders are left to the scan.
IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp"})
_HEADER_READS = (16 * 1024, 256 * 1024, 64 * 1024 * 1024)


def stem(name: str) -> str:
    """The name without its last extension ("a.b.jpg" -> "a.b"); a dotfile-like name is kept whole."""
    base, dot, _ = name.rpartition(".")
    return base if dot and base else name


def extension(name: str) -> str:
    """The name's extension, lower-cased, with its dot ("" when it has none)."""
    return os.path.splitext(name)[1].lower()


def under(top: str, rel: str) -> str:
    """`rel` relative to the folder `top` ("" the root), so that an image and its annotation compare."""
    return rel[len(top) + 1:] if top else rel


class Tree:
    """The job's files and folders, listed once: hidden names skipped, symlinked folders not followed (the scan
    reports what it cannot use), symlinked files remembered so that one leading out of the job is refused."""

    def __init__(self, root: str):
        self.root = root
        self.files: dict[str, list[str]] = {}
        self.links: set[str] = set()
        stack = [""]
        while stack:
            rel = stack.pop()
            names, subdirs = [], []
            try:
                with os.scandir(self.path(rel)) as it:
                    for e in it:
                        if e.name.startswith("."):
                            continue
                        r = f"{rel}/{e.name}" if rel else e.name
                        try:
                            if e.is_dir(follow_symlinks=False):
                                subdirs.append(r)
                            elif e.is_file():
                                names.append(e.name)
                                if e.is_symlink():
                                    self.links.add(r)
                        except OSError:
                            continue
            except OSError:
                continue
            self.files[rel] = sorted(names)
            stack.extend(sorted(subdirs, reverse=True))
        self._sets = {d: set(n) for d, n in self.files.items()}

    def path(self, rel: str) -> str:
        return os.path.join(self.root, *rel.split("/")) if rel else self.root

    def isdir(self, rel: str) -> bool:
        return rel in self.files

    def isfile(self, rel: str) -> bool:
        d, _, name = rel.rpartition("/")
        return name in self._sets.get(d, ())

    def below(self, top: str, exts=None) -> list[str]:
        """Files at any depth below `top` ("" the root), with one of `exts` if given, in path order."""
        out = []
        for d, names in self.files.items():
            if top and d != top and not d.startswith(top + "/"):
                continue
            out.extend(f"{d}/{n}" if d else n for n in names if exts is None or extension(n) in exts)
        return sorted(out)

    def subdirs(self, rel: str) -> list[str]:
        prefix = f"{rel}/" if rel else ""
        return sorted(d[len(prefix):] for d in self.files if d.startswith(prefix) and d != rel
                      and "/" not in d[len(prefix):])


class Sizes:
    """An image's upright (height, width) and EXIF orientation from its header, or None when it cannot be read.
    `headers` keeps each header read (None: unreadable), for the scan not to read it again."""

    def __init__(self, tree: Tree):
        self.tree = tree
        self.headers: dict[str, ImageHeader | None] = {}

    def __call__(self, rel: str) -> tuple[int, int, int] | None:
        if rel not in self.headers:
            image = self.image_file(rel)
            self.headers[rel] = None if image is None else read_image_header(*image)
        h = self.headers[rel]
        return None if h is None else upright(h)

    def image_file(self, rel: str) -> tuple[str, str] | None:
        """(the job's root, the image's absolute path): read_image_header's arguments; None for a link leading out
        of the job."""
        path = self.tree.path(rel)
        return None if rel in self.tree.links and not inside(self.tree.root, path) else (self.tree.root, path)

    def known(self, rel: str, header: ImageHeader | None) -> None:
        """The header read_image_header gave for the image elsewhere (augd.annotations.reading.Reading.map)."""
        self.headers[rel] = header


def upright(h: ImageHeader) -> tuple[int, int, int]:
    """(height, width, EXIF orientation) of the image as it is shown (orientations 5-8 turn it a quarter)."""
    if h.orientation in (5, 6, 7, 8):
        return h.width, h.height, h.orientation
    return h.height, h.width, h.orientation


def read_image_header(root: str, path: str) -> ImageHeader | None:
    """The header of the regular file at `path` inside the job at `root`, opened as the scan and the workers open
    a job's files (augd.io.jobfs.open_inside: no symlink out of the job, no FIFO), by prefixes of growing length
    until it parses (the same header the whole file gives); None when it cannot be read."""
    try:
        with open_inside(root, path) as fh:
            head = b""
            for n in _HEADER_READS:
                head += fh.read(n - len(head))
                try:
                    return read_header(head)
                except NeedMoreData:
                    if len(head) < n:
                        return None
    except (OSError, Rejected):
        return None
    return None


def pair(tree: Tree, image_top: str, ann_top: str, ext: str, images: list[str]):
    """Annotation files (`ext`) below ann_top paired with the images below image_top at the same relative path
    and stem: ({image: annotation}, [annotations without an image], {image: why it is ambiguous})."""
    by_key: dict[str, list[str]] = {}
    for img in images:
        by_key.setdefault(stem(under(image_top, img)), []).append(img)
    pairs, orphans, ambiguous = {}, [], {}
    for ann in tree.below(ann_top, {ext}):
        key = stem(under(ann_top, ann))
        found = by_key.get(key, [])
        if not found:
            orphans.append(ann)
        elif len(found) > 1:
            for img in found:
                ambiguous[img] = f"{ann}: pairs with {len(found)} images of one name ({', '.join(found)}); keep one"
        else:
            pairs[found[0]] = ann
    return pairs, orphans, ambiguous


def annotations_beside(tree: Tree, ext: str) -> list[str]:
    """Annotation files (`ext`) with an image of the same stem in their folder."""
    out = []
    for d, names in tree.files.items():
        stems = {stem(n) for n in names if extension(n) in IMAGE_EXTENSIONS}
        out.extend(f"{d}/{n}" if d else n for n in names if extension(n) == ext and stem(n) in stems)
    return sorted(out)
