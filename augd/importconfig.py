"""`augd import-config`: the command around augd.schema.odapi (which reads a TF Object Detection API pipeline.config
and says what each augmentation option becomes). Exit 0: written; 1: options augd cannot do exactly and no
--approximate, or nothing to import; 2: a file that cannot be read or is not text-format protobuf."""
from __future__ import annotations

import os
import sys

import yaml

from augd import defaults
from augd.errors import UntrustedFileError
from augd.files import read_capped
from augd.parsing.pbtxt import PbtxtError
from augd.schema import SpecError, parse_pipeline
from augd.schema.odapi import APPROXIMATE, EXACT, MISSING, TRAINING, import_config, strip, table

__all__ = ["add_import_arguments", "cmd_import_config"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2   # as augd's CLI


def add_import_arguments(p) -> None:
    p.add_argument("config", nargs="?", help="an Object Detection API pipeline.config")
    p.add_argument("-o", "--output", help="write the pipeline here (default: standard output)")
    p.add_argument("--approximate", action="store_true", help="accept options augd does only approximately, and "
                   "leave the ones it cannot do in the config (each is listed with what differs)")
    p.add_argument("--strip", metavar="CONFIG_OUT", help="also write the config without the augmentation blocks the "
                   "pipeline now does, so training does not augment twice")
    p.add_argument("--name", help="the pipeline's name (default: odapi-<config file name>)")
    p.add_argument("--variants", type=int, default=8, help="augmented variants per image (default 8)")
    p.add_argument("--table", action="store_true", help="list what augd does with each option and exit, writing "
                   "nothing: the config's own options (with their lines), or without a config every option of "
                   "preprocessor.proto")


def _print_table(rows, lines=None) -> None:
    """The --table rows (option, verdict, note), each with its line in the config when `lines` are given."""
    for k, (name, verdict, note) in enumerate(rows):
        where = f"line {lines[k]:<5} " if lines is not None else ""
        print(f"{where}{name:<40} {verdict:<12} {note}")
    counts = {v: sum(1 for _, x, _ in rows if x == v) for v in (EXACT, APPROXIMATE, MISSING, TRAINING)}
    print(f"# {len(rows)} options: " + ", ".join(f"{n} {v}" for v, n in counts.items()))


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name one file (the second may not exist yet)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _clashes(args) -> str | None:
    """Why the files asked for would overwrite the config or each other, or None."""
    outputs = [(flag, path) for flag, path in (("-o", args.output), ("--strip", args.strip)) if path]
    for flag, path in outputs:
        if _same_file(path, args.config):
            return (f"{args.config}: {flag} {path} is the config itself, which augd would overwrite; give another "
                    f"file (the config is only read)")
    if len(outputs) == 2 and _same_file(args.output, args.strip):
        return f"{args.config}: -o and --strip name the same file ({args.output}); give two files"
    return None


def cmd_import_config(args) -> int:

    say = lambda *a: print("augd import-config:", *a, file=sys.stderr)  # noqa: E731
    if args.table and not args.config:
        _print_table(table())
        return EXIT_OK
    if not args.config:
        say("give a pipeline.config (or --table)")
        return EXIT_USAGE
    if args.table and (args.output or args.strip):
        say(f"{args.config}: --table writes nothing; leave out -o and --strip, or --table")
        return EXIT_USAGE
    if args.variants < 1:
        say(f"{args.config}: --variants must be 1 or more; got {args.variants}")
        return EXIT_USAGE
    if why := _clashes(args):
        say(why)
        return EXIT_USAGE
    try:   # capped: a real config is a few KB (PBTXT_MAX_BYTES)
        text = read_capped(args.config, defaults.PBTXT_MAX_BYTES, "protobuf text", "PBTXT_MAX_BYTES").decode("utf-8")
        imported = import_config(text, args.config, args.name, args.variants)
    except UntrustedFileError as exc:
        say(str(exc))
        return EXIT_USAGE
    except (OSError, UnicodeDecodeError) as exc:
        say(f"{args.config}: cannot read it: {getattr(exc, 'strerror', None) or exc}")
        return EXIT_USAGE
    except PbtxtError as exc:
        say(str(exc))
        return EXIT_USAGE
    if args.table:
        _print_table([(option, c.verdict, c.note) for option, _, c in imported.steps],
                     [line for _, line, _ in imported.steps])
        return EXIT_OK
    if not imported.steps:
        say(f"{args.config}: its train_config has no data_augmentation_options: nothing to import")
        return EXIT_FAILED
    for option, line, c in imported.steps:
        say(f"{args.config}:{line}: {option}: {c.verdict}" + (f" ({c.note})" if c.note else ""))
    for note in imported.notes:
        say(note)
    problems = imported.problems()
    if problems and not args.approximate:
        say(f"{args.config}: {len(problems)} option(s) augd cannot do exactly (above); nothing written. "
            f"--approximate accepts them: approximate ones as said, missing ones left to training in the config")
        return EXIT_FAILED
    body = yaml.safe_dump(imported.doc, sort_keys=False, default_flow_style=None, width=110)
    header = "".join(f"# {option} (line {line}): {c.verdict}" + (f": {c.note}" if c.note else "") + "\n"
                     for option, line, c in imported.steps)
    header += "".join(f"# {note}\n" for note in imported.notes)
    out = f"# augd pipeline imported from {os.path.basename(args.config)}\n{header}{body}"
    try:
        parse_pipeline(out, args.output or "<import-config>")   # what is written is a valid pipeline
    except SpecError as exc:
        say(f"{args.config}: the imported pipeline does not validate (a bug: please report it): {exc}")
        return EXIT_FAILED
    try:
        if args.output:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(out)
        else:
            sys.stdout.write(out)
        if args.strip:
            with open(args.strip, "w", encoding="utf-8") as fh:
                fh.write(strip(text, imported.taken))
            say(f"wrote {args.strip} without the {len(imported.taken)} block(s) the pipeline does")
    except OSError as exc:
        say(f"cannot write: {exc.strerror or exc} ({exc.filename})")
        return EXIT_FAILED
    return EXIT_OK
