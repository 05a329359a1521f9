"""The policies' operations one at a time against OpenCV doing the same to the same photos (issue 60, item 1): what
each costs in augd, what it costs at least, and so what a policy that draws among them costs at least.

    python -m bench.policy_ops [--n 200] [--rounds 2] [--only NAMES] [--colour exact|fast] [--tf-threads 1]

The bench's VOC copy without its masks (bench.box_ops), one record per image: each operation alone at p 1 (at
RandAugment's m 9, torchvision's magnitudes as augd.ops.policies writes them) through run_job in this process (one
worker thread; the process's CPU per image), then the same photos decoded, changed by OpenCV's nearest operation and
encoded at q90 in one thread (CPU per image). TensorFlow runs on one thread, as each worker process of the default
run on 2 cores does (bench.box_ops_cpu.worker_engine), unless AUGD_TF_THREADS or `--tf-threads` says otherwise.
`flip` is the baseline both ways: the photo decoded, flipped and encoded; each row's "over flip" is its cost beyond
that. RandAugment n 2 draws two of its 14 operations per image: its floor is the flip's plus twice the mean of their
OpenCV costs beyond it. Figures only.
"""
from __future__ import annotations

import argparse
import glob
import math
import os
import statistics
import tempfile
import time

import cv2
import numpy as np

#: name -> (augd's op at p 1, OpenCV's nearest: img (BGR uint8), rng -> img)
F = 9 / 30   # randaugment_ops(9)'s magnitudes: shear atan(0.3 f), rotate 30 f, shift 150/331 f, enhance 0.9 f
SHEAR, ROT, SHIFT, ENH, SOLARIZE = math.degrees(math.atan(0.3 * F)), 30.0 * F, 150.0 / 331.0 * F, 0.9 * F, 178


def _affine(img, m):
    h, w = img.shape[:2]
    return cv2.warpAffine(img, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)


def _around(img, a):   # a 2x2 linear map about the centre
    h, w = img.shape[:2]
    c = np.array([w / 2, h / 2])
    return np.hstack([a, (c - a @ c)[:, None]])


def _blend(img, other, f):
    return cv2.addWeighted(img, f, other, 1.0 - f, 0.0)


def _equalize(img):
    return cv2.merge([cv2.equalizeHist(c) for c in cv2.split(img)])


def _autocontrast(img):
    out = []
    for c in cv2.split(img):
        lo, hi = cv2.minMaxLoc(c)[:2]
        lut = np.clip((np.arange(256) - lo) * (255.0 / max(hi - lo, 1)), 0, 255).astype(np.uint8)
        out.append(cv2.LUT(c, lut))
    return cv2.merge(out)


def _sharpness(img, f):
    smooth = cv2.filter2D(img, -1, np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float32) / 13)
    return _blend(img, smooth, f)


def _contrast(img, f):   # each channel's distance from its own mean, scaled, saturated
    mean = cv2.mean(img)[:3]
    m = np.hstack([f * np.eye(3), (1 - f) * np.array(mean)[:, None]]).astype(np.float32)
    return cv2.transform(img, m)


def _lut(img, table):
    return cv2.LUT(img, table.astype(np.uint8))


OPS = {
    "flip": ({"random_flip_left_right": {}}, lambda img, rng: cv2.flip(img, 1)),
    "identity": ({"identity": {}}, lambda img, rng: img),
    "autocontrast": ({"autocontrast": {}}, lambda img, rng: _autocontrast(img)),
    "equalize": ({"equalize": {}}, lambda img, rng: _equalize(img)),
    "rotate 9": ({"random_affine": {"scale": [1.0, 1.0], "rotate": [ROT, ROT]}},
                 lambda img, rng: _affine(img, cv2.getRotationMatrix2D((img.shape[1] / 2, img.shape[0] / 2), ROT, 1))),
    "solarize": ({"solarize": {"threshold": SOLARIZE}}, lambda img, rng: _lut(img, np.where(
        np.arange(256) < SOLARIZE, np.arange(256), 255 - np.arange(256)))),
    "color": ({"random_color": {"lower": 1 + ENH, "upper": 1 + ENH}},
              lambda img, rng: _blend(img, cv2.cvtColor(cv2.cvtColor(img, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR),
                                      1 + ENH)),
    "posterize": ({"posterize": {"bits": 7}}, lambda img, rng: _lut(img, np.arange(256) & 0xFE)),
    "contrast": ({"random_contrast": {"lower": 1 + ENH, "upper": 1 + ENH}},
                 lambda img, rng: _contrast(img, 1 + ENH)),
    "brightness": ({"random_brightness": {"max_delta": ENH / 2}},
                   lambda img, rng: cv2.add(img, (float(rng.uniform(0, ENH / 2 * 255)),) * 3 + (0,))),
    "sharpness": ({"random_sharpness": {"lower": 1 + ENH, "upper": 1 + ENH}}, lambda img, rng: _sharpness(img, 1 + ENH)),
    "shear_x": ({"random_affine": {"scale": [1.0, 1.0], "shear": [SHEAR, SHEAR]}},
                lambda img, rng: _affine(img, _around(img, np.array([[1, np.tan(np.radians(SHEAR))], [0, 1]])))),
    "shear_y": ({"random_affine": {"scale": [1.0, 1.0], "shear_y": [SHEAR, SHEAR]}},
                lambda img, rng: _affine(img, _around(img, np.array([[1, 0], [np.tan(np.radians(SHEAR)), 1]])))),
    "translate_x": ({"random_affine": {"scale": [1.0, 1.0], "translate": [SHIFT, 0.0]}},
                    lambda img, rng: _affine(img, np.float32([[1, 0, SHIFT * img.shape[1]], [0, 1, 0]]))),
    "translate_y": ({"random_affine": {"scale": [1.0, 1.0], "translate": [0.0, SHIFT]}},
                    lambda img, rng: _affine(img, np.float32([[1, 0, 0], [0, 1, SHIFT * img.shape[0]]]))),
}
#: RandAugment's 14 (flip is the baseline, not one of them)
RANDAUGMENT = [n for n in OPS if n != "flip"]


def _opencv(files, fn) -> float:
    rng = np.random.default_rng(0)
    c = time.thread_time()
    for f in files:
        img = cv2.imdecode(np.fromfile(f, np.uint8), cv2.IMREAD_COLOR)
        cv2.imencode(".jpg", fn(img, rng), [cv2.IMWRITE_JPEG_QUALITY, 90])
    return (time.thread_time() - c) / len(files) * 1e3


def main(argv=None) -> int:
    from bench.box_ops import _voc_boxes_only
    from bench.box_ops_cpu import TF_THREADS_HELP, cpu_ms, worker_engine
    from bench.data import build_dataset, build_voc
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--colour", choices=("exact", "fast"), default="exact")
    ap.add_argument("--only", default="", help="operation names, comma-separated (flip always runs)")
    ap.add_argument("--randaugment", action="store_true", help="also randaugment n 2 m 9 itself")
    ap.add_argument("--tf-threads", type=int, default=None, help=TF_THREADS_HELP)
    args = ap.parse_args(argv)
    names = ["flip", *([s.strip() for s in args.only.split(",") if s.strip()] or RANDAUGMENT)]
    cv2.setNumThreads(1)
    engine = worker_engine(args.tf_threads)
    augd_ms: dict[str, list[float]] = {n: [] for n in names + ["randaugment n2 m9"] * args.randaugment}
    cv_ms: dict[str, list[float]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        voc = _voc_boxes_only(build_voc(build_dataset(args.n)), os.path.join(tmp, "voc"))
        files = sorted(glob.glob(os.path.join(voc, "JPEGImages", "*")))
        for _ in range(args.rounds):
            for name in augd_ms:
                ops = [{"randaugment": {"n": 2, "m": 9}}] if name.startswith("randaugment") else [OPS[name][0]]
                augd_ms[name].append(cpu_ms(voc, ops, args.n, os.path.join(tmp, "out"), engine, args.colour))
            for name in names:
                cv_ms[name].append(_opencv(files, OPS[name][1]))
    a = {k: statistics.median(v) for k, v in augd_ms.items()}
    o = {k: statistics.median(v) for k, v in cv_ms.items()}
    print(f"| operation ({args.n} photos, 1 thread, TensorFlow threads {engine.options.tf_threads or 'default'}, "
          f"colour {args.colour}) | augd CPU ms an image | over flip | "
          f"OpenCV | over flip | augd / OpenCV |\n|---|---|---|---|---|---|")
    for name in names:
        print(f"| {name} | {a[name]:.2f} | {a[name] - a['flip']:+.2f} | {o[name]:.2f} | {o[name] - o['flip']:+.2f} | "
              f"{a[name] / o[name]:.2f} |")
    ra = [n for n in RANDAUGMENT if n in names]
    if len(ra) == len(RANDAUGMENT):
        floor = o["flip"] + 2 * statistics.mean(o[n] - o["flip"] for n in ra)
        mine = a["flip"] + 2 * statistics.mean(a[n] - a["flip"] for n in ra)
        print(f"\nrandaugment n 2 m 9, from its operations: augd {mine:.2f} ms an image, OpenCV's floor {floor:.2f} "
              f"({mine / floor:.2f})" + (f"; augd's own randaugment row {a['randaugment n2 m9']:.2f} "
                                         f"({a['randaugment n2 m9'] / floor:.2f} of the floor)"
                                         if args.randaugment else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
