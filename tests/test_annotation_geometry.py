"""Annotations move with the pixels (augd.annotations.geometry, Program.geometry), checked by pixels.

A synthetic image of solid red, green and blue shapes on a dark background, with its annotation (two boxes and a
polygon) and its semantic mask, goes through the real compiled graph (each geometric op alone, and a heavy chain
of crop, rotation, colour and flips); the annotation goes through the steps of the same plan. In the decoded
output, the region of each colour must have the transformed box (within 2 px; IoU >= 0.9 where the op rotates),
and the warped mask must cover that region on >= 98 % of its pixels.
"""
import io

import numpy as np
import pytest
from PIL import Image

from augd.annotations import Annotation, Object
from augd.annotations.geometry import rasterise, rle_encode
from augd.annotations.occlusion import Rule
from augd.annotations.targets import KEPT, instance_masks, transform
from augd.engine import image_seed
from tests.helpers import build, compiled, png, spec_for

H, W = 96, 128
BACKGROUND = (40, 40, 40)
#: class index -> colour; index k is channel k - 1's colour
PALETTE = {1: (225, 25, 25), 2: (25, 225, 25), 3: (25, 25, 225)}
RED = (10.5, 12.25, 50.75, 40.5)
GREEN = (70.0, 50.0, 118.0, 86.0)
BLUE = ((20.0, 56.0), (55.0, 52.5), (48.25, 90.0), (15.0, 84.0))


def box_of(poly):
    xs, ys = zip(*poly)
    return min(xs), min(ys), max(xs), max(ys)


def corners(b):
    return ((b[0], b[1]), (b[2], b[1]), (b[2], b[3]), (b[0], b[3]))


def scene(h=H, w=W, scale=1.0):
    """(image, annotation, semantic mask): the shapes drawn from their annotation, scaled by `scale`."""
    red = tuple(v * scale for v in RED)
    green = tuple(v * scale for v in GREEN)
    blue = tuple((x * scale, y * scale) for x, y in BLUE)
    mask = np.zeros((h, w), np.uint8)
    for k, poly in ((1, corners(red)), (2, corners(green)), (3, blue)):
        mask[rasterise([poly], h, w) > 0] = k
    img = np.empty((h, w, 3), np.uint8)
    img[:] = BACKGROUND
    for k, colour in PALETTE.items():
        img[mask == k] = colour
    ann = Annotation(objects=(Object("red", red), Object("green", green),
                              Object("blue", box_of(blue), polygons=(blue,))))
    return img, ann, mask


def strength(img, k):
    """How much channel k - 1 dominates the other two (colour ops change levels, not which channel leads)."""
    x = img.astype(np.int32)
    c = k - 1
    return x[:, :, c] - np.maximum(x[:, :, (c + 1) % 3], x[:, :, (c + 2) % 3])


def regions(img, k):
    """(loose, strong) pixels of colour k: >= 40 % and >= 60 % of the colour's full strength in this image."""
    s = strength(img, k)
    body = s[s > 60]
    if not body.size:
        return np.zeros(s.shape, bool), np.zeros(s.shape, bool)
    full = np.percentile(body, 90)
    return s >= 0.4 * full, s >= 0.6 * full


def extent(region):
    rows, cols = np.flatnonzero(region.any(axis=1)), np.flatnonzero(region.any(axis=0))
    if not len(rows):
        return None
    return float(cols[0]), float(rows[0]), float(cols[-1] + 1), float(rows[-1] + 1)


def iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def run_variant(ops, variant, *, relpath="scene.png", data=None, src=None, graph=None):
    """(output pixels, transformed annotation, warped mask, dropped, steps) of one variant through the real graph,
    its annotation through the steps of the plan the graph used (the same per-image seed)."""
    img, ann, mask = src or scene()
    c = graph or compiled(ops)
    r = c.process(png(img) if data is None else data, relpath, variant)
    out = np.frombuffer(r.payload, np.uint8).reshape(r.height, r.width, 3)
    steps = c.program.geometry(image_seed(c.spec.seed, relpath, variant), img.shape[0], img.shape[1])
    moved, warped, dropped = transform(ann, steps, mask=mask)
    return out, moved, warped, dropped, steps


def check_agreement(out, moved, warped, *, rotates: bool, names=("red", "green", "blue")):
    """Every kept object's box is where its colour is; every dropped object's colour is (nearly) gone; the warped
    mask covers each colour's region."""
    assert warped.shape == out.shape[:2]
    by_name = {o.name: o for o in moved.objects}
    for k, name in ((1, "red"), (2, "green"), (3, "blue")):
        if name not in names:
            continue
        loose, strong = regions(out, k)
        seen = extent(loose)
        obj = by_name.get(name)
        if obj is None:  # dropped: at most a sliver of it may show
            assert seen is None or min(seen[2] - seen[0], seen[3] - seen[1]) <= 2, (name, seen)
            continue
        box = obj.box
        if seen is None:  # a kept sliver can vanish under resampling
            assert min(box[2] - box[0], box[3] - box[1]) < 3, (name, box)
            continue
        near = max(abs(a - b) for a, b in zip(seen, box))
        if near > 2.0 and obj.polygons:   # a steep edge cut by a canvas: pixel centres stop short of its extent
            drawn = extent(rasterise(list(obj.polygons), *out.shape[:2]) > 0)   # drawn as the scene was
            near = near if drawn is None else max(abs(a - b) for a, b in zip(seen, drawn))
        assert near <= 2.0 or (rotates and iou(seen, box) >= 0.9), (name, box, seen, near, iou(seen, box))
        if strong.sum() >= 20:
            covered = (warped[strong] == k).mean()
            assert covered >= 0.98, (name, covered)


SINGLE_OPS = [
    ([{"random_flip_left_right": {}}], False),
    ([{"random_flip_up_down": {}}], False),
    ([{"random_rotation": {"degrees": 15}}], True),
    ([{"random_affine": {"scale": [0.8, 1.25], "translate": [0.1, 0.1], "shear": 8, "rotate": 10}}], True),
    ([{"random_affine": {"shear_y": 12, "rotate": 5}}], True),                                   # shear in y
    ([{"random_perspective": {"scale": [0.08, 0.12]}}], True),    # projective: boxes through their corners
    ([{"random_crop": {"size": [64, 80], "area": [0.2, 1.0]}}], False),
    ([{"center_crop": {"size": [60, 70]}}], False),
    ([{"center_crop": {"size": [120, 150]}}], False),            # larger than the image: padded
    ([{"resize": {"size": [48, 64]}}], False),                    # 2x down: box prefilter in the pixels
    ([{"resize": {"size": [150, 190]}}], False),
    ([{"random_zoom": {"height_factor": 0.3}}], False),
    ([{"random_zoom": {"height_factor": [-0.4, -0.2], "width_factor": [0.1, 0.3]}}], False),
    ([{"random_rotation90": {"p": 0.5}}], False),                  # a quarter turn: height and width swap
    ([{"random_image_scale": {"min_scale_ratio": 0.6, "max_scale_ratio": 1.7}}], False),   # the canvas scales
    ([{"random_scale_crop_and_pad_to_square": {"output_size": 112, "scale_min": 0.5, "scale_max": 1.8}}], False),
    ([{"random_square_crop_by_scale": {"scale_min": 0.6, "scale_max": 1.3, "max_border": 32}}], False),
    ([{"random_crop_to_aspect_ratio": {"aspect_ratio": 1.5}}], False),    # a window of a wider aspect
    ([{"random_pad_image": {"max_size": [150, 190]}}], False),      # a canvas of the mean colour
    ([{"random_absolute_pad_image": {"max_height_padding": 40, "max_width_padding": 40}}], False),
    # ssd_random_crop_pad: sized by the source; black, as a crop's mean colour may lean to one class's (test_pads)
    ([{"random_crop": {"area": [0.3, 0.8], "sampler": "tf"}},
      {"random_pad_image": {"min_ratio": [1.0, 1.0], "max_ratio": [2.0, 2.0], "fill": 0}}], False),
]


@pytest.mark.parametrize("ops,rotates", SINGLE_OPS, ids=[f"{next(iter(o[0]))}{i}" for i, (o, _) in
                                                         enumerate(SINGLE_OPS)])
def test_each_geometric_op_moves_boxes_and_masks_with_the_pixels(ops, rotates):
    for variant in range(1, 7):
        out, moved, warped, _, _ = run_variant(ops, variant)
        check_agreement(out, moved, warped, rotates=rotates)


COLOUR = [
    {"random_saturation": {"lower": 0.8, "upper": 1.2}},
    {"random_brightness": {"max_delta": 0.125}},
    {"random_contrast": {"lower": 0.8, "upper": 1.2}},
    {"random_hue": {"max_delta": 0.05}},
]
#: geometric-heavy's order: crop, rotation and flip fuse into one warp, then colour
HEAVY = [{"random_crop": {"size": [80, 96], "area": [0.3, 1.0]}}, {"random_rotation": {"degrees": 15}},
         {"random_flip_left_right": {}}, *COLOUR]
#: colour between the crop and the rotation: two warps, and what the crop cut off stays gone in the second
SPLIT = [{"random_crop": {"size": [80, 96], "area": [0.3, 1.0]}}, *COLOUR, {"random_rotation": {"degrees": 15}},
         {"random_flip_left_right": {}}, {"random_flip_up_down": {}}]


@pytest.mark.parametrize("ops,warps", [(HEAVY, 1), (SPLIT, 2)], ids=["heavy", "split"])
def test_heavy_chain_in_every_variant(ops, warps):
    truncated = 0
    for variant in range(1, 13):
        out, moved, warped, dropped, steps = run_variant(ops, variant)
        assert len(steps) == warps
        check_agreement(out, moved, warped, rotates=True)
        truncated += sum(o.truncated for o in moved.objects)
        assert len(moved.extra[KEPT]) == len(moved.objects) == 3 - sum(dropped.values())
    assert truncated > 0  # crops cut some boxes: they say so


def test_tf_kernels_agree_with_the_annotations(monkeypatch):
    """The GPU hosts' path (TensorFlow's projective transform) warps by the same matrices."""
    graph = build(spec_for(SPLIT), kernels="tf")
    assert graph.kernel == "tf"
    for variant in range(1, 7):
        out, moved, warped, _, _ = run_variant(SPLIT, variant, graph=graph)
        check_agreement(out, moved, warped, rotates=True)


def test_exact_flips_and_integer_crops_give_exact_boxes():
    _, ann, _ = scene()
    seen = set()
    for variant in range(1, 9):
        _, moved, _, _, steps = run_variant([{"random_flip_left_right": {}}, {"random_flip_up_down": {}}], variant)
        (m, _, _), = steps
        sx, sy = m[0, 0] < 0, m[1, 1] < 0
        seen.add((sx, sy))
        for src, dst in zip(ann.objects, moved.objects):
            x0, y0, x1, y1 = src.box
            want = ((W - x1) if sx else x0, (H - y1) if sy else y0, (W - x0) if sx else x1, (H - y0) if sy else y1)
            assert dst.box == want and not dst.truncated
    assert len(seen) >= 3  # identity and flips both ways among the variants
    _, moved, _, _, _ = run_variant([{"center_crop": {"size": [90, 120]}}], 1)   # offsets 4, 3
    for src, dst in zip(ann.objects, moved.objects):
        assert dst.box == (src.box[0] - 4, src.box[1] - 3, src.box[2] - 4, src.box[3] - 3) and not dst.truncated


def test_box_aware_polygon_extent_is_tight_under_rotation():
    """A polygon's rotated box is the extent of the rotated polygon, not of its rotated box."""
    ops = [{"random_rotation": {"degrees": [30, 30]}}]
    out, moved, _, _, steps = run_variant(ops, 1)
    blue = moved.objects[2]
    loose = transform(Annotation(objects=(Object("blue", box_of(BLUE)),)), steps)[0].objects[0].box
    seen = extent(regions(out, 3)[0])
    assert iou(seen, blue.box) >= 0.9 and iou(seen, loose) < iou(seen, blue.box)


def test_crop_decoded_jpeg_agrees_with_source_coordinates():
    """A large JPEG cropped small: the graph decodes only a window at a reduced DCT scale; the annotation,
    moved in the source's coordinates, still lands on the pixels."""
    big = scene(H * 4, W * 4, scale=4.0)
    buf = io.BytesIO()
    Image.fromarray(big[0]).save(buf, "JPEG", quality=95, subsampling=0)
    ops = [{"random_crop": {"size": [48, 64], "area": [0.5, 1.0]}}]
    for variant in range(1, 5):
        out, moved, warped, _, _ = run_variant(ops, variant, data=buf.getvalue(), relpath="big.jpg", src=big)
        check_agreement(out, moved, warped, rotates=False)


def test_process_many_hands_over_the_source_coordinate_steps_of_its_plan():
    """Detection jobs move their annotations by the Geo steps the graph's own plan used (one plan per variant):
    in the source's coordinates even where a JPEG's decode window rewrote step 0's matrix, the steps
    Program.geometry draws; classification calls do not ask for them and get None."""
    big = scene(H * 4, W * 4, scale=4.0)
    buf = io.BytesIO()
    Image.fromarray(big[0]).save(buf, "JPEG", quality=95, subsampling=0)
    c = compiled([{"random_crop": {"size": [48, 64], "area": [0.5, 1.0]}}, {"random_rotation": {"degrees": 10}}])
    items = [(buf.getvalue(), "big.jpg", v, None) for v in range(3)]
    with_steps = c.process_many(items, geometry=True)
    assert with_steps[0].geometry == ()
    for v, r in enumerate(with_steps[1:], start=1):
        want = c.program.geometry(image_seed(c.spec.seed, "big.jpg", v), H * 4, W * 4)
        assert len(r.geometry) == len(want) >= 1
        for (m, oh, ow), (m2, oh2, ow2) in zip(r.geometry, want):
            assert np.array_equal(m, m2) and (oh, ow) == (oh2, ow2) == (r.height, r.width)
    plain = c.process_many(items)
    assert all(r.geometry is None for r in plain)
    assert [r.payload for r in plain] == [r.payload for r in with_steps]


def test_instance_masks_cover_their_objects():
    _, ann, _ = scene()
    for variant in range(1, 5):
        out, moved, _, _, steps = run_variant(SPLIT, variant)
        masks = instance_masks(ann, H, W, steps)
        assert len(masks) == 3 and all(m.shape == out.shape[:2] and set(np.unique(m)) <= {0, 1} for m in masks)
        for k, m in enumerate(masks, start=1):
            strong = regions(out, k)[1]
            if strong.sum() >= 20:
                assert (m[strong] == 1).mean() >= 0.98
        # paired with the kept objects through KEPT; each kept box is its mask's extent (a rotated corner's
        # tip may cover no pixel centre: 1.5 px)
        for obj, i in zip(moved.objects, moved.extra[KEPT]):
            got = extent(masks[i] > 0)
            if got is not None:
                assert max(abs(a - b) for a, b in zip(got, obj.box)) <= 1.5, (obj.name, got, obj.box)
    assert instance_masks(Annotation(objects=(Object("a", (1, 1, 5, 5)),)), H, W, []) == []


def test_rle_objects_move_with_their_mask():
    coco = pytest.importorskip("augd.annotations.coco")
    img, _, mask = scene()
    rle = rle_encode(mask == 2)
    assert np.array_equal(coco.rle_decode(rle), (mask == 2).astype(np.uint8))
    green = Object("green", GREEN, crowd=True, rle=rle)
    for variant in range(1, 5):
        out, moved, warped, _, _ = run_variant(SPLIT, variant, src=(img, Annotation(objects=(green,)), mask))
        check_agreement(out, moved, warped, rotates=True, names=("green",))
        if moved.objects:
            back = coco.rle_decode(moved.objects[0].rle)
            assert back.shape == out.shape[:2]
            assert moved.objects[0].box == extent(back > 0)


def test_rasterise_is_exact_at_pixel_centres():
    """The scene builder and the instance masks fill the pixels whose centres are inside: [2, 5] is 2, 3, 4."""
    got = rasterise([corners((2.0, 1.0, 5.0, 3.0))], 5, 7)
    assert np.argwhere(got).tolist() == [[r, c] for r in (1, 2) for c in (2, 3, 4)]
    got = rasterise([((1.6, 0.4), (6.4, 0.4), (1.6, 4.6))], 5, 7)      # a triangle: centres on its diagonal out
    want = [[r, c] for r in range(5) for c in range(7) if 1.6 <= c + 0.5 and 0.4 <= r + 0.5
            and (c + 0.5 - 1.6) / 4.8 + (r + 0.5 - 0.4) / 4.2 < 1]
    assert np.argwhere(got).tolist() == want
    u_shape = ((1, 1), (2, 1), (2, 3), (4, 3), (4, 1), (5, 1), (5, 4), (1, 4))   # two spans in its upper rows
    assert np.argwhere(rasterise([u_shape], 6, 6)).tolist() == [[1, 1], [1, 4], [2, 1], [2, 4], [3, 1], [3, 2],
                                                                [3, 3], [3, 4]]


def _centres_inside(poly, h: int, w: int) -> np.ndarray:
    """The definition rasterise keeps, pixel by pixel: a centre is inside where an odd number of the polygon's
    edges (each half-open in y) cross its row at or left of it."""
    p = np.asarray(poly, np.float64)
    q = np.roll(p, -1, axis=0)
    yc, xc = np.mgrid[0:h, 0:w] + 0.5
    odd = np.zeros((h, w), bool)
    for (x0, y0), (x1, y1) in zip(p, q):
        rows = (yc >= min(y0, y1)) & (yc < max(y0, y1))
        with np.errstate(divide="ignore", invalid="ignore"):
            x = x0 + (yc - y0) * (x1 - x0) / (y1 - y0)
        odd ^= rows & (x <= xc)
    return odd


def test_rasterise_of_rectangles_windows_and_several_shapes_is_the_definition():
    """Upright rectangles (their own quick path) in either order, four points on a rectangle's sides that enclose
    nothing, any polygon, a window of the raster and several shapes set in one array: each pixel as the even-odd
    rule at its centre says."""
    rng = np.random.default_rng(5)
    shapes = [[(0, 0), (0, 5), (0, 0), (6, 0)], [(1, 1), (1, 6), (7, 6), (1, 6)], [(2, 2), (2, 2), (5, 2), (5, 2)]]
    for _ in range(150):
        (x0, x1), (y0, y1) = np.sort(rng.integers(-4, 50, (2, 2)) / 2, axis=1)
        box = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
        shapes += [box, box[::-1], rng.uniform(-3, 24, (int(rng.integers(3, 8)), 2)).tolist()]
    for k, shape in enumerate(shapes):
        h, w = 17 + k % 5, 21 - k % 4
        want = _centres_inside(shape, h, w)
        assert np.array_equal(rasterise([shape], h, w) > 0, want), shape
        c0, c1 = sorted(rng.integers(0, w + 1, 2)); r0, r1 = sorted(rng.integers(0, h + 1, 2))  # noqa: E702
        got = rasterise([shape], h, w, window=(int(c0), int(r0), int(c1), int(r1)))
        assert np.array_equal(got > 0, want[r0:r1, c0:c1]), (shape, (c0, r0, c1, r1))
    both = np.zeros((17, 21), np.uint8)
    rasterise([shapes[3]], 17, 21, out=both)
    rasterise([shapes[5]], 17, 21, out=both)
    assert np.array_equal(both > 0, _centres_inside(shapes[3], 17, 21) | _centres_inside(shapes[5], 17, 21))


def test_clipping_truncates_and_visibility_and_size_drop():
    """A crop that cuts the red box in half: truncated, and under min_visibility 0.6 ignored (it shows: weight 0)
    or, with low_visibility drop, dropped; a 0.5 px box is dropped under min_size 1."""
    crop = np.array([[1.0, 0.0, 30.5], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])  # output x = input x - 30.5
    steps = [(crop, 96.0, 80.0)]
    ann = Annotation(objects=(Object("red", RED), Object("tiny", (60.0, 10.0, 60.5, 20.0))))
    moved, warped, dropped = transform(ann, steps)
    assert warped is None and dropped == {"small": 1} and moved.extra[KEPT] == (0,)
    red = moved.objects[0]
    assert red.truncated and red.box == (0.0, RED[1], RED[2] - 30.5, RED[3])
    ignored, _, dropped = transform(ann, steps, rule=Rule(min_visibility=0.6))
    assert dropped == {"small": 1} and ignored.objects[0].ignored == "cut" and ignored.objects[0].box == red.box
    _, _, dropped = transform(ann, steps, rule=Rule(min_visibility=0.6, low_visibility="drop"))
    assert dropped == {"cut": 1, "small": 1}
    kept, _, dropped = transform(ann, steps, rule=Rule(min_size=0.25))
    assert not dropped and not kept.objects[1].truncated


def test_semantic_mask_fills_255_outside_and_is_never_blended():
    out, _, warped, _, _ = run_variant([{"random_rotation": {"degrees": [20, 20]}}], 1)
    assert set(np.unique(warped)) <= {0, 1, 2, 3, 255}
    dark = out.max(axis=2) < 10          # the warp's fill 0, far from the image
    assert dark.any() and (warped[dark] == 255).mean() >= 0.98


def test_every_record_key_of_an_annotation_belongs_to_a_target_kind():
    """Each target kind names the record keys it writes (augd/annotations/targets.py): together they are exactly
    the detection keys the records hold, each one in the schema tf.data parses, so a new kind (keypoints) cannot
    add a key the readers do not know, and a key cannot outlive its kind."""
    from augd.annotations.targets import KINDS, SHAPES
    from augd.io.records import DETECTION_FEATURES
    from augd.io.lite import OBJECT_KEYS, SEGMENTATION_KEYS

    written = {key for kind in KINDS for key in kind.keys}
    assert written == set(OBJECT_KEYS) | set(SEGMENTATION_KEYS)
    assert written <= set(DETECTION_FEATURES)
    assert len({kind.name for kind in KINDS}) == len(KINDS)
    # an object's box comes from the first shape it carries: polygons, then its RLE, then the box itself
    poly = Object("a", (0.0, 0.0, 4.0, 4.0), polygons=(((0.0, 0.0), (4.0, 0.0), (4.0, 4.0)),),
                  rle=rle_encode(np.ones((4, 4), np.uint8)))
    assert [s.name for s in SHAPES if s.carries(poly)][0] == "polygons"
    assert [s.name for s in SHAPES if s.carries(Object("b", (0.0, 0.0, 4.0, 4.0)))] == ["box"]


def test_rotation90_is_numpys_quarter_turn_pixel_for_pixel_on_both_kernels():
    from augd.engine import Engine
    img, _, _ = scene()
    for gpu_host in (False, True):
        c = Engine().compile(spec_for([{"random_rotation90": {}}]), as_gpu_host=gpu_host)
        r = c.process(png(img), "q.png", 1)
        out = np.frombuffer(r.payload, np.uint8).reshape(r.height, r.width, 3)
        assert np.array_equal(out, np.rot90(img)), gpu_host


def test_the_detectors_scale_jitter_places_the_image_as_the_od_api_does():
    """random_square_crop_by_scale: the image unresampled at a whole-pixel offset on a black square canvas;
    random_scale_crop_and_pad_to_square: an output_size square, the scaled image from its top-left corner where it is
    smaller, black beyond."""
    img, _, _ = scene()
    c = compiled([{"random_square_crop_by_scale": {"scale_min": 0.6, "scale_max": 1.3, "max_border": 32}}])
    sides = set()
    for v in range(1, 9):
        r = c.process(png(img), "sq.png", v)
        out = np.frombuffer(r.payload, np.uint8).reshape(r.height, r.width, 3)
        (m, oh, ow), = c.program.geometry(image_seed(c.spec.seed, "sq.png", v), H, W)
        x0, y0 = int(m[0, 2]), int(m[1, 2])
        canvas = np.zeros((int(oh), int(ow), 3), np.uint8)
        ys, xs = np.mgrid[0:int(oh), 0:int(ow)]
        inside = (ys + y0 >= 0) & (ys + y0 < H) & (xs + x0 >= 0) & (xs + x0 < W)
        canvas[inside] = img[(ys + y0)[inside], (xs + x0)[inside]]
        assert oh == ow and np.array_equal(out, canvas), v
        sides.add(int(oh))
    assert len(sides) > 1 and all(int(0.6 * W) <= s <= int(1.3 * W) for s in sides)
    c = compiled([{"random_scale_crop_and_pad_to_square": {"output_size": 200, "scale_min": 0.3, "scale_max": 0.9}}])
    for v in range(1, 5):   # scales under 1: the whole image, scaled, at the top left; black right and below
        r = c.process(png(img), "ls.png", v)
        out = np.frombuffer(r.payload, np.uint8).reshape(r.height, r.width, 3)
        (m, _, _), = c.program.geometry(image_seed(c.spec.seed, "ls.png", v), H, W)
        sh, sw = int(round(H / m[1, 1])), int(round(W / m[0, 0]))
        assert out.shape == (200, 200, 3) and abs(sw / sh - W / H) < 0.05 and max(sh, sw) < 200   # aspect kept
        assert out[sh + 1:].max() == 0 and out[:, sw + 1:].max() == 0 and out[:sh - 1, :sw - 1].min() > 0


# --- moves inside boxes (in_boxes): a shape's pieces go where the box's pixels go ---------------------------------

@pytest.mark.parametrize("op, value", [("rotate", 25.0), ("shear_x", 0.35), ("shear_y", -0.3), ("translate_x", 11.0),
                                       ("translate_y", -7.5), ("flip", 0.0)])
def test_a_shape_across_a_moved_box_is_moved_there_and_left_elsewhere_as_its_pixels_are(op, value):
    """A polygon half in a box and half out (an object beside the one picked), and one inside it: moved as
    geometry (augd.planar.move_shapes, two moves in turn) they cover the pixels their rasters cover once the box's
    window is warped like the pixels (geometry.warp_moved), up to the pixels along their edges."""
    from augd.annotations.geometry import warp_moved
    from augd.ops.boxes import _mover
    from augd.planar import move_shapes
    rect = (30, 20, 90, 70)
    moves = [(rect, _mover(op, value, rect)), (rect, _mover("translate_y", 3.0, rect))]
    for poly in ([(10.0, 30.0), (60.0, 25.5), (75.2, 58.0), (20.0, 66.0)],     # across the box's left edge
                 [(40.0, 30.0), (80.0, 35.0), (60.0, 65.0)],                    # inside it
                 [(5.0, 5.0), (110.0, 10.0), (100.0, 90.0), (50.0, 50.0), (8.0, 80.0)]):   # concave, round it
        src = rasterise([poly], 100, 120)
        pixels = warp_moved(src, [], [(0, r, t) for r, t in moves], fill=0)
        pieces = move_shapes([poly], moves)
        drawn = rasterise(pieces, 100, 120)
        edge = sum(np.hypot(q[0] - p[0], q[1] - p[1]) for piece in pieces for p, q in zip(piece, piece[1:] + piece[:1]))
        assert int((drawn != pixels).sum()) <= edge, (op, poly)
        assert np.array_equal(pixels[:, :30], src[:, :30]) and np.array_equal(drawn[:, :30], src[:, :30])   # outside
        assert (drawn != src).any(), "the move does move something"


@pytest.mark.parametrize("op, value", [("translate_x", 10), ("rotate", 20), ("flip", 0), ("shear_y", 0.3)])
def test_overlapping_boxes_moved_in_turn_leave_each_shape_where_its_pixels_are(op, value):
    """Two overlapping boxes, each moved by in_boxes (the plan's order, its real CPU kernel on the pixels), and a
    shape in one of them that the other's move may carry: its mask and box are where its pixels end up, and no
    grey an earlier move left (and a later one carried away) hides it."""
    from augd.engine.plan import Program
    from augd.ops.boxes import InBoxes
    spec = spec_for([{"in_boxes": {"op": op, "value": value, "box_p": 1.0}}])
    program = Program(spec.ops)
    step = next(s for s in program.steps if isinstance(getattr(s, "op", None), InBoxes))
    a, b = (30, 5, 70, 35), (0, 5, 40, 35)
    shape = ((12.0, 10.0), (27.0, 12.0), (24.0, 30.0), (14.0, 26.0))
    ann = Annotation((Object("a", tuple(map(float, a))), Object("b", tuple(map(float, b))),
                      Object("p", (12.0, 10.0, 27.0, 30.0), polygons=(shape,))))
    judged = 0
    for seed in range(6):
        steps, covers, _, _, moves = program.annotation_plan((seed, 1), 40, 80, [a, b])
        floats, _ = program.plan((seed, 1), 40, 80, False, [a, b])
        img = np.zeros((40, 80, 3), np.uint8)
        img[rasterise([shape], 40, 80) > 0] = 255
        shown = step.op.apply_np(img, floats[step.region])[..., 0] > 191   # the fill is grey (128)
        out, _, dropped = transform(ann, steps, covers=covers, moves=moves, size=(40, 80))
        (mask,) = instance_masks(Annotation((ann.objects[2],)), 40, 80, steps, moves)
        got = {o.name: o for o in out.objects}
        assert "p" in got and not dropped, (seed, dict(dropped))
        ys, xs = np.nonzero(shown)
        assert np.abs(np.subtract(got["p"].box, (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1))).max() <= 1.0
        assert (mask.astype(bool) != shown).sum() <= 35, seed   # half its outline: a turn's blended edge
        assert got["p"].visible >= 0.97 or op in ("rotate", "shear_y"), (seed, got["p"].visible)
        judged += 1
    assert judged == 6


def test_a_cover_drawn_before_a_step_moves_with_the_pixels_a_later_move_inside_a_box_carries():
    """A cutout, then a geometric step, then a shift inside a box that carries the cutout's grey away: the shape
    the shift brings out from under it shows, and the grey the shift moved hides what it lands on."""
    from augd.ops.boxes import _mover
    rect = (0, 0, 40, 40)
    square = ((10.0, 10.0), (20.0, 10.0), (20.0, 20.0), (10.0, 20.0))
    ann = Annotation((Object("a", (10.0, 10.0, 20.0, 20.0), polygons=(square,)),))
    still = (np.eye(3), 60.0, 60.0)
    moves = [(1, rect, _mover("translate_x", 15.0, rect))]
    out, _, dropped = transform(ann, [still], covers=[(0, (25.0, 10.0, 35.0, 20.0))], moves=moves, size=(60, 60))
    assert not dropped and out.objects[0].box == (25.0, 10.0, 35.0, 20.0) and out.objects[0].visible == 1.0
    out, _, dropped = transform(ann, [still], covers=[(0, (0.0, 10.0, 12.0, 20.0))], moves=moves, size=(60, 60))
    assert not dropped and out.objects[0].box == (27.0, 10.0, 35.0, 20.0), out.objects[0].box   # grey moved to 15..27
