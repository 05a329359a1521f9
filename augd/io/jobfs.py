"""Reading a job folder without trusting it: locally, no path that resolves outside the folder and nothing but
regular files (a symlink or FIFO swapped in after the listing is refused, never followed or blocked on); URL
roots ("gs://", "ram://", ...) through tf.io.gfile, imported lazily."""
from __future__ import annotations

import errno
import os
import re
import stat
from typing import TYPE_CHECKING

from augd.files import inside

if TYPE_CHECKING:
    from augd.io.inputs import InputImage

__all__ = ["GFileTree", "LocalTree", "OutsideJob", "folder_identity", "is_url", "local_path", "open_inside",
           "read_bytes", "read_span", "vanished"]

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(path: str) -> bool:
    """True for paths with a scheme that tf.io.gfile must handle; "file://" counts as local."""
    return bool(_URL.match(path)) and not path.startswith("file://")


def local_path(path: str) -> str:
    return path[len("file://") :] if path.startswith("file://") else path


def read_bytes(img: "InputImage") -> bytes:
    """The whole file (a record's image: its bytes within the shard). Locally, the file is opened only if it still
    resolves inside the job folder, without following a symlink swapped in after the scan, and only if it is a
    regular file (refused without blocking)."""
    if img.offset >= 0:
        return read_span(img.root, img.path, img.offset, img.size)
    if is_url(img.path):
        import tensorflow as tf

        with tf.io.gfile.GFile(img.path, "rb") as f:
            return f.read()
    root = local_path(img.root) if img.root else os.path.dirname(local_path(img.path))
    with open_inside(root, local_path(img.path)) as f:
        return f.read()


def read_span(root: str, path: str, offset: int, size: int) -> bytes:
    """`size` bytes at `offset` of the file at `path` (opened as read_bytes opens it); OSError when the file
    holds fewer (it changed since the scan)."""
    with open_inside(local_path(root), local_path(path)) as f:
        data = os.pread(f.fileno(), size, offset)
    if len(data) < size:
        raise OSError(errno.EIO, f"{path}: {len(data)} of {size} bytes at {offset}: the file changed")
    return data


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def vanished(exc: OSError) -> bool:
    """The file, or a folder on its path, is no longer there: the job folder changed under the job (an input
    that fails for a reason of its own is rejected; one that vanished fails the job, reason input_missing)."""
    return isinstance(exc, (FileNotFoundError, NotADirectoryError))


def folder_identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of a local job folder, None for a URL or a folder that is not there. A job commits only
    while its folder is still the one it started on: renamed away, removed or replaced, it is not."""
    if is_url(path):
        return None
    try:
        st = os.stat(local_path(path))
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


class OutsideJob(OSError):
    """A path that resolves outside the job folder (a symlink swapped in after the listing)."""


_real_roots: dict = {}


def _real_root(root: str) -> str:
    """realpath(root), cached per (path, device, inode): the job root is the same for every image, and
    resolving it costs an lstat per component."""
    st = os.stat(root)
    key = (root, st.st_dev, st.st_ino)
    real = _real_roots.get(key)
    if real is None:
        if len(_real_roots) > 256:
            _real_roots.clear()
        real = _real_roots[key] = os.path.realpath(root)
    return real


def _open_components(real_root: str, parts: list[str]):
    fd = os.open(real_root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        for part in parts[:-1]:
            sub = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = sub
        leaf = os.open(parts[-1], os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | _CLOEXEC, dir_fd=fd)
    finally:
        os.close(fd)
    return _regular(leaf)


def open_inside(root: str, path: str):
    """Open `path` only if it is a regular file inside `root`: one component at a time with O_NOFOLLOW, so a
    symlink or FIFO swapped in after the scan fails the open instead of leading outside the job or blocking."""
    real_root = _real_root(root)
    rel = path[len(root):].lstrip("/") if path.startswith(root.rstrip("/") + "/") else ""
    parts = rel.split("/")
    if rel and ".." not in parts and "." not in parts and "" not in parts:
        try:
            return _open_components(real_root, parts)  # the common case: no symlink on the way
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
    # A symlink on the way: one that stays inside the job is fine, so resolve, check, and open the same way.
    target = os.path.realpath(path)
    if target == real_root or not inside(real_root, target):
        raise OutsideJob(errno.EACCES, "the file now resolves outside the job folder (changed since the scan?)")
    return _open_components(real_root, os.path.relpath(target, real_root).split(os.sep))


def _regular(fd: int):
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


class LocalTree:
    """The job folder on a local filesystem. entries() yields (name, kind, detail): kind "dir", "file" (detail =
    size) or a reject reason (detail = message). Symlinks are resolved here, so escapes cannot get past it."""

    def __init__(self, root: str):
        self.root = root

    def path(self, rel: str) -> str:
        return os.path.join(self.root, rel) if rel else self.root

    def isdir(self, rel: str) -> bool:
        return os.path.isdir(self.path(rel))

    def entries(self, rel: str) -> list[tuple[str, str, object]]:
        out = []
        with os.scandir(self.path(rel)) as it:
            for e in it:
                out.append((e.name, *self._classify(e)))
        return sorted(out)

    def _classify(self, e: os.DirEntry) -> tuple[str, object]:
        try:
            st = e.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                if not inside(self.root, e.path):
                    return "outside_job", "symlink points outside the job folder"
                try:
                    st = os.stat(e.path)
                except OSError as err:
                    if err.errno == errno.ELOOP:
                        return "unreadable", "symlink loop (too many levels of symbolic links)"
                    return "unreadable", "broken symlink (its target does not exist)"
                if stat.S_ISDIR(st.st_mode):  # not followed: it would list images twice or loop
                    return "not_regular_file", "symlink to a folder (not followed; move or copy the images)"
        except OSError as err:
            if vanished(err):
                return "missing", "listed, then gone before it could be looked at"
            return "unreadable", f"cannot stat: {err.strerror or err}"
        if stat.S_ISDIR(st.st_mode):
            return "dir", None
        if stat.S_ISREG(st.st_mode):
            return "file", st.st_size
        return "not_regular_file", f"{_kind_of(st.st_mode)}, not a regular file"

    def read(self, rel: str, n: int) -> bytes:
        with open_inside(self.root, self.path(rel)) as f:
            return f.read(n)


class GFileTree:
    """The job folder behind a tf.io.gfile URL: no symlinks or special files exist there."""

    def __init__(self, root: str):
        import tensorflow as tf

        self.gfile = tf.io.gfile
        self.errors = tf.errors
        self.root = root.rstrip("/")

    def path(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def isdir(self, rel: str) -> bool:
        return self.gfile.isdir(self.path(rel))

    def entries(self, rel: str) -> list[tuple[str, str, object]]:
        try:
            names = self.gfile.listdir(self.path(rel))
        except self.errors.OpError as e:
            raise OSError(0, e.message) from None
        out = []
        for name in {n.rstrip("/") for n in names}:  # object stores mark folders with a trailing "/"
            p = self.path(f"{rel}/{name}" if rel else name)
            try:
                out.append((name, "dir", None) if self.gfile.isdir(p) else (name, "file", self.gfile.stat(p).length))
            except self.errors.OpError as e:
                out.append((name, "unreadable", f"cannot stat: {e.message}"))
        return sorted(out)

    def read(self, rel: str, n: int) -> bytes:
        try:
            with self.gfile.GFile(self.path(rel), "rb") as f:
                return f.read(n)
        except self.errors.OpError as e:
            raise OSError(0, e.message) from None
