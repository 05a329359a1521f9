"""The GPU augment stage, proven on any host (issue 42). The Linux TensorFlow wheel is the CUDA build, so its kernel
registry lists the GPU kernels here too: every shipped pipeline and a chain holding every registered op, traced as
a GPU host traces them (Engine.compile(..., as_gpu_host=True)), keep each op of their augment stage on a GPU kernel
for its dtypes, a device-agnostic one, or in a host step pinned to the CPU by design and named in the report. And
both kernels of every op give the same pixels (tests/kernel_parity.py: the cases come from the op registry)."""
from __future__ import annotations

import pytest

from augd.engine import Engine, EngineOptions, placement
from augd.ops import REGISTRY, SeededOp
from augd.ops._tf import tf
from augd.schema import builtin_pipelines, load_pipeline
from tests import kernel_parity
from tests.helpers import spec_for
from tests.test_ops import OP_CASES, PARTNER_OPS

#: host steps by design: the ops that declare one (their JPEG codec), and `colour: fast`'s 3x4 matrix
HOST_STEPS = {n for n, c in REGISTRY.items() if issubclass(c, SeededOp) and c.host_step} | {"colour_matrix"}


def _as_gpu_host(spec):
    return Engine(EngineOptions(kernels="opencv")).compile(spec, as_gpu_host=True)


def _judge(compiled) -> dict:
    stage = placement.gpu_stage(compiled.graph.as_graph_def())
    assert stage["gpu"], "nothing placed on the GPU"
    assert not stage["fallback"], f"op types with no GPU kernel for their dtypes: {sorted(stage['fallback'])}"
    assert set(stage["host"]) <= HOST_STEPS, stage["host"]
    augment = compiled.stage_devices["augment"]
    assert augment.startswith("GPU") and "on the CPU" not in augment, augment
    return stage


@pytest.mark.parametrize("name", sorted(builtin_pipelines()))
def test_every_shipped_pipeline_keeps_its_augment_stage_on_gpu_kernels(name):
    stage = _judge(_as_gpu_host(load_pipeline(builtin_pipelines()[name])))
    assert not {"ResizeArea", "ScaleAndTranslate"} & stage["gpu"]   # no GPU kernel anywhere: never there


@pytest.mark.parametrize("colour", ["exact", "fast"])
def test_a_chain_holding_every_registered_op_keeps_its_augment_stage_on_gpu_kernels(colour):
    ops = [{name: {**params, "p": 1.0}} for name, (params, *_) in sorted(OP_CASES.items()) if name not in PARTNER_OPS]
    stage = _judge(_as_gpu_host(spec_for(ops, colour=colour)))
    assert set(stage["host"]) == ({"random_jpeg_quality", "colour_matrix"} if colour == "fast"
                                  else {"random_jpeg_quality"})


def test_a_host_step_is_pinned_to_the_cpu_and_named_and_the_image_it_skips_stays_on_the_device():
    c = _as_gpu_host(spec_for([{"random_jpeg_quality": {"quality": [40, 60], "p": 0.5}}]))
    assert c.stage_devices["augment"] == "GPU (as placed); host steps: random_jpeg_quality"
    gd = c.graph.as_graph_def()
    nodes = list(gd.node) + [n for f in gd.library.function for n in f.node_def]
    codec = [n for n in nodes if n.op in ("DecodeJpeg", "EncodeJpegVariableQuality")]
    assert codec and all(placement._requested(n.device) == "CPU" and "host.random_jpeg_quality" in n.name
                         for n in codec)
    coins = [n for n in nodes if n.op == "StatelessIf" and placement._requested(n.device) == "GPU"]
    assert coins   # the coin (and the skipped image) stays on the device


def test_the_report_names_fallbacks_and_not_device_agnostic_kernels(monkeypatch):
    """A numpy_function left unpinned in the GPU stage is a fallback, named; a Case (a DEFAULT kernel) is not; a
    build without GPU kernels reports the stage on the CPU."""
    @tf.function(input_signature=[tf.TensorSpec([], tf.string), tf.TensorSpec([], tf.int32)])
    def f(data, k):
        with tf.device(placement.CPU):
            img = tf.io.decode_jpeg(data, channels=3)
        with tf.device(placement.GPU):
            x = tf.cast(img, tf.float32) * 1.5
            x = tf.switch_case(k, [lambda: x, lambda: x * 2.0])
            x = tf.numpy_function(lambda a: a, [x], tf.float32)
            with placement.host_step("thumbnail"):
                y = tf.numpy_function(lambda a: a, [x], tf.float32)
        with tf.device(placement.CPU):
            return tf.io.encode_png(tf.cast(x + y, tf.uint8))

    gd = f.get_concrete_function().graph.as_graph_def()
    stage = placement.gpu_stage(gd)
    assert stage["fallback"] == {"PyFunc"} and "StatelessCase" in stage["agnostic"]
    assert stage["host"] == {"thumbnail": {"PyFunc"}}
    got = placement.stage_devices(gd, "GPU:0 (Test)", "tf", placement.GPU)
    assert got == {"decode": "CPU", "augment": "GPU:0 (Test); host steps: thumbnail; on the CPU: PyFunc",
                   "encode": "CPU"}
    cpu_only = placement._kernels.__wrapped__
    monkeypatch.setattr(placement, "_kernels", lambda op: tuple(k for k in cpu_only(op) if k.device_type != "GPU"))
    assert placement.stage_devices(gd, "GPU:0 (Test)", "tf", placement.GPU)["augment"] == "CPU"


def test_the_check_reads_every_function_body_and_a_body_node_runs_where_its_caller_does():
    """Nodes inside a cond's branch and a while's body nested in it are judged like top-level ones; a body node
    that names no device inherits its caller's (a graph traced without device scopes in its branches); a check
    (Assert) reads its inputs on the host: a fallback, although its kernel is DEFAULT."""
    @tf.function(input_signature=[tf.TensorSpec([None, None, 3], tf.float32), tf.TensorSpec([], tf.bool)])
    def f(x, coin):
        with tf.device(placement.GPU):
            def branch():
                y = tf.numpy_function(lambda a: a, [x], tf.float32)
                tf.debugging.assert_non_negative(y)
                return tf.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, tf.nn.relu(v)), [0, y])[1]
            x = tf.cond(coin, branch, lambda: x * 2.0)
        return tf.identity(x)

    gd = f.get_concrete_function().graph.as_graph_def()
    stage = placement.gpu_stage(gd)
    assert stage["fallback"] == {"PyFunc", "Assert"} and {"Relu", "Mul"} <= stage["gpu"], stage
    for fn in gd.library.function:
        for n in fn.node_def:
            n.ClearField("device")
    assert placement.gpu_stage(gd) == stage


def test_the_kernel_parity_cases_cover_every_op_that_runs_in_the_graph():
    covered = {next(iter(op)) for ops, _ in kernel_parity.cases().values() for op in ops}
    assert covered == set(REGISTRY) - PARTNER_OPS


@pytest.mark.parametrize("case", sorted(kernel_parity.cases()))
def test_both_kernels_of_every_op_agree_on_photos_and_scenes(case):
    """The GPU host's graph (TF kernels) against the CPU host's (OpenCV): mean |diff| <= 1 level and at most 2 % of
    values off by more than 2 (bilinear weights are fixed-point in OpenCV, float in TF), same shapes."""
    ops, colour = kernel_parity.cases()[case]
    for kind, m in kernel_parity.measure(ops, colour).items():
        assert kernel_parity.agrees(m), (kind, m)
