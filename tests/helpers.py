"""Shared helpers for tests: build specs, run the real engine, make images."""
from __future__ import annotations

import functools
import json

import numpy as np

from augd.schema import parse_pipeline


def spec_for(ops: list, *, fmt: str = "raw", seed: int = 1, variants: int = 1, keep_original: bool = False,
             colour: str = "exact"):
    return parse_pipeline(json.dumps({"name": "t", "seed": seed, "variants": variants, "colour": colour,
                                      "keep_original": keep_original, "output": {"format": fmt}, "ops": ops}))


def build(spec, **options):
    """spec's graph, compiled by an Engine with these EngineOptions (the rest default)."""
    from augd.engine import Engine, EngineOptions
    return Engine(EngineOptions(**options)).compile(spec)


@functools.lru_cache(maxsize=64)
def _compiled(key: str):
    d = json.loads(key)
    return build(spec_for(d["ops"], fmt=d["fmt"], seed=d["seed"], colour=d["colour"]))


def compiled(ops: list, *, fmt: str = "raw", seed: int = 1, colour: str = "exact"):
    return _compiled(json.dumps({"ops": ops, "fmt": fmt, "seed": seed, "colour": colour}, sort_keys=True))


def png(img: np.ndarray) -> bytes:
    import cv2
    ok, buf = cv2.imencode(".png", img[:, :, ::-1])
    assert ok
    return buf.tobytes()


def run(ops: list, img: np.ndarray, *, variant: int = 1, relpath: str = "x.png", seed: int = 1,
        colour: str = "exact") -> np.ndarray:
    """Pixels the real compiled graph produces for one image (raw output: exact)."""
    r = compiled(ops, seed=seed, colour=colour).process(png(img), relpath, variant)
    return np.frombuffer(r.payload, np.uint8).reshape(r.height, r.width, 3)


def make_image(h: int = 48, w: int = 64, seed: int = 0) -> np.ndarray:
    """Smooth gradients plus texture: every op has something to change, interpolation stays tame."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    r = 40 + 170 * x / max(w - 1, 1)
    g = 40 + 170 * y / max(h - 1, 1)
    b = 128 + 60 * np.sin(x / 5.0) * np.cos(y / 7.0)
    img = np.stack([r, g, b], -1) + rng.normal(0, 6, (h, w, 3))
    return np.clip(img, 0, 255).astype(np.uint8)
