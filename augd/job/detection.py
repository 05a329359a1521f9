"""A detection or segmentation job's set-up for run_job: its annotations read (a folder's layout or TFRecord
shards), its label map fixed or made, its occlusion rule and keypoints from its settings, all in one Detection
(augd.annotations.objects, whose ImageObjects is the per-image entry point). Only annotations that cannot be read
as a whole fail the job here (`bad_labels`); a bad annotation rejects its image only.
"""
from __future__ import annotations

import dataclasses
import logging
import os

from augd import defaults
from augd.annotations import AnnotationError, KeypointSchema
from augd.annotations.labelmap import LabelMap
from augd.annotations.layout import read_job
from augd.annotations.objects import Detection
from augd.annotations.occlusion import Rule
from augd.annotations.tfrecords import FORMAT as RECORDS_FORMAT
from augd.annotations.tfrecords import find_shards, read_records_job
from augd.errors import FailureReason, JobFailed
from augd.files import inside
from augd.io import is_url
from augd.labels import LabelMapError
from augd.schema import Annotations, PipelineSpec

log = logging.getLogger("augd.job")

__all__ = ["fixed_label_map", "prepare", "prepare_records", "rule_of"]


#: The least thickness of a remnant beside a cover (or of what shows of an ignored object) that still counts as
#: showing, by the output's format: JPEG's 4:2:0 chroma averages each 2x2 block, so a strip of colour needs 3 px to
#: hold a whole block, and keep its hue, wherever it falls; lossless formats keep what min_size keeps.
STRIP = {"jpeg": 3.0}


def rule_of(settings: Annotations, fmt: str) -> Rule:
    """The job's occlusion rule: its annotations settings, and what its output format keeps of a thin strip."""
    return Rule(min_visibility=settings.value("min_visibility"), min_size=settings.value("min_size"),
                min_keypoints=settings.value("min_keypoints"), low_visibility=settings.value("low_visibility"),
                strip=STRIP.get(fmt, 0.0))


def fixed_label_map(settings: Annotations, input_dir: str):
    """The LabelMap `label_map:` fixes (a pbtxt relative to the job, or names), or None. JobFailed (bad_labels)
    when it cannot be read: a job whose ids cannot be trusted writes nothing."""
    value = settings.value("label_map")
    if value is None:
        return None
    if isinstance(value, tuple):
        try:
            return LabelMap.from_names(value)
        except LabelMapError as exc:
            raise JobFailed(f"{input_dir}: annotations.label_map: {exc}", reason=FailureReason.BAD_LABELS) from None
    path = value if os.path.isabs(value) else os.path.join(input_dir, value)
    if not os.path.isabs(value) and not inside(input_dir, path):
        raise JobFailed(f"{input_dir}: annotations.label_map {value!r} is outside the job folder",
                        reason=FailureReason.BAD_LABELS)
    try:
        return LabelMap.read_pbtxt(path)
    except (OSError, AnnotationError, LabelMapError) as exc:
        raise JobFailed(f"{path}: cannot use it as annotations.label_map: {getattr(exc, 'strerror', None) or exc}",
                        reason=FailureReason.BAD_LABELS) from None


def prepare(input_dir: str, spec: PipelineSpec, max_pixels: int = defaults.MAX_PIXELS,
            mapper=None) -> Detection | None:
    """The job's annotations when it is a detection job (format named, or `auto` and a layout detected), else
    None: a classification job, exactly as without annotations. `max_pixels`: the job's (a larger mask is a
    bad annotation); `mapper`: how the format reads its files (augd.annotations.reading.Reading.map)."""
    settings = spec.annotations or Annotations()
    fmt = settings.value("format")
    if fmt == "none" or (fmt == "auto" and is_url(input_dir)):
        return None
    if is_url(input_dir):
        raise JobFailed(f"{input_dir}: annotations ({fmt}) are read from local job folders only",
                        reason=FailureReason.BAD_PIPELINE)
    fixed = fixed_label_map(settings, input_dir)
    try:
        layout = read_job(input_dir, fmt, fixed, mapper, repair=settings.value("repair") == "standard")
    except AnnotationError as exc:
        raise JobFailed(f"{input_dir}: cannot read the job's {fmt} annotations: {exc}",
                        reason=FailureReason.BAD_LABELS) from None
    if layout is None:
        return None
    return Detection(layout, layout.label_map, settings, {}, max_pixels, _keypoints(layout, settings, input_dir),
                     rule_of(settings, spec.output.format))


def prepare_records(input_dir: str, spec: PipelineSpec, max_pixels: int, skip=frozenset(), limits=None):
    """A records job (TFRecord shards at the folder's root: augd.annotations.tfrecords) as (its scan, its Detection
    or None for a classification job, its scratch folder); None when the folder holds no shard (or `format`
    names a folder format). JobFailed when `format: tfrecord` finds no shard, or the label map cannot be used.
    `limits`: the job's augd.io.limits.ReadLimits (its largest record, its beat)."""
    settings = spec.annotations or Annotations()
    fmt = settings.value("format")
    if is_url(input_dir) or fmt not in ("auto", "none", "tfrecord"):
        return None
    if not find_shards(input_dir):   # the common case, a folder job: its label map is read once, by prepare
        if fmt == RECORDS_FORMAT:
            raise JobFailed(f"{input_dir}: annotations.format is tfrecord and the folder's root holds no TFRecord "
                            f"file (found by contents: a record whose length frames with its checksum)",
                            reason=FailureReason.BAD_PIPELINE)
        return None
    fixed = fixed_label_map(settings, input_dir)
    named = settings.value("label_map")
    if isinstance(named, str) and not os.path.isabs(named):
        skip = frozenset(skip) | {os.path.normpath(named)}   # the job's own map: no input
    try:
        job = read_records_job(input_dir, fmt=fmt, label_map=fixed, repair=settings.value("repair") == "standard",
                               classes=spec.labels, max_pixels=max_pixels, skip=skip, limits=limits)
    except AnnotationError as exc:
        raise JobFailed(f"{input_dir}: cannot read the job's TFRecord shards: {exc}",
                        reason=FailureReason.BAD_LABELS) from None
    if job is None:   # auto, and images or folders beside the shards: the folder job
        return None
    if job.layout is None:
        return job.scan, None, job.scratch
    layout = job.layout
    detection = Detection(layout, layout.label_map, settings, {}, max_pixels, _keypoints(layout, settings, input_dir),
                          rule_of(settings, spec.output.format))
    return job.scan, detection, job.scratch


def _keypoints(layout, settings: Annotations, input_dir: str) -> KeypointSchema | None:
    """The format's keypoints with `annotations.keypoint_flip` over its flip and `keypoint_rotation` set. Either set
    for a job without keypoints moves nothing, as the OD API's keypoint_flip_permutation on box-only data (an
    imported config, a daemon's settings for every job): said in the log. JobFailed (bad_labels) when either is no
    permutation of the job's points (a flip: no pairing)."""
    schema = layout.keypoints
    for key in ("keypoint_flip", "keypoint_rotation"):
        value = settings.value(key)
        if value is None:
            continue
        if schema is None:
            log.info("%s: annotations.%s is set and the job's %s annotations have no keypoints: it moves nothing "
                     "(as the OD API ignores keypoint_flip_permutation on box-only data)", input_dir, key,
                     layout.format)
            continue
        try:
            schema = dataclasses.replace(schema, **{key.removeprefix("keypoint_"): tuple(value)},
                                         source=f"annotations.{key}")
        except AnnotationError as exc:
            raise JobFailed(f"{input_dir}: {exc} (the job's points: {', '.join(schema.names)})",
                            reason=FailureReason.BAD_LABELS) from None
    return schema
