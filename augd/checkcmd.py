"""The `augd check` command line: a dataset check before any job (augd.check), the folder planned as a job would
plan it. Exit 1 when it finds what would fail or silently harm a job (`--fail-on`: leak, rejected), 2 when the
arguments are wrong, 0 otherwise."""
from __future__ import annotations

import argparse
import json
import os
import sys

from augd import defaults
from augd.check import FAIL_ON, CheckReport, check_plan, text
from augd.check.hashing import MAX_DISTANCE
from augd.errors import JobFailed
from augd.host import usable_cpus
from augd.io.limits import ReadLimits

__all__ = ["add_check_arguments", "check_dataset", "cmd_check", "memory_arg"]


def memory_arg(value: str) -> str | int | None:
    """`--max-memory-mb` (augd run's and augd check's): auto, none or whole MB."""
    if value in ("auto", "none"):
        return None if value == "none" else value
    if value.isdigit() and int(value) >= 1:
        return int(value)
    raise argparse.ArgumentTypeError(f"must be auto, none or a whole number of MB >= 1; got {value!r}")


def check_dataset(path: str, *, fmt: str = "auto", label_map=None, workers: int = 1,
                  max_distance: int = MAX_DISTANCE, max_pixels: int | None = None,
                  memory_limit: int | None = None) -> CheckReport:
    """Check the dataset at `path` (augd.check). `fmt`: annotations.format; `label_map`: a fixed map (a
    label_map.pbtxt path, relative to `path`, or class names) to check the classes against; `workers`: processes
    that hash; `memory_limit`: the job's (bytes; None: none), which bounds the records a job would read."""
    from augd.job.detection import fixed_label_map
    from augd.job.units import plan_job
    from augd.schema import Annotations, parse_pipeline
    spec = parse_pipeline("name: check\nops: []\n", "augd check").with_annotations(Annotations(format=fmt))
    try:
        plan = plan_job(path, spec, None, max_pixels or defaults.MAX_PIXELS, limits=ReadLimits.for_job(memory_limit))
        fixed = None if label_map is None else fixed_label_map(Annotations(label_map=label_map), path)
    except JobFailed as exc:
        return CheckReport(path, "unknown", {}, {}, [(path, str(exc.reason), str(exc))], {}, [])
    return check_plan(plan, known=None if fixed is None else set(fixed.names()), workers=workers,
                      max_distance=max_distance)


def add_check_arguments(p) -> None:
    from augd.annotations.layout import in_words
    from augd.schema import ANNOTATION_FORMATS
    p.add_argument("path", help=f"a dataset folder as `augd run` reads it: class folders, a {in_words()} layout, or "
                                f"TFRecord shards")
    p.add_argument("--annotations", choices=ANNOTATION_FORMATS, default="auto", help="annotation format (default: "
                   "auto, as augd run detects it)")
    p.add_argument("--label-map", default=None, help="a label_map.pbtxt (or the job's own, relative to PATH) to "
                                                     "check the classes against")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the whole report as JSON")
    p.add_argument("--workers", type=int, default=None, help="processes that hash the images (default: the usable "
                                                             "cores)")
    p.add_argument("--max-distance", type=int, default=MAX_DISTANCE, help=f"bits of 64 within which two images are "
                   f"near-duplicates (default {MAX_DISTANCE})")
    p.add_argument("--fail-on", default=",".join(FAIL_ON), help=f"what makes the exit code 1 (default "
                   f"{','.join(FAIL_ON)}; '' for never)")
    p.add_argument("--max-memory-mb", type=memory_arg, default="auto", help="the memory limit of the job to "
                   "check for, as augd run's (a record over 1/16 of it is one a job rejects); auto (default): half "
                   "the host's; none: no limit")


def cmd_check(args) -> int:
    fail_on = [k for k in args.fail_on.split(",") if k]
    if bad := [k for k in fail_on if k not in FAIL_ON]:
        print(f"augd check: --fail-on {','.join(bad)}: expected a comma-separated list of {', '.join(FAIL_ON)}",
              file=sys.stderr)
        return 2
    if not os.path.isdir(args.path):
        print(f"augd check: {args.path}: not a folder", file=sys.stderr)
        return 2
    if not 0 <= args.max_distance <= 64:
        print(f"augd check: --max-distance {args.max_distance}: expected 0 to 64 bits", file=sys.stderr)
        return 2
    from augd.job.resources import job_memory_bytes
    report = check_dataset(args.path, fmt=args.annotations, label_map=args.label_map,
                           workers=args.workers or usable_cpus(), max_distance=args.max_distance,
                           memory_limit=job_memory_bytes(args.max_memory_mb))
    print(text(report))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(report.to_dict(), fh, indent=1)
            fh.write("\n")
    return report.exit_code(fail_on)
