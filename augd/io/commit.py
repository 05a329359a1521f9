"""Atomic job output: readers see no destination, or a complete one with `_SUCCESS` in it.

Everything is written into a hidden temp folder beside the destination, `<out_root>/.<job>.tmp-<machine>-<pid>-<hex>`
(`machine`: augd.owner.machine_key, so that a daemon sharing the output folder from another machine or container
never takes a live run's temp folder for a dead one's).
Locally, commit() writes `_SUCCESS` into it last, fsyncs it and renames it to `<out_root>/<job>`: the output
appears whole, `_SUCCESS` and all, in one rename. A crash before the rename leaves only hidden debris
(clean_stale_temps removes it). A destination without `_SUCCESS` (an older augd's crash between its rename and its
`_SUCCESS`, a partial copy) is treated as incomplete by readers and removed by the next run.

Overwrite: the old destination is renamed aside (hidden), the new one renamed in, then the old one deleted.
Between those two renames (microseconds, local) the destination path is absent; readers that find it absent or
without `_SUCCESS` must treat it as "not ready", never as "empty". A crash inside that window loses the old
output, which the caller asked to replace anyway.

Object stores (any scheme but local/file) cannot rename atomically: there a rename is copy + delete, and
`_SUCCESS`, written last, is the only commit point.
"""
from __future__ import annotations

import errno
import json
import os
import re
import secrets
import shutil

from augd.errors import AugdError
from augd.files import fsync_dir, fsync_file
from augd.io.jobfs import is_url, local_path
from augd.owner import machine_key, pid_alive

__all__ = ["SUCCESS", "AtomicOutput", "OutputExists", "clean_stale_temps", "is_complete", "write_json", "write_text"]

SUCCESS = "_SUCCESS"
# Temp folders named before the machine key was added to the name are taken to be this machine's.
_TEMP = re.compile(r"^\.(?P<job>.+)\.tmp-(?:(?P<machine>[0-9a-f]{12})-)?(?P<pid>\d+)-[0-9a-f]+(\.old)?$")


class OutputExists(AugdError):
    """The destination holds a complete output and overwrite was not asked for."""


def _join(a: str, b: str) -> str:
    return f"{a.rstrip('/')}/{b}"


def _gfile():
    """tf.io.gfile, for URL roots only: a local output never loads TensorFlow for its files (see augd.io.shards)."""
    import tensorflow as tf
    return tf.io.gfile


def is_complete(dest: str) -> bool:
    path = _join(dest, SUCCESS)
    return _gfile().exists(path) if is_url(path) else os.path.exists(local_path(path))


def write_text(path: str, text: str) -> None:
    # a lone surrogate (a non-UTF-8 file name, os.fsdecode'd) becomes its \udcXX escape: valid JSON, and never an
    # error after a job's work (a rejected file of such a name made writing manifest.json raise)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if is_url(path):
        with _gfile().GFile(path, "w") as f:
            f.write(text)
    else:
        with open(local_path(path), "w", encoding="utf-8") as f:
            f.write(text)


def write_json(path: str, obj) -> None:
    # Sorted keys and a fixed layout: the same manifest gives the same bytes, so outputs can be compared.
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def _fsync_tree(root: str, tick=None) -> None:
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            fsync_file(os.path.join(dirpath, name))
            if tick is not None:   # a shard's fsync can take seconds: the caller's heartbeat goes on
                tick()
        fsync_dir(dirpath)


def _rmtree(path: str) -> None:
    if is_url(path):
        import tensorflow as tf
        try:
            tf.io.gfile.rmtree(path)
        except tf.errors.NotFoundError:  # already gone (some filesystems report stale dirs as existing)
            pass
    else:
        shutil.rmtree(local_path(path), ignore_errors=True)


class AtomicOutput:
    """with AtomicOutput(out, "job") as o: write into o.tmp_dir ...; o.commit()

    Leaving the block without commit() (normally or by an exception) discards the temp folder: nothing half
    written can become visible by accident."""

    def __init__(self, out_root: str, job_name: str, *, overwrite: bool = False):
        if not job_name or "/" in job_name or job_name.startswith("."):
            raise ValueError(f"job name must be a plain, non-hidden folder name; got {job_name!r}")
        self.out_root = out_root.rstrip("/") or "/"
        self.job_name = job_name
        self.overwrite = overwrite
        self.dest = _join(self.out_root, job_name)
        self.tmp_dir = _join(self.out_root, f".{job_name}.tmp-{machine_key()}-{os.getpid()}-{secrets.token_hex(4)}")
        self.local = not is_url(self.out_root)
        self.committed = False

    def __enter__(self) -> "AtomicOutput":
        if self.local:
            makedirs, exists, mkdir = (lambda p: os.makedirs(p, exist_ok=True)), os.path.lexists, os.mkdir
            root, dest, tmp = local_path(self.out_root), local_path(self.dest), local_path(self.tmp_dir)
        else:
            gfile = _gfile()
            makedirs, exists, mkdir = gfile.makedirs, gfile.exists, gfile.mkdir
            root, dest, tmp = self.out_root, self.dest, self.tmp_dir
        makedirs(root)
        if is_complete(self.dest):
            if not self.overwrite:
                raise OutputExists(f"{self.dest} already holds a complete output; pass --overwrite to replace it")
        elif exists(dest):
            _rmtree(self.dest)  # no _SUCCESS: debris of a crashed commit
        mkdir(tmp)
        return self

    def commit(self, tick=None) -> None:
        """Commit; `tick()` is called after each file synced (it must not raise)."""
        if self.committed:
            raise RuntimeError("commit() called twice")
        if self.local:
            self._commit_local(tick)
        else:
            self._commit_remote()
        self.committed = True

    def _commit_local(self, tick=None) -> None:
        """_SUCCESS goes into the temp folder first, and one rename makes the whole output appear: a reader (or
        another daemon committing an output of the same name) never meets the destination without it."""
        tmp, dest, root = local_path(self.tmp_dir), local_path(self.dest), local_path(self.out_root)
        write_text(os.path.join(tmp, SUCCESS), "")
        _fsync_tree(tmp, tick)
        aside = None
        if os.path.lexists(dest):
            if is_complete(dest) and not self.overwrite:  # another run committed while we worked
                raise OutputExists(f"{self.dest} already holds a complete output; pass --overwrite to replace it")
            aside = tmp + ".old"
            os.rename(dest, aside)
        try:
            os.rename(tmp, dest)
        except OSError as exc:
            if aside:  # put the old output back rather than leave no output at all
                os.rename(aside, dest)
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST) and is_complete(dest):   # committed just now
                raise OutputExists(f"{self.dest} already holds a complete output (committed while this run "
                                   f"committed); pass --overwrite to replace it") from None
            raise
        fsync_dir(root)
        if aside:
            shutil.rmtree(aside, ignore_errors=True)

    def _commit_remote(self) -> None:
        gfile = _gfile()
        if gfile.exists(self.dest):
            if is_complete(self.dest) and not self.overwrite:
                raise OutputExists(f"{self.dest} already holds a complete output; pass --overwrite to replace it")
            if is_complete(self.dest):
                gfile.remove(_join(self.dest, SUCCESS))  # demote to incomplete before touching anything else
            _rmtree(self.dest)
        _copy_tree(self.tmp_dir, self.dest)
        write_text(_join(self.dest, SUCCESS), "")   # last: an object store's only commit point
        _rmtree(self.tmp_dir)

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self.committed:
            _rmtree(self.tmp_dir)


def _copy_tree(src: str, dst: str) -> None:
    """Copy file by file. Object stores rename by copy + delete anyway, and gfile's directory rename is not
    recursive on every filesystem (ram:// moves the folder entry but not its files)."""
    gfile = _gfile()
    gfile.makedirs(dst)
    for name in gfile.listdir(src):
        name = name.rstrip("/")
        s, d = _join(src, name), _join(dst, name)
        if gfile.isdir(s):
            _copy_tree(s, d)
        else:
            gfile.copy(s, d, overwrite=True)


def clean_stale_temps(out_root: str, gone=None) -> list[str]:
    """Remove temp folders of this machine's runs that died (their pid is gone) under a local out_root, and those
    of `gone` (an augd.owner.Owner known to be gone: a daemon on another machine whose job was taken over);
    returns their paths. Another machine's are otherwise left alone (its pid means nothing here), as are
    object-store roots."""
    if is_url(out_root):
        return []
    root = local_path(out_root)
    removed = []
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return []
    for name in names:
        m = _TEMP.match(name)
        if not m:
            continue
        theirs = gone is not None and (m.group("machine"), int(m.group("pid"))) == (gone.machine, gone.pid)
        if theirs or m.group("machine") in (None, machine_key()) and not pid_alive(int(m.group("pid"))):
            path = os.path.join(root, name)
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
