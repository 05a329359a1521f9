"""Pipeline spec: validation before TensorFlow, errors that name file, YAML path, value and line."""
import json
import os
import subprocess
import sys

import pytest

from augd.errors import SpecError
from augd.schema import load_pipeline, parse_pipeline
from augd.schema.jsonschema import pipeline_schema

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "PYTHONPATH": ROOT}

SEED = """\
name: seed-classifier
seed: 1234
variants: 4
keep_original: true
output: {format: jpeg, quality: 90, shards: auto, compression: none}
ops:
  - random_saturation: {lower: 0.8, upper: 1.2}
  - random_brightness: {max_delta: 0.125}
  - random_contrast: {lower: 0.8, upper: 1.2}
  - random_hue: {max_delta: 0.2}
  - random_rotation: {degrees: 10}
  - one_of: [{random_flip_left_right: {}}, {random_flip_up_down: {}}]
"""


def test_seed_chain_parses_and_normalizes():
    spec = parse_pipeline(SEED, "seed.yaml")
    assert spec.name == "seed-classifier" and spec.variants == 4 and spec.keep_original
    assert [n.name for n in spec.ops][-1] == "one_of"
    assert [c.name for c in spec.ops[-1].children] == ["random_flip_left_right", "random_flip_up_down"]
    norm = spec.normalized()
    assert norm["ops"][4] == {"random_rotation": {"p": 1.0, "degrees": [-10.0, 10.0], "fill": 0}}
    # the normalized form parses back to the same spec (same hash)
    again = parse_pipeline(json.dumps(norm), "n.json")
    assert again.sha256 == spec.sha256
    assert parse_pipeline(SEED.replace("seed: 1234", "seed: 1235")).sha256 != spec.sha256


BAD = [
    # (yaml change, expected path, expected fragments, line)
    ("  - random_hue: {max_delta: 0.2}", "  - random_hue: {max_delta: 0.9}",
     "ops[3].random_hue.max_delta", ["0.5", "0.9"], 10),
    ("  - random_hue: {max_delta: 0.2}", "  - random_hue: {max_delta: 0.2, bogus: 1}",
     "ops[3].random_hue.bogus", ["unknown key", "max_delta"], 10),
    ("  - random_hue: {max_delta: 0.2}", "  - random_hew: {max_delta: 0.2}",
     "ops[3].random_hew", ["unknown op", "augd ops"], 10),
    ("variants: 4", "variants: -1", "variants", ["-1", "greater than or equal to 0"], 3),
    ("name: seed-classifier", "name: Seed Classifier", "name", ["Seed Classifier", "[a-z0-9_-]"], 1),
    ("quality: 90", "quality: 900", "output.quality", ["900", "100"], 5),
    ("format: jpeg", "format: tiff", "output.format", ["tiff", "jpeg", "png", "raw"], 5),
    ("keep_original: true", "keep_original: true\ntint: red", "tint", ["unknown key", "keep_original"], 5),
    ("keep_original: true", "keep_original: true\ncolour: red", "colour", ["'exact' or 'fast'", "red"], 5),
    ("  - random_rotation: {degrees: 10}", "  - random_rotation: {degrees: [20, 10]}",
     "ops[4].random_rotation.degrees", ["low <= high"], 11),
    ("[{random_flip_left_right: {}}, {random_flip_up_down: {}}]",
     "{ops: [{random_flip_left_right: {}}], weights: [1, 2]}", "ops[5].one_of.weights", ["one weight per op"], 12),
    ("[{random_flip_left_right: {}}, {random_flip_up_down: {}}]", "[{random_flip_left_right: {p: 2}}]",
     "ops[5].one_of.ops[0].random_flip_left_right.p", ["1"], 12),
    ("  - random_hue: {max_delta: 0.2}", "  - random_hue: {max_delta: 0.2}\n    random_gamma: {}",
     "ops[3]", ["exactly one key"], 10),
    ("  - random_hue: {max_delta: 0.2}", "  - random_hue: 0.2", "ops[3].random_hue", ["mapping"], 10),
]


@pytest.mark.parametrize("old,new,path,fragments,line", BAD, ids=[b[2] for b in BAD])
def test_errors_name_file_path_value_and_line(old, new, path, fragments, line):
    assert old in SEED
    with pytest.raises(SpecError) as err:
        parse_pipeline(SEED.replace(old, new), "pipelines/x.yaml")
    msg = str(err.value)
    assert msg.startswith(f"pipelines/x.yaml:{line}: {path}:"), msg
    for frag in fragments:
        assert frag in msg, msg
    assert err.value.path == path and err.value.line == line


def test_yaml_syntax_error_has_line():
    with pytest.raises(SpecError, match=r"x.yaml:[34]: invalid YAML"):
        parse_pipeline("name: a\nops:\n  - [unclosed\n", "x.yaml")


def test_not_a_mapping_and_missing_name():
    with pytest.raises(SpecError, match="must be a YAML mapping"):
        parse_pipeline("- just a list", "x.yaml")
    with pytest.raises(SpecError, match=r"name: required key is missing"):
        parse_pipeline("ops: []", "x.yaml")


def test_unsafe_yaml_tags_are_refused():
    with pytest.raises(SpecError, match="invalid YAML"):
        parse_pipeline("name: !!python/object/apply:os.system ['true']\n", "x.yaml")


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(SpecError, match="cannot read pipeline file"):
        load_pipeline(tmp_path / "nope.yaml")


def test_spec_validation_does_not_import_tensorflow():
    code = ("import sys; from augd.schema import load_pipeline; from augd.schema.jsonschema import pipeline_schema; "
            "load_pipeline('pipelines/geometric-heavy.yaml'); pipeline_schema(); "
            "import augd.ops; print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_cli_validate_exit_codes(tmp_path):
    shipped = sorted(os.path.join(ROOT, "pipelines", f) for f in os.listdir(os.path.join(ROOT, "pipelines")))
    ok = subprocess.run([sys.executable, "-m", "augd", "validate", *shipped], env=ENV, capture_output=True,
                        text=True)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.count("ok ") == len(shipped) >= 4
    bad = tmp_path / "bad.yaml"
    bad.write_text(SEED.replace("max_delta: 0.2", "max_delta: 0.9"))
    res = subprocess.run([sys.executable, "-m", "augd", "validate", shipped[0], str(bad)], env=ENV,
                         capture_output=True, text=True)
    assert res.returncode == 1
    assert f"{bad}:10: ops[3].random_hue.max_delta" in res.stderr


def test_cli_ops_lists_at_least_20_with_params():
    res = subprocess.run([sys.executable, "-m", "augd", "ops", "--json"], env=ENV, capture_output=True, text=True,
                         check=True)
    ops = json.loads(res.stdout)
    assert len(ops) >= 20
    byname = {o["name"]: o for o in ops}
    assert byname["random_hue"]["params"]["max_delta"]["maximum"] == 0.5
    assert all("p" in o["params"] for o in ops)
    text = subprocess.run([sys.executable, "-m", "augd", "ops"], env=ENV, capture_output=True, text=True,
                          check=True).stdout
    assert "random_crop" in text and "size (required)" in text


def test_schema_accepts_shipped_pipelines_and_rejects_bad_ones():
    jsonschema = pytest.importorskip("jsonschema")
    import yaml
    schema = pipeline_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    v = jsonschema.Draft202012Validator(schema)
    for f in os.listdir(os.path.join(ROOT, "pipelines")):
        with open(os.path.join(ROOT, "pipelines", f)) as fh:
            errors = list(v.iter_errors(yaml.safe_load(fh)))
        assert not errors, (f, errors[:1])
    assert list(v.iter_errors(yaml.safe_load(SEED.replace("max_delta: 0.2", "max_delta: 0.9"))))
    assert list(v.iter_errors(yaml.safe_load(SEED.replace("random_hue", "random_hew"))))


# -- one wording of validation errors: pipelines, a job's augd.yaml and the daemon's config ------------------

def test_a_union_fails_once_and_a_nested_mapping_lists_its_own_keys():
    with pytest.raises(SpecError) as err:
        parse_pipeline("name: a\noutput: {shards: x}\n", "p.yaml")
    assert str(err.value) == "p.yaml:2: output.shards: Input should be 'auto'; got 'x'"  # no "output.shards.int"
    with pytest.raises(SpecError) as err:
        parse_pipeline("name: a\noutput: {fromat: png}\n", "p.yaml")
    assert str(err.value) == ("p.yaml:2: output.fromat: unknown key 'fromat'; did you mean format? "
                              "(allowed keys: format, quality, shards, compression)")


@pytest.mark.parametrize("text, expected", [
    ("pipelin: normalize\n", ["augd.yaml:1: pipelin: unknown key 'pipelin'; did you mean pipeline? "
                              "(allowed keys: pipeline, labels, annotations)"]),
    ("pipeline: [a]\nlabels: {a: 1}\n",
     ["augd.yaml:1: pipeline: must be a pipeline name or an embedded pipeline mapping; got ['a']",
      "augd.yaml:2: labels: must be a list of class names or a labels file in the job; got {'a': 1}"]),
    ("pipeline:\n  name: two\n  ops:\n    - random_hue: {max_delta: 0.9}\n    - random_hew: {}\n",
     ["augd.yaml:4: pipeline.ops[0].random_hue.max_delta: Input should be less than or equal to 0.5; got 0.9",
      "augd.yaml:5: pipeline.ops[1].random_hew: unknown op 'random_hew'"]),
])
def test_a_jobs_augd_yaml_words_its_errors_like_a_pipeline(tmp_path, text, expected):
    from augd.daemon.routing import resolve_pipeline
    (tmp_path / "augd.yaml").write_text(text)
    with pytest.raises(SpecError) as err:
        resolve_pipeline(str(tmp_path), None, "normalize")
    lines = [line.removeprefix(f"{tmp_path}/") for line in str(err.value).splitlines()]
    assert len(lines) == len(expected) and all(line.startswith(e) for line, e in zip(lines, expected)), lines


def test_the_daemon_config_words_its_errors_like_a_pipeline(tmp_path):
    from augd.daemon.config import load_settings
    (tmp_path / "c.yaml").write_text("settle_second: 3\nworkers: 0\n")
    with pytest.raises(SpecError) as err:
        load_settings(str(tmp_path / "c.yaml"))
    second, first = str(err.value).splitlines()  # pydantic's order: a key's value before unknown keys
    assert first.endswith("c.yaml:1: settle_second: unknown key 'settle_second'; did you mean settle_seconds or "
                          "health_stale_seconds? (allowed keys: data_dir, inbox, work, done, failed, out, "
                          "pipelines_dir, default_pipeline, warm_up, settle_seconds, rescan_seconds, polling, on_success, "
                          "job_timeout_seconds, grace_seconds, max_pixels, job_memory_mb, labels, annotations, "
                          "status_preview, max_rejected, check, max_attempts, claim_lease_seconds, workers, "
                          "executor, beam, executor_options, "
                          "engine, metrics_bind, metrics_port, http_request_timeout_seconds, http_idle_timeout_seconds, http_max_connections, "
                          "health_stale_seconds, log_format, log_level)"), first
    assert second.endswith("c.yaml:2: workers: Input should be greater than or equal to 1; got 0"), second


def test_the_daemon_config_gives_each_executor_its_options_and_refuses_what_it_cannot_run(tmp_path):
    """executor_options: {EXECUTOR: [...]} is the general place for an executor's own options (what follows `--`
    on augd run); options for an executor that takes none, and Beam's in two places, are refused at load, naming
    the key, as is an executor whose extra is not installed."""
    import importlib.util

    from augd.daemon.config import load_settings

    def load(text):
        (tmp_path / "c.yaml").write_text(text)
        return load_settings(str(tmp_path / "c.yaml"))

    with pytest.raises(SpecError, match=r"c.yaml:3: executor_options.threads: the threads executor takes no "
                                        r"options; those that do: beam"):
        load("executor: threads\nexecutor_options:\n  threads: [--x]\n")
    if importlib.util.find_spec("apache_beam") is None:
        with pytest.raises(SpecError, match=r"c.yaml:1: executor: the beam executor needs apache_beam, which is "
                                            r"not installed: pip install 'augd\[beam\]'"):
            load("executor: beam\n")
        return
    s = load("executor: beam\nexecutor_options:\n  beam: [--direct_num_workers=2]\n")
    assert s.executor_args("beam") == ("--direct_num_workers=2",) and s.executor_args("threads") == ()
    assert load("beam: {options: [--a]}\n").executor_args("beam") == ("--a",)
    with pytest.raises(SpecError, match="Beam's options are set twice"):
        load("beam: {options: [--a]}\nexecutor_options: {beam: [--b]}\n")


@pytest.mark.parametrize("ref, is_path", [("normalize", False), ("my-chain", False), ("p.yaml", True),
                                          ("p.yml", True), ("sub/p", True), ("./p", True)])
def test_a_reference_is_a_path_or_a_name_by_one_rule(ref, is_path):
    from augd.schema import find_pipeline, is_pipeline_path
    assert is_pipeline_path(ref) is is_path
    if is_path:
        assert find_pipeline(ref) == ref  # never looked up by name


def test_known_pipelines_are_the_shipped_ones_and_the_search_folders(tmp_path):
    from augd.schema import builtin_pipelines, find_pipeline, known_pipelines
    (tmp_path / "mine.yml").write_text("name: mine\n")
    assert known_pipelines((str(tmp_path), str(tmp_path / "absent"))) == set(builtin_pipelines()) | {"mine"}
    assert find_pipeline("mine", (str(tmp_path),)) == str(tmp_path / "mine.yml")
    with pytest.raises(SpecError, match="known: .*mine"):
        find_pipeline("nope", (str(tmp_path),))
