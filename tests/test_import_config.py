"""`augd import-config` on configs of the shapes the Object Detection API ships (SSD, Faster R-CNN, CenterNet,
EfficientDet): each augmentation option exact, approximate (said how) or missing (left to training); the pipeline
written validates and runs; --strip leaves the config as it was but for the blocks the pipeline does."""
from __future__ import annotations

import collections
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from augd.parsing.pbtxt import PbtxtError, first, parse, scalars
from augd.schema import parse_pipeline
from augd.schema.odapi import OPTIONS, import_config, strip, table

REPO = Path(__file__).resolve().parent.parent

MODEL_SSD = """model {
  ssd {
    num_classes: 90
    image_resizer { fixed_shape_resizer { height: 320 width: 320 } }
    feature_extractor { type: "ssd_mobilenet_v2_fpn_keras" }
  }
}
"""
MODEL_FRCNN = """model {
  faster_rcnn {
    num_classes: 90
    image_resizer {
      keep_aspect_ratio_resizer { min_dimension: 640 max_dimension: 640 pad_to_max_dimension: true }
    }
  }
}
"""


def config(model: str, *augmentations: str) -> str:
    blocks = "".join(f"  data_augmentation_options {{\n    {a}\n  }}\n" for a in augmentations)
    return (f"# shipped-style config\n{model}train_config: {{\n  batch_size: 128\n  num_steps: 50000\n"
            f"  optimizer {{ momentum_optimizer: {{ momentum_optimizer_value: 0.9 }} }}\n{blocks}"
            f"  fine_tune_checkpoint: \"PATH_TO_BE_CONFIGURED\"\n}}\n"
            f"train_input_reader: {{\n  label_map_path: \"label_map.txt\"\n  tf_record_input_reader {{\n"
            f"    input_path: \"train.record-?????-of-00100\"\n  }}\n}}\n")


SHIPPED = {   # the augmentations of the API's configs of each family, as they ship them
    "faster_rcnn": (MODEL_FRCNN, ["random_horizontal_flip {\n    }"]),
    "ssd": (MODEL_SSD, ["random_horizontal_flip {\n    }", "ssd_random_crop {\n    }"]),
    "ssd_colour": (MODEL_SSD, ["random_horizontal_flip {\n    }", "random_adjust_hue { max_delta: 0.05 }",
                               "random_adjust_contrast { min_delta: 0.7 max_delta: 1.1 }",
                               "random_adjust_saturation { min_delta: 0.8 max_delta: 1.25 }",
                               "random_adjust_brightness { max_delta: 0.2 }",
                               "random_distort_color { color_ordering: 1 }",
                               "random_rgb_to_gray { probability: 0.05 }",
                               "random_jpeg_quality { random_coef: 0.5 min_jpeg_quality: 50 max_jpeg_quality: 90 }",
                               "random_black_patches { max_black_patches: 4 }"]),
    "centernet": (MODEL_FRCNN, ["random_horizontal_flip {\n      keypoint_flip_permutation: 0\n"
                                "      keypoint_flip_permutation: 2\n      keypoint_flip_permutation: 1\n    }",
                                "random_crop_image { min_aspect_ratio: 0.5 max_aspect_ratio: 1.7 random_coef: 0.25 }",
                                "random_adjust_hue {\n    }", "random_square_crop_by_scale {\n      scale_min: 0.6\n"
                                "      scale_max: 1.3\n    }"]),
    "efficientdet": (MODEL_SSD, ["random_horizontal_flip {\n    }", "random_scale_crop_and_pad_to_square {\n"
                                 "      output_size: 512\n      scale_min: 0.1\n      scale_max: 2.0\n    }"]),
}


def test_text_format_is_read_with_where_each_field_lies():
    text = ('a: 1\nb { c: "x y" c: \'z\\n\' d: [1, 2.5, -3e2] e: TRUE_ENUM f: true }  # trailing\n'
            'g < h: 0.5f >\n"ab"\n')
    with pytest.raises(PbtxtError, match="<config>:4: expected a field name"):
        parse(text)
    fields = parse(text[:text.index('"ab"')])
    b = first(fields, "b")
    assert [f.name for f in fields] == ["a", "b", "g"] and text[b.start:b.end].startswith("b {")
    assert text[b.start:b.end].endswith("}") and scalars(b) == {"c": ["x y", "z\n"], "d": [1, 2.5, -300.0],
                                                                 "e": "TRUE_ENUM", "f": True}
    assert scalars(first(fields, "g")) == {"h": 0.5} and first(fields, "g").line == 3
    with pytest.raises(PbtxtError, match="x.config:1: a message is not closed"):
        parse("a {\n b: 1\n", "x.config")


@pytest.mark.parametrize("family", sorted(SHIPPED))
def test_each_shipped_family_imports_with_each_option_judged(family):
    model, augs = SHIPPED[family]
    text = config(model, *augs)
    got = import_config(text, f"{family}.config")
    verdicts = [(name, c.verdict) for name, _, c in got.steps]
    expected = {
        "faster_rcnn": [("random_horizontal_flip", "exact")],
        "ssd": [("random_horizontal_flip", "exact"), ("ssd_random_crop", "exact")],
        "ssd_colour": [("random_horizontal_flip", "exact"), ("random_adjust_hue", "exact"),
                       ("random_adjust_contrast", "exact"), ("random_adjust_saturation", "exact"),
                       ("random_adjust_brightness", "exact"), ("random_distort_color", "exact"),
                       ("random_rgb_to_gray", "exact"), ("random_jpeg_quality", "exact"),
                       ("random_black_patches", "approximate")],   # augd also shrinks the boxes it hides
        # the crop keeps boxes showing 0.3 of themselves (its own min_visibility), the square crop any (the job's 0)
        "centernet": [("random_horizontal_flip", "exact"), ("random_crop_image", "exact"),
                      ("random_adjust_hue", "exact"), ("random_square_crop_by_scale", "approximate")],
        "efficientdet": [("random_horizontal_flip", "exact"),
                         ("random_scale_crop_and_pad_to_square", "approximate")],   # resampled otherwise
    }[family]
    assert verdicts == expected
    spec = parse_pipeline(yaml.safe_dump(got.doc), "imported.yaml")   # a valid pipeline, every op known
    names = [next(iter(op)) for op in got.doc["ops"]]
    if family == "ssd":
        crops = got.doc["ops"][1]["one_of"]["ops"]   # the API's 7 default samplers, TensorFlow's window sampler
        assert [c["random_crop"]["min_object_covered"] for c in crops] == [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]
        assert all("size" not in c["random_crop"] and c["random_crop"]["sampler"] == "tf"
                   and c["random_crop"]["p"] == 0.85 for c in crops)   # each window at its own size
        assert [c["random_crop"]["min_visibility"] for c in crops] == [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]
        # the API drops what a crop leaves under its overlap_thresh; augd ignores it (weight 0) and says so
        assert got.doc["annotations"] == {"min_visibility": 0.0, "min_size": 0.0, "low_visibility": "ignore"}
        assert got.notes and "low_visibility: drop does exactly what the API does" in got.notes[0]
    assert got.doc["augment_splits"] == ["train"]   # written out: the API augments its train input only
    if family == "ssd_colour":
        assert names == ["random_flip_left_right", "random_hue", "random_contrast", "random_saturation",
                         "random_brightness", "random_brightness", "random_contrast", "random_saturation",
                         "random_hue", "random_grayscale", "random_jpeg_quality", "random_black_patches"]
        assert got.doc["ops"][2] == {"random_contrast": {"lower": 0.7, "upper": 1.1}}
        assert got.doc["ops"][10] == {"random_jpeg_quality": {"quality": [50, 89], "p": 0.5}}   # max is exclusive
    if family == "centernet":
        assert spec.annotations.value("keypoint_flip") == (0, 2, 1)
        crop = got.doc["ops"][1]["random_crop"]
        assert crop == {"area": [0.1, 1.0], "aspect": [0.5, 1.7], "min_object_covered": 1.0, "sampler": "tf",
                        "min_visibility": 0.3, "p": 0.75}
        assert spec.annotations.value("min_visibility") == 0.0 and spec.annotations.value("min_size") == 0.0
    if family == "efficientdet":
        assert got.doc["ops"][1] == {"random_scale_crop_and_pad_to_square": {"output_size": 512, "scale_min": 0.1,
                                                                              "scale_max": 2.0}}
        assert got.doc["annotations"] == {"min_visibility": 0.0, "min_size": 0.0}
    assert len(got.problems()) == sum(v != "exact" for _, v in expected)


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "augd", "import-config", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def test_the_command_writes_an_import_strips_what_it_took_and_the_job_augments_train_alone(tmp_path):
    """The pipeline runs on the box-only VOC sample though its flip carries a keypoint permutation (FaceSSD's,
    CenterNet's: the API ignores it without keypoints), augments train only (written out) and writes the validation
    images as they are, though it keeps no original (issue 57)."""
    model, augs = SHIPPED["ssd_colour"]
    flip = "random_horizontal_flip {\n      keypoint_flip_permutation: 1\n      keypoint_flip_permutation: 0\n    }"
    augs = [flip, *augs[1:]]
    text = config(model, *augs, "normalize_image { original_minval: 0 original_maxval: 255 }")
    cfg = tmp_path / "ssd.config"
    cfg.write_text(text)
    p = _cli(cfg, "-o", tmp_path / "ssd.yaml", "--strip", tmp_path / "ssd-stripped.config", "--variants", "4",
             cwd=tmp_path)
    assert p.returncode == 1 and "random_black_patches: approximate" in p.stderr
    assert not (tmp_path / "ssd.yaml").exists()
    p = _cli(cfg, "-o", tmp_path / "ssd.yaml", "--strip", tmp_path / "ssd-stripped.config", "--variants", "4",
             "--approximate", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "ssd.config:" in p.stderr and "random_distort_color: exact" in p.stderr
    assert "normalize_image: training" in p.stderr
    spec = parse_pipeline((tmp_path / "ssd.yaml").read_text(), "ssd.yaml")
    assert spec.name == "odapi-ssd" and spec.variants == 4 and len(spec.ops) == 12 and not spec.keep_original
    assert spec.augment_splits == ("train",) and spec.annotations.value("keypoint_flip") == (1, 0)
    stripped = (tmp_path / "ssd-stripped.config").read_text()
    train = first(parse(stripped), "train_config")
    left = [f.value[0].name for f in train.value if f.name == "data_augmentation_options"]
    assert left == ["normalize_image"]   # not an augmentation: it stays for training
    kept_lines = [ln for ln in text.splitlines() if not any(a.split()[0] in ln for a in augs)
                  and "data_augmentation_options" not in ln and "keypoint_flip_permutation" not in ln
                  and ln.strip() not in ("}", "")]
    assert all(ln in stripped for ln in kept_lines)   # everything else as it was
    # and the imported pipeline runs a detection job
    voc = REPO / "augd" / "samples" / "detection"
    r = subprocess.run([sys.executable, "-m", "augd", "run", str(voc), "-p", str(tmp_path / "ssd.yaml"), "-o",
                        str(tmp_path / "out"), "--quiet", "--workers", "1", "--executor", "threads"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "annotations.keypoint_flip is set and the job's voc annotations have no keypoints: it moves nothing" \
        in r.stderr
    assert "validation written as it is (originals only, no augmented variants); augmented: train" in r.stderr
    from augd.io import parse_example, read_records
    out = tmp_path / "out" / "detection"
    by_split = {s: [parse_example(x) for f in sorted(out.glob(f"detection-{s}-*.tfrecord"))
                    for x in read_records(str(f))] for s in ("train", "validation")}
    assert {x["augd/variant"] for x in by_split["train"]} == {1, 2, 3, 4}
    assert len(by_split["validation"]) == 2 and {x["augd/variant"] for x in by_split["validation"]} == {0}
    assert all(x["image/encoded"] == (voc / x["image/filename"]).read_bytes() for x in by_split["validation"])
    import json
    splits = json.loads((out / "manifest.json").read_text())["splits"]
    assert (splits["validation"]["augmented"], splits["validation"]["variants"], splits["validation"]["records"]) == \
        (False, [0], 2) and splits["train"]["augmented"] is True


def test_the_command_refuses_what_a_user_would_regret_naming_the_file(tmp_path):
    """--table with a config tables that config's options; --strip or -o onto the config itself is refused (the
    config untouched, nothing written); a malformed block is refused naming the file and line."""
    model, augs = SHIPPED["efficientdet"]
    cfg = tmp_path / "effdet.config"
    cfg.write_text(config(model, *augs))
    before = cfg.read_bytes()
    p = _cli(cfg, "--table", cwd=tmp_path)
    assert p.returncode == 0
    assert p.stdout.splitlines()[-1] == "# 2 options: 1 exact, 1 approximate, 0 missing, 0 training"
    assert [ln.split()[2:4] for ln in p.stdout.splitlines()[:-1]] == [
        ["random_horizontal_flip", "exact"], ["random_scale_crop_and_pad_to_square", "approximate"]], p.stdout
    assert p.stdout.startswith("line ") and sorted(x.name for x in tmp_path.iterdir()) == ["effdet.config"]
    for args, said in (((cfg, "--approximate", "-o", tmp_path / "p.yaml", "--strip", tmp_path / "." / "effdet.config"),
                        "--strip"), ((cfg, "--approximate", "-o", cfg), "-o"),
                       ((cfg, "--approximate", "-o", tmp_path / "x", "--strip", tmp_path / "x"), "the same file"),
                       ((cfg, "--table", "--strip", tmp_path / "x"), "--table writes nothing")):
        p = _cli(*args, cwd=tmp_path)
        assert p.returncode == 2 and p.stderr.startswith(f"augd import-config: {cfg}: ") and said in p.stderr, p.stderr
        assert cfg.read_bytes() == before and sorted(x.name for x in tmp_path.iterdir()) == ["effdet.config"]
    two = tmp_path / "two.config"
    two.write_text("train_config {\n  data_augmentation_options {\n    random_horizontal_flip {}\n"
                   "    random_vertical_flip {}\n  }\n}\n")
    p = _cli(two, cwd=tmp_path)
    assert p.returncode == 2 and f"{two}:2: data_augmentation_options must hold one preprocessing step" in p.stderr
    assert "got 2: random_horizontal_flip, random_vertical_flip" in p.stderr


def test_what_is_not_exact_fails_unless_approximate_and_what_is_missing_stays_in_the_config(tmp_path):
    model, augs = SHIPPED["centernet"]
    cfg = tmp_path / "centernet.config"
    cfg.write_text(config(model, *augs, "random_crop_to_aspect_ratio { clip_boxes: false }",
                          "random_jitter_boxes {\n      ratio: 0.05\n    }"))
    p = _cli(cfg, "-o", tmp_path / "c.yaml", cwd=tmp_path)
    assert p.returncode == 1 and not (tmp_path / "c.yaml").exists()
    assert "random_crop_to_aspect_ratio: approximate (clip_boxes false" in p.stderr and "--approximate" in p.stderr
    p = _cli(cfg, "-o", tmp_path / "c.yaml", "--approximate", "--strip", tmp_path / "c.config", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    train = first(parse((tmp_path / "c.config").read_text()), "train_config")
    assert [f.value[0].name for f in train.value if f.name == "data_augmentation_options"] == \
        ["random_jitter_boxes"]   # training still does what augd cannot
    assert "random_jitter_boxes: missing (moves each box's corners" in p.stderr
    assert (tmp_path / "c.yaml").read_text().startswith("# augd pipeline imported from centernet.config\n")
    bad = tmp_path / "bad.config"
    bad.write_text("train_config {\n  data_augmentation_options {\n")
    p = _cli(bad, cwd=tmp_path)
    assert p.returncode == 2 and "bad.config:2: a message is not closed" in p.stderr


def test_the_table_lists_every_option_of_preprocessor_proto():
    rows = table()
    assert len(rows) == len(OPTIONS) == 39 and len({r[0] for r in rows}) == 39
    assert all(note for _, verdict, note in rows if verdict in ("approximate", "missing", "training"))
    # an exact option's note says how, never what differs from the API (what does is approximate, said so)
    assert [(name, note) for name, verdict, note in rows if verdict == "exact" and "API" in note] == []
    verdict = {name: v for name, v, _ in rows}
    assert {verdict[n] for n in ("random_image_scale", "random_square_crop_by_scale",
                                 "random_scale_crop_and_pad_to_square", "random_black_patches")} == {"approximate"}
    counts = collections.Counter(verdict for _, verdict, _ in rows)
    told = " ".join((REPO / "docs" / "pipelines.md").read_text().split())
    assert (f"Today: {counts['exact']} of the 39 options exact, {counts['approximate']} approximate, "
            f"{counts['missing']} missing, {counts['training']} training") in told, counts   # the docs keep up


def test_strip_cuts_blocks_and_their_lines_only():
    text = "a {\n  x: 1\n  y { z: 2 }\n  y { z: 3 }  # keep me\n  w: 4\n}\n"
    ys = [f for f in first(parse(text), "a").value if f.name == "y"]
    assert strip(text, ys) == "a {\n  x: 1\n  # keep me\n  w: 4\n}\n"


def test_the_apis_pads_import_exactly_and_run_a_job(tmp_path):
    """random_pad_image, random_absolute_pad_image, random_crop_pad_image and ssd_random_crop_pad (its 6 default
    crops, each then padded by 1-2x the image before it, in the crop's mean colour); a pad after a resizing option
    is approximate (augd sizes it by the source)."""
    text = config(MODEL_SSD, "random_horizontal_flip {\n    }", "ssd_random_crop_pad {\n    }",
                  "random_absolute_pad_image { max_height_padding: 40 max_width_padding: 30 }",
                  "random_pad_image { pad_color: 0 pad_color: 0 pad_color: 0 }")
    got = import_config(text, "pads.config")
    assert [c.verdict for _, _, c in got.steps] == ["exact"] * 4
    seqs = got.doc["ops"][1]["one_of"]["ops"]
    assert len(seqs) == 6 and all(s["sequence"]["ops"][1] == {"random_pad_image": {
        "min_ratio": [1.0, 1.0], "max_ratio": [2.0, 2.0], "fill": "mean"}} for s in seqs)
    assert [s["sequence"]["ops"][0]["random_crop"]["min_visibility"] for s in seqs] == [0.1, 0.3, 0.5, 0.7, 0.9, 1.0]
    assert got.doc["ops"][2] == {"random_absolute_pad_image": {"max_height_padding": 40, "max_width_padding": 30,
                                                               "fill": "mean"}}
    assert got.doc["ops"][3] == {"random_pad_image": {"fill": 0}}
    (tmp_path / "pads.yaml").write_text(yaml.safe_dump(got.doc))
    voc = REPO / "augd" / "samples" / "detection"
    r = subprocess.run([sys.executable, "-m", "augd", "run", str(voc), "-p", str(tmp_path / "pads.yaml"), "-o",
                        str(tmp_path / "out"), "--quiet", "--workers", "1", "--executor", "threads"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    # records of many sizes, read downstream: the loader (resized, ragged boxes) and augd inspect with --dump
    import augd.data
    out = tmp_path / "out" / "detection"
    sizes, boxes = set(), 0
    for x, y in augd.data.load(str(out), "train+validation", image_size=None, batch_size=None, boxes="ragged"):
        sizes.add(tuple(x.shape[:2]))
        boxes += int(y["boxes"].shape[0])
    assert len(sizes) > 5 and boxes > 0
    (x, y), *_ = list(augd.data.load(str(out), "train", image_size=(64, 64), batch_size=4, boxes="ragged"))
    assert tuple(x.shape) == (4, 64, 64, 3)
    shown = subprocess.run([sys.executable, "-m", "augd", "inspect", str(out), "--dump", "3", str(tmp_path / "d")],
                           capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0 and len(list((tmp_path / "d").iterdir())) == 3, shown.stderr[-2000:]
    flips = import_config(config(MODEL_SSD, "random_horizontal_flip { probability: 0.8 }",
                                 "random_vertical_flip { probability: 0.25 }"), "flips.config")
    assert [c.verdict for _, _, c in flips.steps] == ["exact", "exact"]
    perm = "".join(f" keypoint_rot_permutation: {k}\n" for k in (3, 0, 1, 2))
    turns = import_config(config(MODEL_SSD, f"random_rotation90 {{\n{perm} probability: 0.1\n }}"), "turns.config")
    assert turns.steps[0][2].verdict == "exact" and turns.doc["annotations"] == {"keypoint_rotation": [3, 0, 1, 2]}
    assert turns.doc["ops"] == [{"random_rotation90": {"p": 0.1}}]
    assert flips.doc["ops"] == [{"random_flip_left_right": {"probability": 0.8}},
                                {"random_flip_up_down": {"probability": 0.25}}]
    late = import_config(config(MODEL_SSD, "random_image_scale {\n    }", "random_crop_pad_image {\n    }",
                                "random_pad_image { pad_color: 10 pad_color: 20 pad_color: 30 }"), "late.config")
    (_, _, scale), (_, _, crop_pad), (_, _, coloured) = late.steps
    assert scale.verdict == "approximate" and crop_pad.verdict == "approximate" and "resized" in crop_pad.note
    assert coloured.verdict == "approximate" and "pad_color [10, 20, 30]" in coloured.note


def test_autoaugment_image_becomes_the_same_policy():
    from augd.schema.odapi import OPTIONS
    c = OPTIONS["autoaugment_image"]({"policy_name": "v2"}, [])
    assert c.verdict == "approximate" and c.ops == [{"autoaugment": {"policy": "v2"}}] and "centre" in c.note
    assert OPTIONS["autoaugment_image"]({}, []).ops == [{"autoaugment": {"policy": "v0"}}]   # the proto's default
    assert OPTIONS["autoaugment_image"]({"policy_name": "test"}, []).verdict == "missing"
