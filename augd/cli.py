"""The `augd` command. Verbs only parse arguments, call a room, and print; no business logic here."""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from augd import __version__, defaults
from augd.defaults import EXECUTORS
from augd.errors import AugdError, JobFailed, SpecError
from augd.files import one_line, point_at_devnull, reader_gone
from augd.labels import LabelMapError, label_map
from augd.tfenv import load_tensorflow_quietly, prepare_own_process

log = logging.getLogger("augd")

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def cmd_validate(args) -> int:
    from augd.ops.words import plural
    from augd.schema import find_pipeline, load_pipeline
    bad = 0
    for ref in args.files:
        try:
            spec = load_pipeline(find_pipeline(ref))
            print(f"ok   {ref}: {spec.name} ({plural(len(spec.ops), 'op')}, {plural(spec.variants, 'variant')}, "
                  f"sha256 {spec.sha256[:12]})")
        except SpecError as exc:
            bad += 1
            for err in getattr(exc, "errors", None) or [exc]:  # every error of the file, one line each
                print(f"FAIL {err}", file=sys.stderr)
    return EXIT_FAILED if bad else EXIT_OK


def cmd_show(args) -> int:
    from augd.schema import find_pipeline, load_pipeline
    try:
        path = find_pipeline(args.pipeline)
        load_pipeline(path)  # only a valid pipeline is shown as one to copy
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (SpecError, OSError) as exc:
        print(f"augd show: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"# {path}\n{text}", end="" if text.endswith("\n") else "\n")
    return EXIT_OK


def cmd_ops(args) -> int:
    from augd.ops import describe_ops
    ops = describe_ops()
    if args.json:
        print(json.dumps(ops, indent=2))
        return EXIT_OK
    headings = {"geometry": "Geometry (fused into one warp)", "colour": "Colour", "pixel": "Pixel",
                "mix": "Mixing images (the first op only: the image and partners of its split on one canvas)",
                "composite": "Composites (children as a list, or a mapping with ops:)"}
    for kind, heading in headings.items():
        print(f"== {heading} ==")
        for op in (o for o in ops if o["kind"] == kind):
            print(f"{op['name']}  {op['summary']}")
            for line in (op["example"] or "").splitlines():
                print(f"    e.g. {line}")
            for pname, p in op["params"].items():
                req = " (required)" if pname in op["required"] else f" = {json.dumps(p.get('default'))}"
                bounds = [f"{k} {p[k]}" for k in ("minimum", "exclusiveMinimum", "maximum") if k in p]
                if "prefixItems" in p:
                    items = p["prefixItems"][0]
                    bounds = [f"each in [{items.get('minimum')}, {items.get('maximum')}]"]
                desc = p.get("description", "")
                print(f"    {pname}{req}{'  ' + ', '.join(bounds) if bounds else ''}{'  - ' + desc if desc else ''}")
        print()
    from augd.schema.jsonschema import pipeline_keys
    print("== Pipeline keys (not ops: beside ops: in a pipeline; docs/pipelines.md) ==")
    for key, sub, desc in pipeline_keys():
        print(f"{key}:{' {' + ', '.join(sub) + '}' if sub else ''}  {desc}")
    print()
    print(f"{len(ops)} ops. Every op also takes p, the probability that it applies (default 1); an op with its own "
          f"coin (the flips: 0.5) applies with p times that.")
    return EXIT_OK


def cmd_schema(args) -> int:
    from augd.schema.jsonschema import pipeline_schema
    print(json.dumps(pipeline_schema(), indent=2))
    return EXIT_OK


def cmd_run(args) -> int:
    from augd.schema import find_pipeline, load_pipeline
    try:
        spec = load_pipeline(find_pipeline(args.pipeline))
    except SpecError as exc:
        print(f"augd run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.seed is not None:
        spec = spec.with_seed(args.seed)
    if args.labels is not None:
        is_file = os.path.isfile(args.labels) or "/" in args.labels or args.labels.endswith(".txt")
        value = args.labels if is_file else args.labels.split(",")
        try:
            spec = spec.with_labels(label_map(value, os.getcwd(), "--labels"))
        except LabelMapError as exc:
            print(f"augd run: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if args.annotations is not None or args.label_map is not None:
        from augd.schema import Annotations
        lm = os.path.abspath(args.label_map) if args.label_map is not None else None
        if lm is not None and not os.path.isfile(lm):
            print(f"augd run: --label-map {args.label_map!r} is not a file", file=sys.stderr)
            return EXIT_USAGE
        spec = spec.with_annotations(Annotations(format=args.annotations, label_map=lm))
    if not os.path.isdir(args.input) and "://" not in args.input:
        print(f"augd run: input {args.input!r} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    from augd.engine.options import EngineOptions
    try:
        engine_options = EngineOptions.from_env()
    except ValueError as exc:
        print(f"augd run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    pool, choice = _early_pool(args, spec, engine_options)
    try:
        return _run(args, spec, engine_options, pool, choice)
    finally:
        if pool is not None:
            pool.close()


def _no_options(executor) -> str | None:
    """Why `executor` takes no options after `--` (naming those that do), or None where it takes them."""
    from augd.job.executors import traits
    if executor is None:
        return "only `augd run` takes options after --"
    if traits(executor).options is not None:
        return None
    takers = [f"`augd run --executor {k} -- OPTIONS` ({traits(k).options.split(',')[0]})" for k in EXECUTORS
              if traits(k).options]
    return f"--executor {executor} takes no options after --; these do: " + "; ".join(takers)


def _early_pool(args, spec, engine_options):
    """(pool, choice): what the job runs on, chosen before this process loads TensorFlow (`auto`: by the job's files
    and their bytes, augd.job.executors.choice), and the worker processes where that is processes, started now so
    that their imports and this process' plan overlap. (None, None) for an executor that does not run on them
    (threads, Beam) and a URL: run_job chooses then."""
    from augd.job.executors import traits
    if not traits(args.executor).pool or "://" in args.input:
        return None, None
    from augd.job.executors.choice import Host, choose, estimate_folder
    from augd.job.workers.pool import ProcessPool
    # the device as far as can be told without TensorFlow: a GPU host has NVIDIA's device nodes (or /dev/dxg
    # under WSL2); where unsure, no early pool (run_job still picks processes after the plan if they pay)
    gpu = engine_options.device == "gpu" or (engine_options.device == "auto" and any(
        os.path.exists(p) for p in ("/dev/nvidia0", "/proc/driver/nvidia", "/dev/dxg")))
    choice = choose(args.executor, estimate_folder(args.input, spec), Host.here(args.workers, gpu))
    if not traits(choice.kind).pool:
        return None, choice
    return ProcessPool(choice.workers, engine_options), choice


def _run(args, spec, engine_options, pool, choice) -> int:
    from augd.job.executors import traits
    asked = traits(args.executor)
    # with an early pool (or an executor whose graphs run elsewhere: Dask's workers) this process never loads
    # TensorFlow (augd.job.run); where it will, first quietly: its native libraries print noise on CPU hosts
    if not args.verbose and pool is None and (asked.engine_here or asked.graph_here):
        load_tensorflow_quietly()
    from augd.job import JobOptions, JobWatch, run_job
    from augd.job.resources import job_memory_bytes
    bar = None
    missing = asked.missing(args.executor)
    if missing:
        print(f"augd run: {missing}", file=sys.stderr)
        return EXIT_USAGE
    if asked.check_options is not None:
        try:
            asked.check_options(tuple(args.executor_args))
        except ValueError as exc:
            print(f"augd run: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if sys.stderr.isatty() and not args.quiet and asked.watch:
        from tqdm import tqdm
        bar = tqdm(unit="img", desc=args.name or os.path.basename(args.input.rstrip("/")), file=sys.stderr)

    def progress(p):
        if bar is not None:
            bar.total = p.total
            bar.update(p.done - bar.n)
            bar.set_postfix(written=p.written, rejected=p.rejected, refresh=False)

    options = JobOptions(name=args.name, workers=args.workers, executor=args.executor, overwrite=args.overwrite,
                         max_pixels=args.max_pixels, memory_limit=job_memory_bytes(args.max_memory_mb),
                         max_rejected=args.max_rejected, executor_args=args.executor_args, check=args.check,
                         choice=choice)
    engine = None
    if pool is None and asked.engine_here:   # threads, or auto without an early pool
        from augd.engine import Engine
        try:
            engine = Engine(engine_options)
        except ValueError as exc:  # device: gpu on a host without one
            print(f"augd run: {exc}", file=sys.stderr)
            return EXIT_USAGE
    try:
        result = run_job(args.input, spec, args.out, options, JobWatch(on_progress=progress), engine, pool,
                         engine_options)
    except JobFailed as exc:
        print(f"augd run: job failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if bar is not None:
            bar.close()
    try:
        _summary(result)
        sys.stdout.flush()
    except BrokenPipeError:   # the job is committed: a reader that went away does not make it fail
        point_at_devnull(*(x for x in (sys.stdout, sys.stderr) if reader_gone(x)))
    return EXIT_OK


def _summary(result) -> None:
    from augd.job.report import reasons_summary
    r = result.report
    print(f"{result.name}: {r.inputs.written}/{r.inputs.seen} images -> {r.records.written} "
          f"records in {len(r.shards)} shard(s), {r.inputs.rejected} rejected, "
          f"{r.timing.images_per_second} img/s, {r.bytes.written / 1e6:.1f} MB -> {result.out_dir}")
    if r.annotations is not None:
        a = r.annotations.to_dict()
        print(f"  {a['format']} annotations: {a['objects']['in']} objects in, {a['objects']['out']} out "
              f"({a['objects']['dropped']} dropped), {a['negatives']['kept']} negatives kept, "
              f"{a['repairs']['objects']} repaired, {a['bad_annotations']} bad annotations; label map: "
              f"{a['label_map']}", file=sys.stderr)
    if r.tiles is not None:
        t = r.tiles
        print(f"  tiles: {t['tiles']} cut, {t['kept']} kept ({t['empty_kept']} of {t['empty']} empty ones), "
              f"{t['objects_in_kept_tiles']} objects in them; {t['full_images']} whole-image records",
              file=sys.stderr)
    if r.unlabeled and r.unlabeled.images and r.annotations is None:  # a detection job's images have no class
        print(f"  unlabeled (label -1: not in a class folder): {r.unlabeled.images} images", file=sys.stderr)
    rejected = r.inputs.rejected_files
    if rejected:
        print("  rejected by reason: " + reasons_summary(f.reason for f in rejected), file=sys.stderr)
    for f in rejected[:20]:
        print(one_line(f"  rejected {f.relpath}: {f.message}"), file=sys.stderr)
    if len(rejected) > 20:
        print(f"  ... and {len(rejected) - 20} more: manifest.json lists them all", file=sys.stderr)


def _fraction(value: str) -> float:
    try:
        f = float(value)
    except ValueError:
        f = -1.0
    if not 0.0 <= f <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a fraction in [0, 1] (0.05 = 5 %); got {value!r}")
    return f


def cmd_inspect(args) -> int:
    from augd.inspect import inspect_paths
    try:
        return inspect_paths(args.paths, dump=args.dump, out=sys.stdout)
    except BrokenPipeError:
        raise   # its reader left: main() ends quietly
    except (OSError, ValueError) as exc:
        print(f"augd inspect: {exc}", file=sys.stderr)
        return EXIT_FAILED


def _serve_arguments(parser) -> None:
    parser.add_argument("--config", "-c", help="daemon config YAML (default: built-in defaults, folders under "
                                               "./augd-data)")
    parser.add_argument("--check", action="store_true", help="validate the config, print the resolved settings, "
                                                             "and exit")


def cmd_serve(args) -> int:
    from augd.daemon.config import load_settings
    try:
        settings = load_settings(args.config)
    except SpecError as exc:
        print(f"augd serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.check:
        print(f"ok   {settings.source}")
        for key in ("inbox", "work", "done", "failed", "out", "pipelines_dir", "default_pipeline"):
            print(f"  {key}: {getattr(settings, key)}")
        for key, value in settings.config.model_dump().items():
            if key not in ("inbox", "work", "done", "failed", "out", "pipelines_dir", "default_pipeline", "data_dir"):
                print(f"  {key}: {value}")
        return 0
    from augd.daemon.logs import setup_logging
    from augd.daemon.service import Daemon
    setup_logging(settings.log_format, "debug" if getattr(args, "verbose", False) else settings.log_level)
    daemon = Daemon(settings, args.config)
    try:
        return daemon.serve()
    except OSError as exc:
        print(f"augd serve: {exc}", file=sys.stderr)
        return 1
    except AugdError as exc:
        print(f"augd serve: {exc}", file=sys.stderr)
        return 2


def _check_arg(value: str) -> tuple[str, ...]:
    from augd.check import FAIL_ON
    kinds = tuple(k for k in value.split(",") if k)
    if bad := [k for k in kinds if k not in FAIL_ON]:
        raise argparse.ArgumentTypeError(f"{','.join(bad)}: expected a comma-separated list of {', '.join(FAIL_ON)}")
    return kinds


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="augd", description="Offline image augmentation into TFRecord shards.")
    p.add_argument("--version", action="version", version=f"augd {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    r = sub.add_parser("run", help="augment one folder of images into TFRecord shards")
    r.add_argument("input", help="job folder: class sub-folders, or images directly")
    r.add_argument("--pipeline", "-p", required=True, help="pipeline YAML file, or a built-in pipeline name")
    r.add_argument("--out", "-o", required=True, help="output root (any tf.io.gfile URL); writes OUT/NAME/")
    r.add_argument("--name", help="job name (default: the input folder's name)")
    r.add_argument("--workers", type=int, default=None, help="parallel images: worker processes or threads "
                   "(default: all cores)")
    r.add_argument("--executor", choices=EXECUTORS, default="auto",
                   help="processes: worker processes, each with its own graph; threads: one process; auto: "
                        "processes on CPU hosts for jobs large enough to pay their start-up, else threads; beam: "
                        "Apache Beam (pip install 'augd[beam]'), its pipeline options after a --, e.g. -- "
                        "--runner=DataflowRunner --project=P (default: the DirectRunner)")
    r.add_argument("--runner", choices=("local", "beam"), default=None,
                   help="deprecated: --runner beam is --executor beam")
    r.add_argument("--overwrite", action="store_true", help="replace an existing complete output")
    r.add_argument("--seed", type=int, default=None, help="override the pipeline's seed")
    r.add_argument("--max-pixels", type=int, default=defaults.MAX_PIXELS,
                   help=f"reject images larger than this (default {defaults.MAX_PIXELS})")
    from augd.checkcmd import memory_arg   # augd run and augd check take the same limit
    r.add_argument("--max-memory-mb", type=memory_arg, default="auto",
                   help="memory the job may add to the process, in MB; auto (default): half the host's "
                        "(cgroup-aware); none: no limit")
    r.add_argument("--labels", metavar="FILE|A,B,...",
                   help="fixed label map (ids across jobs): a labels.txt (0:cat lines, as augd writes) or class "
                        "names separated by commas; a class folder not in it fails the job")
    from augd.annotations.layout import in_words
    from augd.schema import ANNOTATION_FORMATS
    r.add_argument("--annotations", choices=ANNOTATION_FORMATS, default=None,
                   help="detection/segmentation annotations: auto (the default, unless the pipeline says otherwise) "
                        f"detects TFRecord shards or a {in_words()} layout; none: a classification job")
    r.add_argument("--label-map", metavar="FILE", default=None,
                   help="fixed detection label map (a TF Object Detection API label_map.pbtxt): ids across jobs; an "
                        "object of a class not in it rejects its image")
    r.add_argument("--max-rejected", type=_fraction, default=None, metavar="FRACTION",
                   help="fail the job (writing nothing) when more than this fraction of its inputs is rejected")
    r.add_argument("--check", type=_check_arg, nargs="?", const=("leak", "rejected"), default=None,
                   metavar="leak,rejected", help="run augd check on the folder first (its report: check.json beside "
                   "the manifest) and fail the job, writing nothing, on what it names (default leak,rejected; '' "
                   "never)")
    r.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    r.set_defaults(fn=cmd_run)

    v = sub.add_parser("validate", help="check pipeline files (or shipped pipelines by name); exit 1 if any is "
                                        "invalid, with every error of each file")
    v.add_argument("files", nargs="+", metavar="PIPELINE")
    v.set_defaults(fn=cmd_validate)

    sh = sub.add_parser("show", help="print a pipeline (a shipped one by name, or a file), to copy and edit")
    sh.add_argument("pipeline")
    sh.set_defaults(fn=cmd_show)

    o = sub.add_parser("ops", help="list the ops with their parameters")
    o.add_argument("--json", action="store_true")
    o.set_defaults(fn=cmd_ops)

    s = sub.add_parser("schema", help="print the JSON Schema of the pipeline format")
    s.set_defaults(fn=cmd_schema)

    sv = sub.add_parser("serve", help="run the drop-folder daemon")
    _serve_arguments(sv)
    sv.set_defaults(fn=cmd_serve)

    i = sub.add_parser("inspect", help="summarise TFRecord files or output folders")
    i.add_argument("paths", nargs="+")
    i.add_argument("--dump", nargs=2, metavar=("N", "DIR"), help="write the first N images to DIR")
    i.set_defaults(fn=cmd_inspect)

    ck = sub.add_parser("check", help="what a job would meet in a dataset: classes, box sizes, repairs, rejections, "
                                      "near-duplicates and leaks across splits; exit 1 on a leak or a rejection")
    from augd.checkcmd import add_check_arguments, cmd_check
    add_check_arguments(ck)
    ck.set_defaults(fn=cmd_check)

    ic = sub.add_parser("import-config", help="an Object Detection API pipeline.config's augmentations as an augd "
                                              "pipeline (exact, or said where not)")
    from augd.importconfig import add_import_arguments, cmd_import_config
    add_import_arguments(ic)
    ic.set_defaults(fn=cmd_import_config)

    pv = sub.add_parser("preview", help="contact sheet of a pipeline's variants of a few images, with the drawn "
                                        "parameters under each tile (the records `augd run` writes)")
    from augd.preview import add_preview_arguments, cmd_preview
    add_preview_arguments(pv)
    pv.set_defaults(fn=cmd_preview)
    return p


def main(argv=None) -> int:
    prepare_own_process()   # before NumPy loads (nothing above imports it); the workers inherit it
    # SIGPIPE stays ignored, as Python starts (and systemd starts services): a write to a closed pipe or socket
    # is an error where it happens, never the end of the process. The listing verbs (ops, show, schema, validate,
    # inspect) end on it quietly below; `run` finishes its job and `serve` logs on (daemon/logs.py).
    try:
        code = _main(argv)
        sys.stdout.flush()   # a listing's last lines may still be buffered for a reader that left
        return code
    except BrokenPipeError:   # a listing's reader went away (`augd ops | head -1`): as Python's documentation says
        gone = [x for x in (sys.stdout, sys.stderr) if reader_gone(x)]
        if not gone:
            raise   # some other pipe or socket: a real error, with its traceback
        point_at_devnull(*gone)
        return EXIT_FAILED


def _main(argv) -> int:
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    executor_args = []
    if "--" in argv:  # `augd run ... --executor beam -- <Beam pipeline options>`: the executor's own options
        cut = argv.index("--")
        argv, executor_args = argv[:cut], argv[cut + 1:]
    args = build_parser().parse_args(argv)
    if getattr(args, "runner", None) is not None:
        instead = "beam" if args.runner == "beam" else "auto"
        print(f"augd: --runner is deprecated and will go: use --executor {instead}", file=sys.stderr)
        if args.runner == "beam":
            if args.executor not in ("auto", "beam"):
                print(f"augd: --runner beam and --executor {args.executor} contradict each other", file=sys.stderr)
                return EXIT_USAGE
            args.executor = "beam"
    if executor_args:
        why = _no_options(getattr(args, "executor", None))
        if why:
            print(f"augd: {why}", file=sys.stderr)
            return EXIT_USAGE
    args.executor_args = executor_args
    _setup_logging(args.verbose)
    if args.verb == "serve" and not args.verbose:  # `run` loads it itself, after starting any worker processes
        # TensorFlow's native libraries print start-up noise on CPU hosts that no log level hides.
        load_tensorflow_quietly()
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
