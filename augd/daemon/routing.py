"""Which pipeline a job runs: its own augd.yaml, else its inbox sub-folder's name, else the default.

A job's augd.yaml holds `pipeline`: a name (or a path relative to the job) or a whole pipeline embedded as a
mapping, `labels`: a fixed label map (class names, or a labels file in the job), and `annotations`: how a
detection job reads its boxes (its keys over the pipeline's, the pipeline's over the daemon's). Every error is a
SpecError naming the file, line and YAML path.
"""
from __future__ import annotations

import difflib
import os
import re

from pydantic import BaseModel, ConfigDict, field_validator

from augd import defaults
from augd.errors import SpecError
from augd.files import inside
from augd.io import SPLIT_FOLDERS
from augd.jobfolder import CONTROL_FILES
from augd.labels import LabelMapError, label_map
from augd.schema import (Annotations, AnnotationsConfig, PipelineSpec, YamlDoc, find_pipeline, is_pipeline_path,
                       known_pipelines, load_pipeline,
                       parse_doc, read_yaml_file, validate)

__all__ = ["JobConfig", "resolve_pipeline"]


class JobConfig(BaseModel):
    """A job's own augd.yaml."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    pipeline: str | dict | None = None
    labels: list[str] | str | None = None   # a fixed label map: class names, or a labels file in the job
    annotations: AnnotationsConfig | None = None   # a detection job's settings; label_map: a file in the job

    # Checked before the union's branches, so that a wrong value gets one error that says what is allowed.
    @field_validator("pipeline", mode="before")
    @classmethod
    def _pipeline(cls, v):
        if v is None or isinstance(v, (str, dict)):
            return v
        raise ValueError("must be a pipeline name or an embedded pipeline mapping")

    @field_validator("labels", mode="before")
    @classmethod
    def _labels(cls, v):
        if v is None or isinstance(v, str) or isinstance(v, list) and all(isinstance(n, str) for n in v):
            return v
        raise ValueError("must be a list of class names or a labels file in the job")


def _from_job_config(job_dir: str, search_dirs
                     ) -> tuple[PipelineSpec | None, tuple[str, ...] | None, Annotations | None]:
    """(the pipeline the job's augd.yaml names, its label map, its annotation settings): each None when it says
    nothing of it."""
    path = os.path.join(job_dir, defaults.JOB_CONFIG)
    if not os.path.isfile(path):
        return None, None, None
    if not inside(job_dir, path):
        raise SpecError(f"{path}: refused: it is a symlink that leads outside the job folder", source=path)
    doc = read_yaml_file(path, "job config")
    data = {} if doc.data is None else doc.data
    if not isinstance(data, dict):
        raise doc.error((), f"a job's {defaults.JOB_CONFIG} must be a mapping such as 'pipeline: normalize'; "
                            f"got {type(data).__name__}")
    cfg = validate(JobConfig, doc, data)
    labels = None
    if cfg.labels is not None:
        if isinstance(cfg.labels, str) and (os.path.isabs(cfg.labels) or
                                            not inside(job_dir, os.path.join(job_dir, cfg.labels))):
            raise doc.error(("labels",), f"{cfg.labels!r} is outside the job folder; a job may name a labels file "
                                         f"only inside itself")
        try:
            labels = label_map(cfg.labels, job_dir, f"{path}: labels")
        except LabelMapError as exc:
            raise SpecError(str(exc), source=path, path="labels") from None
    annotations = None
    if cfg.annotations is not None:
        lm = cfg.annotations.label_map
        if isinstance(lm, str) and (os.path.isabs(lm) or not inside(job_dir, os.path.join(job_dir, lm))):
            raise doc.error(("annotations", "label_map"), f"{lm!r} is outside the job folder; a job may name a "
                                                          f"label map file only inside itself")
        annotations = Annotations.from_config(cfg.annotations)   # a relative label_map: read against the job
    return _job_pipeline(doc, cfg, job_dir, search_dirs), labels, annotations


def _job_pipeline(doc: YamlDoc, cfg: JobConfig, job_dir: str, search_dirs) -> PipelineSpec | None:
    if cfg.pipeline is None:
        return None
    if isinstance(cfg.pipeline, dict):
        return parse_doc(doc.below("pipeline"))
    ref = cfg.pipeline
    if is_pipeline_path(ref):
        if os.path.isabs(ref) or not inside(job_dir, os.path.join(job_dir, ref)):
            raise doc.error(("pipeline",), f"{ref!r} is outside the job folder; a job may name a pipeline file "
                                           f"only inside itself (or a pipeline by name)")
        ref = os.path.join(job_dir, ref)
        if os.path.lexists(ref) and not os.path.isfile(ref):  # a FIFO would block the daemon for ever
            raise doc.error(("pipeline",), f"{cfg.pipeline!r} is not a regular file")
    try:
        return load_pipeline(find_pipeline(ref, search_dirs))
    except SpecError as exc:
        raise doc.error(("pipeline",), str(exc)) from None


def _misrouted(job_dir: str, search_dirs) -> None:
    """Refuse a job that is a routing folder with a misspelt pipeline name (inbox/seed-clasifier/cats2/<class>/):
    its name is close to a pipeline's and its folders hold only folders. Run as one job, each of its jobs would
    become a single class."""
    name = re.sub(r"\.\d+$", "", os.path.basename(job_dir.rstrip("/")))  # work/ may add a .1 suffix
    # A typo (seed-clasifier: 0.97, tinny2: 0.91), not a name that extends one (normalize-v2: 0.86).
    near = difflib.get_close_matches(name, sorted(known_pipelines(search_dirs)), n=1, cutoff=0.9)
    if not near:
        return

    def folders(path: str) -> list[os.DirEntry] | None:
        """The visible entries of path when all of them are folders (and there is one), else None."""
        with os.scandir(path) as it:
            entries = [e for e in it if not e.name.startswith(".") and e.name not in CONTROL_FILES]
        return entries if entries and all(e.is_dir(follow_symlinks=False) for e in entries) else None

    try:
        top = folders(job_dir)
        misrouted = bool(top) and not all(e.name in SPLIT_FOLDERS for e in top) and all(folders(e.path) for e in top)
    except OSError:
        return  # the scan says what is wrong with the folder
    if misrouted:
        raise SpecError(f"{name}/: not a pipeline name (did you mean {near[0]}?), and its folders "
                        f"({', '.join(sorted(e.name for e in top)[:5])}) hold class folders, so it is not run as one "
                        f"job whose classes are those folders. Pipelines: "
                        f"{', '.join(sorted(known_pipelines(search_dirs)))}. Move each job into "
                        f"inbox/<pipeline>/, or give this folder an {defaults.JOB_CONFIG}.", source=job_dir)


def resolve_pipeline(job_dir: str, route: str | None, default: str, search_dirs=(),
                     labels: tuple[str, ...] | None = None, annotations: Annotations | None = None
                     ) -> tuple[PipelineSpec, str]:
    """(spec, how it was chosen: "augd.yaml" | "folder" | "default"). Raises SpecError. The spec's label map
    is the job's own (augd.yaml), else the pipeline's, else `labels` (the daemon's); its annotation settings are
    the job's keys over the pipeline's over `annotations` (the daemon's)."""
    spec, job_labels, job_annotations = _from_job_config(job_dir, search_dirs)
    how = defaults.JOB_CONFIG
    if spec is None and route:
        spec, how = load_pipeline(find_pipeline(route, search_dirs)), "folder"
    elif spec is None:
        _misrouted(job_dir, search_dirs)
        spec, how = load_pipeline(find_pipeline(default, search_dirs)), "default"
    spec = spec.under_annotations(annotations).with_annotations(job_annotations)
    return spec.with_labels(job_labels or (None if spec.labels else labels)), how
