"""EngineOptions and Engine: one place reads the environment, options are validated with clear errors, engines
count their own graphs, and a process refuses a second set of process-wide settings instead of ignoring it."""
import os
import re
import subprocess
import sys

import pytest

from augd.engine import Engine, EngineOptions
from augd.engine.options import ENV
from tests.helpers import spec_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_from_env_reads_every_knob_and_overrides_win():
    env = {"AUGD_KERNELS": "TF", "AUGD_CROP_DECODE": "0", "AUGD_GRAPPLER": "1", "AUGD_OPENCV_THREADS": "3",
           "AUGD_MALLOC": "no", "AUGD_DEVICE": "cpu", "AUGD_GPU_MEMORY_MB": "512", "AUGD_TF_THREADS": "2"}
    o = EngineOptions.from_env(env)
    assert o == EngineOptions(kernels="tf", crop_decode=False, grappler="on", opencv_threads=3, tune_malloc=False,
                              device="cpu", gpu_memory_mb=512, tf_threads=2)
    assert EngineOptions.from_env({}) == EngineOptions()
    assert EngineOptions.from_env(env, kernels="opencv").kernels == "opencv"
    assert EngineOptions.from_env(env, gpu_memory_mb=None).gpu_memory_mb is None   # None is a value, not "unset"
    assert EngineOptions.from_env({"MALLOC_ARENA_MAX": "2"}).tune_malloc is False  # the user's malloc wins
    assert set(ENV) == set(EngineOptions.model_fields)


@pytest.mark.parametrize("env, message", [
    ({"AUGD_KERNELS": "cuda"}, r"kernels must be one of \['auto', 'tf', 'opencv'\]; got 'cuda' .*AUGD_KERNELS=cuda"),
    ({"AUGD_OPENCV_THREADS": "two"}, r"AUGD_OPENCV_THREADS must be a whole number; got 'two'"),
    ({"AUGD_CROP_DECODE": "maybe"}, r"AUGD_CROP_DECODE must be 1 or 0 \(true/false\); got 'maybe'"),
    ({"AUGD_GPU_MEMORY_MB": "0"}, r"gpu_memory_mb must be a whole number of MB >= 1, or null; got 0"),
    ({"AUGD_DEVICE": "tpu"}, r"device must be one of \['auto', 'cpu', 'gpu'\]; got 'tpu'"),
])
def test_bad_environment_values_name_the_variable_the_value_and_what_is_allowed(env, message):
    with pytest.raises(ValueError, match=message):
        EngineOptions.from_env(env)


def test_no_module_but_options_names_an_engine_knobs_variable():
    """The variables are read in augd/engine/options.py only: no other module holds their names as strings."""
    literal = re.compile(r"[\"']({})[\"']".format("|".join(ENV.values())))
    offenders = []
    for folder, _, files in os.walk(os.path.join(ROOT, "augd")):
        for name in files:
            path = os.path.join(folder, name)
            if name.endswith(".py") and not path.endswith(os.path.join("engine", "options.py")):
                offenders += [f"{os.path.relpath(path, ROOT)}:{n}" for n, line in
                              enumerate(open(path, encoding="utf-8"), 1) if literal.search(line)]
    assert offenders == []


def test_engines_count_their_own_graphs_and_per_graph_options_may_differ():
    a, b = Engine(EngineOptions(kernels="tf")), Engine(EngineOptions(kernels="opencv", crop_decode=False))
    spec = spec_for([{"random_rotation": {"degrees": 5}}])
    ca, cb, cb2 = a.compile(spec), b.compile(spec), b.compile(spec)
    assert (a.builds, b.builds) == (1, 2) and (ca.kernel, cb.kernel) == ("tf", "opencv")
    assert (a.traces, b.traces) == (1, 2)
    for c in (ca, cb, cb2):
        c.close()


def test_a_second_set_of_process_settings_is_refused_not_ignored():
    code = ("import augd; from augd.engine import Engine, EngineOptions; Engine(EngineOptions()); "
            "Engine(EngineOptions(opencv_threads=4))")
    res = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": ROOT, "CUDA_VISIBLE_DEVICES": ""},
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert "this process' engine was set up with grappler=auto, opencv_threads=1" in res.stderr
    assert "tf_threads=0" in res.stderr
    assert "an engine with grappler=auto, opencv_threads=4" in res.stderr and "needs a process of its own" in res.stderr


def test_the_daemon_config_engine_block_sets_the_options(tmp_path, monkeypatch):
    from augd.daemon.config import load_settings
    monkeypatch.setenv("AUGD_KERNELS", "tf")
    monkeypatch.setenv("AUGD_OPENCV_THREADS", "2")
    cfg = tmp_path / "augd.yaml"
    cfg.write_text("engine:\n  opencv_threads: 1\n  crop_decode: false\n")
    o = load_settings(str(cfg)).engine_options
    assert (o.kernels, o.opencv_threads, o.crop_decode) == ("tf", 1, False)  # config over environment
    cfg.write_text("engine:\n  kernels: cuda\n")
    from augd.errors import SpecError
    with pytest.raises(SpecError, match=r"augd.yaml:2: engine.kernels: .*'auto', 'tf' or 'opencv'"):
        load_settings(str(cfg))


def test_a_config_null_overrides_the_environment_and_a_key_left_out_does_not(tmp_path, monkeypatch):
    """`gpu_memory_mb: null` ("grow as needed") beats AUGD_GPU_MEMORY_MB: the config's engine block is
    EngineOptions itself, and the keys it sets (model_fields_set) are told apart from those it leaves out."""
    from augd.daemon.config import load_settings
    monkeypatch.setenv("AUGD_GPU_MEMORY_MB", "512")
    monkeypatch.setenv("AUGD_TF_THREADS", "3")
    cfg = tmp_path / "augd.yaml"
    cfg.write_text("engine:\n  gpu_memory_mb: null\n")
    o = load_settings(str(cfg)).engine_options
    assert (o.gpu_memory_mb, o.tf_threads) == (None, 3)
    cfg.write_text("engine:\n  kernels: tf\n")
    assert load_settings(str(cfg)).engine_options.gpu_memory_mb == 512
    cfg.write_text("engine:\n  gpu_memory_mb: 0\n")
    from augd.errors import SpecError
    with pytest.raises(SpecError, match=r"augd.yaml:2: engine.gpu_memory_mb: .*greater than or equal to 1"):
        load_settings(str(cfg))
