"""The Beam executor's launcher side, after the pipeline ran (augd/job/executors/beam_pipeline.py): the workers'
outcomes read back from the job's temp folder, every image tallied in the local executor's order, the shards
checked and the manifest's graph block made. Needs TensorFlow's filesystems (gs:// too), not Apache Beam."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from augd.annotations.objects import ObjectCounts
from augd.errors import FailureReason, JobFailed
from augd.io import RejectedInput, shard_name
from augd.job.images import ImageOutcome
from augd.job.report import GraphInfo, ShardSet, Tally, TileCounts
from augd.job.units import JobPlan

log = logging.getLogger("augd.job")

__all__ = ["OUTCOMES", "read_outcomes", "shard_names"]

#: In the job's temp folder: the workers' outcomes for the launcher. Every hidden name in that folder is the
#: executor's own (this file, shard attempts) and is removed before the commit.
OUTCOMES = ".beam-outcomes.json"


def shard_names(plan: JobPlan, g: int) -> list[str]:
    group = plan.groups[g]
    return [shard_name(group.prefix(plan.name), s, group.shards, plan.spec.output.compression)
            for s in range(group.shards)]


@dataclass
class _Written:
    """One group's shards as ShardSet.add reads a ShardWriter."""
    paths: list
    records_per_shard: list
    bytes_written: int


@dataclass(frozen=True)
class _Device:
    name: str
    tf_version: str


def _outcome(plan: JobPlan, s: dict) -> ImageOutcome:
    img = plan.groups[s["g"]].order[s["pos"]]
    o = s["objects"]
    return ImageOutcome(
        img, records=(b"",) * s["records"],   # Tally counts them; their bytes are in the shards
        rejected=RejectedInput(img.relpath, *s["rejected"]) if s["rejected"] else None, bytes_read=s["bytes_read"],
        stage_seconds=s["stages"], objects=ObjectCounts(**o) if o is not None else None,
        tiles=TileCounts(*s["tiles"]) if s.get("tiles") is not None else None)


def _graph(images: list[dict], metrics: dict) -> tuple[GraphInfo, _Device]:
    """The manifest's graph block and device, from the workers: per process, the graphs its DoFn instances built
    (the metrics also count an attempt that failed), their traces, images and seconds."""
    workers: dict = {}
    for s in images:
        host, pid, instance = s["worker"].rsplit(":", 2)
        w = workers.setdefault((host, pid), {"host": host, "pid": int(pid), "graphs": {}, "images": 0, "seconds": 0.0})
        w["graphs"][instance] = s["traces"]
        w["images"] += 1
        w["seconds"] += s["seconds"]
    rows = tuple({"host": w["host"], "pid": w["pid"], "builds": len(w["graphs"]), "traces": sum(w["graphs"].values()),
                  "images": w["images"], "seconds": round(w["seconds"], 3)} for _, w in sorted(workers.items()))
    graph = GraphInfo(metrics.get("graph_builds") or sum(w["builds"] for w in rows),
                      metrics.get("graph_traces") or sum(w["traces"] for w in rows),
                      images[0]["stage_devices"], "beam", rows)
    devices = sorted({tuple(s["device"]) for s in images})
    return graph, _Device(", ".join(n for n, _ in devices), ", ".join(sorted({v for _, v in devices})))


def read_outcomes(plan: JobPlan, out_dir: str, tally: Tally, metrics: dict):
    """From the outcomes file: every image tallied in the local executor's order, the shards written, and the
    report's graph block and device. Removes the executor's hidden files (the outcomes, a crashed attempt's
    folder) before run_job commits."""
    import tensorflow as tf
    path = f"{out_dir}/{OUTCOMES}"
    if not tf.io.gfile.exists(path):
        raise JobFailed(f"the Beam pipeline finished but {path} is missing: the workers must write to the same "
                        f"filesystem as the launcher (a gs:// URL on Dataflow)", reason=FailureReason.CRASHED)
    with tf.io.gfile.GFile(path) as f:
        data = json.load(f)
    images, shard_rows = data["images"], data["shards"]
    if any(data["repeated"].values()):
        log.info("beam: the runner repeated %(images)d image outcome(s) and %(shards)d shard(s); each was kept once",
                 data["repeated"])
    want = [(g, pos) for g, group in enumerate(plan.groups) for pos in range(len(group.order))]
    if [(s["g"], s["pos"]) for s in images] != want:
        raise JobFailed(f"the Beam pipeline returned {len(images)} image outcomes for {len(want)} images",
                        reason=FailureReason.CRASHED)
    for s in images:   # in the local executor's order: group after group, each in its seeded order
        tally.add(_outcome(plan, s))
    shards = ShardSet()
    for g, group in enumerate(plan.groups):
        rows = [r for r in shard_rows if r["g"] == g]
        if [r["shard"] for r in rows] != list(range(group.shards)):
            raise JobFailed(f"the Beam pipeline wrote {len(rows)} of group {g}'s {group.shards} shards",
                            reason=FailureReason.CRASHED)
        shards.add(group.split, _Written([f"{out_dir}/{n}" for n in shard_names(plan, g)],
                                         [r["records"] for r in rows], sum(r["bytes"] for r in rows)))
    tally.stages["write"] += sum(r["seconds"] for r in shard_rows)
    for name in tf.io.gfile.listdir(out_dir):  # a crashed attempt's folder, the outcomes file
        name = name.rstrip("/")
        if name.startswith("."):
            p = f"{out_dir}/{name}"
            tf.io.gfile.rmtree(p) if tf.io.gfile.isdir(p) else tf.io.gfile.remove(p)
    return shards, _graph(images, metrics)
