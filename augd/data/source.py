"""Which shard files a path means, and what the job's manifest.json (or labels.txt) says about them."""
from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field

import tensorflow as tf

from augd.errors import AugdError

__all__ = ["STORED_BOX_FORMAT", "DataError", "DatasetInfo", "resolve"]

SUCCESS = "_SUCCESS"
MANIFEST = "manifest.json"
LABELS = "labels.txt"
_GLOB = re.compile(r"[*?\[]")
_SPLIT = re.compile(r"^[A-Za-z0-9_]+$")
#: After the job name: "-<split>" or nothing, then augd's "-00000-of-00004.tfrecord[.gz]"; or TFDS's own
#: "-<split>.tfrecord-00000-of-00004".
_TAIL = (r"(?:-(?P<split>[A-Za-z0-9_]+))?-\d{5}-of-\d{5}\.tfrecord(?:\.gz)?",
         r"-(?P<split>[A-Za-z0-9_]+)\.tfrecord-\d{5}-of-\d{5}(?:\.gz)?")
ALLOWED_PATHS = "an augd output folder holding _SUCCESS, or a glob of .tfrecord[.gz] shard files"
#: The records' own box layout, in Keras 3's names: normalized (ymin, xmin, ymax, xmax).
STORED_BOX_FORMAT = "rel_yxyx"


class DataError(AugdError, ValueError):
    """A path or argument augd.data cannot use. The message names the path, what is wrong and what is allowed."""


@dataclass(frozen=True)
class DatasetInfo:
    """What is known about the records `load` reads. Counts are None where neither the manifest nor the file
    names tell them (a glob of foreign shards). class_counts are the job's (every split) labeled records per
    class; records, unlabeled_records and split_records count records in shard files."""
    path: str
    job: str | None
    split: str | None                        # as asked: None, "train" or "train+validation"
    splits: tuple[str, ...]                  # every split the shard names show; () when unsplit
    class_names: tuple[str, ...]
    class_counts: dict = field(hash=False)   # {class name: records}
    records: int | None                      # in the selected shards, labeled or not
    unlabeled_records: int | None            # label -1, in the selected shards
    split_records: dict = field(hash=False)  # {split: records}, every split
    pipeline: str | None
    pipeline_sha256: str | None
    variants: tuple[int, ...]
    image_format: str | None                 # jpeg | png | raw: the pipeline's output format
    shard_files: tuple[str, ...]             # full paths, sorted
    compression: str                         # none | gzip
    manifest: dict | None = field(default=None, hash=False, compare=False, repr=False)
    #: Keras 3's name for the boxes' layout: "rel_yxyx" (normalized ymin, xmin, ymax, xmax) as the records store
    #: them, or what load(bounding_box_format=) converted them to; None when the output holds no detection job.
    bounding_box_format: str | None = None

    @property
    def detection(self) -> bool:
        """True for a detection job's output (its manifest has an annotations block): boxes, not image labels."""
        return bool((self.manifest or {}).get("annotations"))

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def labeled_records(self) -> int | None:
        if self.records is None or self.unlabeled_records is None:
            return None
        return self.records - self.unlabeled_records


def _join(folder: str, name: str) -> str:
    return f"{folder.rstrip('/')}/{name}"


def _read_text(path: str) -> str:
    with tf.io.gfile.GFile(path, "r") as f:
        return f.read()


def _read_manifest(folder: str) -> dict | None:
    path = _join(folder, MANIFEST)
    if not tf.io.gfile.exists(path):
        return None
    try:
        manifest = json.loads(_read_text(path))
        ok = (isinstance(manifest, dict)
              and all(isinstance(s["file"], str) and isinstance(s["records"], int) for s in manifest["shards"])
              and all(isinstance(c["label"], int) and isinstance(c["name"], str) for c in manifest["classes"]))
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:  # the keys read below: shards [{file, records}], classes [{label, name}]
        raise DataError(f"{path}: not an augd manifest (invalid JSON, or no shards/classes lists); allowed: the "
                        f"manifest.json `augd run` writes")
    return manifest


def _read_labels(folder: str) -> tuple[str, ...]:
    """Class names from TF-slim's labels.txt ("0:name" lines), for shards without a manifest."""
    path = _join(folder, LABELS)
    if not tf.io.gfile.exists(path):
        return ()
    names = {}
    for n, line in enumerate(_read_text(path).splitlines(), 1):
        index, sep, name = line.partition(":")
        if line.strip() and (not sep or not index.strip().isdigit()):
            raise DataError(f"{path}:{n}: {line!r} is not a label line; allowed: '<index>:<class name>'")
        if sep:
            names[int(index)] = name
    if sorted(names) != list(range(len(names))):
        raise DataError(f"{path}: label indices {sorted(names)} have gaps; allowed: 0..N-1, once each")
    return tuple(names[i] for i in range(len(names)))


def _outputs_below(folder: str) -> list[str]:
    """The complete augd outputs one level below `folder` (what `augd run --out folder` made), sorted."""
    try:
        names = sorted(n.rstrip("/") for n in tf.io.gfile.listdir(folder))
    except tf.errors.OpError:
        return []
    return [_join(folder, n) for n in names
            if not n.startswith(".") and tf.io.gfile.exists(_join(_join(folder, n), SUCCESS))]


def _refuse_incomplete(folder: str) -> None:
    if tf.io.gfile.exists(_join(folder, SUCCESS)):
        return
    below = [] if tf.io.gfile.exists(_join(folder, MANIFEST)) else _outputs_below(folder)
    if below:   # the --out folder, not an output: say which outputs it holds
        shown = ", ".join(below[:10]) + (f" and {len(below) - 10} more" if len(below) > 10 else "")
        raise DataError(f"{folder}: not an output folder but a folder of {len(below)} output(s): {shown}; allowed: "
                        f"one of them, e.g. augd.data.load({below[0]!r}, ...), or a glob of their shards")
    raise DataError(f"{folder}: incomplete output (no {SUCCESS}): the job is still running, failed or "
                    f"crashed; allowed: a folder holding {SUCCESS}, which augd writes last")


def _split_of(name: str, job: str | None, wanted: str | None = None) -> str | None:
    """The split in a shard file name, or None. Without the job's name the stem is unknown ("my-pets-00000"
    could be job "my", split "pets"), so then only `wanted` is recognised, as a name suffix."""
    if job is None:
        if wanted is None:
            return None
        tails = [rf"-{re.escape(wanted)}-\d{{5}}-of-\d{{5}}\.tfrecord(?:\.gz)?$",
                 rf"-{re.escape(wanted)}\.tfrecord-\d{{5}}-of-\d{{5}}(?:\.gz)?$"]
        return wanted if any(re.search(t, name) for t in tails) else None
    for tail in _TAIL:
        m = re.fullmatch(re.escape(job) + tail, name)
        if m and m.group("split"):
            return m.group("split")
    return None


def _parse_split(path: str, split: str | None) -> tuple[str, ...]:
    if split is None:
        return ()
    parts = tuple(split.split("+")) if isinstance(split, str) else ()
    if not parts or not all(_SPLIT.match(p) for p in parts):
        raise DataError(f"{path}: split={split!r} is not a split name; allowed: None, a name of letters, digits "
                        f"and _ ('train'), or several joined by + ('train+validation')")
    return parts


def _select(path: str, names: list[str], job: str | None, split: str | None, *, whole: bool):
    """(names of the split(s) asked for, every split seen, {name: split}). `whole`: names are a whole output
    folder, where mixing splits by accident must not happen; a glob reads what it matches."""
    wanted = _parse_split(path, split)
    if job is None:  # foreign shards: split names are only recognised when asked for
        of = {n: next((s for s in wanted if _split_of(n, None, s)), None) for n in names}
    else:
        of = {n: _split_of(n, job) for n in names}
    seen = tuple(sorted({s for s in of.values() if s}))
    if not wanted:
        if seen and whole:
            raise DataError(f"{path}: the shards are split into {', '.join(seen)}; allowed: split= one of them, "
                            f"or several joined by + (split={'+'.join(seen)!r})")
        return list(names), seen, of
    missing = [s for s in wanted if s not in seen]
    if missing:
        allowed = f"allowed: {', '.join(seen)}" if seen else (
            "allowed: split=None, as no shard is named <job>-<split>-NNNNN-of-NNNNN.tfrecord[.gz]")
        raise DataError(f"{path}: no shard of split {', '.join(missing)}; {allowed}")
    return [n for n in names if of[n] in wanted], seen, of


def _compression(path: str, files: list[str]) -> str:
    gz = {f.endswith(".gz") for f in files}
    if len(gz) > 1:
        raise DataError(f"{path}: mixes gzip (.gz) and uncompressed shards; allowed: shards that are all one "
                        f"or all the other")
    return "gzip" if gz == {True} else "none"


def _from_folder(path: str, split: str | None):
    folder = path.rstrip("/") or "/"
    _refuse_incomplete(folder)
    manifest = _read_manifest(folder)
    if manifest is None:
        raise DataError(f"{folder}: no {MANIFEST}, so this is not an augd output folder; allowed: "
                        f"{ALLOWED_PATHS} (a glob reads foreign shards)")
    present = set(tf.io.gfile.listdir(folder))
    listed = sorted(s["file"] for s in manifest["shards"])  # the manifest, not a listing: what was committed
    absent = [f for f in listed if f not in present]
    if absent:
        raise DataError(f"{folder}: {len(absent)} shard(s) the manifest lists are missing ({', '.join(absent[:3])})"
                        f"; allowed: a complete output folder")
    job = manifest.get("job") or posixpath.basename(folder)
    names, seen, of = _select(folder, listed, job, split, whole=True)
    return folder, manifest, job, [_join(folder, n) for n in names], seen, of


def _from_glob(pattern: str, split: str | None):
    files = sorted(f for f in tf.io.gfile.glob(pattern) if not tf.io.gfile.isdir(f))
    if not files:
        raise DataError(f"{pattern}: matches no file; allowed: {ALLOWED_PATHS}")
    folders = sorted({posixpath.dirname(f) for f in files})
    manifests = {}
    for folder in folders:
        if tf.io.gfile.exists(_join(folder, MANIFEST)):  # an augd output: its shards are whole once committed
            _refuse_incomplete(folder)
            manifests[folder] = _read_manifest(folder)
    # One augd output: its manifest describes the files. Several folders or foreign shards: labels.txt at most.
    manifest = manifests.get(folders[0]) if len(folders) == 1 else None
    job = manifest.get("job") if manifest else None
    names, seen, of = _select(pattern, [posixpath.basename(f) for f in files], job, split, whole=False)
    keep = set(names)
    return folders[0], manifest, job, [f for f in files if posixpath.basename(f) in keep], seen, of


def resolve(path: str, split: str | None = None) -> DatasetInfo:
    """DatasetInfo of an output folder or a glob of shards (with `split`: of that split's shards only)."""
    path = str(path)
    is_glob = bool(_GLOB.search(path)) or (tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path))
    if not is_glob and not tf.io.gfile.isdir(path):
        raise DataError(f"{path}: no such folder or file; allowed: {ALLOWED_PATHS}")
    found = _from_glob(path, split) if is_glob else _from_folder(path, split)
    return _info(path, split, *found)


def _info(path, split, folder, manifest, job, files, seen, of) -> DatasetInfo:
    compression = _compression(path, files)
    if manifest is None:
        return DatasetInfo(path=path, job=None, split=split, splits=seen, class_names=_read_labels(folder),
                           class_counts={}, records=None, unlabeled_records=None, split_records={},
                           pipeline=None, pipeline_sha256=None, variants=(), image_format=None,
                           shard_files=tuple(files), compression=compression)
    per_file = {s["file"]: int(s["records"]) for s in manifest["shards"]}
    chosen = [posixpath.basename(f) for f in files]
    records = sum(per_file[n] for n in chosen) if all(n in per_file for n in chosen) else None
    job_unlabeled = int((manifest.get("unlabeled") or {}).get("records", 0))
    # Unlabeled records sit in some shards, which ones the manifest does not say: known only for all or none.
    if not job_unlabeled or set(chosen) == set(per_file):
        unlabeled = job_unlabeled if records is not None else None
    else:
        unlabeled = None
    split_records: dict = {}
    for name, s in of.items():  # of: every shard considered (the folder's, or the glob's), by file name
        if s and name in per_file:
            split_records[s] = split_records.get(s, 0) + per_file[name]
    pipeline = manifest.get("pipeline") or {}
    return DatasetInfo(
        path=path, job=job, split=split, splits=seen,
        class_names=tuple(c["name"] for c in sorted(manifest["classes"], key=lambda c: c["label"])),
        class_counts={c["name"]: int(c.get("records", 0)) for c in manifest["classes"]},
        records=records, unlabeled_records=unlabeled, split_records=split_records,
        pipeline=pipeline.get("name"), pipeline_sha256=manifest.get("pipeline_sha256"),
        variants=tuple((manifest.get("records") or {}).get("variants", ())),
        image_format=(pipeline.get("output") or {}).get("format"), shard_files=tuple(files),
        compression=compression, manifest=manifest,
        bounding_box_format=STORED_BOX_FORMAT if manifest.get("annotations") else None)
