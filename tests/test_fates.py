"""Issue 55: no visible object becomes background. After the whole chain every object is kept, ignored (it shows,
under the rule: weight 0) or dropped (nothing a viewer can see), by one rule (augd.annotations.occlusion), judged by
the pixels of synthetic scenes (tests/visible.py): every op that cuts or hides, the OD API's four config families
as they ship, the three low_visibility choices, masks and keypoints, and the records' readers (the OD API's keys,
TF Model Garden's decoder, augd.data, augd inspect, the preview)."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from augd.annotations import Annotation, Object
from augd.annotations.occlusion import Rule
from augd.annotations.targets import transform
from augd.job import JobOptions, run_job
from augd.schema import parse_pipeline
from bench.fates import _odapi, _spec
from tests.visible import CHAINS, ODAPI_SHAPES, judge, read, scenes

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def scene_job(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fates") / "voc"
    scenes(root, 6, seed=5)
    return root


def _run(job: Path, spec, out: Path):
    run_job(str(job), spec, str(out), JobOptions(workers=1, executor="threads"))
    folder = out / job.name
    return read(folder), json.loads((folder / "manifest.json").read_text())["annotations"]


ROWS = [(n, "chain", ops) for n, ops in CHAINS.items()] + [(f"OD API {n}", "odapi", o) for n, o in ODAPI_SHAPES.items()]


@pytest.mark.parametrize("name,kind,ops", ROWS, ids=[r[0] for r in ROWS])
def test_every_visible_object_is_in_a_box_of_its_class_and_every_box_on_its_object(scene_job, tmp_path, name, kind,
                                                                                    ops):
    variants = 1 if ops == "tile" else 4
    spec = (_spec if kind == "chain" else _odapi)(name.replace(" ", "_"), ops, variants, None)
    records, ann = _run(scene_job, spec, tmp_path / "out")
    judged = judge(records, min_area=150)
    objects = ann["objects"]
    print(f"\n{name}: {judged.records} records, kept {objects['kept']}, ignored {objects['ignored']} "
          f"{objects['ignored_by_reason']}, dropped {objects['dropped']} {objects['dropped_by_reason']}; visible "
          f"with no box {judged.unboxed}, boxes off their pixels {judged.off}")
    assert judged.unboxed == 0 and judged.off == 0, judged.examples[:6]
    assert (judged.kept, judged.ignored) == (objects["kept"], objects["ignored"])
    assert objects["out"] == objects["kept"] + objects["ignored"]
    assert sum(objects["ignored_by_reason"].values()) == objects["ignored"]
    assert sum(objects["dropped_by_reason"].values()) == objects["dropped"]
    assert objects["low_visibility"] == "ignore"
    for r in records:   # an ignored object: weight 0, is_crowd 1 and its reason; a record without one: no such key
        why = r.get("augd/object/ignored", [])
        if any(why):
            assert [w == 0.0 for w in r["image/object/weight"]] == [bool(y) for y in why]
            assert r["image/object/is_crowd"] == [int(bool(y)) for y in why]
            assert set(why) - {""} <= {"cut", "covered", "keypoints"}
        else:
            assert "augd/object/ignored" not in r


def test_low_visibility_drop_is_the_od_apis_and_keep_writes_every_remnant(scene_job, tmp_path):
    """The same chain under the three choices: ignore leaves no visible object unboxed; drop (the OD API's own
    behaviour) leaves the objects under min_visibility as background, their pixels in the image; keep writes them as
    ordinary boxes (weight 1, nothing ignored). The boxes kept are the same under all three."""
    ops = CHAINS["crop, rotate, flip"] + CHAINS["random_erasing"]
    got = {}
    for low in ("ignore", "drop", "keep"):
        records, ann = _run(scene_job, _spec("low", ops, 4, low), tmp_path / low)
        got[low] = (records, ann["objects"], judge(records, min_area=150))
    (_, ign, j_ign), (_, drop, j_drop), (_, keep, j_keep) = got["ignore"], got["drop"], got["keep"]
    assert ign["ignored"] > 0 and j_ign.unboxed == 0 and j_ign.off == 0
    assert drop["ignored"] == 0 and j_drop.unboxed > 0 and drop["dropped"] == ign["dropped"] + ign["ignored"]
    # keep writes every remnant min_size thick, also one too thin under JPEG for ignore to call it seen (Rule.seen)
    assert keep["ignored"] == 0 and keep["kept"] >= ign["kept"] + ign["ignored"] and j_keep.unboxed == 0
    assert keep["kept"] + keep["dropped"] == ign["kept"] + ign["ignored"] + ign["dropped"]
    assert ign["kept"] == drop["kept"] and drop["low_visibility"] == "drop"
    assert all("augd/object/ignored" not in r for r in got["keep"][0] + got["drop"][0])


def test_a_thin_strip_beyond_a_cover_does_not_stretch_the_box_across_it():
    """An object 100 px wide covered but for its left 30 px and a strip of 2 px at its far side: with JPEG output
    (whose 4:2:0 chroma blurs a 2-px strip into what borders it: the rule's strip, 3 px) its box is the 30 px that
    show; with PNG output (strip 0) the 2-px strip still counts at min_size 2, and the box spans both."""
    obj = Object("a", (10.0, 10.0, 110.0, 50.0))
    cover = ((0, (40.0, 0.0, 108.0, 60.0)),)
    jpeg, _, _ = transform(Annotation(objects=(obj,)), [], covers=cover, size=(60, 120), rule=Rule(min_size=2, strip=3))
    png, _, _ = transform(Annotation(objects=(obj,)), [], covers=cover, size=(60, 120), rule=Rule(min_size=2))
    assert jpeg.objects[0].box == (10.0, 10.0, 40.0, 50.0) and png.objects[0].box == (10.0, 10.0, 110.0, 50.0)
    thin = Object("pole", (10.0, 10.0, 13.0, 50.0))   # a pole 3 px wide cut in two still shows, both parts
    out, _, _ = transform(Annotation(objects=(thin,)), [], covers=((0, (0.0, 20.0, 20.0, 30.0)),), size=(60, 120),
                          rule=Rule(min_size=2, strip=3))
    assert out.objects[0].box == (10.0, 10.0, 13.0, 50.0)


def test_in_boxes_turns_hide_the_corners_they_grey_and_two_moves_grey_what_the_pair_leaves():
    """in_boxes rotate greys the corners of its box: an object of another box reaching into them loses those pixels
    (its box shrinks to what shows); a shift there and back greys only the far strip (the content came back)."""
    from augd.annotations.occlusion import hidden_by
    from augd.engine.plan import Program
    from tests.helpers import spec_for
    a, b = (40.0, 40.0, 100.0, 100.0), (95.0, 20.0, 140.0, 45.0)   # b reaches into a's top-right corner
    turned = Program(spec_for([{"in_boxes": {"op": "rotate", "value": 30, "box_p": 1.0}}]).ops)
    covers = turned.covers((1, 2), 160, 160, boxes=(a,))
    assert covers and all(k == 0 and len(shape) == 3 for k, shape in covers)   # 4 triangles, a's corners
    grey = hidden_by(covers, [], [], (160, 160))
    assert grey[40, 99] and grey[41:44, 96:99].any() and not grey[70, 70]   # a's corner, not its middle
    out, _, _ = transform(Annotation(objects=(Object("b", b),)), [], covers=covers, size=(160, 160))
    shown = 1.0 - grey[20:45, 95:140].mean()   # b's part in a's corner no longer shows
    assert out.objects[0].truncated and out.objects[0].visible == pytest.approx(shown, abs=0.01) and shown < 1.0
    there_and_back = Program(spec_for([{"in_boxes": {"op": "translate_x", "value": 10}},
                                       {"in_boxes": {"op": "translate_x", "value": -10}}]).ops)
    for seed in range(8):   # both signs drawn per op: wherever the content ends, the rest of the box is grey
        covers = there_and_back.covers((seed, 7), 160, 160, boxes=(a,))
        grey = hidden_by(covers, [], [], (160, 160))
        assert grey is not None and grey[40:100, 40:100].sum() in (10 * 60, 20 * 60)


def test_ignored_objects_keep_their_masks_and_keypoints_as_they_show(tmp_path):
    """One rule for all three target kinds: an ignored object's mask is the pixels of it that show (its box their
    extent) and its keypoints are those that stayed on the canvas, all under its weight 0."""
    from tests.annotated import Img, Shape, coco_job
    from tests.posed import coco_pose_job, people
    imgs = [Img(f"p{i}.png", 120, 160, (Shape("blob", ((20 + i, 20), (70, 30 + i), (60, 90), (15, 70)), (220, 40, 40)),
                                        Shape("blob", ((100, 30), (150, 40 + i), (140, 100), (95, 90)), (220, 40, 40))))
            for i in range(4)]
    coco_job(str(tmp_path / "coco"), imgs)
    spec = parse_pipeline(json.dumps({"name": "m", "seed": 3, "variants": 6, "keep_original": False,
                                      "output": {"format": "png"}, "annotations": {"min_visibility": 0.5},
                                      "ops": [{"random_crop": {"area": [0.2, 0.5], "aspect": [0.7, 1.4]}}]}), "m.yaml")
    records, ann = _run(tmp_path / "coco", spec, tmp_path / "out")
    assert ann["objects"]["ignored"] > 0
    import cv2
    for r in records:
        h, w = r["pixels"].shape[:2]
        for k, why in enumerate(r.get("augd/object/ignored", [])):
            mask = cv2.imdecode(np.frombuffer(r["image/object/mask"][k], np.uint8), cv2.IMREAD_GRAYSCALE) > 0
            ys, xs = np.nonzero(mask)
            box = [r[f"image/object/bbox/{c}"][k] for c in ("xmin", "ymin", "xmax", "ymax")]
            assert len(xs) and np.allclose([xs.min() / w, ys.min() / h, (xs.max() + 1) / w, (ys.max() + 1) / h],
                                           box, atol=1.5 / min(h, w)), (why, box)
            red = (r["pixels"][:, :, 0] > 150) & (r["pixels"][:, :, 1] < 100)
            assert red[mask].mean() > 0.9   # the mask is the object's pixels that show
    pose = people(6, h=96, w=112, seed=9)
    coco_pose_job(str(tmp_path / "pose"), pose)
    spec = parse_pipeline(json.dumps({"name": "k", "seed": 2, "variants": 8, "keep_original": False,
                                      "output": {"format": "png"}, "annotations": {"min_keypoints": 4},
                                      "ops": [{"random_crop": {"area": [0.3, 0.6]}}]}), "k.yaml")
    records, ann = _run(tmp_path / "pose", spec, tmp_path / "out2")
    ignored = [(r, k) for r in records for k, why in enumerate(r.get("augd/object/ignored", [])) if why]
    assert ignored and ann["objects"]["ignored_by_reason"].get("keypoints", 0) > 0
    for r, k in ignored:
        vis = r["image/object/keypoint/visibility"][5 * k:5 * k + 5]
        assert sum(v > 0 for v in vis) < 4 and r["image/object/weight"][k] == 0.0


def _model_garden_decoder():
    """TF Model Garden's TfExampleDecoder (official/vision/dataloaders/tf_example_decoder.py, pip's
    tf-models-official), loaded from its own files: `official.vision`'s __init__ imports Model Garden's whole
    training stack (gin, orbit, ...), which the decoder does not use."""
    spec = importlib.util.find_spec("official")
    if spec is None or importlib.util.find_spec("tf_keras") is None:
        pytest.skip("tf-models-official and tf-keras are not installed (scripts/test.sh installs them)")
    base = Path(spec.submodule_search_locations[0]) / "vision" / "dataloaders"
    for name in ("official.vision", "official.vision.dataloaders"):
        pkg = sys.modules.setdefault(name, types.ModuleType(name))
        pkg.__path__ = [str(base.parent if name.endswith("vision") else base)]
    for name in ("decoder", "tf_example_decoder"):
        full = f"official.vision.dataloaders.{name}"
        if full not in sys.modules:
            mod_spec = importlib.util.spec_from_file_location(full, base / f"{name}.py")
            module = importlib.util.module_from_spec(mod_spec)
            sys.modules[full] = module
            mod_spec.loader.exec_module(module)
    return sys.modules["official.vision.dataloaders.tf_example_decoder"].TfExampleDecoder


def _ignoring_job(tmp_path) -> Path:
    scenes(tmp_path / "voc", 4, seed=8)
    spec = _spec("readers", CHAINS["crop, rotate, flip"], 4, None)
    run_job(str(tmp_path / "voc"), spec, str(tmp_path / "out"), JobOptions(workers=1, executor="threads"))
    return tmp_path / "out" / "voc"


def test_the_od_apis_keys_model_gardens_decoder_and_augd_data_read_what_is_ignored(tmp_path):
    import tensorflow as tf

    import augd.data
    out = _ignoring_job(tmp_path)
    raw = [rec for p in sorted(out.glob("*.tfrecord")) for rec in tf.data.TFRecordDataset(str(p)).as_numpy_iterator()]
    with_ignored = [x for x in raw if b"augd/object/ignored" in x]
    assert with_ignored, "the chain ignores some objects"
    # the OD API's TfExampleDecoder reads image/object/weight as a VarLenFeature into groundtruth_weights
    keys = {"image/object/weight": tf.io.VarLenFeature(tf.float32),
            "image/object/is_crowd": tf.io.VarLenFeature(tf.int64),
            "image/object/class/label": tf.io.VarLenFeature(tf.int64)}
    decoder = _model_garden_decoder()(regenerate_source_id=False)
    for x in with_ignored:
        f = tf.io.parse_single_example(x, keys)
        weights = tf.sparse.to_dense(f["image/object/weight"]).numpy()
        assert (weights == 0).any() and set(weights.tolist()) <= {0.0, 1.0}
        decoded = decoder.decode(tf.constant(x))
        crowd = decoded["groundtruth_is_crowd"].numpy()
        assert crowd.tolist() == (weights == 0).tolist()   # Model Garden: ignored in COCO evaluation
        assert len(decoded["groundtruth_boxes"]) == len(weights)
    # augd.data: ignored boxes kept by default, weights on demand, or left out
    n_all = n_ignored = 0
    for _, y in augd.data.load(str(out), image_size=64, batch_size=None, boxes="ragged", weights=True):
        n_all += len(y["labels"])
        n_ignored += int((y["weights"].numpy() == 0).sum())
    n_skip = sum(len(y["labels"]) for _, y in augd.data.load(str(out), image_size=64, batch_size=None, boxes="ragged",
                                                            ignored="skip"))
    manifest = json.loads((out / "manifest.json").read_text())["annotations"]["objects"]
    assert (n_all, n_ignored, n_skip) == (manifest["out"], manifest["ignored"], manifest["kept"])
    padded = next(iter(augd.data.load(str(out), image_size=64, batch_size=4, boxes="padded", max_boxes=12,
                                      weights=True)))[1]
    assert padded["weights"].shape == (4, 12) and set(padded["weights"].numpy().ravel().tolist()) <= {0.0, 1.0}
    with pytest.raises(ValueError, match="weights=True without boxes"):
        augd.data.load(str(out), image_size=64, weights=True)
    with pytest.raises(ValueError, match="ignored='drop'.*'keep', 'skip'"):
        augd.data.load(str(out), image_size=64, boxes="ragged", ignored="drop")


def test_inspect_counts_and_draws_ignored_boxes_apart(tmp_path):
    out = _ignoring_job(tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())["annotations"]["objects"]
    res = subprocess.run([sys.executable, "-m", "augd", "inspect", str(out), "--dump", "16", str(tmp_path / "look")],
                         capture_output=True, text=True, timeout=300, cwd=REPO)
    assert res.returncode == 0, res.stderr
    line = next(ln for ln in res.stdout.splitlines() if "ignored objects" in ln)
    assert f": {manifest['ignored']}; " in line and f"cut={manifest['ignored_by_reason']['cut']}" in line
    assert len(list((tmp_path / "look").glob("*.png"))) == 16
    from augd.drawing import box_outline
    solid, dashed = np.zeros((40, 40, 3), np.uint8), np.zeros((40, 40, 3), np.uint8)
    box_outline(solid, (5, 5, 34, 34), (255, 0, 255))
    box_outline(dashed, (5, 5, 34, 34), (255, 0, 255), dashed=True)
    assert 0.3 < (dashed > 0).sum() / (solid > 0).sum() < 0.8 and not (dashed & ~solid).any()
    assert not dashed[5, 5:35].all() and dashed[5, 5:35].any()   # an edge in pieces


def test_import_config_says_where_augd_ignores_what_the_od_api_drops(tmp_path):
    from augd.schema.odapi import LOW_VISIBILITY_NOTE, import_config
    blocks = "".join(f"  data_augmentation_options {{\n    {a}\n  }}\n" for a in ODAPI_SHAPES["ssd"])
    imported = import_config(f"train_config: {{\n  batch_size: 8\n{blocks}}}\n", "ssd.config")
    assert imported.notes == [LOW_VISIBILITY_NOTE] and imported.doc["annotations"]["low_visibility"] == "ignore"
    flip = import_config("train_config: {\n  data_augmentation_options { random_horizontal_flip {} }\n}\n", "f.config")
    assert not flip.notes and "annotations" not in flip.doc   # nothing cut: nothing to say
    (tmp_path / "ssd.config").write_text(f"train_config: {{\n  batch_size: 8\n{blocks}}}\n")
    res = subprocess.run([sys.executable, "-m", "augd", "import-config", str(tmp_path / "ssd.config")],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert res.returncode == 0 and "low_visibility: drop does exactly what the API does" in res.stderr
    assert "# annotations.low_visibility: ignore" in res.stdout


def test_records_read_back_keep_their_ignored_objects_ignored(tmp_path):
    """augd's own records as a job's input (TFRecord shards): an ignored object comes back ignored, for the reason
    it was, however much of itself the next chain leaves; one another writer weighed 0 is ignored as `input`."""
    out = _ignoring_job(tmp_path)
    before = json.loads((out / "manifest.json").read_text())["annotations"]["objects"]
    spec = parse_pipeline(json.dumps({"name": "again", "seed": 1, "variants": 1, "keep_original": False,
                                      "output": {"format": "jpeg"}, "ops": [{"random_flip_left_right": {}}]}), "a.yaml")
    records, ann = _run(out, spec, tmp_path / "again")
    assert ann["objects"]["ignored"] == before["ignored"] and ann["objects"]["ignored_by_reason"] == {
        "cut": before["ignored"]}
    assert sum(r["image/object/weight"].count(0.0) for r in records if "image/object/weight" in r) == before["ignored"]

