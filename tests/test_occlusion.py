"""One occlusion rule, judged by the pixels: a cutout (`random_erasing`, `random_black_patches`, `coarse_dropout`)
hides part of an object, before or after other geometry, and the object's box becomes the extent of what still shows
(remnants thinner than `min_size` do not count), its mask loses what was hidden, and an object showing less than
`min_visibility` of itself is ignored (written with weight 0), one showing nothing dropped. Scenes: solid rectangles
of one colour each on white, PNG output (no JPEG blur), the cutout black."""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from augd.annotations import Annotation, Object
from augd.annotations.occlusion import Rule
from augd.annotations.targets import transform
from augd.job import JobOptions, run_job
from augd.schema import parse_pipeline
from tests.annotated import Img, Shape, voc_job
from tests.test_ssd_ops import read_records, strength

COLOURS = {"red": (230, 30, 30), "green": (30, 210, 30), "blue": (30, 30, 230)}
MIN_SIZE, MIN_VISIBILITY = 3, 0.25
CHAINS = {
    "erase only": "  - random_erasing: {area: [0.08, 0.3], value: 0}\n",
    "erase, then flip and rotate": "  - random_erasing: {area: [0.08, 0.3], value: 0}\n"
                                   "  - random_flip_left_right: {}\n  - random_rotation: {degrees: 8, fill: 255}\n",
    "rotate, then erase": "  - random_rotation: {degrees: 8, fill: 255}\n"
                          "  - random_erasing: {area: [0.08, 0.3], value: 0}\n",
    "black patches, then rotate": "  - random_black_patches: {max_black_patches: 8, probability: 0.6, "
                                  "size_to_image_ratio: 0.25}\n  - random_rotation: {degrees: 8, fill: 255}\n",
    "coarse dropout, then rotate": "  - coarse_dropout: {holes: [2, 6], height: [0.15, 0.35], width: [0.1, 0.3]}\n"
                                   "  - random_rotation: {degrees: 8, fill: 255}\n",
}


def _scenes(root) -> dict:
    """{(image file, class): its object's area in pixels}."""
    images = []
    for i in range(6):
        rng = np.random.default_rng(i)
        shapes = []
        for k, (cls, colour) in enumerate(COLOURS.items()):
            x0, y0 = 8 + 62 * k + int(rng.integers(0, 8)), int(rng.integers(10, 60))
            shapes.append(Shape(cls, (x0, y0, x0 + int(rng.integers(30, 50)), y0 + int(rng.integers(35, 60))),
                                colour))
        images.append(Img(f"im{i}.png", 130, 200, tuple(shapes)))
    voc_job(str(root), images)
    return {(f"JPEGImages/{im.name}", s.cls): (s.geom[2] - s.geom[0]) * (s.geom[3] - s.geom[1])
            for im in images for s in im.objects()}


def _shown(pixels: np.ndarray, colour, k: int = MIN_SIZE) -> np.ndarray:
    """The colour's pixels that count: its own (not the black cutout, not white), opened by a k-square."""
    s = strength(pixels, colour) > 80
    return cv2.morphologyEx(s.astype(np.uint8), cv2.MORPH_OPEN, np.ones((k, k), np.uint8)) > 0


def _extent(mask: np.ndarray):
    ys, xs = np.nonzero(mask)
    return (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1) if len(xs) else None


def _agrees(box, pixels, colour, sliver: bool = False) -> bool:
    """The box is the extent of the colour's pixels that count, within 2 px: a remnant as thick as min_size
    give or take the resampling's pixel may count or not (a warped cutout's edge moves by one). `sliver`: an
    ignored object, often a wedge between a turned edge and a cover's that narrows past min_size so slowly that
    half a pixel of resampling moves its end by many rows: each side lies between where the pixels of parts
    min_size - 1 and min_size + 1 thick end (within 2 px)."""
    seen = [_extent(_shown(pixels, colour, k)) for k in (MIN_SIZE - 1, MIN_SIZE, MIN_SIZE + 1)]
    if not sliver:
        return any(e is not None and np.abs(np.array(e) - box).max() <= 2 for e in seen)
    ends = np.array([e for e in seen if e is not None])
    return len(ends) > 0 and bool(((ends.min(0) - 2 <= box) & (box <= ends.max(0) + 2)).all())


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_a_cutout_shrinks_boxes_to_what_shows_and_ignores_what_it_hides_too_much(tmp_path, chain):
    areas = _scenes(tmp_path / "voc")
    spec = parse_pipeline("name: occ\nseed: 3\nvariants: 8\nkeep_original: false\noutput: {format: png, shards: 1}\n"
                          f"annotations: {{min_size: {MIN_SIZE}, min_visibility: {MIN_VISIBILITY}}}\n"
                          "ops:\n" + CHAINS[chain], "occ.yaml")
    res = run_job(str(tmp_path / "voc"), spec, str(tmp_path / "out"), JobOptions(workers=1, executor="threads"))
    kept = ignored = dropped = disagree = 0
    wrong = []
    for r in read_records(tmp_path / "out" / "voc"):
        pixels = r["pixels"]
        h, w = pixels.shape[:2]
        names = [t.decode() for t in r["image/object/class/text"]]
        why = [t.decode() for t in r["augd/object/ignored"]] or [""] * len(names)
        weights = list(r["image/object/weight"]) or [1.0] * len(names)
        boxes = np.stack([r[f"image/object/bbox/{k}"] for k in ("xmin", "ymin", "xmax", "ymax")], -1) * [w, h, w, h]
        for cls, colour in COLOURS.items():
            shown = _shown(pixels, colour)
            share = shown.sum() / areas[r["image/filename"].decode(), cls]
            where = (r["image/filename"], r["augd/variant"], cls)
            if cls not in names:
                dropped += 1
                if share > 0.02:   # more of it shows than a warped cover's edge leaves: kept or ignored it
                    wrong.append((*where, "dropped", round(share, 3)))
                continue
            k = names.index(cls)
            if why[k]:
                ignored += 1
                if share > MIN_VISIBILITY + 0.05 or weights[k] != 0.0 or why[k] != "covered":
                    wrong.append((*where, "ignored", why[k], weights[k], round(share, 3)))
            else:
                kept += 1
                if share < MIN_VISIBILITY - 0.05 or weights[k] != 1.0:
                    wrong.append((*where, "kept", weights[k], round(share, 3)))
            if not _agrees(boxes[k], pixels, colour, sliver=bool(why[k])):
                disagree += 1
                wrong.append((*where, boxes[k].round(1).tolist(), _extent(shown)))
    a = res.report.annotations
    print(f"\n{chain}: objects in {3 * 6 * 8}, kept {kept}, ignored {ignored} ({a.ignored}), dropped {dropped} "
          f"({a.dropped}), disagreeing with their pixels {disagree}")
    assert kept + ignored + dropped == 3 * 6 * 8 and dropped == sum(a.dropped.values())
    assert ignored == sum(a.ignored.values()) and set(a.ignored) <= {"covered"}, a.ignored
    assert set(a.dropped) <= {"covered", "small", "outside"}, a.dropped
    assert ignored > 0 and not wrong, wrong


def test_a_one_pixel_remnant_beside_a_patch_does_not_count_and_a_wholly_erased_object_goes():
    """Cutouts drawn by hand (Program.covers' form): one leaves a 1-px L of a box and its top 25 px (the box
    becomes those 25 px), one covers an object whole (dropped), one misses (unchanged). A paste's cover is a
    raster (what a mix's later sources hide): the same rule, and under min_visibility the three fates."""
    a, b, c = Object("a", (10.0, 10.0, 60.0, 110.0)), Object("b", (80.0, 20.0, 120.0, 60.0)), \
        Object("c", (140.0, 10.0, 180.0, 40.0))
    covers = ((0, (11.0, 35.0, 70.0, 120.0)), (0, (75.0, 15.0, 125.0, 65.0)))   # a: 1-px column left of the patch
    ann = Annotation(objects=(a, b, c))
    out, _, gone = transform(ann, [], covers=covers, size=(120, 200), rule=Rule(min_size=3))
    assert gone == {"covered": 1} and [o.name for o in out.objects] == ["a", "c"]
    assert out.objects[0].box == (10.0, 10.0, 60.0, 35.0) and out.objects[0].truncated
    assert out.objects[1] == c
    loose, _, _ = transform(ann, [], covers=covers, size=(120, 200), rule=Rule(min_size=1))
    assert loose.objects[0].box == (10.0, 10.0, 60.0, 110.0), "at min_size 1 the 1-px column still counts"
    hidden = np.zeros((120, 200), bool)
    hidden[35:, 11:] = True
    one = Annotation(objects=(a,))
    pasted = dict(covers=((0, hidden),), size=(120, 200))
    assert transform(one, [], rule=Rule(min_size=3), **pasted)[0].objects[0].box == (10.0, 10.0, 60.0, 35.0)
    for low, fate in (("drop", {"covered": 1}), ("ignore", "covered"), ("keep", "")):   # 25 of 100 rows show
        got, _, gone = transform(one, [], rule=Rule(min_visibility=0.3, min_size=3, low_visibility=low), **pasted)
        if low == "drop":
            assert gone == fate and not got.objects
        else:
            assert not gone and got.objects[0].ignored == fate and got.objects[0].box == (10.0, 10.0, 60.0, 35.0)
            assert got.objects[0].visible == pytest.approx(0.25)


@pytest.mark.parametrize("min_size", [2, 3, 4])
def test_what_shows_beside_a_cover_keeps_its_place_at_every_min_size(min_size):
    """The thin-remnant rule's opening keeps what it keeps where it is: an even square (min_size 2, the default)
    once moved the kept part one pixel right and down, so a box cut by a strip lost a row and a column it shows."""
    obj = Object("a", (72.0, 77.0, 112.0, 109.0))
    for strip, want in (((100.0, 77.0, 112.0, 109.0), (72.0, 77.0, 100.0, 109.0)),
                        ((72.0, 77.0, 84.0, 109.0), (84.0, 77.0, 112.0, 109.0)),
                        ((72.0, 97.0, 112.0, 109.0), (72.0, 77.0, 112.0, 97.0))):
        out, _, _ = transform(Annotation(objects=(obj,)), [], covers=((0, strip),), size=(160, 240),
                              rule=Rule(min_size=min_size))
        assert out.objects[0].box == want, (min_size, strip, out.objects[0].box)


def test_black_patches_are_the_od_apis_squares_and_the_plan_knows_each_one():
    """random_black_patches as the OD API draws them: squares of side int(ratio x the shorter side), each there
    with `probability`, wholly inside the image; the plan's covers are exactly the black pixels the graph wrote."""
    from augd.engine.plan import Program
    from augd.ops.sampling import image_seed
    from tests.helpers import run, spec_for
    op = {"random_black_patches": {"max_black_patches": 5, "probability": 0.6, "size_to_image_ratio": 0.25}}
    white = np.full((80, 120, 3), 255, np.uint8)
    program, counts = Program(spec_for([op]).ops), set()
    for i in range(12):
        covers = program.covers(image_seed(1, f"w{i}.png", 1), 80, 120)
        black = run([op], white, relpath=f"w{i}.png").max(axis=2) == 0
        drawn = np.zeros((80, 120), bool)
        for k, (x0, y0, x1, y1) in covers:
            assert k == 0 and x1 - x0 == y1 - y0 == 20 and 0 <= x0 and x1 <= 120 and 0 <= y0 and y1 <= 80
            drawn[int(y0):int(y1), int(x0):int(x1)] = True
        assert np.array_equal(black, drawn), f"w{i}.png"
        counts.add(len(covers))
    assert len(counts) >= 3 and max(counts) <= 5   # each patch its own coin


def _ellipses(root) -> None:
    """Six VOC images of three round objects each (filled ellipses as 96-gon polygons: VOC keeps only their boxes)."""
    rng = np.random.default_rng(11)
    images = []
    for i in range(6):
        shapes = []
        for k, (cls, colour) in enumerate(COLOURS.items()):
            cx, cy = 40 + 60 * k + rng.uniform(-6, 6), 60 + rng.uniform(-15, 15)
            a, b = rng.uniform(16, 26), rng.uniform(10, 20)
            t = np.linspace(0, 2 * np.pi, 96, endpoint=False)
            shapes.append(Shape(cls, tuple(zip((cx + a * np.cos(t)).round(2), (cy + b * np.sin(t)).round(2))), colour))
        images.append(Img(f"e{i}.png", 120, 200, tuple(shapes)))
    voc_job(str(root), images)


def test_box_rotation_ellipse_keeps_round_objects_tight_where_corners_grow(tmp_path):
    """Box-only round objects turned 20-30 degrees: with `box_rotation: ellipse` each box is its object's pixels
    (within 2 px); the corner rule's boxes hold the pixels too but are larger (the corners of a box around an
    ellipse lie outside it). Judged by the pixels of each colour."""
    _ellipses(tmp_path / "round")
    slack = {}
    for rule in ("ellipse", "corners"):
        spec = parse_pipeline("name: rot\nseed: 4\nvariants: 3\nkeep_original: false\noutput: {format: png}\n"
                              "ops:\n  - random_rotation: {degrees: [20, 30], fill: 255}\n"
                              f"annotations: {{box_rotation: {rule}}}\n", "rot.yaml")
        run_job(str(tmp_path / "round"), spec, str(tmp_path / rule), JobOptions(workers=1, executor="threads"))
        gaps = []
        for r in read_records(tmp_path / rule / "round"):
            pixels = r["pixels"]
            h, w = pixels.shape[:2]
            names = [t.decode() for t in r["image/object/class/text"]]
            boxes = np.stack([r[f"image/object/bbox/{k}"] for k in ("xmin", "ymin", "xmax", "ymax")], -1) * [w, h, w, h]
            for cls, colour in COLOURS.items():
                x0, y0, x1, y1 = _extent(_shown(pixels, colour, 1))
                box = boxes[names.index(cls)]
                assert box[0] <= x0 + 2 and box[1] <= y0 + 2 and box[2] >= x1 - 2 and box[3] >= y1 - 2, (rule, box)
                gaps.append(max(x0 - box[0], y0 - box[1], box[2] - x1, box[3] - y1))
        slack[rule] = max(gaps)
        print(f"\nbox_rotation {rule}: {len(gaps)} boxes, largest gap to their pixels {max(gaps):.1f} px, mean "
              f"{np.mean(gaps):.1f}")
    assert slack["ellipse"] <= 2.0 and slack["corners"] > 4.0, slack
