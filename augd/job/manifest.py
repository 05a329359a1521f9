"""manifest.json and labels.txt: what a job did, in figures a user and the metrics can both check."""
from __future__ import annotations

import collections

import datetime as _dt
import os

import augd
from augd.engine import DeviceInfo
from augd.spec import PipelineSpec

__all__ = ["STAGES", "build_manifest", "labels_txt", "reasons_summary"]

#: Per-image stages, in order. The same names label augd_stage_seconds.
STAGES = ("read", "decode", "augment", "encode", "write")


def reasons_summary(reasons) -> str:
    """'undecodable 3, empty 1': how many inputs each reason rejected, most first (the run summary, the
    max_rejected failure)."""
    return ", ".join(f"{k} {v}" for k, v in collections.Counter(reasons).most_common())


def labels_txt(classes) -> str:
    """TF-slim's labels file: one `index:class_name` line per class."""
    return "".join(f"{i}:{c}\n" for i, c in enumerate(classes))


def build_manifest(*, name, input_dir, spec: PipelineSpec, device: DeviceInfo, classes, per_class, seen,
                   written, rejected, shard_paths, records_per_shard, bytes_read, bytes_written,
                   graph_builds, graph_traces, wall_seconds, stage_seconds, started,
                   stage_devices: dict | None = None, splits: dict | None = None) -> dict:
    records = sum(records_per_shard)
    return {
        "augd_version": augd.__version__,
        "tensorflow_version": device.tf_version,
        "device": device.name,
        "job": name,
        "input": input_dir,
        "created": _dt.datetime.fromtimestamp(started, _dt.timezone.utc).isoformat(timespec="seconds"),
        "pipeline": spec.normalized(),
        "pipeline_sha256": spec.sha256,
        "seed": spec.seed,
        "classes": [{"label": i, "name": c, **{k: v for k, v in per_class.get(c, {}).items() if k != "label"}}
                    for i, c in enumerate(classes)],
        "unlabeled": {k: v for k, v in per_class.get("", {}).items() if k != "label"} or None,
        "inputs": {
            "seen": seen,
            "written": written,
            "rejected": len(rejected),
            "rejected_files": [{"path": r.relpath, "reason": r.reason, "message": r.message}
                               for r in sorted(rejected, key=lambda r: r.relpath)],
        },
        "records": {"written": records, "variants": ([0] if spec.keep_original else []) +
                    list(range(1, spec.variants + 1))},
        "shards": [{"file": os.path.basename(p), "records": n} for p, n in zip(shard_paths, records_per_shard)],
        **({"splits": splits} if splits else {}),  # per split: images, records, rejected, its shard files
        "bytes": {"read": bytes_read, "written": bytes_written,
                  "ratio": round(bytes_written / bytes_read, 4) if bytes_read else None},
        "graph": {"builds": graph_builds, "traces": graph_traces, "stage_devices": stage_devices},
        "timing": {
            "wall_seconds": round(wall_seconds, 3),
            "images_per_second": round(written / wall_seconds, 2) if wall_seconds > 0 else None,
            "stage_seconds": {k: round(stage_seconds[k], 4) for k in STAGES},
        },
    }
