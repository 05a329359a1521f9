"""augd's side of the benchmark: its real engine and writer (`augd.job.run_job`), timed from the outside.

Imports augd (and so TensorFlow) on first use only, so the OpenCV pools run before TensorFlow is loaded.
"""
from __future__ import annotations

import copy
import os
import shutil
import tempfile
import time

import yaml

from bench.common import REPO
from bench.data import link_tree, voc_files

__all__ = ["DETECTION_JOBS", "SPECS", "environment", "make_spec", "run_augd", "run_detection",
           "run_detection_floor", "size_ratios", "spec_doc"]

SEED_YAML = os.path.join(REPO, "pipelines", "seed-classifier.yaml")
OUTPUT_Q90 = {"format": "jpeg", "quality": 90, "shards": "auto", "compression": "none"}
#: tf.image's seed colour ops, as in pipelines/seed-classifier.yaml (hue 0.2 turns = ColorJitter(hue=0.2)).
SEED_COLOUR = [
    {"random_saturation": {"lower": 0.8, "upper": 1.2}},
    {"random_brightness": {"max_delta": 0.125}},
    {"random_contrast": {"lower": 0.8, "upper": 1.2}},
    {"random_hue": {"max_delta": 0.2}},
]


def _seed_doc() -> dict:
    with open(SEED_YAML, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _heavy_doc() -> dict:
    return {"name": "bench-heavy", "seed": 42, "ops": [
        {"random_crop": {"size": [224, 224], "area": [0.25, 1.0], "aspect": [0.75, 4 / 3]}},
        {"random_rotation": {"degrees": 10}},
        {"random_flip_left_right": {}},
        *SEED_COLOUR,
    ]}


def _heavy_crop_doc() -> dict:
    """The heavy chain's crop alone: its windowed decode, one resize and the writer, nothing else."""
    doc = _heavy_doc()
    return {"name": "bench-heavy-crop", "seed": doc["seed"], "ops": doc["ops"][:1]}


#: name -> (base document, overrides). Every throughput spec writes exactly one augmented record per image.
SPECS = {
    "seed": (_seed_doc, {"name": "bench-seed", "variants": 1, "keep_original": False, "output": OUTPUT_Q90}),
    "heavy": (_heavy_doc, {"variants": 1, "keep_original": False, "output": OUTPUT_Q90}),
    # the same chains with `colour: fast` (the colour ops folded into one uint8 colour matrix)
    "seed_fast": (_seed_doc, {"name": "bench-seed-fast", "variants": 1, "keep_original": False,
                              "output": OUTPUT_Q90, "colour": "fast"}),
    "heavy_fast": (_heavy_doc, {"name": "bench-heavy-fast", "variants": 1, "keep_original": False,
                                "output": OUTPUT_Q90, "colour": "fast"}),
    # the bound of the heavy chain: what augd pays with no rotation, flip or colour work at all
    "heavy_crop": (_heavy_crop_doc, {"variants": 1, "keep_original": False, "output": OUTPUT_Q90}),
    # size figures (issue 7 item 4)
    "originals": (_seed_doc, {"name": "bench-originals", "variants": 0, "keep_original": True,
                              "output": OUTPUT_Q90}),
    "mixed": (_seed_doc, {"name": "bench-mixed", "variants": 1, "keep_original": True, "output": OUTPUT_Q90}),
    "raw": (_seed_doc, {"name": "bench-raw", "variants": 1, "keep_original": False,
                        "output": {"format": "raw", "shards": "auto", "compression": "none"}}),
}


def spec_doc(name: str) -> dict:
    """The pipeline document of SPECS[name], a fresh copy (callers write it as YAML or parse it)."""
    base, overrides = SPECS[name]
    doc = copy.deepcopy(base())
    doc.update(copy.deepcopy(overrides))
    return doc


def make_spec(name: str):
    from augd.schema import YamlDoc, parse_doc
    doc = spec_doc(name)
    return parse_doc(YamlDoc(source=f"<bench:{name}>", data=doc, lines={}))


def environment() -> dict:
    """Versions and device, for the JSON figures."""
    import tensorflow as tf

    from augd.engine import Engine, EngineOptions
    dev = Engine(EngineOptions.from_env()).device
    return {"tensorflow": tf.__version__, "device": dev.name}


def _warm_up(spec, data_dir: str, files: list[str], workers: int, tmp: str) -> None:
    """One small job first, so TensorFlow's one-off process start-up (kernel registration, thread pools,
    oneDNN) is not charged to the measured job. Each measured job still pays its own compile."""
    from augd.engine import Engine, EngineOptions
    from augd.job import JobOptions, run_job
    job = os.path.join(tmp, "warmup-in")
    link_tree(data_dir, job, files)
    # the measured job's engine options (AUGD_* and MALLOC_*): a process holds one set (EngineOptions.process_key)
    run_job(job, spec, os.path.join(tmp, "warmup-out"), JobOptions(name="warmup", workers=workers, overwrite=True),
            engine=Engine(EngineOptions.from_env()))
    shutil.rmtree(job)
    shutil.rmtree(os.path.join(tmp, "warmup-out"))


def _compile_seconds(spec) -> float:
    from augd.engine import Engine, EngineOptions
    t0 = time.perf_counter()
    Engine(EngineOptions.from_env()).compile(spec).close()
    return time.perf_counter() - t0


def run_augd(name: str, data_dir: str, files: list[str], *, workers: int, tmp: str, warmup: bool = True,
             keep_output: bool = False, spec_name: str | None = None, warmup_files: list[str] | None = None) -> dict:
    """Time one run_job over `files` (relative to data_dir) with spec `spec_name` (default `name`). img/s =
    images / wall time of run_job, which includes scanning, compiling the job's graph, writing the shards and
    committing. `warmup_files`: the warm-up job's files (default: the first few of `files`)."""
    from augd.engine import Engine, EngineOptions
    from augd.job import JobOptions, JobWatch, run_job

    spec = make_spec(spec_name or name)
    work = tempfile.mkdtemp(prefix=f"augd-bench-{name}-", dir=tmp)
    try:
        if warmup:
            _warm_up(spec, data_dir, warmup_files or files[:max(4, 2 * workers)], workers, work)
        compile_s = _compile_seconds(spec)
        job = os.path.join(work, "in")
        link_tree(data_dir, job, files)
        done: list[float] = []
        engine = Engine(EngineOptions.from_env())
        t0, c0 = time.perf_counter(), time.process_time()
        res = run_job(job, spec, os.path.join(work, "out"), JobOptions(name=name, workers=workers, overwrite=True),
                      JobWatch(on_image=lambda _r: done.append(time.perf_counter())), engine)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        builds = engine.builds
        m = res.report
        n = m.inputs.written
        steady = (len(done) - 1) / (done[-1] - done[0]) if len(done) > 1 and done[-1] > done[0] else None
        out = {
            "images": n, "records": m.records.written, "rejected": m.inputs.rejected,
            "workers": workers, "wall_seconds": round(wall, 3), "images_per_second": round(n / wall, 2),
            "cpu_seconds": round(cpu, 3),
            "includes": "scan + compile + augment + write + commit (after a warm-up job)",
            "first_image_seconds": round(done[0] - t0, 3) if done else None,
            "steady_images_per_second": round(steady, 2) if steady else None,
            "compile_seconds_separately": round(compile_s, 3),
            "manifest_images_per_second": m.timing.images_per_second,
            "manifest_wall_seconds": m.timing.wall_seconds,
            "stage_seconds": m.timing.stage_seconds,
            "stage_share": _shares(m.timing.stage_seconds),
            "device": m.device, "graph": m.graph.to_dict(), "graph_builds_counted": builds,
            "bytes": m.bytes.to_dict(),
            "annotations": m.annotations.to_dict() if m.annotations is not None else None,
        }
        if keep_output:
            out["out_dir"] = res.out_dir
        return out
    finally:
        if not keep_output:
            shutil.rmtree(work, ignore_errors=True)


#: The detection rows: the files each job holds per photo of the VOC copy (bench.data.build_voc). All three run
#: the heavy chain's spec on the same relative paths (JPEGImages/...), so every image draws the same plan.
DETECTION_JOBS = {"det_plain": (), "det": ("xml",), "det_masks": ("xml", "png")}


def run_detection(name: str, voc_dir: str, *, workers: int, tmp: str) -> dict:
    """Time the heavy chain over the VOC copy: `det_plain` the photos alone (a classification job, the
    reference), `det` with their Annotations/ boxes, `det_masks` also with SegmentationClass/ masks."""
    parts = DETECTION_JOBS[name]
    files = voc_files(voc_dir, parts)
    per_image = 1 + len(parts)
    return run_augd(name, voc_dir, files, workers=workers, tmp=tmp, spec_name="heavy",
                    warmup_files=files[:max(4, 2 * workers) * per_image])


#: The floor rows: the annotation work of a detection job alone, without the images (no graph, no writer).
DETECTION_FLOORS = {"det_floor_boxes": ("xml",), "det_floor_masks": ("xml", "png")}


def run_detection_floor(name: str, voc_dir: str, *, workers: int, tmp: str) -> dict:
    """Time what a detection job adds to the plain one, alone, over the same VOC copy with the same threads:
    `det_floor_boxes` reads the job's annotations up front (prepare + attach, as run_job does), then per image
    moves its boxes through the variant's steps and builds its record objects (ImageObjects.variant);
    `det_floor_masks` is the mask work alone, per image: read the source mask PNG, warp it, encode it. The steps
    are drawn before the clock starts: the job's graph plan gives them at no extra cost."""
    from concurrent.futures import ThreadPoolExecutor

    from augd.annotations.geometry import warp_mask
    from augd.annotations.masks import mask_png, read_mask
    from augd.engine.plan import Program
    from augd.ops.sampling import image_seed
    from augd.io import scan_job
    from augd.job.detection import prepare

    spec = make_spec("heavy")
    program = Program(spec.ops)
    work = tempfile.mkdtemp(prefix=f"augd-bench-{name}-", dir=tmp)
    try:
        job = os.path.join(work, "in")
        link_tree(voc_dir, job, voc_files(voc_dir, DETECTION_FLOORS[name]))

        def setup():
            det = prepare(job, spec)
            scan = scan_job(job, classes=spec.labels, layout=det.layout)
            imgs, _, _ = det.attach(scan.images)
            return det, imgs

        det, imgs = setup()
        steps, upright = {}, {}
        for img in imgs:
            h, w = img.header.height, img.header.width
            h, w = (w, h) if img.header.orientation in (5, 6, 7, 8) else (h, w)   # upright, as the job plans
            upright[img.relpath] = h, w
            steps[img.relpath] = program.geometry(image_seed(spec.seed, img.relpath, 1), h, w,
                                                  det.boxes(img) if program.uses_boxes else None)

        def boxes(img):
            st = steps[img.relpath]
            det.for_image(img).variant(spec, program, 1, round(st[-1][1]), round(st[-1][2]), steps=st)

        def masks(img):
            ann = det.annotations[img.relpath]
            src = read_mask(ann.mask, upright[img.relpath], ann.mask)
            return mask_png(warp_mask(src, steps[img.relpath], fill=255))

        t0, c0 = time.perf_counter(), time.process_time()
        if name == "det_floor_boxes":
            det, imgs = setup()
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(boxes if name == "det_floor_boxes" else masks, imgs))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        return {"images": len(imgs), "workers": workers, "wall_seconds": round(wall, 3),
                "images_per_second": round(len(imgs) / wall, 2), "cpu_seconds": round(cpu, 3),
                "includes": "prepare + attach, then per image: boxes moved + record objects"
                if name == "det_floor_boxes" else "per image: read the mask PNG + warp + encode"}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _shares(stages: dict) -> dict:
    total = sum(stages.values())
    return {k: round(v / total, 3) for k, v in stages.items()} if total else {}


def _payload_sizes(out_dir: str) -> dict:
    """Sum of stored image bytes per variant kind, read back from the shards; and how many variant-0
    payloads are the source file byte for byte."""
    from augd.io import parse_example, read_records
    sums = {"original": 0, "augmented": 0, "originals_identical": 0, "originals": 0, "augmented_records": 0}
    for rec in read_records(out_dir):
        ex = parse_example(rec)
        payload = ex.get("image/encoded") or ex.get("image/raw") or b""
        if ex["augd/variant"] == 0:
            sums["original"] += len(payload)
            sums["originals"] += 1
            sums["originals_identical"] += int(ex["image/key/sha256"] == ex["image/source_id"])
        else:
            sums["augmented"] += len(payload)
            sums["augmented_records"] += 1
    return sums


def size_ratios(data_dir: str, files: list[str], *, workers: int, tmp: str) -> dict:
    """Output bytes / input bytes (issue 7 item 4), from the stored image payloads, plus whole-shard ratios."""
    in_bytes = sum(os.path.getsize(os.path.join(data_dir, f)) for f in files)
    out: dict = {"images": len(files), "input_bytes": in_bytes}
    for name in ("originals", "mixed", "raw"):
        r = run_augd(name, data_dir, files, workers=workers, tmp=tmp, warmup=False, keep_output=True)
        try:
            p = _payload_sizes(r["out_dir"])
        finally:
            shutil.rmtree(os.path.dirname(os.path.dirname(r["out_dir"])), ignore_errors=True)
        out[name] = {"payload": p, "shard_bytes_ratio": r["bytes"]["ratio"] if r["bytes"] else None,
                     "images_per_second": r["images_per_second"]}
    o, m, raw = out["originals"]["payload"], out["mixed"]["payload"], out["raw"]["payload"]
    out["ratios"] = {
        "originals_only (keep_original, variants 0)": round(o["original"] / in_bytes, 4),
        "originals_only identical to source": f'{o["originals_identical"]}/{o["originals"]}',
        "originals beside variants (keep_original, variants 1)": round(m["original"] / in_bytes, 4),
        "originals beside variants identical to source": f'{m["originals_identical"]}/{m["originals"]}',
        "augmented q90 (variants 1)": round(m["augmented"] / in_bytes, 4),
        "raw (variants 1)": round(raw["augmented"] / in_bytes, 4),
    }
    return out
