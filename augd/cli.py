"""The `augd` command. Verbs only parse arguments, call a room, and print; no business logic here."""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from augd import __version__
from augd.errors import JobFailed, SpecError

log = logging.getLogger("augd")

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def cmd_validate(args) -> int:
    from augd.spec import load_pipeline
    bad = 0
    for path in args.files:
        try:
            spec = load_pipeline(path)
            print(f"ok   {path}: {spec.name} ({len(spec.ops)} ops, {spec.variants} variants, sha256 {spec.sha256[:12]})")
        except SpecError as exc:
            bad += 1
            print(f"FAIL {exc}", file=sys.stderr)
    return EXIT_FAILED if bad else EXIT_OK


def cmd_ops(args) -> int:
    from augd.ops import describe_ops
    ops = describe_ops()
    if args.json:
        print(json.dumps(ops, indent=2))
        return EXIT_OK
    for op in ops:
        print(f"{op['name']}  [{op['kind']}]  {op['summary']}")
        for pname, p in op["params"].items():
            req = " (required)" if pname in op["required"] else f" = {json.dumps(p.get('default'))}"
            bounds = [f"{k} {p[k]}" for k in ("minimum", "exclusiveMinimum", "maximum") if k in p]
            if "prefixItems" in p:
                items = p["prefixItems"][0]
                bounds = [f"each in [{items.get('minimum')}, {items.get('maximum')}]"]
            desc = p.get("description", "")
            print(f"    {pname}{req}{'  ' + ', '.join(bounds) if bounds else ''}{'  - ' + desc if desc else ''}")
    print(f"\n{len(ops)} ops. Every op also takes p (probability, default 1).")
    return EXIT_OK


def cmd_schema(args) -> int:
    from augd.spec.schema import pipeline_schema
    print(json.dumps(pipeline_schema(), indent=2))
    return EXIT_OK


def cmd_run(args) -> int:
    from augd.spec import find_pipeline, load_pipeline
    try:
        spec = load_pipeline(find_pipeline(args.pipeline))
    except SpecError as exc:
        print(f"augd run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.seed is not None:
        spec = spec.with_seed(args.seed)
    if not os.path.isdir(args.input) and "://" not in args.input:
        print(f"augd run: input {args.input!r} is not a folder", file=sys.stderr)
        return EXIT_USAGE
    from augd.job import run_job
    from augd.job.resources import job_memory_bytes
    bar = None
    if sys.stderr.isatty() and not args.quiet:
        from tqdm import tqdm
        bar = tqdm(unit="img", desc=args.name or os.path.basename(args.input.rstrip("/")), file=sys.stderr)

    def progress(p):
        if bar is not None:
            bar.total = p.total
            bar.update(p.done - bar.n)
            bar.set_postfix(written=p.written, rejected=p.rejected, refresh=False)

    try:
        result = run_job(args.input, spec, args.out, name=args.name, workers=args.workers,
                         overwrite=args.overwrite, max_pixels=args.max_pixels, progress=progress,
                         memory_limit=job_memory_bytes(args.max_memory_mb))
    except JobFailed as exc:
        print(f"augd run: job failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if bar is not None:
            bar.close()
    m = result.manifest
    print(f"{result.name}: {m['inputs']['written']}/{m['inputs']['seen']} images -> {m['records']['written']} "
          f"records in {len(m['shards'])} shard(s), {m['inputs']['rejected']} rejected, "
          f"{m['timing']['images_per_second']} img/s, {m['bytes']['written'] / 1e6:.1f} MB -> {result.out_dir}")
    for r in m["inputs"]["rejected_files"][:20]:
        print(f"  rejected {r['path']}: {r['message']}", file=sys.stderr)
    return EXIT_OK


def _memory_arg(value: str) -> str | int | None:
    if value in ("auto", "none"):
        return None if value == "none" else value
    if value.isdigit() and int(value) >= 1:
        return int(value)
    raise argparse.ArgumentTypeError(f"must be auto, none or a whole number of MB >= 1; got {value!r}")


def cmd_inspect(args) -> int:
    from augd.inspect import inspect_paths
    try:
        return inspect_paths(args.paths, dump=args.dump, out=sys.stdout)
    except (OSError, ValueError) as exc:
        print(f"augd inspect: {exc}", file=sys.stderr)
        return EXIT_FAILED


def build_parser() -> argparse.ArgumentParser:
    from augd import defaults
    p = argparse.ArgumentParser(prog="augd", description="Offline image augmentation into TFRecord shards.")
    p.add_argument("--version", action="version", version=f"augd {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")

    r = sub.add_parser("run", help="augment one folder of images into TFRecord shards")
    r.add_argument("input", help="job folder: class sub-folders, or images directly")
    r.add_argument("--pipeline", "-p", required=True, help="pipeline YAML file, or a built-in pipeline name")
    r.add_argument("--out", "-o", required=True, help="output root (any tf.io.gfile URL); writes OUT/NAME/")
    r.add_argument("--name", help="job name (default: the input folder's name)")
    r.add_argument("--workers", type=int, default=None, help="parallel images (default: all cores)")
    r.add_argument("--overwrite", action="store_true", help="replace an existing complete output")
    r.add_argument("--seed", type=int, default=None, help="override the pipeline's seed")
    r.add_argument("--max-pixels", type=int, default=defaults.MAX_PIXELS,
                   help=f"reject images larger than this (default {defaults.MAX_PIXELS})")
    r.add_argument("--max-memory-mb", type=_memory_arg, default="auto",
                   help="memory the job may add to the process, in MB; auto (default): half the host's "
                        "(cgroup-aware); none: no limit")
    r.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    r.set_defaults(fn=cmd_run)

    v = sub.add_parser("validate", help="check pipeline files; exit 1 if any is invalid")
    v.add_argument("files", nargs="+")
    v.set_defaults(fn=cmd_validate)

    o = sub.add_parser("ops", help="list the ops with their parameters")
    o.add_argument("--json", action="store_true")
    o.set_defaults(fn=cmd_ops)

    s = sub.add_parser("schema", help="print the JSON Schema of the pipeline format")
    s.set_defaults(fn=cmd_schema)

    sv = sub.add_parser("serve", help="run the drop-folder daemon")
    from augd.daemon.cli import add_serve_arguments, cmd_serve
    add_serve_arguments(sv)
    sv.set_defaults(fn=cmd_serve)

    i = sub.add_parser("inspect", help="summarise TFRecord files or output folders")
    i.add_argument("paths", nargs="+")
    i.add_argument("--dump", nargs=2, metavar=("N", "DIR"), help="write the first N images to DIR")
    i.set_defaults(fn=cmd_inspect)
    return p


def main(argv=None) -> int:
    import signal
    if hasattr(signal, "SIGPIPE"):  # `augd ops | head` should end quietly
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    args = build_parser().parse_args(argv)
    _setup_logging(args.verbose)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
