"""After the images: the checks a job must pass to commit, its report (manifest.json) and its side files. The
same for every executor (threads, worker processes, Beam)."""
from __future__ import annotations

import sys
from contextlib import contextmanager

import augd
from augd import jobfolder
from augd.annotations.objects import Detection
from augd.errors import (FailureReason, JobFailed, RejectReason, WorkerError, WorkerLost,
                         tf_error_message)
from augd.io import AtomicOutput, OutputExists, write_text
from augd.io.jobfs import folder_identity
from augd.job.report import (AnnotationReport, ByteCounts, ClassObjects, GraphInfo, Inputs, JobReport, RecordCounts,
                             ShardSet, Tally, TileCounts, Timing, iso_utc, labels_txt, reasons_summary)
from augd.job.units import JobPlan, variants_of

__all__ = ["build_report", "check_outcome", "check_root", "claimed_output", "write_sidecars"]


def _check_rejected(input_dir: str, seen: int, rejected: list, max_rejected: float | None,
                    not_inputs: frozenset[str] = frozenset()) -> None:
    """JobFailed (too_many_rejected) when more than `max_rejected` of the inputs were rejected. `not_inputs`: the
    rejected files that are no input image (a detection job's orphan or broken annotation files): listed in the
    manifest, but left out of the fraction on both sides."""
    if not_inputs:
        seen -= sum(r.relpath in not_inputs for r in rejected)
        rejected = [r for r in rejected if r.relpath not in not_inputs]
    if max_rejected is None or not seen or len(rejected) / seen <= max_rejected:
        return
    reasons = reasons_summary(r.reason for r in rejected)
    raise JobFailed(f"{input_dir}: {len(rejected)} of {seen} inputs were rejected ({len(rejected) / seen:.1%}), more "
                    f"than max_rejected={max_rejected:g} allows ({reasons}; first: {rejected[0].relpath}: "
                    f"{rejected[0].message}); nothing was written", reason=FailureReason.TOO_MANY_REJECTED)


def _annotation_report(detection: Detection, tally: Tally, rejected, negatives_rejected: int) -> AnnotationReport:
    names = detection.label_map.names()
    return AnnotationReport(
        format=detection.format, label_map=jobfolder.LABEL_MAP_FILE,
        classes=tuple(ClassObjects(detection.label_map.id_of(n, jobfolder.LABEL_MAP_FILE), n, tally.objects_in[n],
                                   tally.objects_out[n], tally.ignored_out[n]) for n in names),
        dropped=dict(tally.dropped), ignored=dict(tally.ignored), low_visibility=detection.rule.low_visibility,
        negatives_kept=tally.negatives, negatives_rejected=negatives_rejected,
        bad_annotations=sum(r.reason == RejectReason.BAD_ANNOTATION for r in rejected),
        repaired={k: v for k, v in detection.layout.repaired.items() if k in detection.annotations},
        keypoints=None if detection.keypoints is None else {
            **detection.keypoints.to_dict(), "labelled": {"in": tally.points_in, "out": tally.points_out}})


def build_report(plan: JobPlan, tally: Tally, shards: ShardSet, graph: GraphInfo, device, started: float,
                 wall_seconds: float, rejected: list, first_record_seconds: float | None = None) -> JobReport:
    """The job's report (manifest.json) from what the executor tallied and wrote; the same for every executor."""
    spec, scan, state = plan.spec, plan.scan, tally.progress
    return JobReport(
        augd_version=augd.__version__, tensorflow_version=device.tf_version, device=device.name, job=plan.name,
        input=plan.input_dir, created=iso_utc(started), pipeline=spec.normalized(), pipeline_sha256=spec.sha256,
        seed=spec.seed, classes=tally.classes(scan.classes), unlabeled=tally.unlabeled(),
        inputs=Inputs(len(scan.images) + len(scan.rejected), state.written,
                      tuple(sorted(rejected, key=lambda r: r.relpath))),
        records=RecordCounts(sum(shards.records), tuple(variants_of(spec))), shards=shards.shards(),
        splits=shards.splits(tally, {g.split: (spec.augments(g.split), g.variants) for g in plan.groups})
        if plan.groups[0].split else {},
        bytes=ByteCounts(tally.bytes_read, shards.bytes_written), graph=graph,
        timing=Timing.measured(wall_seconds, state.written, tally.stages, first_record_seconds),
        annotations=_annotation_report(plan.detection, tally, rejected, plan.negatives_rejected)
        if plan.detection else None, balance=plan.balance,
        tiles=TileCounts.total(tally.tiles) if spec.tile is not None else None)


def check_outcome(plan: JobPlan, tally: Tally, max_rejected: float | None) -> list:
    """All rejected inputs (the scan's and the executor's), after checking that the job may commit: JobFailed when
    nothing was written or more than max_rejected was rejected."""
    rejected = list(plan.scan.rejected) + tally.rejected
    gone = [r for r in rejected if r.reason == RejectReason.MISSING]
    if gone:   # before "nothing written": a job whose folder was removed has every image gone
        raise JobFailed(f"{plan.input_dir}: {len(gone)} of the inputs the job listed vanished while it ran (first: "
                        f"{gone[0].relpath}: {gone[0].message}); the folder changed under the job, so nothing was "
                        f"committed. Drop the job again, whole", reason=FailureReason.INPUT_MISSING)
    if tally.progress.written == 0:
        first = tally.rejected[0]
        raise JobFailed(f"{plan.input_dir}: none of {len(plan.images)} images could be decoded "
                        f"(first: {first.relpath}: {first.message})", reason=FailureReason.NO_VALID_INPUT)
    seen = len(plan.scan.images) + len(plan.scan.rejected)
    _check_rejected(plan.input_dir, seen, rejected, max_rejected, plan.scan.not_inputs)
    return rejected


def check_root(input_dir: str, identity: tuple[int, int] | None) -> None:
    """JobFailed (input_missing) when the job folder is no longer the one the job started on (`identity`: its
    device and inode then; None: a URL, not checked): removed, renamed away or replaced, even after its last
    image was read. Called just before the commit, so that _SUCCESS never stands for a folder that is gone."""
    if identity is None:
        return
    now = folder_identity(input_dir)
    if now != identity:
        what = "is gone (removed or moved away)" if now is None else "was replaced by another folder"
        raise JobFailed(f"{input_dir}: the job folder {what} while the job ran; nothing was committed",
                        reason=FailureReason.INPUT_MISSING)


def write_sidecars(out_dir: str, plan: JobPlan, report: JobReport) -> None:
    """labels.txt, label_map.pbtxt and manifest.json (last) into the job's temporary output folder."""
    if plan.scan.classes:
        write_text(f"{out_dir}/labels.txt", labels_txt(plan.scan.classes))
    if plan.detection is not None:
        kp = plan.detection.keypoints
        write_text(f"{out_dir}/{jobfolder.LABEL_MAP_FILE}",
                   plan.detection.label_map.to_pbtxt({c: kp.names for c in kp.classes} if kp else None))
    write_text(f"{out_dir}/manifest.json", report.to_json())


def _op_errors() -> tuple:
    """TensorFlow's error class where it is loaded (a gfile URL, the engine in this process); a parent whose workers
    run the graph may never load it, and nothing it runs raises one then."""
    tf = sys.modules.get("tensorflow")
    return (tf.errors.OpError,) if tf is not None and hasattr(tf, "errors") else ()


@contextmanager
def claimed_output(out_root: str, name: str, overwrite: bool):
    """The job's output claimed (AtomicOutput: a hidden temp folder, committed by the caller, removed on any
    failure), and the one place where what goes wrong while it is held becomes a JobFailed with its reason, for
    every executor. A JobFailed raised inside passes as it is; anything not named here is a bug in augd and
    propagates (the daemon fails the job as `crashed` with its traceback in error.txt)."""
    try:
        with AtomicOutput(out_root, name, overwrite=overwrite) as out:
            yield out
    except OutputExists as exc:
        raise JobFailed(str(exc), reason=FailureReason.OUTPUT_EXISTS) from None
    except WorkerLost as exc:
        raise JobFailed(f"worker processes died: {exc}", reason=FailureReason.WORKER_LOST) from None
    except WorkerError as exc:
        raise JobFailed(f"a worker process failed: {exc}", reason=FailureReason.CRASHED) from None
    except (OSError, *_op_errors()) as exc:
        msg = tf_error_message(exc) if not isinstance(exc, OSError) else str(exc)
        raise JobFailed(f"cannot write output under {out_root}: {msg}", reason=FailureReason.OUTPUT_ERROR) from None
