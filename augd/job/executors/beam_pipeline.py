"""The Beam executor's pipeline (augd/job/executors/beam.py opens it; apart, so that the executor's traits read
without Apache Beam installed): a job on Apache Beam writes what threads and processes write, shard for shard,
byte for byte.

run_job scans the job (`plan_job`) and claims the output (a hidden temp folder, AtomicOutput) as for every
executor; `write` then builds and runs a pipeline of these steps, every one safe to retry:

1. Create the job's work units, (group, position in the group's seeded order), and Reshuffle them over workers.
2. `_ProcessImage`: each DoFn instance builds its Engine and compiles the job's graph once, in setup();
   `process_images` turns one image into its records, or a rejection. Besides the records, each image yields a
   small summary (counts, rejection, seconds, objects).
3. `_Count`: record counts need a global view: each image's count is grouped by group (a GroupByKey of small
   tuples), and `record_slots` over them gives each record its shard and its position there, as on every
   executor (augd.job.units), and each shard its record count.
4. `_Place`: each image's records meet their slots in a GroupByKey by image, and go out keyed by shard.
5. GroupByKey on (group, shard), with the shard's count (so that empty shards are written too);
   `_WriteShard` sorts a shard's records by position, checks that none is missing, writes them with
   ShardWriter (the local executor's writer: same compression, same bytes) under a unique hidden name in the
   temp folder and renames that into place. A retried attempt rewrites the same bytes.
6. `_gather`: every summary and every shard written meet in one GroupByKey and go into one JSON file in the
   temp folder.

No step reads a side input: the DaskRunner computes a side input by running its whole upstream again inside
every task that reads one, which processed every image five times on the demo when the counts were a side
input; joined by GroupByKeys, every image is processed once there too.

Repeated elements. Beam promises that a bundle's outputs are committed once, however often it runs (a failed
attempt's outputs are dropped; its side effects are not). Runners do not all keep that promise for every step
(the DaskRunner's re-evaluated side inputs repeated them; a speculative or re-run task elsewhere can), so augd
adds its own rule: every element carries its key (an image's (group, position); a record's (group, shard,
position); a shard's (group, shard)), and every step that counts or places keeps a repeated key once, after
checking that the copies agree (the per-image work is a pure function of its key, so a disagreement is a bug,
and fails the step). Every write is idempotent: a shard is renamed into place from its own attempt folder, the
outcomes file likewise, so a repeated write leaves the same bytes.

Then, on the launcher, after wait_until_finish(): read that file and tally the images in the local order; run_job
finishes as for every executor (check_outcome, build_report, write_sidecars, AtomicOutput.commit: _SUCCESS last).

Why the last step runs on the launcher and not as a Beam step: JobFailed (no valid input, too many rejected)
reaches the caller with its reason, as from run_job, instead of as a worker's exception that a runner retries
and wraps; the commit happens exactly once, by the process that claimed the output, which also removes the
temp folder on any failure (a Beam step may run again after it committed). It works on remote runners because
the workers hand their outcomes to the launcher through the output filesystem (a tf.io.gfile URL such as gs://),
the one thing they share. The cost: the launcher must wait for the pipeline to finish.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import time
import uuid

try:
    import apache_beam as beam
    from apache_beam.metrics import Metrics
    from apache_beam.metrics.metric import MetricsFilter
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
except ImportError as _exc:  # an optional extra: augd runs without it
    raise ImportError(f"the Beam executor needs Apache Beam ({_exc}): pip install 'augd[beam]'",
                      name="apache_beam") from _exc

from apache_beam.portability.api import beam_provision_api_pb2

from augd.engine import Engine, release_memory
from augd.engine.options import EngineOptions
from augd.errors import FailureReason, JobFailed
from augd.io import ShardWriter, is_url, write_text
from augd.job.executors.beam_outcomes import OUTCOMES, read_outcomes, shard_names
from augd.job.images import ImageOutcome, process_images
from augd.job.options import JobWatch
from augd.job.report import ShardSet, Tally
from augd.job.units import JobPlan, record_slots
from augd.tfenv import quiet_native_stderr

log = logging.getLogger("augd.job")

__all__ = ["Beam"]

_NS = "augd"   # the Beam metrics namespace
_DIRECT = {"direct", "directrunner", "switchingdirectrunner"}


def _counter(name: str):
    return Metrics.counter(_NS, name)


class _ProcessImage(beam.DoFn):
    """(group, position) -> (its summary, its records). One graph per DoFn instance:
    runners keep an instance for many bundles, so a worker builds one graph per thread it runs this step on."""
    def __init__(self, plan: JobPlan, engine_options: EngineOptions):
        self.plan, self.engine_options = plan, engine_options
        self.compiled = None

    def setup(self):
        with quiet_native_stderr():
            self.compiled = Engine(self.engine_options).compile(self.plan.spec)
        self.instance = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.counted = False

    def process(self, unit):
        if not self.counted:  # metrics have no home in setup(): the build is counted with the first image
            self.counted = True
            _counter("graph_builds").inc()
            _counter("graph_traces").inc(self.compiled.traces)
        g, pos = unit
        group = self.plan.groups[g]
        t0 = time.perf_counter()
        [out] = process_images(self.compiled, self.plan.spec, [group.order[pos]],
                               list(group.variants_of(group.order[pos])),
                               self.plan.detection, self.plan.partners)
        _counter("images").inc()
        _counter("rejected" if out.rejected else "records").inc(1 if out.rejected else len(out.records))
        # one element, (summary, records): the steps below key it as they need
        yield _summary(g, pos, out, self, time.perf_counter() - t0), out.records

    def teardown(self):
        if self.compiled is not None:
            self.compiled.close()
            self.compiled = None
            release_memory()


def _summary(g: int, pos: int, out: ImageOutcome, fn: _ProcessImage, seconds: float) -> dict:
    """What the launcher needs of an image (JSON: the outcomes file), without its records."""
    o, c = out.objects, fn.compiled
    return {"g": g, "pos": pos, "records": len(out.records), "bytes_read": out.bytes_read,
            "rejected": [out.rejected.reason, out.rejected.message] if out.rejected else None,
            "stages": out.stage_seconds, "seconds": seconds,
            "objects": dataclasses.asdict(o) if o is not None else None,
            "tiles": list(vars(out.tiles).values()) if out.tiles is not None else None,
            "worker": fn.instance, "traces": c.traces, "device": [c.device.name, c.device.tf_version],
            "stage_devices": c.stage_devices}


def _record_counts(counts, size: int, g: int) -> list[int]:
    """A group's record count per position, from its (position, count) pairs. A runner may repeat an element
    (Dataflow and Spark re-run bundles and speculative tasks): a repeated position is kept once, as the
    per-image work is a pure function of it; two counts that disagree, or a position with none, fail the step
    rather than place a record wrongly."""
    per_pos = [None] * size
    for pos, n in counts:
        if per_pos[pos] is not None and per_pos[pos] != n:
            raise RuntimeError(f"image {pos} of group {g} was counted twice with different record counts "
                               f"({per_pos[pos]}, {n}): a repeated element is not the same")
        per_pos[pos] = n
    if None in per_pos:
        raise RuntimeError(f"image {per_pos.index(None)} of group {g} has no record count: the runner lost an output")
    return per_pos


def _once(rows: list[dict], key, same) -> list[dict]:
    """`rows` sorted by `key`, a repeated key kept once (the first); the fields `same` names must agree between
    repeats (others, a worker's name or its seconds, may differ between two runs of the same element)."""
    out: dict = {}
    for row in rows:
        k = key(row)
        if k in out and [out[k][f] for f in same] != [row[f] for f in same]:
            raise RuntimeError(f"{k} was reported twice, differently ({[out[k][f] for f in same]} and "
                               f"{[row[f] for f in same]}): a repeated element is not the same")
        out.setdefault(k, row)
    return [out[k] for k in sorted(out)]


def _the_same(values: list, what: str):
    """The one value of copies that must agree (a repeated element), or RuntimeError."""
    if any(v != values[0] for v in values[1:]):
        raise RuntimeError(f"{what} arrived twice, differently: a repeated element is not the same")
    return values[0]


class _Count(beam.DoFn):
    """(group, [(position, record count), ...]) -> each image's record slots, ((group, position), ("slots",
    [(shard, position in shard), ...])), and each shard's record count, ((group, shard), ("expect", n)): the
    placement every executor uses (record_slots), from the group's counts gathered by a GroupByKey."""

    def __init__(self, plan: JobPlan):
        self.sizes = [len(g.order) for g in plan.groups]
        self.shards = [g.shards for g in plan.groups]

    def process(self, item):
        g, counts = item
        per_shard = [0] * self.shards[g]   # counted from the slots: record_slots alone says where records go
        for pos, slots in enumerate(record_slots(_record_counts(counts, self.sizes[g], g), self.shards[g])):
            for shard, _ in slots:
                per_shard[shard] += 1
            yield (g, pos), ("slots", slots)
        for s, n in enumerate(per_shard):
            yield (g, s), ("expect", n)


class _Place(beam.DoFn):
    """((group, position), [("slots", ...), ("records", ...)]) -> ((group, shard), ("record", position in shard,
    record)) for each of the image's records."""

    def process(self, item):
        (g, pos), values = item
        slots = [v[1] for v in values if v[0] == "slots"]
        records = [v[1] for v in values if v[0] == "records"]
        if not slots or not records:
            raise RuntimeError(f"image {pos} of group {g}: {'no records' if not records else 'no record count'} "
                               f"arrived: the runner lost an output")
        slots = _the_same(slots, f"the slots of image {pos} of group {g}")
        records = _the_same(records, f"the records of image {pos} of group {g}")
        if len(slots) != len(records):
            raise RuntimeError(f"image {pos} of group {g}: {len(records)} records, {len(slots)} counted")
        for (shard, at), record in zip(slots, records):
            yield (g, shard), ("record", at, record)


class _WriteShard(beam.DoFn):
    """((group, shard), [("expect", n), ("record", position, record), ...]) -> the shard file, and what was
    written."""

    def __init__(self, plan: JobPlan, out_dir: str):
        self.out_dir, self.compression = out_dir, plan.spec.output.compression
        self.names = {(g, s): name for g in range(len(plan.groups)) for s, name in enumerate(shard_names(plan, g))}

    def process(self, item):
        import tensorflow as tf

        (g, s), values = item
        name = self.names[(g, s)]
        expected = [v[1] for v in values if v[0] == "expect"]
        if not expected:
            raise RuntimeError(f"{name}: no record count arrived: the runner lost an output")
        want = _the_same(expected, f"{name}'s record count")
        at_position: dict = {}
        for _, at, record in (v for v in values if v[0] == "record"):
            if at_position.setdefault(at, record) != record:   # a repeated record is kept once; it must be the same
                raise RuntimeError(f"{name}: two different records at position {at}: a repeated element is not "
                                   f"the same")
        records = sorted(at_position.items())
        if [at for at, _ in records] != list(range(want)):
            raise RuntimeError(f"{name}: records at positions {[at for at, _ in records][:20]}, expected 0..{want - 1}:"
                               f" the runner lost records")
        t0 = time.perf_counter()
        # ShardWriter writes (and fsyncs) the shard in a folder of this attempt's own; a retry or a second
        # attempt running at the same time writes its own, and each renames the same bytes into place.
        attempt = f"{self.out_dir}/.{name}.attempt-{uuid.uuid4().hex}"
        tf.io.gfile.makedirs(attempt)
        with ShardWriter(attempt, "shard", 1, self.compression) as writer:
            for _, record in records:
                writer.write(0, record)
        tf.io.gfile.rename(writer.paths[0], f"{self.out_dir}/{name}", overwrite=True)
        tf.io.gfile.rmtree(attempt)
        _counter("shards").inc()
        yield {"g": g, "shard": s, "records": len(records), "bytes": writer.bytes_written,
               "seconds": time.perf_counter() - t0}


def _gather(item, out_dir: str) -> None:
    """(key, [("image", summary), ("shard", row), ...]): every image's summary and every shard written, into the
    outcomes file (written aside, renamed in)."""
    import tensorflow as tf

    _, values = item
    summaries = [v[1] for v in values if v[0] == "image"]
    shards = [v[1] for v in values if v[0] == "shard"]
    tmp = f"{out_dir}/{OUTCOMES}.{uuid.uuid4().hex}"
    images = _once(summaries, lambda s: (s["g"], s["pos"]), ("records", "rejected", "bytes_read", "objects"))
    written = _once(shards, lambda s: (s["g"], s["shard"]), ("records", "bytes"))
    write_text(tmp, json.dumps({"images": images, "shards": written,
                                "repeated": {"images": len(summaries) - len(images),
                                             "shards": len(shards) - len(written)}}))
    tf.io.gfile.rename(tmp, f"{out_dir}/{OUTCOMES}", overwrite=True)


def _build(p, plan: JobPlan, engine_options: EngineOptions, out_dir: str) -> None:
    """The pipeline, joined by GroupByKeys and no side input: a runner that computes a side input by running its
    upstream again (the DaskRunner does, in every task that reads it) would process every image again."""
    units = [(g, pos) for g, group in enumerate(plan.groups) for pos in range(len(group.order))]
    processed = (p | "Units" >> beam.Create(units) | "Spread" >> beam.Reshuffle()
                 | "Process" >> beam.ParDo(_ProcessImage(plan, engine_options)))
    counted = (processed | "Counts" >> beam.Map(lambda it: (it[0]["g"], (it[0]["pos"], it[0]["records"])))
               | "ByGroup" >> beam.GroupByKey() | "Count" >> beam.ParDo(_Count(plan)))
    slots = counted | "Slots" >> beam.Filter(lambda kv: kv[1][0] == "slots")
    expected = counted | "Expected" >> beam.Filter(lambda kv: kv[1][0] == "expect")
    records = processed | "Records" >> beam.Map(lambda it: ((it[0]["g"], it[0]["pos"]), ("records", it[1])))
    placed = ((slots, records) | "JoinImage" >> beam.Flatten() | "ByImage" >> beam.GroupByKey()
              | "Place" >> beam.ParDo(_Place()))
    # every group has an image (plan_job makes none without), so its counts name every shard, empty ones too
    written = ((placed, expected) | "JoinShard" >> beam.Flatten() | "ByShard" >> beam.GroupByKey()
               | "Write" >> beam.ParDo(_WriteShard(plan, out_dir)))
    images = processed | "Summaries" >> beam.Map(lambda it: (None, ("image", it[0])))
    shards = written | "Written" >> beam.Map(lambda row: (None, ("shard", row)))
    ((images, shards) | "JoinAll" >> beam.Flatten() | "Together" >> beam.GroupByKey()
     | "Gather" >> beam.Map(_gather, out_dir))


#: Runners Beam ships but does not know by a short name: `--runner=DaskRunner` works as Beam's own names do.
_QUALIFIED = {"daskrunner": "apache_beam.runners.dask.dask_runner.DaskRunner"}


def _pipeline(args: list[str]):
    """(Pipeline, runner name). Without --runner: the DirectRunner. The DirectRunner runs here on the FnApiRunner,
    its own engine for batch pipelines, without first trying Prism, which it would download (offline: it fails
    and falls back; online: a different runner than the one asked for)."""
    options = PipelineOptions(args)
    name = options.view_as(StandardOptions).runner or "DirectRunner"
    if name.lower() in _QUALIFIED:
        name = options.view_as(StandardOptions).runner = _QUALIFIED[name.lower()]
    if name.lower() not in _DIRECT:
        try:
            return beam.Pipeline(options=options), name.rsplit(".", 1)[-1]
        except (ValueError, ImportError) as exc:   # an unknown runner, or one whose extra is missing
            if not isinstance(exc, ImportError):
                hint = "; augd also knows DaskRunner"
            elif "dask" in name.lower():
                hint = "; the DaskRunner needs dask: pip install 'apache-beam[dask]'"
            else:
                hint = "; install the runner's extra (pip install 'apache-beam[...]')"
            raise JobFailed(f"Beam cannot make the runner {name!r}: {str(exc).splitlines()[0][:400]}{hint}",
                            reason=FailureReason.CRASHED) from exc
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.runners.portability.portable_runner import JobServiceHandle
    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())  # as the DirectRunner does
    runner = fn_runner.FnApiRunner(provision_info=fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)))
    return beam.Pipeline(runner=runner, options=options), "DirectRunner"


def _metrics(result) -> dict[str, int]:
    """The augd counters, summed over steps: committed where the runner has them, else attempted; {} when the
    runner reports none."""
    try:
        counters = result.metrics().query(MetricsFilter().with_namespace(_NS))["counters"]
    except Exception as exc:  # noqa: BLE001 - metrics are a log line here, never the job's outcome
        log.debug("beam: no metrics from the runner: %s", exc)
        return {}
    out: dict[str, int] = {}
    for c in counters:
        value = c.committed if c.committed is not None else c.attempted
        out[c.key.metric.name] = out.get(c.key.metric.name, 0) + (value or 0)
    return out


class Beam:
    """The Executor on Apache Beam. `launch.args`: Beam's pipeline options (`--runner=DataflowRunner
    --project=...`); without --runner, the DirectRunner. The input and the output must be on a filesystem the
    workers and this process share (a tf.io.gfile URL such as gs:// on a remote runner). `launch.engine_options`
    go to the workers, whose own AUGD_* environment is not read. The runner sizes its own workers and memory; the
    job is followed by its end only (`watch` sees no image) and is not cancelled: it runs to its end."""

    def __init__(self, launch):
        self.engine_options = launch.engine_options
        self.pipeline, self.runner = _pipeline(list(launch.args))
        self._report = None

    def write(self, plan: JobPlan, out_dir: str, tally: Tally, watch: JobWatch) -> ShardSet:
        if self.runner not in StandardOptions.LOCAL_RUNNERS and not (is_url(plan.input_dir) and is_url(out_dir)):
            log.warning("beam: the %s's workers must read %s and write %s at the same paths as this process: a "
                        "tf.io.gfile URL (gs://...) for both, or a filesystem mounted on every worker", self.runner,
                        plan.input_dir, out_dir)
        p, runner = self.pipeline, self.runner
        _build(p, plan, self.engine_options, out_dir)
        log.info("beam: %s: %d images in %d groups on the %s", plan.name, len(plan.images), len(plan.groups), runner)
        result = None
        try:
            result = p.run()
            state = result.wait_until_finish()
        except KeyboardInterrupt:
            if result is not None:  # a remote pipeline would go on writing into a folder nobody commits
                result.cancel()
            raise
        except Exception as exc:  # noqa: BLE001 - a failed pipeline, whatever the runner raises
            lines = [ln for ln in str(exc).splitlines() if ln.strip()] or [type(exc).__name__]
            log.debug("beam: the pipeline failed", exc_info=True)
            raise JobFailed(f"the Beam pipeline failed on the {runner}: {lines[-1].strip()[:500]}",
                            reason=FailureReason.CRASHED) from exc
        finally:
            # The DaskRunner's result holds the dask Client it opened and Beam never closes; left open, it keeps
            # reconnecting to a cluster that may be gone (the daemon runs job after job).
            client = getattr(result, "client", None)
            if client is not None and callable(getattr(client, "close", None)):
                try:
                    client.close()
                except Exception as exc:  # noqa: BLE001 - never hide the pipeline's own outcome behind this
                    log.warning("beam: closing the runner's dask client failed: %s", exc)
        if state is not None and str(state).rsplit(".", 1)[-1] not in ("DONE", "UNKNOWN"):
            raise JobFailed(f"the Beam pipeline ended {state} on the {runner}", reason=FailureReason.CRASHED)
        metrics = _metrics(result)
        log.info("beam: %s: %s", plan.name, ", ".join(f"{k} {v}" for k, v in sorted(metrics.items())) or
                 "the runner reported no metrics")
        shards, self._report = read_outcomes(plan, out_dir, tally, metrics)
        return shards

    def report(self):
        return self._report

    def close(self) -> None:
        pass
