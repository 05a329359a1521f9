"""The job's work units, a pure function of the input folder and the pipeline: which images, in which seeded order,
into how many shards, with which variants, and where each record lands.

Every executor (threads, worker processes, Beam) runs from the same JobPlan and places records with
`record_slots`, so a slice of images can be processed anywhere, in any order, retried any number of times,
and the shards come out byte-identical: record k of a split (counting in seeded order, rejected images holding
none) is written to shard k % count, after the split's records k' < k of that shard.
"""
from __future__ import annotations

import collections
import dataclasses
import math
import os
from dataclasses import dataclass

from augd import jobfolder
from augd.annotations.layout import in_words
from augd.annotations.objects import Detection
from augd.errors import FailureReason, JobFailed
from augd.io import SPLIT_FOLDERS, SPLITS, InputImage, ScanResult, scan_job, shard_count, shuffled_order, split_of
from augd.io.limits import ReadLimits
from augd.job.detection import prepare, prepare_records
from augd.job.mixing import Partners
from augd.ops import Kind
from augd.schema import PipelineSpec
from augd.schema.tile import tiles_of_header

__all__ = ["Group", "JobPlan", "plan_job", "record_slots", "tiles_per_image", "variants_of"]


def variants_of(spec: PipelineSpec) -> list[int]:
    """Variant indices written per image: 0 is the original (when kept), 1..N the augmented copies."""
    return ([0] if spec.keep_original else []) + list(range(1, spec.variants + 1))


def tiles_per_image(spec: PipelineSpec, img: InputImage) -> int:
    """The records each of an image's variants makes: its tiles (at most: a detection job drops some empty ones)
    with `tile:`, else 1."""
    if spec.tile is None:
        return 1
    h = img.header
    return len(tiles_of_header(spec.tile, h.height, h.width, h.orientation))


@dataclass(frozen=True)
class Group:
    """One split's share of the job ("" for a job without splits): its images in seeded order, its shard count
    and the variants each of its images gets (`variants`; with class balance, `more` gives an image more
    augmented variants: relpath -> their count)."""
    split: str
    order: tuple[InputImage, ...]
    shards: int
    variants: tuple[int, ...]
    more: dict = dataclasses.field(default_factory=dict, compare=False)

    def variants_of(self, img: InputImage) -> tuple[int, ...]:
        n = self.more.get(img.relpath)
        if n is None:
            return self.variants
        return (0, *range(1, n + 1)) if 0 in self.variants else tuple(range(1, n + 1))

    @property
    def records(self) -> int:
        """Records planned for the group (before any image is rejected)."""
        return sum(len(self.variants_of(i)) for i in self.order)

    def prefix(self, job: str) -> str:
        """Shard file prefix: <job>-train-00000-of-00004... or <job>-00000-of-00001."""
        return f"{job}-{self.split}" if self.split else job


@dataclass(frozen=True)
class JobPlan:
    """What the launcher decides before any image is processed."""
    input_dir: str
    name: str
    spec: PipelineSpec
    scan: ScanResult
    groups: tuple[Group, ...]
    detection: Detection | None = None
    negatives_rejected: int = 0
    partners: Partners | None = None     # a chain led by a partner op (mosaic, mixup, cutmix): its splits' pools
    balance: dict | None = None          # class balance: per split, the classes' counts before and after
    #: a records job's scratch folder (augd.annotations.tfrecords.Scratch: inflated shards), kept while the plan is
    scratch: object = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def images(self) -> list[InputImage]:
        """Every image to process, group after group, each group in its seeded order."""
        return [img for g in self.groups for img in g.order]


def record_slots(records_per_image, shards: int) -> list[list[tuple[int, int]]]:
    """For one group, in seeded order: each image's records' (shard, position in that shard). The same on
    every executor; a rejected image (0 records) takes no slot."""
    out, k = [], 0
    for n in records_per_image:
        out.append([((k + j) % shards, (k + j) // shards) for j in range(n)])
        k += n
    return out


#: Items a beating mapper hands its mapper at a time: a beat every few seconds of reading at most.
BEAT_ITEMS = 1024


def beating(mapper, beat):
    """`mapper` (a Reading.map: map(fn, items) -> results, None: here) with `beat` called between slices of
    BEAT_ITEMS items: each slice is whole before the beat, which may stop the job (nothing left in flight)."""
    def run(fn, items: list) -> list:
        out: list = []
        for i in range(0, len(items), BEAT_ITEMS):
            part = items[i:i + BEAT_ITEMS]
            out += mapper(fn, part) if mapper is not None else fn(part)
            beat()
        return out
    return run


def _estimate_bytes(spec: PipelineSpec, images, n: int, more: dict | None = None) -> int:
    """The shard count's size estimate: part of the output's identity (it decides the shards), so unchanged;
    `more`: class balance's records per image where an image gets more than `n`."""
    more = more or {}
    if spec.output.format == "raw":
        return sum(i.header.width * i.header.height * 3 * more.get(i.relpath, n) for i in images)
    return sum(i.size * more.get(i.relpath, n) for i in images)


def _label_map_file(spec: PipelineSpec):
    """The scan's `ignore`: a job's own label map file named by `annotations.label_map` is no input."""
    lm = spec.annotations.label_map if spec.annotations is not None else None
    if not isinstance(lm, str) or os.path.isabs(lm):
        return None
    rel = os.path.normpath(lm).replace(os.sep, "/")
    return lambda relpath: relpath == rel


def _split_images(scan, spec: PipelineSpec, input_dir: str) -> list[tuple[str, list[InputImage]]]:
    """[(split, its images)] in SPLITS order: the job's split folders, or a `split:` setting's stable hash of
    each path (so a re-run or an added image never moves an image between splits); [("", all)] without."""
    images = list(scan.images)
    if spec.split:
        if scan.splits:
            raise JobFailed(f"{input_dir}: the job has split folders ({', '.join(scan.splits)}) and the pipeline "
                            f"sets split: {dict(spec.split)}; use one or the other", reason=FailureReason.BAD_PIPELINE)
        images = [dataclasses.replace(i, split=split_of(i.relpath, spec.split)) for i in images]
    elif not scan.splits:
        return [("", images)]
    return [(s, [i for i in images if i.split == s]) for s in SPLITS if any(i.split == s for i in images)]


def _in_splits(scan: ScanResult, spec: PipelineSpec, detection: Detection | None, splits_of: dict) -> tuple:
    """The scan's rejected inputs, each with the split it would have been in (so the manifest and augd check count
    it there): its split folder's, the layout's list's, the split its image had before the annotations refused it,
    a records job's shard name's, or a `split:` setting's hash of its path. Files that are no input image (an
    orphan annotation file) and files outside every split stay in none."""
    layout = detection.layout.splits if detection is not None else {}
    split_job = bool(scan.splits or layout or any(splits_of.values()) or spec.split)

    def split(r) -> str:
        top, sep, _ = r.relpath.partition("/")
        if r.split or not split_job or r.relpath in scan.not_inputs or r.reason == "outside_splits":
            return r.split
        if scan.splits and sep and top in SPLIT_FOLDERS:
            return SPLIT_FOLDERS[top]
        if s := splits_of.get(r.relpath) or layout.get(r.relpath):
            return s
        if "#" in r.relpath and "/" not in r.relpath:   # <shard>#<index>: a records job's record
            from augd.annotations.tfrecords import shard_split   # as detection.py: for records jobs alone
            return shard_split(r.relpath.split("#", 1)[0])
        return split_of(r.relpath, spec.split) if spec.split else ""
    return tuple(dataclasses.replace(r, split=split(r)) for r in scan.rejected)


def plan_job(input_dir: str, spec: PipelineSpec, name: str | None, max_pixels: int, mapper=None,
             limits: ReadLimits | None = None) -> JobPlan:
    """Scan the job (annotations included) and fix its groups. Raises JobFailed when no image is left. `mapper`:
    how the annotation files are read (augd.annotations.reading.Reading.map; run_job's reads them on a warm
    pool's idle workers: augd.job.workers.pool.chunked_map); the plan is the same either way. `limits`: what
    reading may spend (augd.io.limits; its beat is called throughout the scan, and may stop it)."""
    input_dir = input_dir.rstrip("/") or "/"
    limits = limits or ReadLimits()
    records = prepare_records(input_dir, spec, max_pixels, jobfolder.CONTROL_FILES | jobfolder.MARKERS, limits)
    if records is not None:
        scan, detection, scratch = records
    else:
        detection, scratch = prepare(input_dir, spec, max_pixels, beating(mapper, limits.beat)), None
        scan = scan_job(input_dir, max_pixels=max_pixels, classes=spec.labels, ignore=_label_map_file(spec),
                        skip_names=jobfolder.CONTROL_FILES, skip_anywhere=jobfolder.MARKERS,
                        layout=detection.layout if detection else None, beat=limits.beat)
    negatives_rejected = 0
    splits_of = {i.relpath: i.split for i in scan.images}
    if detection is not None:
        # the headers the scan took from the layout: not for the workers' payload
        detection = dataclasses.replace(detection, layout=dataclasses.replace(detection.layout, headers={}))
        kept, refused, negatives_rejected = detection.attach(scan.images)
        scan = dataclasses.replace(scan, images=tuple(kept),
                                   rejected=tuple(sorted(scan.rejected + tuple(refused), key=lambda r: r.relpath)))
    scan = dataclasses.replace(scan, rejected=_in_splits(scan, spec, detection, splits_of))
    if not scan.images:
        reasons = "; ".join(f"{r.relpath}: {r.message}" for r in scan.rejected[:5]) or "the folder holds no files"
        raise JobFailed(f"{input_dir}: no valid image to process ({len(scan.rejected)} rejected: {reasons})",
                        reason=FailureReason.NO_VALID_INPUT)
    groups, balance = [], {}
    for split, images in _split_images(scan, spec, input_dir):
        # a split the pipeline does not augment (by default every one but train) is written as it is
        variants = variants_of(spec) if spec.augments(split) else [0]
        order = tuple(images[i] for i in shuffled_order([i.relpath for i in images], spec.seed))
        more = {}
        if spec.balance is not None and any(variants):
            more, balance[split or "all"] = _balanced(order, spec, _classes_of(detection), 0 in variants)
        count = shard_count(_estimate_bytes(spec, order, len(variants), {k: n + (0 in variants) for k, n in
                                                                         more.items()}), spec.output.shards)
        groups.append(Group(split, order, count, tuple(variants), more))
    return JobPlan(input_dir, name or os.path.basename(input_dir), spec, scan, tuple(groups), detection,
                   negatives_rejected, _partners(spec, groups, detection), balance or None, scratch)


def _classes_of(detection: Detection | None):
    """An image's classes with their multiplicity: its objects' (detection), or its own class (-1: none)."""
    if detection is not None:
        def objects(img):
            ann = detection.annotations.get(img.relpath)
            return [o.name for o in ann.objects] if ann is not None else []
        return objects
    return lambda img: [img.label_text] if img.label >= 0 else []


def _balanced(order, spec: PipelineSpec, classes_of, original: bool) -> tuple[dict, dict]:
    """Class balance for one split: ({relpath: augmented variants} for the images that get more than
    `variants`, the report: the classes' counts in the records planned before and after). An image's variants
    are variants x (the most common class's count / its rarest class's count), rounded up, within
    [variants, max_variants]: a pure function of the split's annotations."""
    per = {img.relpath: collections.Counter(classes_of(img)) for img in order}
    counts = collections.Counter()
    for c in per.values():
        counts.update(c)
    top = max(counts.values(), default=0)
    more, v = {}, spec.variants
    for img in order:
        if per[img.relpath]:
            rarest = min(counts[c] for c in per[img.relpath])
            n = min(spec.balance, max(v, math.ceil(v * top / rarest)))
            if n > v:
                more[img.relpath] = n
    before, after = collections.Counter(), collections.Counter()
    for img in order:
        for c, k in per[img.relpath].items():
            before[c] += k * (v + original)
            after[c] += k * (more.get(img.relpath, v) + original)
    return more, {"before": dict(sorted(before.items())), "after": dict(sorted(after.items())),
                  "images_with_more_variants": len(more)}


def _partners(spec: PipelineSpec, groups, detection: Detection | None) -> Partners | None:
    """The pools a leading partner op draws from: each split's own images (a validation pixel in a train record
    would inflate every metric), in the seeded order every executor shares; with `partners: rare`, each image
    weighted by 1 / its split's count of its rarest class (objects' classes, or the image's own class)."""
    if not spec.ops or spec.ops[0].kind is not Kind.MIX or spec.ops[0].params.p <= 0:
        return None
    if spec.ops[0].name == "copy_paste" and detection is None:
        raise JobFailed(f"ops[0].copy_paste pastes annotated objects, and this job has no annotations (a "
                        f"{in_words(objects=True)} folder); use mosaic, mixup or cutmix for a classification job",
                        reason=FailureReason.BAD_PIPELINE)
    pools = {g.split: g.order for g in groups}
    if spec.ops[0].params.partners != "rare":
        return Partners(pools)
    classes_of = _classes_of(detection)
    return Partners(pools, {s: Partners.rare_weights(pool, classes_of) for s, pool in pools.items()})
