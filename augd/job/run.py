"""One job end to end: plan (scan, seeded order, groups) -> claim the output -> an executor writes the shards ->
check, report, side files -> atomic commit. The same steps for `augd run`, the daemon and the bench, whichever
executor (augd/job/executors/) runs the images; the per-image work they all call is augd/job/images.py."""
from __future__ import annotations

import dataclasses
import logging
import time

from augd import defaults
from augd.check import check_plan, text
from augd.defaults import ExecutorKind
from augd.engine import Engine
from augd.engine.options import EngineOptions
from augd.errors import FailureReason, JobFailed
from augd.host import usable_cpus
from augd.io import write_text
from augd.io.jobfs import folder_identity
from augd.io.limits import ReadLimits
from augd.job.executors import Choice, Host, Launch, choose, open_executor, traits
from augd.job.executors.choice import plan_cost
from augd.job.finish import build_report, check_outcome, check_root, claimed_output, write_sidecars
from augd.job.images import ImageOutcome, process_images
from augd.job.options import Cancel, JobOptions, JobResult, JobWatch
from augd.job.report import JobProgress, Tally
from augd.job.units import plan_job, variants_of
from augd.job.workers.pool import chunked_map
from augd.schema import PipelineSpec

log = logging.getLogger("augd.job")

__all__ = ["Cancel", "ImageOutcome", "JobOptions", "JobResult", "JobWatch", "build_report", "check_outcome",
           "process_images", "run_job", "variants_of", "write_sidecars"]


def run_job(input_dir: str, spec: PipelineSpec, out_root: str, options: JobOptions | None = None,
            watch: JobWatch | None = None, engine: Engine | None = None, pool=None,
            engine_options: EngineOptions | None = None) -> JobResult:
    """Run one job into `out_root`/name/. Raises JobFailed (with its reason) when no complete output can be
    produced; bad images are rejected and listed, they never fail the job on their own.

    `engine`: the Engine threads compile the job's graph with (default: one with `engine_options`); its device
    decides `auto`. `engine_options`: for workers that build their own engine (worker processes, Beam's; default:
    the engine's, else EngineOptions()). `pool`: a warm augd.job.workers.pool.ProcessPool (the daemon's), else one is
    started for the job when the executor is processes. No engine is built here for a Beam job, nor for one handed
    a pool and no engine (`augd run`'s early pool) that runs on the pool: this process then never loads
    TensorFlow, whose import (seconds of CPU) would compete with the workers' own. An engine is built here only
    for an executor whose traits say it compiles here (threads), and for auto to learn the device."""
    opts, watch = options or JobOptions(), watch or JobWatch()
    started, t_start = time.time(), time.perf_counter()
    root = opts.root or folder_identity(input_dir)
    plan = plan_job(input_dir, spec, opts.name, opts.max_pixels, chunked_map(pool) if pool is not None else None,
                    ReadLimits.for_job(opts.memory_limit, watch.beat))
    workers = opts.workers or usable_cpus()
    checked = _check(plan, opts.check, workers, pool, watch.beat) if opts.check is not None else None
    engine_options = engine_options or (engine.options if engine is not None else EngineOptions())
    choice = opts.choice   # made by the caller (augd run's early pool, the daemon's warm one) for opts.executor
    if opts.executor is not ExecutorKind.AUTO and (choice is None or choice.kind is not opts.executor):
        asked = pool.size if pool is not None and traits(opts.executor).pool else workers
        choice = Choice(opts.executor, asked, "asked for", requested=opts.executor.value)
    elif choice is None:
        # the device: the caller's engine's, else the pool's workers' (None if none could start: its first batch
        # fails the job, saying why), else an engine built here
        device = engine.device if engine is not None else pool.device() if pool is not None else None
        if device is None and pool is None:
            engine = _engine(engine_options)
            device = engine.device
        host = Host.here(pool.size if pool else opts.workers, device is not None and device.kind == "GPU",
                         pool.size if pool else 0, engine_ready=engine is not None)
        choice = choose(opts.executor, plan_cost(plan), host)
    kind, workers = choice.kind, choice.workers
    # a choice made before the plan (augd run's, from the files; the daemon's, once) and what the plan holds
    early = f" (chosen before the plan; planned: {plan_cost(plan).records} records)" if choice is opts.choice else ""
    log.info("job %s: %s%s", plan.name, choice.line(), early)
    if plain := [g.split for g in plan.groups if g.split and not spec.augments(g.split)]:
        log.info("job %s: %s written as %s (originals only, no augmented variants); augmented: %s "
                 "(augment_splits: %s%s)", plan.name, ", ".join(plain), "they are" if len(plain) > 1 else "it is",
                 ", ".join(g.split for g in plan.groups if spec.augments(g.split)) or "no split",
                 list(spec.augment_splits or defaults.AUGMENT_SPLITS),
                 ", the default" if spec.augment_splits is None else "")
    if engine is None and traits(kind).engine_here:
        engine = _engine(engine_options)
    tally = Tally(JobProgress(name=plan.name, total=len(plan.images)))
    tally.add_scan(plan.scan)
    executor = None
    try:
        with claimed_output(out_root, plan.name, opts.overwrite) as out:
            # opened once the output is known to be writable: a run that may not write fails before the graph
            executor = open_executor(kind, Launch(plan, engine_options, workers, engine, pool, opts.memory_limit,
                                                  opts.executor_args))
            shards = executor.write(plan, out.tmp_dir, tally, watch)
            rejected = check_outcome(plan, tally, opts.max_rejected)
            graph, device = executor.report()
            graph = dataclasses.replace(graph, choice=choice.to_dict())
            first = tally.first_record_at - t_start if tally.first_record_at is not None else None
            report = build_report(plan, tally, shards, graph, device, started, time.perf_counter() - t_start,
                                  rejected, first)
            write_sidecars(out.tmp_dir, plan, report)
            if checked is not None:
                write_text(f"{out.tmp_dir}/check.json", checked.to_json())
            check_root(input_dir, root)
            if watch.before_commit is not None:
                watch.before_commit()
            out.commit(watch.tick)
    finally:
        if executor is not None:
            executor.close()
    return JobResult(name=plan.name, out_dir=out.dest, report=report)


def _check(plan, fail_on: tuple[str, ...], workers: int, pool, beat):
    """augd check on the job's own plan (its images hashed on its pool, when it has one); JobFailed (check_failed,
    with the report's text) when it finds what `fail_on` names."""
    report = check_plan(plan, workers=workers, mapper=chunked_map(pool) if pool is not None else None, beat=beat)
    if report.exit_code(fail_on):
        found = ", ".join(f"{k}={n}" for k, n in report.problems().items() if n and k in fail_on)
        raise JobFailed(f"{plan.input_dir}: the dataset check found {found} (check: fail_on {list(fail_on)}); "
                        f"nothing was written. The check:\n{text(report)}", reason=FailureReason.CHECK_FAILED)
    return report


def _engine(options: EngineOptions) -> Engine:
    return Engine(options)   # loads TensorFlow (in the process that runs the graph)
