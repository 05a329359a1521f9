"""Filesystem policies every layer shares: bounded reads of files a job supplies, whether a path stays inside a
folder, and fsync. A leaf module (like errors and defaults), so spec, io and the daemon use one of each."""
from __future__ import annotations

import os
import re
import select
import stat

from augd.errors import UntrustedFileError

__all__ = ["count_files", "format_size", "fsync_dir", "fsync_file", "inside", "one_line", "read_capped"]

#: What one line of a report may not hold as it is: a newline in a file name would forge a line of its own.
_CONTROL = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")


def one_line(text: str) -> str:
    """`text` (a file name, a message quoting one) as one line: control characters and the surrogates of
    non-UTF-8 bytes shown as escapes (\\n, \\x1b, \\udcff)."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)

_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a directory"}


def format_size(n: int) -> str:
    """1048576 -> '1 MiB', 2411724 -> '2.3 MiB'."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f}".removesuffix(".0") + f" {unit}"
    return f"{n} bytes"


def _refuse_irregular(path: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise UntrustedFileError(f"{path}: refused: not a regular file ({kind})", path=path)


def read_capped(path: str, max_bytes: int, kind: str, limit_name: str = "") -> bytes:
    """The bytes of a regular file of at most max_bytes; never reads more than max_bytes + 1.

    A FIFO or device is refused without opening it (stat) or blocking on it (O_NONBLOCK, then fstat, in case
    it was swapped in between). OSError from open/read propagates for the caller to word.
    """
    def too_big(size: str) -> UntrustedFileError:
        named = f" ({limit_name})" if limit_name else ""
        return UntrustedFileError(f"{path}: refused: {size} exceeds the {format_size(max_bytes)} limit for "
                                  f"{kind} files{named}", path=path, limit=max_bytes)

    _refuse_irregular(path, os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        _refuse_irregular(path, st.st_mode)
        if st.st_size > max_bytes:  # refused without reading a byte (a sparse 10 GB file costs nothing)
            size = format_size(st.st_size)
            exact = size.endswith("bytes") or size == format_size(max_bytes)  # not "1 MiB exceeds 1 MiB"
            raise too_big(f"{st.st_size} bytes" if exact else f"{size} ({st.st_size} bytes)")
        data = fh.read(st.st_size + 1)
        if len(data) > st.st_size:  # it grew, or reports no size (procfs): read on, but only up to the limit
            data += fh.read(max_bytes + 1 - len(data))
    if len(data) > max_bytes:
        raise too_big(f"more than {format_size(max_bytes)}")
    return data


def inside(root: str, path: str) -> bool:
    """True when `path`, symlinks resolved, is `root` or lies below it (resolved too): a job never makes augd
    read a file outside its folder."""
    real_root = os.path.realpath(root)
    return os.path.commonpath([real_root, os.path.realpath(path)]) == real_root


def fsync_file(path: str) -> None:
    """Flush a written file to disk, so that a rename or marker after this survives a power cut."""
    _fsync(path, 0)


def fsync_dir(path: str) -> None:
    """Flush a folder's entries (renames and new files in it) to disk."""
    _fsync(path, os.O_DIRECTORY)


def _fsync(path: str, flags: int) -> None:
    fd = os.open(path, os.O_RDONLY | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def count_files(path: str, enough: int) -> int:
    """Files under a folder, counted up to `enough` (a size threshold needs no more). Cheap: names only."""
    n = 0
    for _, _, files in os.walk(path):
        n += len(files)
        if n >= enough:
            break
    return n


def reader_gone(stream) -> bool:
    """Whether the pipe or socket behind a standard stream has lost its reader (poll says POLLERR or POLLHUP),
    so that a BrokenPipeError can be told apart from one of some other pipe."""
    try:
        p = select.poll()
        p.register(stream.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in p.poll(0))
    except (OSError, ValueError, AttributeError):   # closed, or no file behind it: nothing to write to either
        return True


def point_at_devnull(*streams) -> None:
    """Point standard streams whose reader went away at /dev/null: nothing more written to them, not even the
    buffered rest that Python flushes at exit (and would exit 120 over), can fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for stream in streams:
            try:
                os.dup2(devnull, stream.fileno())
            except (OSError, ValueError, AttributeError):   # no such stream, or not a file
                pass
    finally:
        os.close(devnull)
