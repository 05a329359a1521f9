"""Scratch folders: where a records job inflates its GZIP and ZLIB shards, `$TMPDIR/augd-records-<machine>-<pid>-*`
(augd.owner's machine key: a pid means something only in its own process table). A folder is removed when the
plan holding it is dropped or its process exits; one whose process died (`kill -9`, a crash) is swept by the next
augd process on this machine that makes one, and by the daemon at start and whenever it takes a job over, so a
restart never inflates a second copy beside the first. TensorFlow-free."""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import weakref

from augd.owner import machine_key, pid_alive

__all__ = ["Scratch", "sweep_scratch"]

PREFIX = "augd-records-"
_NAME = re.compile(rf"^{PREFIX}(?P<machine>[0-9a-f]{{12}})-(?P<pid>\d+)-")


class Scratch:
    """A job's scratch folder. A pickled copy (a Beam worker's) names it, owns nothing."""

    def __init__(self, path: str | None = None):
        if path is None:
            sweep_scratch()
            path = tempfile.mkdtemp(prefix=f"{PREFIX}{machine_key()}-{os.getpid()}-")
            weakref.finalize(self, shutil.rmtree, path, True)
        self.path = path

    def __reduce__(self):
        return Scratch, (self.path,)


def sweep_scratch(tmpdir: str | None = None) -> list[str]:
    """Remove the scratch folders of this machine's processes that are gone; returns their paths."""
    root = tmpdir or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(root)
    except OSError:
        return removed
    for name in names:
        m = _NAME.match(name)
        if m and m.group("machine") == machine_key() and not pid_alive(int(m.group("pid"))):
            path = os.path.join(root, name)
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
