"""Issue 55's table, counted by the pixels: every chain that cuts or hides objects (tests/visible.py's CHAINS, and
the OD API's four config families imported as they ship), run on synthetic VOC scenes of solid rectangles (60
scenes of 480x360, 6 objects each, JPEG), with the default annotations or `--low-visibility` given. Per chain:
records, the manifest's objects kept, ignored and dropped (with reasons), the visible objects left with no box
(regions of 600 px or more of a class colour in no box of their class), the largest of them, and the boxes off
their pixels (tests/visible.py's judge). Counts, not timings.

    python -m bench.fates [--n 60] [--variants 4] [--low-visibility ignore|drop|keep] [--only NAME,...]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path


def _spec(name: str, ops, variants: int, low: str | None):
    from augd.schema import parse_pipeline
    doc = {"name": "fates", "seed": 55, "variants": variants, "keep_original": False, "ops": ops,
           "output": {"format": "jpeg", "quality": 92}}
    if ops == "tile":
        doc["ops"] = [{"random_flip_left_right": {}}]
        doc["tile"] = {"size": 160, "overlap": 0.2, "empty": 0.0}
    if low:
        doc["annotations"] = {"low_visibility": low}
    return parse_pipeline(json.dumps(doc), f"{name}.yaml")


def _odapi(name: str, options: list[str], variants: int, low: str | None):
    from augd.schema import parse_pipeline
    from augd.schema.odapi import import_config
    blocks = "".join(f"  data_augmentation_options {{\n    {a}\n  }}\n" for a in options)
    text = f"model {{ ssd {{ num_classes: 3 }} }}\ntrain_config: {{\n  batch_size: 8\n{blocks}}}\n"
    doc = import_config(text, f"{name.lower()}.config", variants=variants).doc
    if low:
        doc.setdefault("annotations", {})["low_visibility"] = low
    return parse_pipeline(json.dumps(doc), f"{name}.yaml")


def main(argv=None) -> int:
    from augd.job import JobOptions, run_job
    from tests.visible import CHAINS, ODAPI_SHAPES, counted, judge, read, scenes
    ap = argparse.ArgumentParser(prog="python -m bench.fates", description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=60, help="scenes (default 60)")
    ap.add_argument("--variants", type=int, default=4)
    ap.add_argument("--low-visibility", choices=("ignore", "drop", "keep"), default=None,
                    help="annotations.low_visibility for every chain (default: the pipeline's default)")
    ap.add_argument("--min-area", type=int, default=600, help="a region this large is a visible object")
    ap.add_argument("--only", default="", help="chain names, separated by ;")
    ap.add_argument("--show", type=int, default=0, help="print this many examples of what the judge found")
    args = ap.parse_args(argv)
    only = {s.strip() for s in args.only.split(";") if s.strip()}
    rows = [(n, "chain", ops) for n, ops in CHAINS.items()] + [(f"OD API {n}", "odapi", o)
                                                                for n, o in ODAPI_SHAPES.items()]
    print("| chain | records | kept | ignored (why) | dropped (why) | visible objects with no box | largest | "
          "boxes off their pixels |\n|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        scenes(root / "voc", args.n)
        for name, kind, ops in rows:
            if only and name not in only:
                continue
            spec = (_spec if kind == "chain" else _odapi)(name.replace(" ", "_"), ops, args.variants,
                                                          args.low_visibility)
            out = root / f"out{len(list(root.iterdir()))}"
            run_job(str(root / "voc"), spec, str(out), JobOptions(workers=2, executor="threads"))
            m = json.loads((out / "voc" / "manifest.json").read_text())["annotations"]["objects"]
            judged = judge(read(out / "voc"), min_area=args.min_area)
            c = counted(judged)
            why = lambda d: ", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "-"   # noqa: E731
            print(f"| {name} | {c['records']} | {m.get('kept', m['out'])} | {m.get('ignored', 0)} "
                  f"({why(m.get('ignored_by_reason', {}))}) | {m['dropped']} ({why(m['dropped_by_reason'])}) | "
                  f"{c['unboxed']} | {c['largest_unboxed']} px | {c['off']} |", flush=True)
            for e in judged.examples[:args.show]:
                print("    ", *e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
