"""The engine: one finalized graph per job, any image size, fused geometry, stateless seeds."""
import io

import cv2
import numpy as np
import pytest
import tensorflow as tf

from augd.engine import Engine, image_seed
from tests.helpers import build, compiled, make_image, png, run, spec_for


def test_cpu_device_is_reported_without_error():
    info = Engine().device
    assert info.kind in ("CPU", "GPU") and info.tf_version == tf.__version__


def test_seed_is_stable_and_keyed_by_all_three_parts():
    s = image_seed(1234, "train/F603/a.jpg", 1)
    assert s == image_seed(1234, "train/F603/a.jpg", 1)
    assert len({s, image_seed(1235, "train/F603/a.jpg", 1), image_seed(1234, "train/F603/b.jpg", 1),
                image_seed(1234, "train/F603/a.jpg", 2)}) == 4
    assert s == (7956863635328530425, 7502425920801344769)  # pinned: changing it changes every output


def test_finalized_graph_refuses_new_ops():
    c = build(spec_for([{"random_hue": {}}]))
    with pytest.raises(RuntimeError, match="finalized"):
        with c.graph.as_default():
            tf.constant(1.0)
    c.process(png(make_image()), "x.png", 1)  # still runs


def test_fifty_shapes_one_build_one_trace():
    engine = Engine()
    spec = spec_for([{"random_saturation": {}}, {"random_rotation": {"degrees": 10}},
                     {"random_crop": {"size": [24, 24]}}, {"gaussian_blur": {}}], fmt="jpeg")
    c = engine.compile(spec)
    rng = np.random.default_rng(5)
    shapes = set()
    for i in range(50):
        h, w = (int(v) for v in rng.integers(8, 300, 2))
        shapes.add((h, w))
        r = c.process(png(make_image(h, w, seed=i)), f"{i}.png", 1 + i % 3)
        assert (r.height, r.width) == (24, 24)
    assert len(shapes) == 50
    assert engine.builds == 1 and c.builds == 1
    assert engine.traces == c.traces == 1


def test_variant_zero_is_the_decoded_original():
    img = make_image(31, 45)
    assert np.array_equal(run([{"invert": {}}], img, variant=0), img)


def _interior(a, b, margin):
    return a[margin:-margin, margin:-margin].astype(float), b[margin:-margin, margin:-margin].astype(float)


def test_fused_warp_matches_op_by_op_warping():
    """Tolerance: mean |diff| <= 2.5 grey levels over the interior. Op by op resamples three times
    (blurring each time); the fused chain resamples once, so it is also the sharper of the two."""
    img = make_image(120, 160, seed=3)
    chain = [{"random_rotation": {"degrees": [7, 7]}},
             {"random_affine": {"scale": [1.15, 1.15], "translate": [0, 0]}},
             {"resize": {"size": [90, 110]}}]
    fused = run(chain, img)
    step = img
    for op in chain:
        step = run([op], step)
    a, b = _interior(fused, step, 12)
    assert fused.shape == step.shape == (90, 110, 3)
    assert np.abs(a - b).mean() <= 2.5
    sharp = lambda x: np.abs(np.diff(x.astype(float), axis=1)).mean()  # noqa: E731
    assert sharp(fused) >= sharp(step)


def test_rotation_matches_opencv_reference():
    img = make_image(100, 140, seed=4)
    out = run([{"random_rotation": {"degrees": [12, 12]}}], img)
    centre = ((140 - 1) / 2, (100 - 1) / 2)
    m = cv2.getRotationMatrix2D(centre, 12, 1.0)  # positive = counter-clockwise in both
    ref = cv2.warpAffine(img, m, (140, 100), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
    a, b = _interior(out, ref, 20)
    assert np.abs(a - b).mean() <= 1.0


@pytest.mark.parametrize("op,reference", [
    ({"random_brightness": {"max_delta": 0.0}}, lambda x: tf.image.adjust_brightness(x, 0.0)),
    ({"random_contrast": {"lower": 1.3, "upper": 1.3}}, lambda x: tf.image.adjust_contrast(x, 1.3)),
    ({"random_saturation": {"lower": 0.6, "upper": 0.6}}, lambda x: tf.image.adjust_saturation(x, 0.6)),
    ({"random_hue": {"max_delta": 0.0}}, lambda x: tf.image.adjust_hue(x, 0.0)),
    ({"random_gamma": {"gamma": [1.7, 1.7]}}, lambda x: tf.image.adjust_gamma(x, 1.7)),
    ({"random_grayscale": {}}, lambda x: tf.image.grayscale_to_rgb(tf.image.rgb_to_grayscale(x))),
    ({"random_jpeg_quality": {"quality": [40, 40]}}, lambda x: tf.image.adjust_jpeg_quality(x, 40)),
])
def test_colour_ops_mean_what_tf_image_means(op, reference):
    img = make_image(40, 50, seed=6)
    ours = run([op], img).astype(int)
    ref = reference(tf.constant(img)).numpy().astype(int)
    assert np.abs(ours - ref).max() <= 1, np.abs(ours - ref).max()


def test_colour_run_is_one_float_pass_but_keeps_per_op_clipping():
    img = make_image(20, 20)
    bright = {"random_brightness": {"max_delta": 0.0}}
    two = run([{"random_contrast": {"lower": 2.0, "upper": 2.0}}, bright], img).astype(int)
    ref = tf.image.adjust_contrast(tf.constant(img), 2.0)
    assert np.abs(two - ref.numpy().astype(int)).max() <= 1


def test_exif_orientation_is_applied_like_pil():
    PIL = pytest.importorskip("PIL.Image")
    from PIL import ImageOps
    base = make_image(30, 50, seed=8)
    for orientation in range(1, 9):
        exif = PIL.Exif()
        exif[0x0112] = orientation
        buf = io.BytesIO()
        PIL.fromarray(base).save(buf, format="PNG", exif=exif)
        data = buf.getvalue()
        expected = np.asarray(ImageOps.exif_transpose(PIL.open(io.BytesIO(data))).convert("RGB"))
        r = compiled([{"invert": {}}]).process(data, "e.png", 0)
        got = np.frombuffer(r.payload, np.uint8).reshape(r.height, r.width, 3)
        assert np.array_equal(got, expected), orientation


@pytest.mark.parametrize("gpu_host", [False, True], ids=["cpu-host", "gpu-host"])
@pytest.mark.parametrize("size", [32, 37])
def test_strong_downscale_is_antialiased(gpu_host, size):
    """A fine checkerboard shrunk 8x (or 6.9x: a 6x box, then bilinear) comes out flat grey, not moire, on both
    kernels: OpenCV's area resize, and the reshape-and-mean box that replaced ResizeArea on the GPU path."""
    from augd.engine import Engine
    board = ((np.indices((256, 256)).sum(0) % 2) * 255).astype(np.uint8)
    img = np.repeat(board[:, :, None], 3, axis=2)
    c = Engine().compile(spec_for([{"resize": {"size": [size, size]}}]), as_gpu_host=gpu_host)
    r = c.process(png(img), "board.png", 1)
    out = np.frombuffer(r.payload, np.uint8).reshape(r.height, r.width, 3).astype(float)
    assert out.shape == (size, size, 3) and abs(out.mean() - 127.5) < 3 and out.std() < 3


def test_decode_errors_raise_for_the_caller_to_reject():
    c = compiled([{"invert": {}}])
    data = png(make_image())
    with pytest.raises(tf.errors.InvalidArgumentError):
        c.process(data[: len(data) // 2] + b"\0" * 10, "t.png", 1, orientation=1)


CROP_CHAINS = [
    [{"random_crop": {"size": [64, 64], "area": [0.25, 1.0]}}, {"random_rotation": {"degrees": 10}},
     {"random_flip_left_right": {}}],                                    # the heavy chain's geometry
    [{"resize": {"size": [40, 50]}}],                                     # 1/4 and 1/8 DCT scale
    [{"random_crop": {"size": [80, 80], "area": [0.05, 0.2]}}, {"random_rotation": {"degrees": 30,
                                                                                  "fill": "reflect"}}],
    [{"random_rotation": {"degrees": 40}}, {"random_brightness": {}}],   # footprint outside the image
]


@pytest.mark.parametrize("chain", CROP_CHAINS, ids=[str(i) for i in range(len(CROP_CHAINS))])
def test_crop_aware_jpeg_decode_matches_full_decode(chain, monkeypatch):
    """Decoding only the window a leading crop/warp reads, at a reduced DCT scale, gives the image the
    full decode + warp gives: mean |diff| <= 4 levels and mean signed diff <= 2 on a noisy test image (the
    DCT-domain downscale is a slightly different low-pass than the box prefilter, and box blocks start at
    the window instead of the image origin). Same draws: the random window is identical."""
    img = cv2.resize(make_image(120, 160, seed=11), (640, 480), interpolation=cv2.INTER_CUBIC)
    data = cv2.imencode(".jpg", img[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
    outs = {}
    for flag in ("1", "0"):
        c = build(spec_for(chain), crop_decode=flag == "1")
        outs[flag] = [c.process(data, f"c{i}.jpg", 1) for i in range(6)]
    for a, b in zip(outs["1"], outs["0"]):
        assert (a.height, a.width) == (b.height, b.width)
        x = np.frombuffer(a.payload, np.uint8).astype(int)
        y = np.frombuffer(b.payload, np.uint8).astype(int)
        assert np.abs(x - y).mean() <= 4.0 and abs((x - y).mean()) <= 2.0, (np.abs(x - y).mean(), (x - y).mean())


@pytest.mark.parametrize("preset", [None, "1"])
def test_device_setup_logs_once_and_respects_the_users_settings(preset):
    """Autotune off unless the user set it; on CPU hosts Grappler is skipped unless AUGD_GRAPPLER=1."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CUDNN_USE_AUTOTUNE", "AUGD_GRAPPLER")}
    env.update(PYTHONPATH=root, CUDA_VISIBLE_DEVICES="")
    if preset:
        env["TF_CUDNN_USE_AUTOTUNE"] = env["AUGD_GRAPPLER"] = preset
    code = ("import logging, os; logging.basicConfig(level=logging.INFO); import augd; "
            "from augd.engine import Engine, EngineOptions; o = EngineOptions.from_env(); "
            "a = Engine(o).device; b = Engine(o).device; "
            "import tensorflow as tf; skip = tf.config.optimizer.get_experimental_options()"
            ".get('disable_meta_optimizer', False); "
            "print(a.kind, a is b, os.environ['TF_CUDNN_USE_AUTOTUNE'], skip)")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["CPU", "True", preset or "0", "False" if preset else "True"]
    assert res.stderr.count("running on the CPU") == 1


def test_malloc_tuning_is_applied_on_glibc_and_yields_to_the_user():
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("from augd.engine import EngineOptions; from augd.engine.device import tune_malloc; "
            "print(EngineOptions.from_env().tune_malloc and tune_malloc())")
    base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "AUGD_MALLOC"}
    runs = {name: subprocess.run([sys.executable, "-c", code], env={**base, "PYTHONPATH": root, **extra},
                                 capture_output=True, text=True, check=True).stdout.strip()
            for name, extra in (("default", {}), ("user", {"MALLOC_ARENA_MAX": "2"}), ("off", {"AUGD_MALLOC": "0"}))}
    import platform
    assert runs["default"] == ("True" if platform.libc_ver()[0] == "glibc" else "False")
    assert runs["user"] == runs["off"] == "False"


def test_a_header_that_lies_about_the_size_is_replanned_from_the_decoded_image():
    """The plan is made from the scan's header; if the decoded image has another size, the graph re-plans
    (a wrong plan would crop or warp the wrong window)."""
    from dataclasses import replace

    from augd.formats import read_header
    img = make_image(60, 80, seed=2)
    data = png(img)
    chain = [{"random_crop": {"size": [30, 30], "area": [0.3, 0.6]}}, {"random_rotation": {"degrees": 10}}]
    c = compiled(chain)
    good = c.process(data, "h.png", 1)
    liar = replace(read_header(data), width=800, height=20)
    bad = c.process(data, "h.png", 1, header=liar)
    assert bad.payload == good.payload and (bad.height, bad.width) == (30, 30)


def test_one_bad_image_in_a_batch_does_not_fail_the_others():
    c = compiled([{"random_rotation": {"degrees": 10}}])
    good = png(make_image(30, 40, seed=1))
    items = [(good, "a.png", 1, None), (good[: len(good) // 2], "b.png", 1, None), (good, "c.png", 1, None)]
    out = c.process_many(items)
    assert isinstance(out[1], tf.errors.InvalidArgumentError)
    assert out[0].payload == c.process(good, "a.png", 1).payload
    assert out[2].payload == c.process(good, "c.png", 1).payload


def test_without_a_header_the_graph_plans_from_the_decoded_size():
    """process() on bytes whose header is not parsed first (orientation given): the graph re-plans."""
    img = make_image(50, 70, seed=4)
    chain = [{"resize": {"size": [20, 30], "keep_aspect": True}}, {"random_rotation": {"degrees": 5}}]
    c = compiled(chain)
    a = c.process(png(img), "n.png", 1)
    b = c.process(png(img), "n.png", 1, orientation=1)
    assert a.payload == b.payload and (b.height, b.width) == (20, 28)


@pytest.mark.parametrize("kernel", ["opencv", "tf"])
def test_strong_downscale_keeps_the_last_row_and_column(kernel, monkeypatch):
    """The box prefilter extends the image to a multiple of its factor instead of dropping the tail, so
    the output's last row and column are not blended with the fill (they were: 16 on a flat 200)."""
    flat = np.full((1003, 1501, 3), 200, np.uint8)
    c = build(spec_for([{"resize": {"size": [100, 150]}}]), kernels=kernel)
    r = c.process(png(flat), "f.png", 1)
    out = np.frombuffer(r.payload, np.uint8).reshape(r.height, r.width, 3)
    assert out.min() >= 199, (out[-1].min(), out[:, -1].min())


def test_crop_decode_windows_cover_the_warps_taps():
    """Small crops of a large JPEG (decoded at 1/8 scale, then box-shrunk again): no dark edges."""
    flat = np.full((2048, 2048, 3), 200, np.uint8)
    data = cv2.imencode(".jpg", flat, [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
    c = compiled([{"random_crop": {"size": [16, 16], "area": [0.5, 1.0]}}])
    for i in range(6):
        r = c.process(data, f"w{i}.jpg", 1)
        out = np.frombuffer(r.payload, np.uint8)
        assert out.min() >= 195, out.min()


def test_a_jpeg_header_that_lies_is_not_used_for_the_decode_window(monkeypatch):
    """libjpeg's size disagrees with the header the plan used: the graph decodes the whole image and
    re-plans, giving exactly what the full-decode path gives for the true size."""
    from dataclasses import replace

    from augd.formats import read_header
    img = cv2.resize(make_image(120, 160, seed=11), (640, 480), interpolation=cv2.INTER_CUBIC)
    data = cv2.imencode(".jpg", img[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes()
    chain = [{"random_crop": {"size": [64, 64], "area": [0.25, 1.0]}}, {"random_rotation": {"degrees": 10}}]
    c = build(spec_for(chain))
    full = build(spec_for(chain), crop_decode=False).process(data, "j.jpg", 1)
    assert c.process(data, "j.jpg", 1).payload != full.payload  # the honest header gets the window
    for w, h in ((600, 400), (700, 500)):
        liar = replace(read_header(data), width=w, height=h)
        assert c.process(data, "j.jpg", 1, header=liar).payload == full.payload


def test_the_plan_names_its_decode_mode():
    """ints[DECODE_MODE] is 0 (decode the whole image) unless a smaller window or a DCT scale pays; the graph
    then decodes only ints[WINDOW] at 1/DECODE_RATIOS[mode - 1]."""
    from augd.engine.plan import DECODE_MODE, DECODE_RATIOS, SOURCE_SIZE, WINDOW, Program
    whole = Program(spec_for([{"random_rotation": {"degrees": 0}}]).ops)
    _, ints = whole.plan((1, 2), 480, 640, True)
    assert ints[DECODE_MODE] == 0 and list(ints[WINDOW]) == [0, 0, 480, 640] and list(ints[SOURCE_SIZE]) == [480, 640]
    small = Program(spec_for([{"random_crop": {"size": [64, 64], "area": [0.25, 0.3]}}]).ops)
    _, ints = small.plan((1, 2), 480, 640, True)
    ratio = DECODE_RATIOS[ints[DECODE_MODE] - 1]
    _, _, wh, ww = ints[WINDOW]
    assert ints[DECODE_MODE] >= 1 and wh * ww < 0.5 * (480 // ratio) * (640 // ratio)
    _, ints = small.plan((1, 2), 480, 640, False)  # not a JPEG in its stored orientation
    assert ints[DECODE_MODE] == 0


def test_stage_devices_are_read_back_from_the_graph(monkeypatch):
    """CPU host: every stage on the CPU, the steps in OpenCV (or TF with AUGD_KERNELS=tf)."""
    chain = [{"random_crop": {"size": [32, 32], "area": [0.5, 1.0]}}, {"random_brightness": {"max_delta": 0.1}}]
    assert compiled(chain).stage_devices == {"decode": "CPU", "augment": "CPU (OpenCV)", "encode": "CPU"}
    assert build(spec_for(chain), kernels="tf").stage_devices == {"decode": "CPU", "augment": "CPU", "encode": "CPU"}
