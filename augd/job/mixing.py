"""Partner ops on the job's side (mosaic, mixup, cutmix: augd/ops/mixing.py): which partners each variant draws,
and the canvas the rest of the chain runs on.

Partners come from the image's own split only (a validation pixel in a train record would inflate every metric
silently), drawn from the mix's own counter-based generator, a pure function of (pipeline seed, the image's path,
variant): every executor draws the same partners and writes the same bytes. Each partner is decoded with OpenCV at
the coarsest JPEG DCT scale (1/2, 1/4, 1/8) that still gives its tile a source pixel per pixel, warped into its
tile with the engine's own kernel, and the canvas goes to the job's graph as raw pixels (augd.engine.rawpixels: a
copy each way), where the ops after the partner op run on it as on any image: one graph per job still does all of
them.
"""
from __future__ import annotations

import collections
import hashlib
import time
from dataclasses import dataclass, field

import numpy as np

from augd.annotations.geometry import rasterise, warp_mask
from augd.annotations.rle import rle_decode
from augd.engine.hostdecode import as_raw, decode_scaled
from augd.engine.kernels import warp_np
from augd.formats import ImageHeader
from augd.io import InputImage, read_bytes
from augd.lazycv import cv2
from augd.ops import Mix, PartnerOp, Placement
from augd.ops.sampling import coin, generator, image_seed
from augd.schema.tile import source_path

__all__ = ["Drawn", "Mixed", "Partners", "canvas_boxes", "compose", "draw", "mixed_variant", "upright"]

def upright(img: InputImage) -> tuple[int, int]:
    """(h, w) as decoded: EXIF orientations 5-8 swap the stored sides."""
    h, w = img.header.height, img.header.width
    return (w, h) if img.header.orientation in (5, 6, 7, 8) else (h, w)


@dataclass(frozen=True)
class Partners:
    """The images partner ops draw from, per split, in the job's seeded order, with each one's draw weight
    (uniform, or towards images holding rare classes: `rare_weights`)."""
    pools: dict[str, tuple[InputImage, ...]]
    weights: dict[str, tuple[float, ...]] | None = None
    _index: dict = field(default_factory=dict, compare=False, repr=False)
    _cum: dict = field(default_factory=dict, compare=False, repr=False)

    def pick(self, rng, img: InputImage, k: int) -> tuple[InputImage, ...]:
        """`k` partners of `img` from its split: never itself (nor, for a tile, the image it was cut from), and no
        image twice, while the split has enough others (a split of one image partners it with itself)."""
        pool = self.pools[img.split]
        index = self._index.get(img.split)
        if index is None:
            index = self._index[img.split] = {p.relpath: j for j, p in enumerate(pool)}
        own = index.get(img.relpath, index.get(source_path(img.relpath)))
        taken = {own} if own is not None else set()
        out = []
        for _ in range(k):
            if len(taken) >= len(pool):   # every image taken: repeat the others (or the image itself, alone)
                taken = {own} if own is not None and len(pool) > 1 else set()
            out.append(pool[self._draw(rng, img.split, taken)])
            taken.add(index[out[-1].relpath])
        return tuple(out)

    def _draw(self, rng, split: str, taken: set) -> int:
        """One index into the split's pool outside `taken`, by its weights (uniform without), from the generator's
        next draws: deterministic for a given generator."""
        n = len(self.pools[split])
        if self.weights is None:
            # among the n - len(taken) free slots, skipping over the taken ones in order
            j = min(int(rng.random() * (n - len(taken))), n - len(taken) - 1)
            for t in sorted(taken):
                if j >= t:
                    j += 1
            return j
        cum = self._cum.get(split)
        if cum is None:
            cum = self._cum[split] = np.cumsum(self.weights[split])
        for _ in range(64):   # rejection: the taken are a few images of many
            j = min(int(np.searchsorted(cum, rng.random() * cum[-1], side="right")), n - 1)
            if j not in taken:
                return j
        return next(j for j in range(n) if j not in taken)

    @staticmethod
    def rare_weights(pool, classes_of) -> tuple[float, ...]:
        """Each image's weight: 1 / the split's count of its rarest class (`classes_of(img)`: its class names;
        an image with none weighs as the most common class)."""
        counts = collections.Counter(c for img in pool for c in set(classes_of(img)))
        top = max(counts.values(), default=1)
        return tuple(1.0 / min((counts[c] for c in set(classes_of(img))), default=top) for img in pool)


@dataclass(frozen=True)
class Drawn:
    """What a variant's partner op drew: its Mix, and its partners in placement order (after the image)."""
    image: InputImage
    mix: Mix
    partners: tuple[InputImage, ...]

    @property
    def sources(self) -> tuple[InputImage, ...]:
        """The image and its partners, in placement order."""
        return (self.image, *self.partners)


def draw(op: PartnerOp, spec_seed: int, img: InputImage, variant: int, partners: Partners,
         boxes_of=None) -> Drawn | None:
    """The variant's mix, or None when its p coin says no. Its own generator (the path prefixed by a NUL, which no
    path holds), so the ops after it draw exactly what they draw without it. `boxes_of(img)`: each source's boxes,
    for an op that picks objects (copy_paste)."""
    rng = generator(image_seed(spec_seed, "\0mix\0" + img.relpath, variant))
    if not coin(rng, op.params.p):
        return None
    picks = partners.pick(rng, img, op.partners // op.repeats)
    if op.repeats > 1:   # each partner once per placement of its object's copies
        picks = tuple(p for p in picks for _ in range(op.repeats))
    sources = (img, *picks)
    boxes = [boxes_of(i) for i in sources] if op.needs_boxes and boxes_of is not None else None
    return Drawn(img, op.sample(rng, [tuple(map(float, upright(i))) for i in sources], boxes), picks)


def _tile(pixels: np.ndarray, m: np.ndarray, p: Placement, img: InputImage, fill: int) -> np.ndarray:
    """A source's tile: the source resampled into its footprint (the scaled image's extent in the tile, to whole
    pixels), with its own edge pixels repeated where a sample falls a fraction past it (as a resize then a paste
    gives: no fill bleeds into its border), and `fill` where the source does not reach."""
    th, tw = p.size
    if pixels.shape[:2] == (th, tw) and np.allclose(m, np.eye(3)):
        return pixels
    h, w = upright(img)
    x0, y0, x1, y1 = (int(round(v)) for v in _in_canvas(p, np.array([[0.0, 0.0, w, h]]))[0])
    x0, y0, x1, y1 = x0 - p.rect[0], y0 - p.rect[1], x1 - p.rect[0], y1 - p.rect[1]
    tile = np.full((th, tw, 3), fill, np.uint8)
    if x1 > x0 and y1 > y0:
        shift = np.array([[1, 0, x0], [0, 1, y0], [0, 0, 1]], np.float64)
        tile[y0:y1, x0:x1] = warp_np(pixels, m @ shift, y1 - y0, x1 - x0, "nearest", "bilinear")
    return tile


def compose(drawn: Drawn, sources: list[tuple[bytes, InputImage] | None],
            alphas: dict | None = None) -> tuple[np.ndarray, tuple[bool, ...]]:
    """(the canvas (BGR uint8) of a mix, whether each source was placed): each source (None: one that could not
    be read, or a partner the mix does not use) into its tile, through its alpha (`alphas`: placement index ->
    float tile mask, for a pasted object) where it has one. A source that cannot be decoded leaves its tile as
    the fill (a blend shares its weight out to the others) and brings no object."""
    mix = drawn.mix
    out = np.full((mix.height, mix.width, 3), mix.fill, np.uint8)
    tiles, placed = [], []
    for k, (p, src) in enumerate(zip(mix.placements, sources)):
        pixels, m = decode_scaled(src[0], src[1].header, p.matrix) if src is not None and p is not None else (None, None)
        placed.append(pixels is not None)
        if pixels is None:
            continue
        tiles.append((k, p, _tile(pixels, m, p, src[1], mix.fill)))
    if mix.blend and tiles:
        total = sum(p.weight for _, p, _ in tiles) or 1.0
        acc = np.zeros(out.shape, np.float32)
        for _, p, tile in tiles:
            x0, y0, x1, y1 = p.rect
            acc[y0:y1, x0:x1] += (p.weight / total) * tile
        return np.clip(np.rint(acc), 0, 255).astype(np.uint8), tuple(placed)
    for k, p, tile in tiles:
        x0, y0, x1, y1 = p.rect
        alpha = (alphas or {}).get(k)
        if alpha is None:
            out[y0:y1, x0:x1] = tile
        else:
            a = alpha[..., None]
            out[y0:y1, x0:x1] = np.clip(np.rint(a * tile + (1.0 - a) * out[y0:y1, x0:x1]), 0, 255).astype(np.uint8)
    return out, tuple(placed)


def read_sources(img: InputImage, data: bytes, drawn: Drawn) -> tuple[list, tuple[str, ...], float]:
    """([(bytes, image) or None per placement], the used partners' source ids (sha256 of their bytes; '' for one
    that could not be read), seconds reading them). The image's own bytes are already read; a partner the mix
    does not use (None placement) is not read."""
    t0 = time.perf_counter()
    sources, ids = [(data, img)], []
    for partner, p in zip(drawn.partners, drawn.mix.placements[1:]):
        if p is None:
            sources.append(None)
            continue
        try:
            got = read_bytes(partner)
        except OSError:
            sources.append(None)
            ids.append("")
            continue
        sources.append((got, partner))
        ids.append(hashlib.sha256(got).hexdigest())
    return sources, tuple(ids), time.perf_counter() - t0


def _in_canvas(p: Placement, boxes: np.ndarray) -> np.ndarray:
    """Boxes (xmin, ymin, xmax, ymax: pixel edges of the source) through a placement, clipped to its tile; rows
    with nothing left inside it have max <= min."""
    m = p.matrix
    if m[0, 1] == 0.0 and m[1, 0] == 0.0 and m[2, 0] == 0.0 and m[2, 1] == 0.0 and m[2, 2] == 1.0:
        # a scale and a shift (every placement the ops draw): its inverse, without a general 3x3 inverse
        inv = np.array([[1 / m[0, 0], 0, -m[0, 2] / m[0, 0]], [0, 1 / m[1, 1], -m[1, 2] / m[1, 1]], [0, 0, 1]])
    else:
        inv = np.linalg.inv(m)
    xs, ys = boxes[:, [0, 2, 2, 0]] - 0.5, boxes[:, [1, 1, 3, 3]] - 0.5
    q = inv @ np.stack([xs.ravel(), ys.ravel(), np.ones(xs.size)])
    px, py = (q[0] / q[2]).reshape(xs.shape) + 0.5 + p.rect[0], (q[1] / q[2]).reshape(ys.shape) + 0.5 + p.rect[1]
    x0, y0, x1, y1 = p.rect
    return np.column_stack([np.clip(px.min(1), x0, x1), np.clip(py.min(1), y0, y1), np.clip(px.max(1), x0, x1),
                            np.clip(py.max(1), y0, y1)])


def canvas_boxes(drawn: Drawn, placed, boxes_of) -> tuple:
    """Every placed source's boxes ((xmin, ymin, xmax, ymax) in its upright pixel edges: `boxes_of(img)`) on the
    canvas, clipped to their tiles (for box-aware ops after the partner op)."""
    out = []
    for p, img, ok in zip(drawn.mix.placements, drawn.sources, placed):
        if not ok:
            continue
        b = np.asarray(boxes_of(img), np.float64).reshape(-1, 4)
        if p.obj >= 0:
            b = b[p.obj:p.obj + 1]
        if len(b):
            out += [tuple(v) for v in _in_canvas(p, b) if v[2] > v[0] and v[3] > v[1]]
    return tuple(out)


def shares(drawn: Drawn, placed) -> tuple[float, ...]:
    """Each source's share of the canvas (summing to 1; 0 for one not placed): its weight times the area it
    shows, for a classification record's mixed label. A paste hides what it lands on: cutmix's patch is taken
    off the image's area."""
    mix = drawn.mix
    area = []
    for p, img, ok in zip(mix.placements, drawn.sources, placed):
        if not ok:
            area.append(0.0)
            continue
        h, w = upright(img)
        x0, y0, x1, y1 = _in_canvas(p, np.array([[0.0, 0.0, w, h]]))[0]
        area.append(p.weight * max(x1 - x0, 0.0) * max(y1 - y0, 0.0) if ok else 0.0)
    if not mix.blend:   # later placements cover earlier ones (a mosaic's tiles are disjoint: nothing changes)
        for k in range(1, len(area)):
            if placed[k]:
                for j in (j for j in range(k) if placed[j]):
                    a, b = mix.placements[j].rect, mix.placements[k].rect
                    ow = max(min(a[2], b[2]) - max(a[0], b[0]), 0) * max(min(a[3], b[3]) - max(a[1], b[1]), 0)
                    area[j] = max(area[j] - ow * mix.placements[j].weight, 0.0)
    total = sum(area) or 1.0
    return tuple(a / total for a in area)


@dataclass(frozen=True)
class Mixed:
    """One variant's mix, ready for the graph: the canvas as raw pixels and their header, the boxes on it (box-aware
    ops draw from them), and what its record says of it."""
    drawn: Drawn
    placed: tuple[bool, ...]
    ids: tuple[str, ...]              # the partners' source ids ('' for one that could not be read)
    data: bytes
    header: ImageHeader
    boxes: tuple
    read_seconds: float
    compose_seconds: float
    alphas: dict = field(default_factory=dict)   # placement index -> float tile mask of a pasted object

    def hidden(self, k: int) -> np.ndarray | None:
        """Canvas pixels (bool) of placement k's tile that placements after it paste over, or None when none
        does (a blend hides nothing; a mosaic's tiles never overlap)."""
        mix = self.drawn.mix
        me, out = mix.placements[k], None
        for j in range(k + 1, len(mix.placements)):
            p = mix.placements[j]
            if mix.blend or p is None or not self.placed[j] or not (
                    p.rect[0] < me.rect[2] and me.rect[0] < p.rect[2] and p.rect[1] < me.rect[3]
                    and me.rect[1] < p.rect[3]):
                continue
            if out is None:
                out = np.zeros((mix.height, mix.width), bool)
            x0, y0, x1, y1 = p.rect
            a = self.alphas.get(j)
            out[y0:y1, x0:x1] |= True if a is None else a > 0.5
        if out is not None:
            x0, y0, x1, y1 = me.rect
            inside = np.zeros_like(out)
            inside[y0:y1, x0:x1] = out[y0:y1, x0:x1]
            out = inside if inside.any() else None
        return out

    def record_keys(self, classification: bool) -> dict:
        """make_example's keyword arguments for the mix: its partners, and for a classification record each
        source's label and share."""
        out = {"partners": self.ids}
        if classification:
            out["mix"] = tuple((img.label, img.label_text, w) for img, w in
                               zip(self.drawn.sources, shares(self.drawn, self.placed)))
        return out


def mixed_variant(op: PartnerOp, spec_seed: int, img: InputImage, data: bytes, variant: int, partners: Partners,
                  detection=None, boxed: bool = False) -> Mixed | None:
    """The variant's canvas (with the boxes on it when `boxed`: box-aware ops follow), or None: its p coin says the
    op does not apply, or OpenCV cannot decode the image
    itself (a format only TensorFlow reads, such as GIF): the variant then runs on the image alone, as the graph
    decodes it (or rejects it), and its record names no partner."""
    drawn = draw(op, spec_seed, img, variant, partners, detection.boxes if detection is not None else None)
    if drawn is None:
        return None
    sources, ids, read_s = read_sources(img, data, drawn)
    t0 = time.perf_counter()
    alphas = _alphas(drawn, detection) if detection is not None else {}
    canvas, placed = compose(drawn, sources, alphas)
    if not placed[0]:
        return None
    used = [ok for ok, p in zip(placed[1:], drawn.mix.placements[1:]) if p is not None]
    ids = tuple(i if ok else "" for i, ok in zip(ids, used))   # read but not decodable: not in the record
    raw, header = as_raw(canvas)
    boxes = canvas_boxes(drawn, placed, detection.boxes) if detection is not None and boxed else ()
    return Mixed(drawn, placed, ids, raw, header, boxes, read_s, time.perf_counter() - t0, alphas)


def _alphas(drawn: Drawn, detection) -> dict:
    """Each pasted object's tile mask (float 0..1): its polygons or RLE mask, or its whole box on a box-only set,
    warped into its tile (nearest), its edge softened by the mix's `feather`."""
    out = {}
    for k, (p, img) in enumerate(zip(drawn.mix.placements, drawn.sources)):
        if p is None or p.obj < 0:
            continue
        obj = detection.annotations[img.relpath].objects[p.obj]
        th, tw = p.size
        if obj.polygons or obj.rle is not None:
            h, w = upright(img)
            src = rasterise(obj.polygons, h, w) if obj.polygons else rle_decode(obj.rle)
            alpha = warp_mask(src, [(p.matrix, th, tw)], fill=0).astype(np.float32)
        else:
            alpha = np.ones((th, tw), np.float32)
        sigma = drawn.mix.feather
        if sigma > 0:
            pad = int(np.ceil(3 * sigma))
            alpha = cv2.GaussianBlur(np.pad(alpha, pad), (0, 0), sigma)[pad:pad + th, pad:pad + tw]
        out[k] = alpha
    return out
