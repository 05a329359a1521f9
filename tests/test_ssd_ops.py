"""The SSD ops: `random_expand` (zoom-out onto a larger canvas) and `random_crop`'s box-aware mode
(`min_object_covered`, as tf.image.sample_distorted_bounding_box), checked on the pixels of the real graph.

Synthetic images hold solid rectangles of a colour nothing else takes; the graph's plan and the annotations'
geometry are given the same boxes, so the box the annotation ends at must be where the colour is (within 2 px),
and a box-aware crop must show at least `min_object_covered` of some box, measured by counting its colour.
Without `min_object_covered` (or without boxes) the plans are the ones recorded before the mode existed.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from augd.annotations import Annotation, Object
from augd.annotations.targets import transform
from augd.engine import image_seed
from augd.engine.explain import explain
from augd.engine.plan import Program
from tests.annotated import Img, Shape, voc_job
from tests.helpers import compiled, png, spec_for

REPO = Path(__file__).resolve().parent.parent
SSD = REPO / "pipelines" / "detection-ssd.yaml"
H, W = 80, 96
GREY = 128
#: name -> (box in pixel edges, RGB)
SHAPES = {"red": ((20, 15, 50, 45), (230, 30, 30)), "green": ((62, 40, 86, 70), (30, 220, 30))}
ANN = Annotation(objects=tuple(Object(n, tuple(float(v) for v in b)) for n, (b, _) in SHAPES.items()))
BOXES = tuple(o.box for o in ANN.objects)

# Plans of two chains drawn BEFORE random_crop had a box-aware mode (seed 1, img{k}.png, variant 1 + k % 2,
# 96 x 128): floats of each; the chain ends with a one_of between a crop and a zoom, after a rotation, a crop, a
# flip and a colour op.
CROP = [{"random_crop": {"size": [32, 40], "area": [0.3, 0.6]}}]
CHAIN = [{"random_rotation": {"degrees": 10}}, {"random_crop": {"size": [64, 64], "aspect": [0.5, 2.0]}},
         {"random_flip_left_right": {}}, {"random_brightness": {}},
         {"one_of": {"ops": [{"random_crop": {"size": [48, 48]}}, {"random_zoom": {}}]}}, {"gaussian_noise": {}}]
BEFORE = {
    "crop": [
        [1.4804896347427914, 0.0, 56.82379979449384, 0.0, 1.952213855213645, 4.90573952069035, 0.0, 0.0, 1.0, 32.0,
         40.0],
        [1.9078519343773617, 0.0, 42.32807418942309, 0.0, 1.9723226317138132, 16.485451316436883, 0.0, 0.0, 1.0,
         32.0, 40.0],
        [1.400871085799477, 0.0, 16.444982362232082, 0.0, 2.1097981635288585, 5.946889337967923, 0.0, 0.0, 1.0, 32.0,
         40.0],
        [1.702649428119015, 0.0, 38.22943795778967, 0.0, 2.1150974888467715, 16.293717261932176, 0.0, 0.0, 1.0, 32.0,
         40.0]],
    "chain": [
        [1.2094474946634817, 0.25864003005635333, 19.12715700854441, -0.2117119712245266, 1.4775335308724635,
         7.298945124493967, 0.0, 0.0, 1.0, 64.0, 64.0, -0.036478836445874074, 0.9063408832115845, 0.0,
         2.9502621788350893, 0.0, 0.9063408832115845, 2.9502621788350893, 0.0, 0.0, 1.0, 64.0, 64.0],
        [-1.5553542928146094, 0.10120677428644426, 99.30679860095736, 0.10518127854252111, 1.4965818349955116,
         -2.279363107230746, 0.0, 0.0, 1.0, 64.0, 64.0, 0.11575077178662388, 1.1482642147503215, 0.0,
         -4.670322764635124, 0.0, 1.1482642147503215, -4.670322764635124, 0.0, 0.0, 1.0, 64.0, 64.0],
        [0.7387651444393178, 0.18968474089352882, 16.84855051314232, -0.12329965607791325, 1.136519593498237,
         14.723378085039712, 0.0, 0.0, 1.0, 64.0, 64.0, -0.08975412909099734, 0.9106156954593022, 0.0,
         6.193216902446904, 0.0, 0.8114331038773167, 7.05821742104199, 0.0, 0.0, 1.0, 48.0, 48.0],
        [1.4589985673452281, 0.1179482233180391, 16.928916376536872, -0.12741962133359233, 1.350547796649008,
         10.437036657653275, 0.0, 0.0, 1.0, 64.0, 64.0, -0.011293850484523, 0.8547768945354682, 0.0,
         2.401225692645639, 0.0, 0.6691387392795857, 27.6631787207872, 0.0, 0.0, 1.0, 48.0, 48.0]],
}
#: pipelines/geometric-heavy.yaml's sha256 before random_crop gained its new keys (records carry it)
GEOMETRIC_HEAVY_SHA = "dcfbb7807c9a22b06770a30058d92c316acbf4e62bbbbc71d3153354353bd9be"


def scene() -> np.ndarray:
    img = np.full((H, W, 3), GREY, np.uint8)
    for (x0, y0, x1, y1), colour in SHAPES.values():
        img[y0:y1, x0:x1] = colour
    return img


def strength(img: np.ndarray, colour) -> np.ndarray:
    """How much an image's pixels lead in the colour's channel (colour ops change levels, not which leads)."""
    c = int(np.argmax(colour))
    x = img.astype(np.int32)
    return x[:, :, c] - np.maximum(x[:, :, (c + 1) % 3], x[:, :, (c + 2) % 3])


def extent(region: np.ndarray):
    ys, xs = np.nonzero(region)
    return None if not len(xs) else (float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1))


def through_graph(ops, variants, *, boxes=BOXES, relpath="scene.png"):
    """[(pixels, moved annotation, steps)] per variant: the graph and the annotation given the same boxes."""
    c = compiled(ops)
    img = scene()
    results = c.process_many([(png(img), relpath, v, None, boxes) for v in variants])
    out = []
    for v, r in zip(variants, results):
        assert not isinstance(r, Exception), r
        assert not r.replanned
        steps = c.program.geometry(image_seed(c.spec.seed, relpath, v), H, W, boxes)
        moved, _, _ = transform(ANN, steps)
        out.append((np.frombuffer(r.payload, np.uint8).reshape(r.height, r.width, 3), moved, steps))
    return out


def assert_boxes_on_colours(pixels, moved, where=""):
    """Each kept box within 2 px of its colour's extent (half its full strength); a dropped one left no colour."""
    kept = {o.name: o.box for o in moved.objects}
    for name, (_, colour) in SHAPES.items():
        s = strength(pixels, colour)
        seen = extent(s >= 0.5 * (max(colour) - min(colour)))
        if name not in kept:
            assert seen is None or min(seen[2] - seen[0], seen[3] - seen[1]) <= 2, (where, name, seen)
            continue
        box = kept[name]
        if min(box[2] - box[0], box[3] - box[1]) < 3:
            continue  # a sliver may blend away
        assert seen is not None, (where, name, box)
        assert max(abs(a - b) for a, b in zip(seen, box)) <= 2.0, (where, name, box, seen)


# ---- random_expand ---------------------------------------------------------------------------------------------

def test_random_expand_places_the_image_on_a_filled_canvas():
    ops = [{"random_expand": {"ratio": [1.5, 3.0], "fill": 7}}]
    sizes = set()
    for v, (pixels, moved, steps) in enumerate(through_graph(ops, range(1, 9)), 1):
        h, w = pixels.shape[:2]
        sizes.add((h, w))
        assert 1.5 * H - 1 <= h <= 3.0 * H + 1 and abs(w / h - W / H) < 0.03, (v, h, w)
        # The whole source lands unresampled at a whole-pixel place; everything else is the fill.
        m, oh, ow = steps[0]
        left, top = int(-m[0, 2]), int(-m[1, 2])
        assert (oh, ow) == (h, w) and m[0, 2] == -left and m[1, 2] == -top
        assert np.array_equal(pixels[top:top + H, left:left + W], scene()), v
        canvas = pixels.copy()
        canvas[top:top + H, left:left + W] = 7
        assert (canvas == 7).all(), v
        assert_boxes_on_colours(pixels, moved, f"variant {v}")
        assert len(moved.objects) == 2
    assert len(sizes) > 4


def test_random_expand_in_a_chain_with_a_box_aware_crop_and_flip():
    ops = [{"random_expand": {"ratio": [1.0, 3.0]}},
           {"random_crop": {"size": [72, 72], "area": [0.2, 1.0], "aspect": [0.5, 2.0], "min_object_covered": 0.5}},
           {"random_flip_left_right": {}}, {"random_brightness": {"max_delta": 0.05}}]
    assert len(Program(spec_for(ops).ops).steps) == 2   # expand, crop and flip: one warp; then colour
    checked = 0
    for v, (pixels, moved, _) in enumerate(through_graph(ops, range(1, 13)), 1):
        assert pixels.shape == (72, 72, 3)
        assert moved.objects, f"variant {v}: the crop must keep half of some box"
        assert_boxes_on_colours(pixels, moved, f"variant {v}")
        checked += len(moved.objects)
    assert checked >= 12


def test_random_expand_bounds_the_jobs_memory_check():
    from augd.job.resources import output_bound
    bound = output_bound(spec_for([{"random_expand": {"ratio": [1, 3]}}, {"random_flip_left_right": {}}]).ops)
    assert bound(1000) == 9000
    crop_then_expand = spec_for([{"resize": {"size": [10, 10]}}, {"random_expand": {"ratio": [1, 2]}}]).ops
    assert output_bound(crop_then_expand)(50) == 400          # 10x10 grown 2x per side, over its 50 px source
    classic = spec_for([{"random_crop": {"size": [300, 200]}}, {"random_rotation": {}}]).ops
    assert output_bound(classic)(100) == 60000 and output_bound(classic)(10 ** 6) == 10 ** 6
    alternatives = spec_for([{"one_of": {"ops": [{"random_expand": {"ratio": [1, 3]}},
                                                 {"random_pad_image": {"max_ratio": [2.0, 2.0]}}]}}]).ops
    assert output_bound(alternatives)(1000) == 9000           # one of them: the larger, not both
    both = spec_for([{"sequence": {"ops": [{"random_expand": {"ratio": [1, 3]}}, {"random_pad_image": {}}]}}]).ops
    assert output_bound(both)(1000) == 36000


# ---- box-aware random_crop -------------------------------------------------------------------------------------

def visible_fractions(pixels, steps):
    """Per shape, the fraction of its source area the crop shows, from its colour's pixels in the output (each
    output pixel stands for the window's scale x scale source pixels)."""
    m = steps[0][0]
    per_pixel = abs(m[0, 0] * m[1, 1])
    out = []
    for (x0, y0, x1, y1), colour in SHAPES.values():
        shown = (strength(pixels, colour) >= 0.5 * (max(colour) - min(colour))).sum() * per_pixel
        out.append(shown / ((x1 - x0) * (y1 - y0)))
    return out


@pytest.mark.parametrize("cover", [0.5, 0.9])
def test_every_box_aware_crop_shows_min_object_covered_of_some_box(cover):
    base = {"size": [48, 48], "area": [0.05, 0.3], "aspect": [0.5, 2.0]}
    aware = through_graph([{"random_crop": {**base, "min_object_covered": cover}}], range(1, 41))
    plain = through_graph([{"random_crop": base}], range(1, 41))
    misses = 0
    for v, ((pixels, moved, steps), (p_pixels, _, p_steps)) in enumerate(zip(aware, plain), 1):
        best = max(visible_fractions(pixels, steps))
        assert best >= cover - 0.06, f"variant {v}: the crop shows {best:.2f} of its best box, under {cover}"
        assert_boxes_on_colours(pixels, moved, f"variant {v}")
        misses += max(visible_fractions(p_pixels, p_steps)) < cover - 0.06
    assert misses >= 10, "without min_object_covered most of these small crops miss both boxes: a test that bites"


def test_a_crop_that_cannot_be_satisfied_takes_the_whole_image():
    tiny = {"size": [40, 48], "area": [0.01, 0.02], "aspect": [1.0, 1.0], "min_object_covered": 1.0, "attempts": 3}
    prog = Program(spec_for([{"random_crop": tiny}]).ops)
    whole = 0
    for k in range(20):
        m, _, _ = prog.geometry(image_seed(1, f"{k}.png", 1), H, W, BOXES)[0]
        whole += bool(np.allclose(m[:2, :2], np.diag([W / 48, H / 40])))   # the whole image's scale
    assert whole >= 15   # a 1-2 % window can hardly hold a whole 30 x 30 box in 3 attempts


def test_without_min_object_covered_or_boxes_the_plans_are_the_recorded_ones():
    for name, ops in (("crop", CROP), ("chain", CHAIN)):
        aware = json.loads(json.dumps(ops).replace('"random_crop": {', '"random_crop": {"min_object_covered": 0.7, '))
        for k, want in enumerate(BEFORE[name]):
            seed = image_seed(1, f"img{k}.png", 1 + k % 2)
            assert Program(spec_for(ops).ops).plan(seed, 96, 128)[0].tolist() == want, (name, k)
            # a chain with no box-aware op ignores boxes; a box-aware one without boxes draws as before
            assert Program(spec_for(ops).ops).plan(seed, 96, 128, boxes=BOXES)[0].tolist() == want, (name, k)
            assert Program(spec_for(aware).ops).plan(seed, 96, 128)[0].tolist() == want, (name, k)
    from augd.schema import load_pipeline
    assert load_pipeline(REPO / "pipelines" / "geometric-heavy.yaml").sha256 == GEOMETRIC_HEAVY_SHA
    assert "min_object_covered" not in json.dumps(spec_for(CROP).normalized())


def test_boxes_change_the_crop_only_and_deterministically():
    ops = [{"random_rotation": {"degrees": 20}}, {"random_crop": {
        "size": [40, 40], "area": [0.05, 0.2], "min_object_covered": 0.9}}, {"random_brightness": {}},
        {"gaussian_noise": {}}]
    prog = Program(spec_for(ops).ops)
    changed = 0
    for k in range(30):
        seed = image_seed(3, f"{k}.png", 1)
        with_boxes, without = explain(prog, seed, H, W, BOXES), explain(prog, seed, H, W)
        assert [d.values for d in with_boxes] == [d.values for d in without]   # later ops: the same draws
        assert np.array_equal(with_boxes[0].matrix, without[0].matrix)          # earlier ops too
        changed += not np.array_equal(with_boxes[1].matrix, without[1].matrix)
        again = prog.plan(seed, H, W, boxes=BOXES)
        assert all(np.array_equal(a, b) for a, b in zip(again, prog.plan(seed, H, W, boxes=BOXES)))
    assert changed >= 10


def test_a_replanned_variant_is_flagged_and_its_boxes_refused(tmp_path):
    from augd.formats import read_header
    from augd.annotations.objects import Detection, ImageObjects
    from augd.annotations import AnnotationError
    from augd.annotations.labelmap import LabelMap
    from augd.io import InputImage
    from augd.schema import Annotations
    ops = [{"random_crop": {"size": [40, 40], "min_object_covered": 0.5}}]
    c, data = compiled(ops), png(scene())
    real = read_header(data)
    lied = dataclasses.replace(real, width=W + 8)          # a header that disagrees with the pixels
    assert not c.process(data, "a.png", 1, header=real, boxes=BOXES).replanned
    r = c.process(data, "a.png", 1, header=lied, boxes=BOXES)
    assert r.replanned and (r.height, r.width) == (40, 40)  # same size: only the flag tells
    det = Detection(None, LabelMap.from_names(["green", "red"]), Annotations(), {"a.png": ANN})
    objs = ImageObjects(det, InputImage("a.png", str(tmp_path / "a.png"), len(data), 0, "", real), ANN)
    objs.variant(c.spec, c.program, 1, 40, 40)
    with pytest.raises(AnnotationError, match="re-planned"):
        objs.variant(c.spec, c.program, 1, 40, 40, replanned=True)


# ---- a detection job with the shipped SSD recipe ----------------------------------------------------------------

JOB_COLOURS = {"car": (220, 30, 30), "dog": (30, 200, 30), "cup": (30, 30, 220)}


def ssd_job(root) -> dict:
    images = []
    for i in range(5):
        rng = np.random.default_rng(i)
        shapes = []
        for k, (cls, colour) in enumerate(JOB_COLOURS.items()):
            x0, y0 = 20 + 100 * k + int(rng.integers(0, 30)), int(rng.integers(20, 170))
            shapes.append(Shape(cls, (x0, y0, x0 + int(rng.integers(40, 70)), y0 + int(rng.integers(40, 90))), colour))
        images.append(Img(f"im{i}.png", 280, 320, tuple(shapes)))
    return voc_job(str(root), images)


def read_records(folder) -> list[dict]:
    import tensorflow as tf

    from augd.io.records import DETECTION_FEATURES, FEATURES
    files = sorted(str(p) for p in folder.glob("*.tfrecord*"))
    out = []
    for ex in tf.data.TFRecordDataset(files).map(lambda s: tf.io.parse_single_example(
            s, {**FEATURES, **DETECTION_FEATURES})):
        r = {k: tf.sparse.to_dense(v).numpy() if isinstance(v, tf.SparseTensor) else v.numpy() for k, v in ex.items()}
        r["pixels"] = tf.io.decode_image(ex["image/encoded"], channels=3).numpy()
        out.append(r)
    return out


def test_ssd_recipe_job_boxes_agree_with_pixels_and_shards_do_not_depend_on_workers(tmp_path):
    from augd.job.run import JobOptions, run_job
    from augd.schema import load_pipeline
    ssd_job(tmp_path / "voc")
    ssd = load_pipeline(SSD)
    spec = dataclasses.replace(ssd, variants=3, output=ssd.output.model_copy(update={"format": "png"}))
    one = run_job(str(tmp_path / "voc"), spec, str(tmp_path / "w1"), JobOptions(workers=1))
    three = run_job(str(tmp_path / "voc"), spec, str(tmp_path / "w3"), JobOptions(workers=3))
    assert one.report.inputs.rejected_files == () and one.report.annotations.format == "voc"
    shards = sorted(p.name for p in (tmp_path / "w1" / "voc").glob("*.tfrecord*"))
    assert shards == sorted(p.name for p in (tmp_path / "w3" / "voc").glob("*.tfrecord*"))
    for s in shards:
        assert (tmp_path / "w1" / "voc" / s).read_bytes() == (tmp_path / "w3" / "voc" / s).read_bytes(), s
    assert three.report.records == one.report.records
    records = read_records(tmp_path / "w1" / "voc")
    assert len(records) == 5 * 4
    checked = 0
    for r in records:
        if r["augd/variant"] == 0:
            continue
        pixels, (h, w) = r["pixels"], r["pixels"].shape[:2]
        assert (h, w) == (300, 300)
        names = [t.decode() for t in r["image/object/class/text"]]
        boxes = np.stack([r[f"image/object/bbox/{k}"] for k in ("xmin", "ymin", "xmax", "ymax")], -1) * [w, h, w, h]
        for cls, colour in JOB_COLOURS.items():
            s = strength(pixels, colour)
            seen = extent(s >= 0.5 * np.percentile(s[s > 60], 90)) if (s > 60).sum() > 20 else None
            if cls not in names:
                assert seen is None, (r["image/filename"], r["augd/variant"], cls, seen)
                continue
            box = boxes[names.index(cls)]
            if min(box[2] - box[0], box[3] - box[1]) < 4:
                continue
            assert seen is not None and np.abs(np.array(seen) - box).max() <= 2.0, (
                r["image/filename"], r["augd/variant"], cls, box, seen)
            checked += 1
    assert checked >= 15


# ---- the OD API's crops: windows drawn as TensorFlow draws them, kept at their own size ---------------------------

def _tf_windows(n, h, w, area, aspect, cover, box):
    """n windows (x, y, width, height) from TensorFlow's own stateless_sample_distorted_bounding_box."""
    import tensorflow as tf
    boxes = tf.constant([[[box[1] / h, box[0] / w, box[3] / h, box[2] / w]]], tf.float32)
    out = []
    for i in range(n):
        begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
            [h, w, 3], boxes, seed=[i, 7], min_object_covered=cover, aspect_ratio_range=aspect, area_range=area,
            max_attempts=100, use_image_if_no_bounding_boxes=True)
        out.append((int(begin[1]), int(begin[0]), int(size[1]), int(size[0])))
    return np.array(out, float)


@pytest.mark.parametrize("cover", [0.0, 0.7])
def test_the_tf_sampler_draws_windows_as_sample_distorted_bounding_box_does(cover):
    """sampler: tf against TensorFlow's own op, 1500 windows each, on a 120x160 image with one box: the same
    distribution of width, height and place (means and quartiles within 4 % of the side), as often the whole
    image when nothing fits."""
    from augd.ops.windows import tf_window
    from augd.ops.sampling import generator
    h, w, area, aspect, box = 120, 160, (0.1, 1.0), (0.5, 2.0), (20.0, 30.0, 60.0, 90.0)
    ours = np.array([tf_window(generator((i, 3)).fork(), h, w, area, aspect, cover, np.array([box]), 100)
                     for i in range(1500)], float)
    theirs = _tf_windows(1500, h, w, area, aspect, cover, box)
    for k, side in enumerate((w, h, w, h)):   # x, y, width, height
        for q in (25, 50, 75):
            assert abs(np.percentile(ours[:, k], q) - np.percentile(theirs[:, k], q)) <= 0.04 * side + 1, (k, q)
        assert abs(ours[:, k].mean() - theirs[:, k].mean()) <= 0.04 * side, (k, ours[:, k].mean(),
                                                                             theirs[:, k].mean())
    whole = [float(((a[:, 2] == w) & (a[:, 3] == h)).mean()) for a in (ours, theirs)]
    assert abs(whole[0] - whole[1]) <= 0.03, whole


def test_a_crop_without_size_keeps_its_window_unresampled_and_the_boxes_on_their_colours():
    ops = [{"random_crop": {"area": [0.2, 0.9], "aspect": [0.5, 2.0], "min_object_covered": 0.3, "sampler": "tf"}}]
    img = scene()
    sizes = set()
    for pixels, moved, steps in through_graph(ops, range(1, 9)):
        (m, oh, ow), = steps
        x0, y0 = int(m[0, 2]), int(m[1, 2])
        assert np.array_equal(m[:2, :2], np.eye(2)) and pixels.shape == (oh, ow, 3)
        assert np.array_equal(pixels, img[y0:y0 + int(oh), x0:x0 + int(ow)])   # the window itself, pixel for pixel
        assert_boxes_on_colours(pixels, moved)
        sizes.add(pixels.shape)
    assert len(sizes) > 1   # each window its own size


def test_each_crop_ignores_objects_under_its_own_min_visibility_in_a_job(tmp_path):
    """The OD API's per-crop overlap_thresh: in one_of two crops, each crop's own min_visibility (0.75, 0.15) over
    the job's 0; judged by the pixels (an unresampled window: each colour's pixels are its object's share), the
    crop a record went through told by its size (random_crop_to_aspect_ratio's is fixed). An object under its
    crop's threshold is ignored (weight 0), where the API drops it; low_visibility: drop does as the API."""
    from augd.job.run import JobOptions, run_job
    from augd.schema import parse_pipeline
    areas = {(rel, cls): (b[2] - b[0]) * (b[3] - b[1]) for rel, objs in ssd_job(tmp_path / "voc").items()
             for cls, b in objs}
    for low in ("ignore", "drop"):
        spec = parse_pipeline(
            "name: floors\nseed: 5\nvariants: 16\nkeep_original: false\noutput: {format: png, shards: 1}\n"
            f"annotations: {{min_visibility: 0, min_size: 0, low_visibility: {low}}}\nops:\n  - one_of:\n"
            "      ops:\n"
            "        - random_crop: {area: [0.1, 0.5], aspect: [0.5, 2.0], sampler: tf, min_visibility: 0.75}\n"
            "        - random_crop_to_aspect_ratio: {aspect_ratio: 0.4, min_visibility: 0.15}\n", "floors.yaml")
        res = run_job(str(tmp_path / "voc"), spec, str(tmp_path / low), JobOptions(workers=1, executor="threads"))
        seen = {0.75: [0, 0], 0.15: [0, 0]}   # floor -> [kept, under] among objects partly in the window
        wrong = []
        for r in read_records(tmp_path / low / "voc"):
            pixels, names = r["pixels"], [t.decode() for t in r["image/object/class/text"]]
            why = [t.decode() for t in r["augd/object/ignored"]] or [""] * len(names)
            floor = 0.15 if pixels.shape[:2] == (280, 112) else 0.75    # round(280 x 0.4) wide, the image's height
            for cls, colour in JOB_COLOURS.items():
                share = (strength(pixels, colour) > 80).sum() / areas[r["image/filename"].decode(), cls]
                if share == 0.0 or share >= 1.0:
                    continue
                fate = "dropped" if cls not in names else why[names.index(cls)] or "kept"
                seen[floor][0 if fate == "kept" else 1] += 1
                if fate != ("kept" if share >= floor else "cut" if low == "ignore" else "dropped"):
                    wrong.append((r["image/filename"], r["augd/variant"], cls, floor, round(share, 3), fate))
        assert not wrong, (low, wrong)
        assert all(k and d for k, d in seen.values()), seen    # each crop kept some remnants and not others
        under = (res.report.annotations.ignored if low == "ignore" else res.report.annotations.dropped).get("cut", 0)
        assert under == sum(d for _, d in seen.values())
