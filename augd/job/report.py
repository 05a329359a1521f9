"""What a job did, as typed values: `JobReport` is run_job's result, and manifest.json is its serialisation
(`to_json`), in figures a user and the metrics can both check. Also the running tallies that add up to it, the
live progress of a job, and labels.txt."""
from __future__ import annotations

import collections
import datetime as _dt
import json
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from augd.annotations.objects import ObjectCounts
from augd.annotations.repair import summary
from augd.io import SPLIT_FOLDERS
from augd.stages import STAGES

if TYPE_CHECKING:
    from augd.io import RejectedInput

__all__ = ["SCHEMA_VERSION", "AnnotationReport", "ByteCounts", "ClassObjects", "ObjectCounts", "ClassCounts",
           "TileCounts", "Counts", "GraphInfo", "Inputs", "JobProgress",
           "JobReport", "RecordCounts", "Shard", "ShardSet", "SplitCounts", "Tally", "Timing", "labels_txt",
           "reasons_summary"]

#: manifest.json's `schema_version`. Readers rely on its keys: add keys, never rename or drop one.
SCHEMA_VERSION = 1


def reasons_summary(reasons) -> str:
    """'undecodable 3, empty 1': how many inputs each reason rejected, most first (the run summary, the
    max_rejected failure)."""
    return ", ".join(f"{k} {v}" for k, v in collections.Counter(reasons).most_common())


def labels_txt(classes) -> str:
    """TF-slim's labels file: one `index:class_name` line per class."""
    return "".join(f"{i}:{c}\n" for i, c in enumerate(classes))


@dataclass(frozen=True)
class Counts:
    """Images written, records written and inputs rejected: of the unlabeled images (and the base of a class's
    and a split's figures)."""
    images: int
    records: int
    rejected: int

    def to_dict(self) -> dict:
        return {"images": self.images, "records": self.records, "rejected": self.rejected}


@dataclass(frozen=True)
class ClassCounts(Counts):
    """One class: its label (the index in the class list) and name, and its counts."""
    label: int
    name: str

    def to_dict(self) -> dict:
        return {"label": self.label, "name": self.name, **super().to_dict()}


@dataclass(frozen=True)
class SplitCounts(Counts):
    """One split (train, validation, test): its counts, its shard files, and whether it was augmented (the
    pipeline's augment_splits, by default train only) with the variants each of its images got (an unaugmented
    split: [0], its images as they are)."""
    shards: tuple[str, ...]
    augmented: bool = True
    variants: tuple[int, ...] = ()

    def to_dict(self) -> dict:
        return {**super().to_dict(), "augmented": self.augmented, "variants": list(self.variants),
                "shards": list(self.shards)}


@dataclass(frozen=True)
class Inputs:
    """The job's input files: seen by the scan, written (decoded and augmented), and rejected (by path)."""
    seen: int
    written: int
    rejected_files: tuple[RejectedInput, ...]

    @property
    def rejected(self) -> int:
        return len(self.rejected_files)

    def to_dict(self) -> dict:
        return {"seen": self.seen, "written": self.written, "rejected": self.rejected,
                "rejected_files": [{"path": r.relpath, "reason": r.reason, "message": r.message}
                                   for r in self.rejected_files]}


@dataclass(frozen=True)
class RecordCounts:
    """Records written, and the variant indices written per image (0: the original)."""
    written: int
    variants: tuple[int, ...]

    def to_dict(self) -> dict:
        return {"written": self.written, "variants": list(self.variants)}


@dataclass(frozen=True)
class Shard:
    file: str      # its name in the output folder
    records: int

    def to_dict(self) -> dict:
        return {"file": self.file, "records": self.records}


@dataclass(frozen=True)
class ByteCounts:
    """Bytes of input read and of shards written."""
    read: int
    written: int

    @property
    def ratio(self) -> float | None:
        return round(self.written / self.read, 4) if self.read else None

    def to_dict(self) -> dict:
        return {"read": self.read, "written": self.written, "ratio": self.ratio}


@dataclass(frozen=True)
class GraphInfo:
    """TensorFlow graphs built and traced for the job (one per process that ran its images), the device of each
    stage, the executor that ran it, and per process: its pid, builds and traces (worker processes also: the
    batches, images and seconds they ran; the threads executor: its thread count)."""
    builds: int
    traces: int
    stage_devices: dict | None
    executor: str = "threads"
    workers: tuple = ()
    #: why this executor ran the job (augd.job.executors.Choice.to_dict): what was asked, picked, estimated
    choice: dict | None = None

    def to_dict(self) -> dict:
        return {"builds": self.builds, "traces": self.traces, "stage_devices": self.stage_devices,
                "executor": self.executor, "workers": [dict(w) for w in self.workers],
                **({"choice": self.choice} if self.choice is not None else {})}


@dataclass(frozen=True)
class Timing:
    """Wall time, throughput and the summed seconds of each stage, rounded as manifest.json shows them."""
    wall_seconds: float
    images_per_second: float | None
    stage_seconds: dict[str, float]
    #: from the job's start (its scan) to its first record written by this process (Beam: known to it)
    first_record_seconds: float | None = None

    @classmethod
    def measured(cls, wall_seconds: float, written: int, stage_seconds: dict[str, float],
                 first_record_seconds: float | None = None) -> Timing:
        return cls(wall_seconds=round(wall_seconds, 3),
                   images_per_second=round(written / wall_seconds, 2) if wall_seconds > 0 else None,
                   stage_seconds={k: round(stage_seconds[k], 4) for k in STAGES},
                   first_record_seconds=None if first_record_seconds is None else round(first_record_seconds, 3))

    def to_dict(self) -> dict:
        return {"wall_seconds": self.wall_seconds, "images_per_second": self.images_per_second,
                "first_record_seconds": self.first_record_seconds, "stage_seconds": dict(self.stage_seconds)}


@dataclass(frozen=True)
class TileCounts:
    """One written image of a job with `tile:`: its tiles cut, kept, without any object (empty), empty and kept
    all the same (tile.empty's share), the objects its kept tiles hold as cut (the whole image's record not
    counted), and its whole-image records (tile.full_image)."""
    tiles: int
    kept: int
    empty: int
    empty_kept: int
    objects: int
    full: int = 0

    @staticmethod
    def total(got: collections.Counter) -> dict:
        """The manifest's `tiles` from the job's images' counts added up (Tally.tiles)."""
        return {"tiles": got["tiles"], "kept": got["kept"], "empty": got["empty"], "empty_kept": got["empty_kept"],
                "objects_in_kept_tiles": got["objects"], "full_images": got["full"]}


@dataclass(frozen=True)
class ClassObjects:
    """One class of a detection job's label map: its id (1-based), name, objects read and written (kept and
    ignored), and of those written the ones ignored."""
    id: int
    name: str
    objects_in: int
    objects_out: int
    objects_ignored: int = 0

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "objects_in": self.objects_in, "objects_out": self.objects_out,
                "objects_ignored": self.objects_ignored}


@dataclass(frozen=True)
class AnnotationReport:
    """A detection job's annotations: the format read, objects per class, objects the transforms dropped and those
    the records ignore (weight 0) by reason, what low_visibility made of those under the rule, negatives kept or
    rejected, and images rejected for a bad annotation (listed in inputs.rejected_files)."""
    format: str
    label_map: str                     # the file in the output folder
    classes: tuple[ClassObjects, ...]
    dropped: dict[str, int]            # by reason (augd.annotations.occlusion.DROP_REASONS)
    negatives_kept: int
    negatives_rejected: int
    bad_annotations: int
    keypoints: dict | None = None      # a keypoint job's schema (KeypointSchema.to_dict) and labelled points
    #: image relpath -> its near misses repaired, by reason (augd.annotations.repair)
    repaired: dict = field(default_factory=dict)
    ignored: dict[str, int] = field(default_factory=dict)   # by reason (augd.annotations.occlusion.IGNORE_REASONS)
    low_visibility: str = "ignore"     # the job's annotations.low_visibility: what those under the rule became

    def to_dict(self) -> dict:
        out_ = sum(c.objects_out for c in self.classes)
        out = {"format": self.format, "label_map": self.label_map,
               "classes": [c.to_dict() for c in self.classes],
               "objects": {"in": sum(c.objects_in for c in self.classes), "out": out_,
                           "kept": out_ - sum(self.ignored.values()), "ignored": sum(self.ignored.values()),
                           "ignored_by_reason": dict(sorted(self.ignored.items())),
                           "dropped": sum(self.dropped.values()),
                           "dropped_by_reason": dict(sorted(self.dropped.items())),
                           "low_visibility": self.low_visibility},
               "negatives": {"kept": self.negatives_kept, "rejected": self.negatives_rejected},
               "bad_annotations": self.bad_annotations,
               "repairs": summary(self.repaired)}
        if self.keypoints is not None:
            out["keypoints"] = self.keypoints
        return out


@dataclass(frozen=True)
class JobReport:
    """Everything a committed job did. Field names are manifest.json's keys; `splits` is empty (and the key
    absent) for a job without splits, `unlabeled` None when every image sat in a class folder."""
    augd_version: str
    tensorflow_version: str
    device: str
    job: str
    input: str
    created: str                       # ISO-8601 UTC, to the millisecond: when the job started
    pipeline: dict                     # the normalised pipeline
    pipeline_sha256: str
    seed: int
    classes: tuple[ClassCounts, ...]
    unlabeled: Counts | None
    inputs: Inputs
    records: RecordCounts
    shards: tuple[Shard, ...]
    splits: dict[str, SplitCounts]
    bytes: ByteCounts
    graph: GraphInfo
    timing: Timing
    annotations: AnnotationReport | None = None   # detection jobs only: the key is absent otherwise
    #: class balance (the pipeline's balance key) only: per split, each class's count in the records planned
    #: without it ("before") and with it ("after"): objects in detection jobs, images otherwise
    balance: dict | None = None
    tiles: dict | None = None    # pipelines with `tile:` only (TileCounts.total)

    def to_dict(self) -> dict:
        """manifest.json's content, keys in their documented order."""
        return {
            "schema_version": SCHEMA_VERSION,
            "augd_version": self.augd_version,
            "tensorflow_version": self.tensorflow_version,
            "device": self.device,
            "job": self.job,
            "input": self.input,
            "created": self.created,
            "pipeline": self.pipeline,
            "pipeline_sha256": self.pipeline_sha256,
            "seed": self.seed,
            "classes": [c.to_dict() for c in self.classes],
            "unlabeled": self.unlabeled.to_dict() if self.unlabeled is not None else None,
            "inputs": self.inputs.to_dict(),
            "records": self.records.to_dict(),
            "shards": [s.to_dict() for s in self.shards],
            **({"splits": {k: s.to_dict() for k, s in self.splits.items()}} if self.splits else {}),
            **({"annotations": self.annotations.to_dict()} if self.annotations is not None else {}),
            **({"balance": self.balance} if self.balance is not None else {}),
            **({"tiles": self.tiles} if self.tiles is not None else {}),
            "bytes": self.bytes.to_dict(),
            "graph": self.graph.to_dict(),
            "timing": self.timing.to_dict(),
        }

    def to_json(self) -> str:
        """manifest.json, as written."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"


def iso_utc(t: float) -> str:
    """Unix seconds -> the manifest's `created`: ISO-8601 UTC to the millisecond (with timing.first_record_seconds,
    when a job's first record was written)."""
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).isoformat(timespec="milliseconds")


# -- while the job runs ------------------------------------------------------------------------------------------

@dataclass
class JobProgress:
    """Live figures of a running job (the CLI's progress bar and the daemon's /status read them)."""
    name: str
    total: int
    done: int = 0
    written: int = 0
    rejected: int = 0
    records: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def images_per_second(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0


@dataclass
class _Count:
    images: int = 0
    records: int = 0
    rejected: int = 0

    def frozen(self) -> Counts:
        return Counts(self.images, self.records, self.rejected)


@dataclass
class Tally:
    """Running totals of a job, fed one ImageOutcome at a time in output order."""
    progress: JobProgress
    rejected: list = field(default_factory=list)
    per_class: dict[str, _Count] = field(default_factory=dict)   # by class name; "" holds the unlabeled
    per_split: dict[str, _Count] = field(default_factory=dict)
    stages: dict = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    bytes_read: int = 0
    objects_in: collections.Counter = field(default_factory=collections.Counter)    # detection jobs: by class
    objects_out: collections.Counter = field(default_factory=collections.Counter)
    dropped: collections.Counter = field(default_factory=collections.Counter)       # by reason
    ignored: collections.Counter = field(default_factory=collections.Counter)       # by reason
    ignored_out: collections.Counter = field(default_factory=collections.Counter)   # by class
    negatives: int = 0
    points_in: int = 0
    points_out: int = 0
    first_record_at: float | None = None   # time.perf_counter() when the first image with records was added
    tiles: collections.Counter = field(default_factory=collections.Counter)   # tiled jobs: TileCounts added up

    def _counts(self, label_text: str) -> _Count:
        return self.per_class.setdefault(label_text, _Count())

    def _split(self, split: str) -> _Count:
        return self.per_split.setdefault(split, _Count())

    def add_scan(self, scan) -> None:
        """Zero counts for every class (an empty class folder still shows) plus the files the scan rejected,
        counted in the class whose folder holds them ("" for the job root) and in their split (the plan's
        RejectedInput.split: a split folder's, a layout's, a records shard's)."""
        for name in scan.classes:
            self._counts(name)
        for r in scan.rejected:
            if r.split:
                self._split(r.split).rejected += 1
            top, sep, rest = r.relpath.partition("/")
            if scan.splits and sep and top in SPLIT_FOLDERS:
                top, sep, _ = rest.partition("/")
            self._counts(top if sep and top in scan.classes else "").rejected += 1

    def add(self, res) -> None:
        """One augd.job.ImageOutcome."""
        p = self.progress
        self.bytes_read += res.bytes_read
        cls = self._counts(res.image.label_text)
        split = self._split(res.image.split) if res.image.split else _Count()
        if res.rejected:
            self.rejected.append(res.rejected)
            cls.rejected += 1
            split.rejected += 1
            p.rejected += 1
        else:
            if self.first_record_at is None and res.records:
                self.first_record_at = time.perf_counter()
            cls.images += 1
            cls.records += len(res.records)
            split.images += 1
            split.records += len(res.records)
            p.written += 1
            p.records += len(res.records)
            if res.objects is not None:
                self.objects_in.update(res.objects.objects_in)
                self.objects_out.update(res.objects.objects_out)
                self.dropped.update(res.objects.dropped)
                self.ignored.update(res.objects.ignored)
                self.ignored_out.update(res.objects.ignored_out)
                self.negatives += res.objects.negative
                self.points_in += res.objects.points_in
                self.points_out += res.objects.points_out
        if res.tiles is not None:   # a negative whose tiles were all dropped counts its tiles too
            self.tiles.update(vars(res.tiles))
        for k, v in res.stage_seconds.items():
            self.stages[k] += v
        p.done += 1

    def classes(self, names) -> tuple[ClassCounts, ...]:
        """The report's classes, labelled by their index in `names`."""
        return tuple(ClassCounts(**vars(self.per_class.get(n, _Count())), label=i, name=n)
                     for i, n in enumerate(names))

    def unlabeled(self) -> Counts | None:
        """The images outside any class folder (and the files rejected there), or None when there were none."""
        c = self.per_class.get("")
        return c.frozen() if c is not None else None


@dataclass
class ShardSet:
    """The shard files of a job's splits, in order, and each split's share of them."""
    paths: list = field(default_factory=list)
    records: list = field(default_factory=list)
    bytes_written: int = 0
    by_split: dict = field(default_factory=dict)

    def add(self, split: str, writer) -> None:
        self.by_split[split] = [os.path.basename(p) for p in writer.paths]
        self.paths += writer.paths
        self.records += writer.records_per_shard
        self.bytes_written += writer.bytes_written

    def shards(self) -> tuple[Shard, ...]:
        return tuple(Shard(os.path.basename(p), n) for p, n in zip(self.paths, self.records))

    def splits(self, tally: Tally, augmented: dict[str, tuple[bool, tuple[int, ...]]]) -> dict[str, SplitCounts]:
        """The report's per-split figures; `augmented`: split -> (augmented, its images' variants)."""
        return {s: SplitCounts(**vars(tally.per_split.get(s, _Count())), shards=tuple(files),
                               augmented=augmented[s][0], variants=augmented[s][1])
                for s, files in self.by_split.items()}
