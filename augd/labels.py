"""Fixed label maps: class names whose ids hold across jobs (a train and a validation job must agree). A leaf.

A map is given as a list of class names (id = position) or as a TF-slim labels file (`0:cat` lines, the
labels.txt augd writes; plain one-name-per-line files too). Without one, a job numbers its class folders in
sorted order.
"""
from __future__ import annotations

import os

from augd.errors import AugdError, UntrustedFileError
from augd.files import read_capped

__all__ = ["LabelMapError", "check_names", "label_map", "parse_labels_txt"]

#: A labels file is a few KB even for ImageNet's 1000 classes.
LABELS_MAX_BYTES = 1024 * 1024


class LabelMapError(AugdError):
    """A label map cannot be used: the message names where it came from and what is wrong."""


def check_names(names: list, source: str) -> tuple[str, ...]:
    if not names:
        raise LabelMapError(f"{source}: the label map is empty; give at least one class name")
    seen: set = set()
    for i, n in enumerate(names):
        if not isinstance(n, str) or not n or n != n.strip() or "/" in n or n.startswith("."):
            raise LabelMapError(f"{source}: class {i} is {n!r}; a class name is a folder name (not empty, no '/', "
                                f"not hidden, no surrounding spaces)")
        if n in seen:
            raise LabelMapError(f"{source}: class {n!r} is listed twice")
        seen.add(n)
    return tuple(names)


def parse_labels_txt(text: str, source: str) -> tuple[str, ...]:
    """`0:cat` lines with ids 0..n-1 in order (TF-slim), or one name per line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    names = []
    for k, ln in enumerate(lines):
        idx, sep, name = ln.partition(":")
        if sep and idx.strip().isdigit():
            if int(idx) != k:
                raise LabelMapError(f"{source}: line {k + 1} gives id {idx.strip()}; ids must be 0, 1, 2, ... in "
                                    f"order, one per line")
            names.append(name.strip())
        else:
            names.append(ln)
    return check_names(names, source)


def label_map(value, base_dir: str, source: str) -> tuple[str, ...] | None:
    """The class names a `labels:` setting means: a list of names, or a labels file (relative to base_dir)."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return check_names(list(value), source)
    if isinstance(value, str):
        path = value if os.path.isabs(value) else os.path.join(base_dir, value)
        try:
            text = read_capped(path, LABELS_MAX_BYTES, "labels").decode("utf-8")
        except (OSError, UntrustedFileError, UnicodeDecodeError) as exc:
            raise LabelMapError(f"{source}: labels: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") \
                from None
        return parse_labels_txt(text, path)
    raise LabelMapError(f"{source}: labels must be a list of class names or a labels file; got {value!r}")
