"""Both kernels of an op give the same pixels (issue 42): the graph a GPU host traces (TF kernels, the augment stage
placed on the GPU; on a CPU host soft placement runs that very graph on the CPU) against the graph a CPU host traces
(OpenCV kernels), on the demo photos and on synthetic scenes of solid rectangles (hard edges: where bilinear
weights, fixed-point in OpenCV and float in TF, differ most). The cases are every registered op's row of OP_CASES
(tests/test_ops.py, which checks that every op has one) plus the variants a single row cannot hold (fills,
interpolation, `colour: fast`).

    python -m tests.kernel_parity      # the table: per case, mean |diff| and share of values off by > 2 levels
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from tests.helpers import png, spec_for
from tests.test_ops import OP_CASES, PARTNER_OPS

REPO = Path(__file__).resolve().parent.parent
#: rounding, not a different picture: mean |diff| <= MEAN levels and at most SHARE of values off by > 2 levels
MEAN, SHARE = 1.0, 0.02
VARIANTS = 3

#: what a single OP_CASES row cannot hold: each fill mode, nearest interpolation, strong downscales, a window
#: larger than the image, whole colour runs (exact and `colour: fast`)
EXTRA = {
    "rotation fill reflect": [{"random_affine": {"scale": [0.7, 1.4], "shear": 10, "rotate": 20,
                                                 "translate": [0.1, 0.1], "fill": "reflect"}}],
    "rotation fill nearest": [{"random_rotation": {"degrees": 30, "fill": "nearest"}}],
    "rotation fill wrap": [{"random_rotation": {"degrees": 30, "fill": "wrap"}}],
    "rotation fill 200": [{"random_rotation": {"degrees": 30, "fill": 200}}],
    "crop then flip": [{"random_crop": {"size": [40, 30], "area": [0.1, 1.0]}}, {"random_flip_left_right": {}}],
    "resize 5x down": [{"resize": {"size": [17, 23]}}],
    "resize nearest": [{"resize": {"size": [90, 200], "method": "nearest"}}],
    "center crop past the edge": [{"center_crop": {"size": [150, 150]}}],
    "colour run": [{"random_saturation": {"lower": 0.5, "upper": 1.8}}, {"random_brightness": {"max_delta": 0.3}},
                   {"random_contrast": {"lower": 0.5, "upper": 1.8}}, {"random_hue": {"max_delta": 0.5}}],
    "colour run, fast": [{"random_saturation": {"lower": 0.5, "upper": 1.8}},
                         {"random_brightness": {"max_delta": 0.3}}, {"random_contrast": {"lower": 0.5, "upper": 1.8}},
                         {"random_grayscale": {"p": 0.5}}, {"random_hue": {"max_delta": 0.5}}],
    "colour and noise": [{"random_gamma": {"gamma": [0.5, 2.0]}}, {"random_grayscale": {"p": 0.5}},
                         {"random_brightness": {"max_delta": 0.2, "p": 0.5}}, {"gaussian_noise": {}},
                         {"random_hue": {}}],
}


def cases() -> dict[str, tuple[list, str]]:
    """name -> (ops, colour): every op of the registry that runs in the graph (partner ops compose their canvas
    on the host, before it: tests/test_mixing.py), then EXTRA."""
    out = {name: ([{name: {**params, "p": 1.0}}], "exact") for name, (params, *_) in sorted(OP_CASES.items())
           if name not in PARTNER_OPS}
    out.update({name: (ops, "fast" if name.endswith("fast") else "exact") for name, ops in EXTRA.items()})
    return out


def _scene(h: int, w: int, seed: int) -> np.ndarray:
    """Solid rectangles of saturated colours on grey, with a thin line: hard edges everywhere."""
    rng = np.random.default_rng(seed)
    img = np.full((h, w, 3), 128, np.uint8)
    for colour in ((230, 30, 30), (30, 210, 30), (30, 30, 230), (240, 240, 40), (20, 20, 20)):
        y0, x0 = int(rng.integers(0, h - 12)), int(rng.integers(0, w - 12))
        img[y0:y0 + int(rng.integers(8, h // 2)), x0:x0 + int(rng.integers(8, w // 2))] = colour
    img[h // 3, :] = 255
    return img


@functools.lru_cache(maxsize=1)
def images() -> dict[str, list[bytes]]:
    """{"photos": 4 demo JPEGs of different sizes, "scenes": 2 synthetic PNGs}."""
    demo = sorted((REPO / "augd" / "samples" / "demo").rglob("*.jpg"))
    return {"photos": [p.read_bytes() for p in demo[::5][:4]],
            "scenes": [png(_scene(120, 160, 1)), png(_scene(97, 131, 2))]}


def _pixels(compiled, data: bytes, name: str, variant: int) -> np.ndarray:
    r = compiled.process(data, name, variant)
    return np.frombuffer(r.payload, np.uint8).reshape(r.height, r.width, 3).astype(np.int16)


def measure(ops: list, colour: str = "exact") -> dict[str, dict]:
    """Per image set: {"mean": mean |diff|, "share": share of values off by > 2 levels, "max": largest |diff|,
    "shapes_agree": bool} between the GPU host's graph and the CPU host's, over VARIANTS draws of each image."""
    from augd.engine import Engine, EngineOptions
    spec = spec_for(ops, colour=colour)
    gpu_path = Engine(EngineOptions(kernels="opencv")).compile(spec, as_gpu_host=True)
    cpu_path = Engine(EngineOptions(kernels="opencv")).compile(spec)
    assert gpu_path.kernel == "tf" and cpu_path.kernel == "opencv"
    out = {}
    for kind, datas in images().items():
        diffs, shapes = [], True
        for i, data in enumerate(datas):
            for v in range(1, VARIANTS + 1):
                a, b = _pixels(gpu_path, data, f"{kind}{i}.png", v), _pixels(cpu_path, data, f"{kind}{i}.png", v)
                if a.shape != b.shape:
                    shapes = False
                    continue
                diffs.append(np.abs(a - b).ravel())
        d = np.concatenate(diffs) if diffs else np.zeros(1)
        out[kind] = {"mean": float(d.mean()), "share": float((d > 2).mean()), "max": int(d.max()),
                     "shapes_agree": shapes}
    return out


def agrees(m: dict) -> bool:
    return m["shapes_agree"] and m["mean"] <= MEAN and m["share"] <= SHARE


def main() -> None:
    print("| case | photos mean | photos > 2 | scenes mean | scenes > 2 | max | agree |")
    print("|---|---|---|---|---|---|---|")
    for name, (ops, colour) in cases().items():
        m = measure(ops, colour)
        p, s = m["photos"], m["scenes"]
        print(f"| {name} | {p['mean']:.3f} | {p['share']:.2%} | {s['mean']:.3f} | {s['share']:.2%} | "
              f"{max(p['max'], s['max'])} | {'yes' if agrees(p) and agrees(s) else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
