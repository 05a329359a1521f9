"""What a user would write instead of augd: OpenCV and Albumentations loops over files, in a process pool.

Every workload reads the file, decodes it with cv2.imdecode, transforms it, encodes JPEG q90 with
cv2.imencode and returns the encoded size (the bytes are not written anywhere: augd also hashes, wraps and
writes its records, so this favours the alternatives). Imports no TensorFlow, so spawned workers stay light.
The `crop` floor decodes at half scale (cv2.IMREAD_REDUCED_COLOR_2), cuts the heavy chain's crop window and
resizes it to 224x224 once: about the least the heavy chain costs with OpenCV, at a lower quality than augd's (a
window under 224 pixels a side at half scale, ~40 % of the bench's, is enlarged). The `crop_same` floor is the same
work at augd's quality: it decodes at the coarsest DCT scale that keeps a decoded pixel per output pixel of the window
(augd.engine.plan's rule), the whole image as OpenCV can. `CHAINS` are the Albumentations chains, shared with
bench.user_script (the whole-process user's script).
"""
from __future__ import annotations

import math
import multiprocessing as mp
import os
import time

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # no network check on import

import cv2  # noqa: E402
import numpy as np  # noqa: E402

__all__ = ["CHAINS", "CROP_SIZE", "WORKLOADS", "crop_window", "run_pool"]

JPEG_Q = [cv2.IMWRITE_JPEG_QUALITY, 90]
#: The heavy chain's output size (height, width), crop area range and aspect range (Albumentations' defaults).
CROP_SIZE = (224, 224)
CROP_SCALE = (0.25, 1.0)
CROP_RATIO = (0.75, 4 / 3)

# Per-process state, set by _init in each worker.
_state: dict = {}


def _seed_chain(seed: int):
    import albumentations as A
    return A.Compose([
        A.ColorJitter(brightness=0.125, contrast=0.2, saturation=0.2, hue=0.2, p=1.0),
        A.Rotate(limit=10, interpolation=cv2.INTER_LINEAR, border_mode=cv2.BORDER_CONSTANT, p=1.0),
    ], seed=seed)


def _heavy_chain(seed: int):
    import albumentations as A
    return A.Compose([
        A.RandomResizedCrop(size=CROP_SIZE, scale=CROP_SCALE, ratio=CROP_RATIO,
                            interpolation=cv2.INTER_LINEAR, p=1.0),
        A.Rotate(limit=10, interpolation=cv2.INTER_LINEAR, border_mode=cv2.BORDER_CONSTANT, p=1.0),
        A.HorizontalFlip(p=0.5),
        A.ColorJitter(brightness=0.125, contrast=0.2, saturation=0.2, hue=0.2, p=1.0),
    ], seed=seed)


#: chain name -> Albumentations Compose factory (seed -> Compose)
CHAINS = {"seed": _seed_chain, "heavy": _heavy_chain}


def crop_window(h: int, w: int, rng: np.random.Generator) -> tuple[int, int, int, int]:
    """(y, x, height, width) of a RandomResizedCrop(scale=CROP_SCALE, ratio=CROP_RATIO) window in an h x w
    image, drawn as Albumentations draws it (10 tries, then the central crop at the nearest ratio)."""
    lo, hi = math.log(CROP_RATIO[0]), math.log(CROP_RATIO[1])
    for _ in range(10):
        area = float(rng.uniform(*CROP_SCALE)) * h * w
        aspect = math.exp(float(rng.uniform(lo, hi)))
        cw, ch = round(math.sqrt(area * aspect)), round(math.sqrt(area / aspect))
        if 0 < cw <= w and 0 < ch <= h:
            return int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1)), ch, cw
    ch, cw = h, w
    if w / h < CROP_RATIO[0]:
        ch = round(w / CROP_RATIO[0])
    elif w / h > CROP_RATIO[1]:
        cw = round(h * CROP_RATIO[1])
    return (h - ch) // 2, (w - cw) // 2, ch, cw


def _decode(path: str, flags: int = cv2.IMREAD_COLOR) -> tuple[np.ndarray, int]:
    with open(path, "rb") as fh:
        data = fh.read()
    return _decode_bytes(data, flags, path), len(data)


def _decode_bytes(data: bytes, flags: int, path: str) -> np.ndarray:
    img = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
    if img is None:
        raise ValueError(f"{path}: cv2.imdecode failed")
    return img


def _encode(img: np.ndarray) -> int:
    ok, buf = cv2.imencode(".jpg", img, JPEG_Q)
    if not ok:
        raise ValueError("cv2.imencode failed")
    return int(buf.size)


def _codec(path: str) -> tuple[int, int]:
    img, n_in = _decode(path)
    return n_in, _encode(img)


def _warp(path: str) -> tuple[int, int]:
    img, n_in = _decode(path)
    h, w = img.shape[:2]
    angle = float(_state["rng"].uniform(-10.0, 10.0))
    m = cv2.getRotationMatrix2D((w / 2.0, h / 2.0), angle, 1.0)
    out = cv2.warpAffine(img, m, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
    return n_in, _encode(out)


def _colour(path: str) -> tuple[int, int]:
    # The seed chain's work in the fewest OpenCV passes: its colour ops as one 3x4 matrix (drawn near the
    # identity, as ColorJitter's are; contrast needs the image mean), then one warp that turns by up to 10
    # degrees and carries a flip in its matrix (the chain's flips come up half the time; folded into a warp, a
    # flip costs nothing either way).
    img, n_in = _decode(path)
    h, w = img.shape[:2]
    rng = _state["rng"]
    mean = cv2.mean(img)[:3]
    m3 = (np.eye(3) + rng.uniform(-0.1, 0.1, (3, 3))).astype(np.float32)
    offset = rng.uniform(-0.1, 0.1, 3) * 255.0 + 0.05 * np.asarray(mean)
    img = cv2.transform(img, np.hstack([m3, offset[:, None].astype(np.float32)]))
    m = np.vstack([cv2.getRotationMatrix2D((w / 2.0, h / 2.0), float(rng.uniform(-10.0, 10.0)), 1.0), [0, 0, 1]])
    flip = np.eye(3)
    if rng.random() < 0.5:
        flip[0] = (-1, 0, w - 1)
    else:
        flip[1] = (0, -1, h - 1)
    out = cv2.warpAffine(img, (flip @ m)[:2], (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
    return n_in, _encode(out)


def _crop(path: str) -> tuple[int, int]:
    # The whole image decoded at half scale (libjpeg's DCT scaling), the heavy chain's window drawn on it, one
    # bilinear resize to 224x224: no rotation, flip or colour work.
    img, n_in = _decode(path, cv2.IMREAD_REDUCED_COLOR_2)
    y, x, ch, cw = crop_window(img.shape[0], img.shape[1], _state["rng"])
    out = cv2.resize(img[y:y + ch, x:x + cw], (CROP_SIZE[1], CROP_SIZE[0]), interpolation=cv2.INTER_LINEAR)
    return n_in, _encode(out)


#: cv2.imdecode's flag for each DCT scale 1/r, r as augd.engine.plan.DECODE_RATIOS
_REDUCED = {1: cv2.IMREAD_COLOR, 2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4,
            8: cv2.IMREAD_REDUCED_COLOR_8}


def _crop_same(path: str) -> tuple[int, int]:
    # The crop floor at augd's quality: the window drawn on the image's own size (its header), the whole image
    # decoded at the coarsest DCT scale 1/r whose window keeps a decoded pixel per output pixel (r <= the window's
    # side / 224: augd.engine.plan.Program._window's rule; augd decodes the window's rows alone), one resize.
    from augd.formats import read_header   # no TensorFlow, no NumPy: the header's bytes only
    with open(path, "rb") as fh:
        data = fh.read()
    head = read_header(data)
    y, x, ch, cw = crop_window(head.height, head.width, _state["rng"])
    scale = min(ch / CROP_SIZE[0], cw / CROP_SIZE[1])
    r = max(k for k in _REDUCED if k == 1 or k <= scale)
    img = _decode_bytes(data, _REDUCED[r] | cv2.IMREAD_IGNORE_ORIENTATION, path)   # the header's own sides
    window = img[y // r:-(-(y + ch) // r), x // r:-(-(x + cw) // r)]
    out = cv2.resize(window, (CROP_SIZE[1], CROP_SIZE[0]), interpolation=cv2.INTER_LINEAR)
    return len(data), _encode(out)


def _albu(path: str) -> tuple[int, int]:
    # Albumentations runs on the BGR array as decoded: channel order does not change the cost, and a real
    # loop would also pay two cvtColor passes that are not charged here.
    img, n_in = _decode(path)
    return n_in, _encode(_state["transform"](image=img)["image"])


#: name -> (per-image function, transform factory or None)
WORKLOADS = {
    "codec": (_codec, None),
    "warp": (_warp, None),
    "colour": (_colour, None),
    "crop": (_crop, None),
    "crop_same": (_crop_same, None),
    "albu_seed": (_albu, _seed_chain),
    "albu_heavy": (_albu, _heavy_chain),
}


def _init(kind: str, seed: int, cv_threads: int | None, counter) -> None:
    with counter.get_lock():
        index = counter.value
        counter.value += 1
    if cv_threads is not None:
        cv2.setNumThreads(cv_threads)
    factory = WORKLOADS[kind][1]
    _state.update(kind=kind, rng=np.random.default_rng([seed, index]),
                  transform=factory(seed * 1000 + index) if factory else None, cv_threads=cv2.getNumThreads())


def _run(args: tuple[str, str]) -> tuple[int, int]:
    kind, path = args
    return WORKLOADS[kind][0](path)


def _info(_) -> int:
    return _state["cv_threads"]


def run_pool(kind: str, files: list[str], *, processes: int, cv_threads: int | None = 1, warmup: int = 0,
             seed: int = 0) -> dict:
    """Time `kind` over every file in a pool of `processes` spawned workers. The pool is started and warmed
    up (`warmup` images per worker, not counted) before the clock starts; the clock stops when the last
    result is back. cv_threads: cv2.setNumThreads in each worker (None: OpenCV's default)."""
    ctx = mp.get_context("spawn")  # never fork a parent that may hold TensorFlow's threads
    counter = ctx.Value("i", 0)
    chunk = max(1, min(16, len(files) // (processes * 8)))
    with ctx.Pool(processes, initializer=_init, initargs=(kind, seed, cv_threads, counter)) as pool:
        threads = sorted(set(pool.map(_info, range(processes), chunksize=1)))
        if warmup:
            pool.map(_run, [(kind, f) for f in files[:warmup * processes]], chunksize=1)
        t0 = time.perf_counter()
        sizes = list(pool.imap_unordered(_run, [(kind, f) for f in files], chunksize=chunk))
        wall = time.perf_counter() - t0
    n_in = sum(s[0] for s in sizes)
    n_out = sum(s[1] for s in sizes)
    return {"images": len(files), "wall_seconds": round(wall, 3), "images_per_second": round(len(files) / wall, 2),
            "processes": processes, "cv2_threads_per_process": threads, "chunksize": chunk,
            "bytes_in": n_in, "bytes_out": n_out, "size_ratio": round(n_out / n_in, 4) if n_in else None}
