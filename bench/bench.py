"""augd against the physical floor and against Albumentations, in one run on one machine (issues 7 and 17).

    python -m bench.bench --n 1000 --json bench/results/latest.json

Measures, in this order (the OpenCV pools first, before TensorFlow is loaded in this process):
  codec        OpenCV decode + JPEG q90 encode, a pool of --workers processes         (codec floor)
  warp         decode + one full-size bilinear rotation (±10°) + encode, same pool    (warp floor)
  colour       the warp floor plus the seed chain's colour: cv2.mean and one 3x4 colour matrix (cv2.transform)
               before the rotation, whose matrix carries the chain's flip              (colour floor)
  crop         decode at half scale + the heavy chain's crop window + one resize to 224 + encode (crop floor)
  crop_same    the crop floor at augd's quality: decoded at the coarsest DCT scale that keeps a pixel per output
               pixel of the window (half scale enlarges ~40 % of the bench's windows)
  albu_seed    Albumentations ColorJitter(0.125, 0.2, 0.2, 0.2) + Rotate(10), same pool
  albu_seed_1p the same in one process (OpenCV's own threads left on)
  albu_heavy   RandomResizedCrop(224, scale 0.25-1) + Rotate(10) + HorizontalFlip + ColorJitter, same pool
  augd_seed    augd run_job, seed-classifier chain, 1 augmented record per image, --workers threads
  augd_seed_fast   the same with `colour: fast` (colour ops folded into one uint8 colour matrix)
  augd_heavy   augd run_job, random_crop 224 (area 0.25-1) + rotation 10 + flip + seed colour ops
  augd_heavy_fast  the same with `colour: fast`
  augd_heavy_crop  the heavy chain's random_crop alone: its windowed decode, resize and writer (the bound
                   that no faster warp or colour kernel can pass)
  augd_det_plain   the heavy chain on a VOC copy of the data set's photos, without annotations (reference)
  augd_det         the same job with ~5 random boxes per image (Annotations/*.xml): a detection job
  augd_det_masks   the same with semantic masks too (SegmentationClass/*.png)
  augd_det_floor_boxes  a detection job's annotation work alone, same threads: read the XMLs up front, then
                   per image move its boxes and build its record objects (no images, no graph)
  augd_det_floor_masks  the mask work alone, same threads: per image read the mask PNG, warp it, encode it
  size         output bytes / input bytes: originals, augmented q90, raw (on --size-n images)
Figures only: nothing here asserts a timing. Only ratios from one run mean much on a noisy machine.
Issue 17's whole-process rows (`augd run` and the user's script as subprocesses): python -m bench.whole.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile

from bench.common import default_workers, header, machine, write_json
from bench.data import DEFAULT_CACHE, build_dataset, build_voc, dataset_files, dataset_stats

__all__ = ["LABELS", "MEASUREMENTS", "TARGETS", "TIME_TARGETS", "main", "one_round"]

POOL = ("codec", "warp", "colour", "crop", "crop_same", "albu_seed", "albu_seed_1p", "albu_heavy")
AUGD = ("augd_seed", "augd_seed_fast", "augd_heavy", "augd_heavy_fast", "augd_heavy_crop")
DET = ("augd_det_plain", "augd_det", "augd_det_masks")
DET_FLOOR = ("augd_det_floor_boxes", "augd_det_floor_masks")
MEASUREMENTS = POOL + AUGD + DET + DET_FLOOR + ("size",)
LABELS = {
    "codec": "codec floor: cv2 decode + encode q90, pool",
    "warp": "warp floor: decode + 1 bilinear rotation + encode, pool",
    "colour": "colour floor: warp floor + cv2.mean + one colour matrix, flip in the warp, pool",
    "crop": "crop floor: half-scale decode, crop, resize, encode, pool",
    "crop_same": "crop floor at augd's decode scale, pool",
    "albu_seed": "Albumentations seed chain, pool",
    "albu_seed_1p": "Albumentations seed chain, one process",
    "albu_heavy": "Albumentations heavy chain (crop first), pool",
    "augd_seed": "augd seed chain (run_job, variants 1)",
    "augd_heavy": "augd heavy chain (run_job, variants 1)",
    "augd_seed_fast": "augd seed chain, colour: fast",
    "augd_heavy_fast": "augd heavy chain, colour: fast",
    "augd_heavy_crop": "augd heavy chain's crop alone (bound: no warp, no colour)",
    "augd_det_plain": "augd heavy chain on the VOC copy, no annotations",
    "augd_det": "augd heavy chain, VOC job: boxes",
    "augd_det_masks": "augd heavy chain, VOC job: boxes + semantic masks",
    "augd_det_floor_boxes": "detection floor: boxes work alone (no images)",
    "augd_det_floor_masks": "detection floor: mask read + warp + encode alone",
}
#: (numerator, denominator, minimum, label): the issues' targets, ratios from one run (issue 7; the floors'
#: figures as issue 17 set them).
TARGETS = (
    ("augd_seed", "warp", 0.5, "augd seed / warp floor"),
    ("augd_seed", "albu_seed", 1.4, "augd seed / Albumentations seed pool"),
    ("augd_heavy", "crop", 0.95, "augd heavy / crop floor"),
    # the like-for-like: the crop floor at augd's quality (bench/README.md, issue 60)
    ("augd_heavy", "crop_same", 0.95, "augd heavy / crop floor at augd's decode scale"),
    ("augd_heavy", "albu_heavy", 1.3, "augd heavy / Albumentations heavy pool"),
    ("augd_seed_fast", "warp", 0.9, "augd seed, colour: fast / warp floor"),
    # the like-for-like bound of a chain that colours before it warps (bench/README.md, issue 60)
    ("augd_seed_fast", "colour", 0.9, "augd seed, colour: fast / colour floor"),
    ("augd_seed_fast", "albu_seed", 1.4, "augd seed, colour: fast / Albumentations seed pool"),
    ("augd_heavy_fast", "crop", 0.95, "augd heavy, colour: fast / crop floor"),
    ("augd_heavy_fast", "crop_same", 0.95, "augd heavy, colour: fast / crop floor at augd's decode scale"),
    ("augd_heavy_fast", "albu_heavy", 1.3, "augd heavy, colour: fast / Albumentations heavy pool"),
)
#: (numerator, denominator, maximum, label): issue 16's cost bounds, as ratios of run_job's wall time.
TIME_TARGETS = (
    ("augd_det", "augd_det_plain", 1.10, "detection job time, boxes / no annotations"),
    ("augd_det_masks", "augd_det_plain", 1.5, "detection job time, boxes + masks / no annotations"),
)
#: (floor rows, reference, label): like-for-like bounds, 1 + (the annotation work alone / the plain job), in
#: wall time and in CPU time; informational (the issue's bounds above are the verdicts).
FLOORS = (
    (("augd_det_floor_boxes",), "augd_det_plain", "floor bound, boxes: 1 + boxes alone / plain"),
    (("augd_det_floor_boxes", "augd_det_floor_masks"), "augd_det_plain",
     "floor bound, masks: 1 + (boxes+masks alone) / plain"),
)
#: Context ratios, printed without a verdict (the GPU one gets a verdict on a GPU).
CONTEXT = (
    ("augd_seed", "codec", 0.8, "augd seed / codec floor (GPU target)"),
    ("augd_seed_fast", "codec", None, "augd seed, colour: fast / codec floor"),
    ("augd_heavy", "codec", None, "augd heavy / codec floor"),
    ("augd_heavy_crop", "albu_heavy", None, "augd heavy crop alone / Albumentations heavy pool"),
    ("augd_heavy_fast", "augd_heavy_crop", None, "augd heavy, colour: fast / its crop alone"),
    ("augd_heavy_crop", "crop", None, "augd heavy crop alone / crop floor"),
    ("crop", "albu_heavy", None, "crop floor / Albumentations heavy pool"),
    ("crop_same", "crop", None, "crop floor at augd's decode scale / crop floor"),
    ("albu_seed", "albu_seed_1p", None, "Albumentations seed pool / one process"),
    ("warp", "codec", None, "warp floor / codec floor"),
    ("colour", "warp", None, "colour floor / warp floor"),
)
SIZE_TARGETS = {"originals_only (keep_original, variants 0)": (0.98, 1.02),
                "originals beside variants (keep_original, variants 1)": (0.98, 1.02),
                "augmented q90 (variants 1)": (None, 1.1)}


def _measure_pool(name: str, files: list[str], workers: int, seed: int) -> dict:
    from bench.workloads import run_pool
    kind = "albu_seed" if name == "albu_seed_1p" else name
    if name == "albu_seed_1p":
        return run_pool(kind, files, processes=1, cv_threads=None, warmup=3, seed=seed)
    return run_pool(kind, files, processes=workers, cv_threads=1, warmup=2, seed=seed)


def one_round(selected, data_dir, rel_files, workers, tmp, seed, voc_dir=None) -> dict:
    """One round of the rows of `selected` that are this bench's (others skipped), in that order; bench.whole
    runs its pool and in-process rows through it too."""
    files = [os.path.join(data_dir, f) for f in rel_files]
    figures = {}
    for name in selected:
        if name in POOL:
            figures[name] = _measure_pool(name, files, workers, seed)
        elif name in AUGD:
            from bench.augd_runs import run_augd
            figures[name] = run_augd(name.removeprefix("augd_"), data_dir, rel_files, workers=workers, tmp=tmp)
        elif name in DET:
            from bench.augd_runs import run_detection
            figures[name] = run_detection(name.removeprefix("augd_"), voc_dir, workers=workers, tmp=tmp)
        elif name in DET_FLOOR:
            from bench.augd_runs import run_detection_floor
            figures[name] = run_detection_floor(name.removeprefix("augd_"), voc_dir, workers=workers, tmp=tmp)
        else:
            continue
        print(f"  {name:<13} {figures[name]['images_per_second']:>8.1f} img/s", file=sys.stderr, flush=True)
    return figures


def _ratio(rnd: dict, a: str, b: str) -> float | None:
    if a in rnd and b in rnd and rnd[b]["images_per_second"]:
        return rnd[a]["images_per_second"] / rnd[b]["images_per_second"]
    return None


def _summarize(rounds: list[dict], device: str | None) -> dict:
    names = [n for n in MEASUREMENTS if any(n in r for r in rounds)]
    rates = {n: [r[n]["images_per_second"] for r in rounds if n in r] for n in names}
    summary = {"images_per_second": {n: round(statistics.median(v), 2) for n, v in rates.items()},
               "images_per_second_all_rounds": rates, "targets": [], "context": []}
    on_gpu = bool(device and device.startswith("GPU"))
    for key, table in (("targets", TARGETS), ("context", CONTEXT)):
        for a, b, minimum, label in table:
            per_round = [x for r in rounds if (x := _ratio(r, a, b)) is not None]
            if not per_round:
                continue
            value = statistics.median(per_round)
            judged = minimum is not None and (key == "targets" or on_gpu)
            summary[key].append({"ratio": label, "value": round(value, 3), "rounds": [round(x, 3) for x in per_round],
                                 "target": minimum, "verdict": ("PASS" if value >= minimum else "FAIL")
                                 if judged else ("info" if minimum is None else "info (GPU only)"),
                                 "bound": ">="})
    for a, b, maximum, label in TIME_TARGETS:
        pairs = [(r[a], r[b]) for r in rounds if a in r and b in r and r[b]["wall_seconds"]]
        if not pairs:
            continue
        per_round = [x["wall_seconds"] / y["wall_seconds"] for x, y in pairs]
        value = statistics.median(per_round)
        problem = _detection_problem(*pairs[-1])
        summary["targets"].append({"ratio": label, "value": round(value, 3), "rounds": [round(x, 3) for x in per_round],
                                   "target": maximum, "bound": "<=", "measure": "wall time of run_job",
                                   "verdict": f"INVALID ({problem})" if problem else
                                   ("PASS" if value <= maximum else "FAIL")})
        cpu = [x["cpu_seconds"] / y["cpu_seconds"] for x, y in pairs]
        summary["context"].append({"ratio": label.replace("job time", "CPU time"), "value": round(
            statistics.median(cpu), 3), "rounds": [round(x, 3) for x in cpu], "target": None, "verdict": "info",
            "measure": "CPU time of this process during run_job"})
    for parts, b, label in FLOORS:
        rows = [r for r in rounds if b in r and all(a in r for a in parts) and r[b]["wall_seconds"]]
        if not rows:
            continue
        for measure, key in (("wall time", "wall_seconds"), ("CPU time", "cpu_seconds")):
            per_round = [1.0 + sum(r[a][key] for a in parts) / r[b][key] for r in rows]
            summary["context"].append({"ratio": label + f" ({measure.split()[0]})", "value": round(
                statistics.median(per_round), 3), "rounds": [round(x, 3) for x in per_round], "target": None,
                "verdict": "info", "measure": f"{measure}: the floor rows' own, over the plain run_job's"})
    return summary


def _detection_problem(det: dict, plain: dict) -> str | None:
    """Why a detection row cannot be compared with its reference, or None: it must write the same images, and
    objects (the manifest's annotations.objects.out > 0)."""
    ann = det.get("annotations")
    if not ann:
        return "the job was not read as a detection job"
    if not ann["objects"]["out"]:
        return "no object written"
    if det["images"] != plain["images"] or det["rejected"]:
        return f"{det['images']} images written ({det['rejected']} rejected) against {plain['images']}"
    return None


def _print_table(summary: dict, rounds: list[dict], sizes: dict | None, out=sys.stdout) -> None:
    p = lambda *a: print(*a, file=out)  # noqa: E731
    p(f"\n{'pipeline':<58} {'img/s':>9}  {'runs':<20}")
    p("-" * 92)
    for name, v in summary["images_per_second"].items():
        allr = summary["images_per_second_all_rounds"][name]
        runs = " ".join(f"{x:.0f}" for x in allr) if len(allr) > 1 else ""
        p(f"{LABELS[name]:<58} {v:>9.1f}  {runs:<20}")
    for name in AUGD + DET:
        r = rounds[-1].get(name)
        if r:
            sh = " ".join(f"{k} {v:.0%}" for k, v in r["stage_share"].items())
            p(f"  {name}: steady {r['steady_images_per_second']} img/s, first image after "
              f"{r['first_image_seconds']} s, compile {r['compile_seconds_separately']} s, manifest "
              f"{r['manifest_images_per_second']} img/s, graph builds {r['graph_builds_counted']}, "
              f"device {r['device']}; stage time: {sh}")
            devs = (r.get("graph") or {}).get("stage_devices")
            if devs:
                p("    stages run on: " + ", ".join(f"{k} {v}" for k, v in devs.items()))
            ann = r.get("annotations")
            if ann:
                p(f"    annotations ({ann['format']}): objects in {ann['objects']['in']}, out {ann['objects']['out']}, "
                  f"dropped {ann['objects']['dropped']}, bad {ann['bad_annotations']}; {r['images']} images, "
                  f"{r['rejected']} rejected")
    p(f"\n{'ratio':<58} {'value':>9}  {'target':>7}  verdict")
    p("-" * 92)
    for row in summary["targets"] + summary["context"]:
        tgt = f"{row.get('bound', '>=')} {row['target']}" if row["target"] is not None else ""
        p(f"{row['ratio']:<58} {row['value']:>9.3f}  {tgt:>7}  {row['verdict']}")
    if sizes:
        p(f"\n{'size: output bytes / input bytes (' + str(sizes['images']) + ' images)':<58} {'value':>9}  "
          f"{'target':>7}  verdict")
        p("-" * 92)
        for label, value in sizes["ratios"].items():
            lo, hi = SIZE_TARGETS.get(label, (None, None))
            verdict, tgt = "", ""
            if isinstance(value, float) and hi is not None:
                tgt = f"<= {hi}" if lo is None else "~ 1.0"
                verdict = "PASS" if value <= hi and (lo is None or value >= lo) else "FAIL"
            shown = f"{value:>9.3f}" if isinstance(value, float) else f"{value:>9}"
            p(f"{label:<58} {shown}  {tgt:>7}  {verdict}")


def _voc_meta(voc_dir: str | None) -> dict | None:
    if voc_dir is None:
        return None
    with open(os.path.join(voc_dir, "voc.json"), encoding="utf-8") as fh:
        return {**json.load(fh), "path": voc_dir}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--n", type=int, default=1000, help="images in the data set (default 1000)")
    ap.add_argument("--only", default=",".join(MEASUREMENTS),
                    help=f"comma-separated subset of: {', '.join(MEASUREMENTS)} (default: all)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of every measurement; figures and ratios "
                                                          "are medians over rounds (default 1)")
    ap.add_argument("--workers", type=int, default=default_workers(),
                    help="pool processes and augd workers (default: the CPUs this process may use)")
    ap.add_argument("--size-n", type=int, default=100, help="images for the size ratios (default 100)")
    ap.add_argument("--seed", type=int, default=0, help="data set seed (default 0)")
    ap.add_argument("--cache", default=DEFAULT_CACHE, help="data set cache folder (default bench/.data)")
    ap.add_argument("--tmp", default=None, help="folder for augd's temporary outputs (default: system temp)")
    ap.add_argument("--json", default=None, help="write every figure to this JSON file")
    args = ap.parse_args(argv)
    selected = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in selected if s not in MEASUREMENTS]
    if unknown:
        ap.error(f"--only: unknown measurement(s) {', '.join(unknown)}; known: {', '.join(MEASUREMENTS)}")
    selected = [m for m in MEASUREMENTS if m in selected]  # pools before TensorFlow, always in this order
    # A pool worker that cannot import its library dies and is replaced forever: check up front.
    needs = {"skimage": "scikit-image"} | ({"albumentations": "albumentations"}
                                           if any(m.startswith("albu") for m in selected) else {})
    missing = [pkg for mod, pkg in needs.items() if importlib.util.find_spec(mod) is None]
    if missing:
        ap.error(f"missing {', '.join(missing)}: install the bench extra (pip install -e '.[bench]'), "
                 f"or leave the Albumentations rows out with --only")

    data_dir = build_dataset(args.n, args.seed, args.cache)
    rel_files = dataset_files(data_dir)
    voc_dir = build_voc(data_dir, args.seed) if any(m in selected for m in DET + DET_FLOOR) else None
    meta = dataset_stats(data_dir)
    print(f"data set: {len(rel_files)} images, {meta['distinct_shapes']} distinct shapes, mean "
          f"{meta['megapixels']['mean']} MP ({meta['megapixels']['min']}-{meta['megapixels']['max']}), "
          f"{meta['bytes'] / 1e6:.1f} MB, {data_dir}", file=sys.stderr)
    result = {**header("python -m bench.bench", argv), "machine": machine(),
              "dataset": {**meta, "path": data_dir, "voc_copy": _voc_meta(voc_dir)},
              "workers": args.workers,
              "rounds": []}
    tmp = args.tmp or tempfile.gettempdir()
    for i in range(args.repeat):
        print(f"round {i + 1}/{args.repeat}", file=sys.stderr, flush=True)
        result["rounds"].append(one_round(selected, data_dir, rel_files, args.workers, tmp, args.seed, voc_dir))
    sizes = None
    if "size" in selected:
        from bench.augd_runs import size_ratios
        sizes = size_ratios(data_dir, rel_files[:args.size_n], workers=args.workers, tmp=tmp)
        result["size"] = sizes
    if any(m in selected for m in AUGD + DET + ("size",)):
        from bench.augd_runs import environment
        result["machine"].update(environment())
    device = result["machine"].get("device")
    result["summary"] = _summarize(result["rounds"], device)
    print(f"\nmachine: {result['machine']['cpu_count']} cpus ({result['machine']['cpu_model']}), "
          f"device {device or 'n/a'}, TF {result['machine'].get('tensorflow', 'n/a')}, augd "
          f"{result['machine'].get('augd_commit', 'n/a')}; {len(rel_files)} images, workers {args.workers}, "
          f"{args.repeat} round(s)")
    _print_table(result["summary"], result["rounds"], sizes)
    if args.json:
        write_json(args.json, result)
        print(f"\nfigures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
