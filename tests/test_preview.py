"""`augd preview` (augd.preview): the contact sheet's tiles are the records a job writes, its text is the plan
the graph received, bad images become tiles saying why, and the command writes the sheet.

Jobs are real (augd.job.run_job) and so are the sheets; the CLI runs in a fresh process through
`python -m augd.preview` (augd/preview/__main__.py) and `python -m augd preview`."""
import json
import os
import subprocess
import sys

import cv2
import numpy as np
import pytest
import tensorflow as tf

from augd.engine import Engine
from augd.io import parse_example
from augd.job import JobOptions, run_job
from augd.preview import contact_sheet, describe_variant, letterbox, preview_rows
from augd.schema import parse_pipeline
from tests.jobfiles import augd_env, image_bytes, psnr, records

# Images at the job folder's root, so that the file name is the relative path the job keys seeds by.
SOURCES = {"a.jpg": ("jpeg", 41, 67), "b.png": ("png", 52, 38), "c.jpg": ("exif6", 45, 60)}
CHAIN = [{"random_saturation": {"lower": 0.7, "upper": 1.3}}, {"random_brightness": {"max_delta": 0.1}},
         {"random_rotation": {"degrees": 12, "fill": "reflect"}},
         {"one_of": [{"random_flip_left_right": {}}, {"random_flip_up_down": {}}]},
         {"random_crop": {"size": [30, 34], "area": [0.4, 0.9]}}]


def pipeline(ops, *, fmt="png", variants=3, keep_original=True, seed=5) -> "object":
    return parse_pipeline(json.dumps({"name": "pv", "seed": seed, "variants": variants, "keep_original": keep_original,
                                      "output": {"format": fmt, "shards": 1}, "ops": ops}))


def write_sources(folder, sources=SOURCES) -> list[str]:
    os.makedirs(folder, exist_ok=True)
    paths = []
    for i, (name, (kind, h, w)) in enumerate(sorted(sources.items())):
        path = os.path.join(str(folder), name)
        with open(path, "wb") as fh:
            fh.write(image_bytes(kind, h, w, seed=i))
        paths.append(path)
    return paths


def job_pixels(out_dir) -> dict:
    """{(relpath, variant): pixels} of a job's records, decoded as a reader decodes them."""
    out = {}
    for rec in records(out_dir):
        ex = parse_example(rec)
        h, w = ex["image/height"], ex["image/width"]
        if ex["image/format"] == "raw":
            px = np.frombuffer(ex["image/raw"], np.uint8).reshape(h, w, 3)
        else:
            px = tf.io.decode_image(ex["image/encoded"], channels=3).numpy()
        out[(ex["image/filename"], ex["augd/variant"])] = px
    return out


def found_at(sheet: np.ndarray, block: np.ndarray) -> list[tuple[int, int]]:
    """Every (y, x) where `block` appears in `sheet` pixel for pixel (near matches found by OpenCV, then
    compared exactly)."""
    diff = cv2.matchTemplate(sheet, block, cv2.TM_SQDIFF)
    h, w = block.shape[:2]
    return [(int(y), int(x)) for y, x in np.argwhere(diff < 1e4)
            if np.array_equal(sheet[y:y + h, x:x + w], block)]


@pytest.fixture(scope="module")
def job_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("pv") / "job"
    return str(root), write_sources(root)


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
def test_tiles_are_the_records_the_job_writes(job_root, tmp_path, fmt):
    root, paths = job_root
    spec = pipeline(CHAIN, fmt=fmt)
    written = job_pixels(run_job(root, spec, str(tmp_path), JobOptions(workers=2)).out_dir)
    rows = preview_rows(spec, paths)
    assert [r.relpath for r in rows] == sorted(SOURCES)
    for row in rows:
        assert row.error is None
        assert [t.variant for t in row.tiles] == [None, 1, 2, 3]
        # The input tile is the decoded upright image: what variant 0 holds (the exif6 one turned upright;
        # a job re-encodes that one, so in JPEG it is only close).
        if fmt == "jpeg" and row.relpath == "c.jpg":
            assert psnr(row.tiles[0].image, written[(row.relpath, 0)]) > 30
        else:
            assert np.array_equal(row.tiles[0].image, written[(row.relpath, 0)])
        for t in row.tiles[1:]:
            rec = written[(row.relpath, t.variant)]
            assert t.image.shape == rec.shape == (30, 34, 3)
            assert np.array_equal(t.image, rec), (row.relpath, t.variant)
        assert not np.array_equal(row.tiles[1].image, row.tiles[2].image)
    # The sheet holds exactly those tiles, letterboxed: one row per image, input then v1..v3 left to right.
    tile = 64
    sheet = contact_sheet(spec, paths, tile=tile)
    spots = [[found_at(sheet, letterbox(t.image, tile)) for t in r.tiles] for r in rows]
    assert all(len(s) == 1 for row in spots for s in row)
    ys = [[s[0][0] for s in row] for row in spots]
    xs = [[s[0][1] for s in row] for row in spots]
    assert all(len(set(y)) == 1 for y in ys) and ys[0][0] < ys[1][0] < ys[2][0]
    assert xs[0] == xs[1] == xs[2] and xs[0] == sorted(xs[0])


def test_seeds_are_keyed_by_the_relative_path(tmp_path):
    """In a class folder the job keys seeds by 'cls/a.jpg': relpaths= (the CLI's --root) gives its records; the
    default (the file name) gives those of the same image at the job's root."""
    root = tmp_path / "job"
    (path,) = write_sources(root / "cls", {"a.jpg": ("jpeg", 41, 67)})
    spec = pipeline([{"random_rotation": {"degrees": 20}}, {"random_hue": {"max_delta": 0.2}}], variants=2)
    written = job_pixels(run_job(str(root), spec, str(tmp_path / "out"), JobOptions(workers=1)).out_dir)
    compiled = Engine().compile(spec)
    try:
        (keyed,) = preview_rows(spec, [path], relpaths=["cls/a.jpg"], compiled=compiled)
        (by_name,) = preview_rows(spec, [path], compiled=compiled)
    finally:
        compiled.close()
    assert by_name.relpath == "a.jpg"
    for v in (1, 2):
        assert np.array_equal(keyed.tiles[v].image, written[("cls/a.jpg", v)])
        assert not np.array_equal(by_name.tiles[v].image, written[("cls/a.jpg", v)])
        assert keyed.tiles[v].lines != by_name.tiles[v].lines


def texts(ops, *, variants=8, h=40, w=60, relpath="x.png"):
    spec = pipeline(ops, variants=variants, fmt="raw")
    compiled = Engine().compile(spec)
    try:
        return [describe_variant(compiled, relpath, v, h, w) for v in range(1, variants + 1)]
    finally:
        compiled.close()


def test_text_states_the_drawn_parameters():
    assert texts([{"random_rotation": {"degrees": [5, 5]}}], variants=2) == [["rot +5.0°"]] * 2
    assert texts([{"random_rotation": {"degrees": [-12.5, -12.5]}}], variants=1) == [["rot -12.5°"]]
    assert texts([{"random_contrast": {"lower": 1.5, "upper": 1.5}}, {"random_gamma": {"gamma": 2}}],
                 variants=1) == [["contrast ×1.50", "gamma 2.00"]]
    # A 0.25-area square window of a 40 x 60 image (about 24.5 px a side) resized to 30 x 20, then a resize.
    (crop,) = texts([{"random_crop": {"size": [20, 30], "area": 0.25, "aspect": 1}},
                     {"resize": {"size": [10, 16]}}], variants=1)
    assert crop[0].startswith("crop 0.25 area @ (") and crop[1:] == ["  24×24 → 30×20", "resize 30×20 → 16×10"]
    assert texts([{"random_affine": {"scale": 1.2, "rotate": [-10, -10], "shear": [5, 5], "translate": [0, 0.01]}}],
                 variants=1)[0][0] == "affine ×1.20 rot -10.0°"
    (affine,) = texts([{"random_affine": {"scale": 0.5, "shear": [-20, -20], "translate": [0, 0.0001]}}], variants=1)
    assert affine == ["affine ×0.50 rot +0.0°", "  shear -20.0° shift +0,+0"]
    # Colour values come from the plan: every draw of a range lies in it, and variants differ.
    hues = [float(t[0].split()[1]) for t in texts([{"random_hue": {"max_delta": 0.1}}])]
    assert all(-0.1 <= v <= 0.1 for v in hues) and len(set(hues)) == 8


def test_colour_text_is_what_the_graph_applied(tmp_path):
    path = tmp_path / "x.png"
    path.write_bytes(image_bytes("png", 40, 60, seed=4))
    (row,) = preview_rows(pipeline([{"random_brightness": {"max_delta": 0.2}}], fmt="raw", variants=4), [str(path)])
    src = row.tiles[0].image.astype(int)
    mid = (src > 60) & (src < 190)  # no clipping either way
    for t in row.tiles[1:]:
        (line,) = t.lines
        delta = float(line.split()[1])
        shift = t.image.astype(int)[mid] - src[mid]
        assert np.abs(shift - delta * 255).max() <= 1.0, (line, np.unique(shift))


def test_text_agrees_with_the_pixels_for_flips_one_of_and_p(tmp_path):
    img = image_bytes("png", 40, 60, seed=3)
    path = tmp_path / "x.png"
    path.write_bytes(img)
    ops = [{"one_of": [{"invert": {}}, {"random_grayscale": {}}]},
           {"random_flip_left_right": {}}, {"random_flip_up_down": {"p": 0}}, {"random_rotation": {"p": 0.5}}]
    (row,) = preview_rows(pipeline(ops, fmt="raw", variants=8, seed=1), [str(path)])
    src = row.tiles[0].image
    seen, checked = set(), set()
    for t in row.tiles[1:]:
        lines, px = t.lines, t.image
        assert not any("UD" in s for s in lines)  # p=0: never planned, never said
        branch, flip = lines[0], lines[2]
        assert branch in ("one_of → invert", "one_of → random_grayscale")
        assert lines[1] == ("  invert" if branch.endswith("invert") else "  grayscale")
        assert flip in ("flip LR", "flip LR: no (coin)")
        expect = 255 - src if branch.endswith("invert") else None
        seen.update([branch, flip, lines[-1].split()[0]])
        if lines[-1] == "rot: skipped (p=0.5)":
            checked.add(branch)
            if expect is not None:
                assert np.array_equal(px, expect[:, ::-1] if flip == "flip LR" else expect)
            else:
                assert np.array_equal(px[..., 0], px[..., 1])  # grey
                unflipped = px if flip == "flip LR: no (coin)" else px[:, ::-1]
                luma = src.astype(float) @ [0.2989, 0.5870, 0.1140]
                assert np.abs(unflipped[..., 0] - luma).mean() < 1  # the luma, not mirrored
        else:
            assert lines[-1].startswith("rot ") and lines[-1].endswith("°")
    # Eight variants under this seed show both branches, both flip outcomes, rotated and not.
    assert seen >= {"one_of → invert", "one_of → random_grayscale", "flip LR", "flip LR: no (coin)", "rot",
                    "rot:"}
    assert len(checked) == 2  # both branches' pixels were checked against their text


def test_composites_and_every_kind_are_described_from_the_plan():
    ops = [{"sequence": {"p": 0.6, "ops": [{"random_affine": {"shear": 10, "translate": [0.1, 0.1], "rotate": 15}},
                                           {"gaussian_blur": {}}]}},
           {"some_of": {"n": 2, "ops": [{"random_brightness": {}}, {"random_jpeg_quality": {}},
                                        {"center_crop": {"size": 20}}]}},
           {"random_grayscale": {"p": 0.5}}]
    out = texts(ops, variants=16)
    for lines in out:
        first = lines[0]
        if first == "sequence":
            assert lines[1].startswith("  affine ×") and " rot " in lines[1] and lines[1].endswith("°")
            assert lines[2].startswith("    shear ") and lines[3] == "  gaussian_blur"
        else:
            assert first == "sequence: skipped (p=0.6)"
        some = next(s for s in lines if s.startswith("some_of"))
        chosen = some.split("→ ")[1].split(", ")
        assert len(chosen) == 2
        under = lines[lines.index(some) + 1:lines.index(some) + 3]
        assert [s.split()[0] for s in under] == [{"random_brightness": "brightness", "random_jpeg_quality":
                                                  "random_jpeg_quality", "center_crop": "center"}[c] for c in chosen]
        assert lines[-1] in ("grayscale", "grayscale: skipped (p=0.5)")
    assert {t[0] for t in out} == {"sequence", "sequence: skipped (p=0.6)"}


def test_bad_images_become_tiles_saying_why(tmp_path):
    good = tmp_path / "good.png"
    good.write_bytes(image_bytes("png", 40, 60, seed=1))
    notes = tmp_path / "notes.jpg"
    notes.write_text("not a picture\n")
    trunc = tmp_path / "trunc.jpg"
    trunc.write_bytes(image_bytes("truncated", 40, 60, seed=2))
    paths = [str(good), str(notes), str(trunc), str(tmp_path / "missing.png")]
    spec = pipeline([{"random_hue": {}}], variants=2)
    rows = preview_rows(spec, paths)
    assert rows[0].error is None and len(rows[0].tiles) == 3
    assert "not an image" in rows[1].error
    assert "truncated or corrupt JPEG" in rows[2].error
    assert "cannot read" in rows[3].error and "No such file" in rows[3].error
    sheet = contact_sheet(spec, paths, tile=64)
    assert sheet.dtype == np.uint8 and sheet.shape[2] == 3
    assert len(found_at(sheet, letterbox(rows[0].tiles[1].image, 64))) == 1


def test_variants_default_cap_and_bounds(tmp_path):
    path = tmp_path / "x.png"
    path.write_bytes(image_bytes("png", 20, 30, seed=1))
    many = pipeline([{"random_hue": {}}], variants=12, fmt="raw")
    assert len(preview_rows(many, [str(path)])[0].tiles) == 1 + 8
    assert len(preview_rows(many, [str(path)], variants=0)[0].tiles) == 1
    with pytest.raises(ValueError, match="writes 12 augmented variant"):
        preview_rows(many, [str(path)], variants=13)


def cli(*args, module=("-m", "augd.preview"), timeout=180):
    return subprocess.run([sys.executable, *module, *map(str, args)], env=augd_env(), capture_output=True,
                          text=True, timeout=timeout)


def _has_preview_verb() -> bool:
    from augd.cli import build_parser
    try:
        build_parser().parse_known_args(["preview", "p.yaml", "x.png", "-o", "s.png"])
    except SystemExit:
        return False
    return True


@pytest.mark.parametrize("module", [("-m", "augd.preview"), ("-m", "augd", "preview")], ids=["module", "augd"])
def test_cli_writes_the_sheet(job_root, tmp_path, module):
    if module[-1] == "preview" and not _has_preview_verb():
        pytest.skip("augd/cli.py has no preview verb yet")
    root, paths = job_root
    spec_file = tmp_path / "p.yaml"
    spec_file.write_text(json.dumps({"name": "pv", "seed": 5, "variants": 4, "output": {"format": "png"},
                                     "ops": CHAIN}))
    out = tmp_path / "sheet.png"
    bad = tmp_path / "bad.jpg"
    bad.write_text("hello")
    r = cli(spec_file, *paths[:2], bad, "-o", out, "--variants", 2, "--tile", 64, module=module)
    assert r.returncode == 0, r.stderr
    assert f"{bad}: not an image" in r.stderr
    png = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
    pad = 6  # max(6, tile // 32)
    assert png.shape[1] == pad + 3 * (64 + pad)  # columns: input + 2 variants
    # The very sheet the API draws: 3 rows (images), the same pixels.
    api = contact_sheet(str(spec_file), [*paths[:2], str(bad)], variants=2, tile=64)
    assert np.array_equal(png[:, :, ::-1], api)

    jpg = tmp_path / "sheet.jpg"
    assert cli(spec_file, paths[0], "-o", jpg, "--tile", 64, module=module).returncode == 0
    assert cv2.imread(str(jpg)).shape[1] == pad + 5 * (64 + pad)  # default: the pipeline's 4 variants

    # Usage errors name what is wrong; nothing is written.
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: pv\nvariants: 2\nops:\n  - random_hew: {}\n")
    r = cli(broken, paths[0], "-o", tmp_path / "no.png", module=module)
    assert r.returncode == 2 and str(broken) in r.stderr and "random_hue" in r.stderr
    r = cli(spec_file, paths[0], "-o", tmp_path / "no.png", "--variants", 5, module=module)
    assert r.returncode == 2 and "writes 4 augmented variant" in r.stderr
    r = cli(spec_file, bad, "-o", tmp_path / "no.gif", module=module)
    assert r.returncode == 2 and ".gif" in r.stderr
    assert not (tmp_path / "no.png").exists() and not (tmp_path / "no.gif").exists()


def test_cli_root_keys_seeds_by_the_path_in_the_job(tmp_path):
    root = tmp_path / "job"
    (path,) = write_sources(root / "cls", {"a.jpg": ("jpeg", 41, 67)})
    spec = pipeline([{"random_rotation": {"degrees": 20}}], variants=1)
    spec_file = tmp_path / "p.yaml"
    spec_file.write_text(json.dumps(spec.normalized()))
    out = tmp_path / "s.png"
    r = cli(spec_file, path, "-o", out, "--root", root, "--tile", 48)
    assert r.returncode == 0, r.stderr
    assert "seeds keyed by the path under" in r.stdout
    api = contact_sheet(spec, [path], relpaths=["cls/a.jpg"], tile=48)
    assert np.array_equal(cv2.imread(str(out))[:, :, ::-1], api)
    r = cli(spec_file, path, "-o", out, "--root", tmp_path / "elsewhere")
    assert r.returncode == 2 and "not inside --root" in r.stderr


def test_importing_the_module_loads_neither_tensorflow_nor_opencv():
    code = "import sys, augd.preview; print('tensorflow' in sys.modules, 'cv2' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], env=augd_env(), capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["False", "False"], r.stderr


def test_captions_wrap_whole_and_counts_read_as_words(tmp_path):
    """Issue 57: a line wider than its tile (an AutoAugment sub-policy) wraps onto the next lines, never cut to
    `..`, and the sheet makes room for it; a tiled image of one tile says `1 tile`, not `1 tiles`."""
    from augd.preview.render import _Pen, caption_lines, render_sheet
    pen, long = _Pen(128), "autoaugment v0 #4: ShearY_BBox 1/2, TranslateY_Only_BBoxes 0.6/6"
    drawn = caption_lines(pen, [long, "rot +6.5°"], 128)
    assert " ".join(w for w, line in drawn if line == long) == long and len(drawn) >= 3, drawn
    assert all(pen.width(w) <= 128 for w, _ in drawn) and drawn[-1] == ("rot +6.5°", "rot +6.5°")
    path = tmp_path / "x.png"
    path.write_bytes(image_bytes("png", 40, 60, seed=3))
    rows = preview_rows(pipeline([{"random_hue": {}}], variants=1), [str(path)])
    short = render_sheet(pipeline([{"random_hue": {}}], variants=1), rows, tile=128)
    rows[0].tiles[1].lines.append(long)
    taller = render_sheet(pipeline([{"random_hue": {}}], variants=1), rows, tile=128)
    assert taller.shape[0] >= short.shape[0] + 2 * pen.line   # the long line and its wrap, each a line
    tiled = parse_pipeline("name: t\nvariants: 1\noutput: {format: png}\ntile: {grid: [1, 1]}\n"
                           "ops:\n  - random_hue: {}\n", "t.yaml")
    (row, *_) = preview_rows(tiled, [str(path)])
    assert row.tiles[0].lines[1].startswith("1 tile of 60×40"), row.tiles[0].lines


def test_the_preview_of_a_split_the_job_writes_as_it_is_shows_the_original_alone(tmp_path):
    """augd preview --root on a validation image: the job writes it as it is (augment_splits: [train], the
    default), and so the preview shows it alone, saying why; a train image of the same job gets its variants."""
    from augd.preview import preview_rows
    from bench.fates import _spec
    from tests.visible import CHAINS, scenes
    scenes(tmp_path / "voc", 4, seed=3, split=True)
    spec = _spec("split", CHAINS["crop, rotate, flip"], 2, None)
    train, val = (f"JPEGImages/s00{k}.jpg" for k in (0, 1))   # scenes() alternates train and val
    rows = preview_rows(spec, [tmp_path / "voc" / r for r in (train, val)], relpaths=[train, val],
                        root=tmp_path / "voc")
    assert len(rows[0].tiles) == 3 and len(rows[1].tiles) == 1
    assert "validation: written as it is, no variants (augment_splits: train)" in rows[1].tiles[0].lines
