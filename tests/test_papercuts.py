"""Issue 18, item 5: what a new user tripped on, each through the public surface (the CLI, a real daemon)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from augd.errors import SpecError
from augd.ops import REGISTRY, describe_ops
from augd.schema import parse_pipeline
from tests.daemon_harness import (Daemon, drop_job, make_image, no_leaked_children,  # noqa: F401
                                  no_leaked_children_module, status, write_config)

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
ENV.pop("TF_CPP_MIN_LOG_LEVEL", None)  # as a user's shell has it: augd's own defaults apply


def _augd(*args, check=False):
    return subprocess.run([sys.executable, "-m", "augd", *args], env=ENV, capture_output=True, text=True,
                          cwd=ROOT, check=check, timeout=300)


# -- pipelines ------------------------------------------------------------------------------------------------

def test_a_pipeline_that_writes_nothing_is_invalid():
    with pytest.raises(SpecError, match=r"x.yaml:2: variants: the pipeline would write nothing"):
        parse_pipeline("name: x\nvariants: 0\nkeep_original: false\nops: []\n", "x.yaml")
    parse_pipeline("name: x\nvariants: 0\nkeep_original: true\nops: []\n", "x.yaml")  # originals only: fine


@pytest.mark.parametrize("fill", [256, -1, 999])
def test_fill_values_are_checked_against_their_range(fill):
    with pytest.raises(SpecError, match=r"ops\[0\]\.random_rotation\.fill: Input should be"):
        parse_pipeline(f"name: x\nops:\n  - random_rotation: {{degrees: 10, fill: {fill}}}\n", "x.yaml")


def test_every_range_parameter_takes_a_single_number():
    """`degrees: 10` means [-10, 10] (symmetric ranges); elsewhere a number x means [x, x] (a fixed value)."""
    spec = parse_pipeline("name: x\nops:\n  - random_crop: {size: 32, area: 0.5, aspect: 1}\n"
                          "  - random_rotation: {degrees: 10}\n", "x.yaml")
    crop, rot = spec.ops
    assert crop.params.area == (0.5, 0.5) and crop.params.aspect == (1.0, 1.0)
    assert rot.params.degrees == (-10.0, 10.0)
    with pytest.raises(SpecError, match=r"area"):
        parse_pipeline("name: x\nops:\n  - random_crop: {size: 32, area: 2}\n", "x.yaml")  # still bounded
    shift = parse_pipeline("name: x\nops:\n  - random_affine: {translate: [0.2, 0.1]}\n", "x.yaml").ops[0]
    assert shift.params.translate == (0.2, 0.1), "translate is [x, y], not a [low, high] range"


def test_every_composite_example_shown_by_augd_ops_is_a_valid_pipeline():
    shown = [o for o in describe_ops() if o["example"]]
    assert {o["name"] for o in shown} >= {"one_of", "some_of", "sequence"}
    for op in shown:
        parse_pipeline("name: x\nops:\n" + "".join(f"  {line}\n" for line in op["example"].splitlines()),
                       f"<example of {op['name']}>")


def test_augd_ops_groups_by_kind_shows_composite_syntax_and_how_p_combines():
    """And, after the ops, the pipeline's other keys (tile, balance, split, ...), where a user looking for tiling
    looks first (issue 57): each with its own keys and what it does, from the pipeline's model."""
    from augd.schema.model import _Header
    out = _augd("ops", check=True).stdout
    headings = [ln for ln in out.splitlines() if ln.startswith("== ")]
    assert [h.split()[1] for h in headings] == ["Geometry", "Colour", "Pixel", "Mixing", "Composites", "Pipeline"]
    keys = out.split("== Pipeline keys")[1].split("\n\n")[0].splitlines()[1:]
    listed = {ln.split(":", 1)[0]: ln for ln in keys if ln and not ln[0].isspace() and ":" in ln}
    assert set(listed) >= set(_Header.model_fields) - {"ops"}
    assert listed["tile"].startswith("tile: {size, grid, overlap, empty, full_image}  slice each image into")
    assert all(len(ln.split("  ", 1)) == 2 and ln.split("  ", 1)[1] for ln in listed.values()), listed
    assert "e.g. - one_of: [" in out and "weights" in out
    assert "p × probability overall" in out and "applies with p times that" in out
    assert out.count("\n") > len(REGISTRY)


def test_validate_reports_every_error_of_a_file_with_suggestions(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncolor: fast\nops:\n  - random_hew: {}\n  - random_rotation: {degrees: 10, fill: 999}\n"
                   "  - one_of: [{random_flip_left_right: {pp: 1}}, {resize: {}}]\n")
    r = _augd("validate", str(bad))
    assert r.returncode == 1
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("FAIL ")]
    assert len(lines) == 5, r.stderr
    assert "color: unknown key 'color'; did you mean colour?" in lines[0]
    assert "random_hew: unknown op 'random_hew'; did you mean random_hue" in lines[1]
    assert f"{bad}:5: ops[1].random_rotation.fill:" in lines[2]
    assert "unknown key 'pp'; did you mean p?" in lines[3]
    assert "ops[2].one_of.ops[1].resize.size: required key is missing" in lines[4]


def test_validate_and_show_take_shipped_pipelines_by_name():
    r = _augd("validate", "seed-classifier", "geometric-heavy", check=True)
    assert r.stdout.count("ok ") == 2
    shown = _augd("show", "seed-classifier", check=True).stdout
    assert "name: seed-classifier" in shown and "random_hue" in shown
    parse_pipeline(shown, "<shown>")  # what it prints is the pipeline, ready to copy
    missing = _augd("show", "seed-clasifier")
    assert missing.returncode == 2 and "known: " in missing.stderr and "seed-classifier" in missing.stderr
    assert "did you mean 'seed-classifier'?" in missing.stderr, missing.stderr


@pytest.mark.parametrize("name, near", [("classify-heavy", "'classify-light'"), ("detection_ssd", "'detection-ssd'"),
                                        ("geometric-hevy", "'geometric-heavy'")])
def test_an_unknown_pipeline_name_suggests_the_nearest_ones(name, near):
    from augd.schema import find_pipeline
    with pytest.raises(SpecError) as e:
        find_pipeline(name)
    assert f"did you mean {near}" in str(e.value) and "known: " in str(e.value), e.value


def test_the_status_pages_sheet_has_no_empty_input_tile_when_the_original_is_not_written(tmp_path):
    """The daemon draws its sheet from the records alone: a job that does not keep the original gets a row of its
    variants only (the first one titled with the input's name), not a blank tile."""
    import cv2
    import numpy as np

    from augd.job import JobOptions, JobWatch, run_job
    from augd.preview import row_from_outcome, sheet_png
    from tests.daemon_harness import make_job
    rows = {}
    for keep in (False, True):
        spec = parse_pipeline(f"name: p\nvariants: 3\nkeep_original: {str(keep).lower()}\noutput: {{shards: 1}}\n"
                              "ops:\n  - random_rotation: {degrees: 20}\n", "p.yaml")
        got = []
        run_job(str(make_job(tmp_path / f"job{keep}", 2, classes=())), spec, str(tmp_path / f"out{keep}"),
                JobOptions(workers=1, executor="threads"), JobWatch(on_image=got.append))
        row = row_from_outcome(spec, got[0])
        assert all(t.image is not None for t in row.tiles), [t.title for t in row.tiles]
        assert len(row.tiles) == 3 + keep and row.tiles[0].title.startswith(row.path)
        sheet = cv2.imdecode(np.frombuffer(sheet_png(spec, [row]), np.uint8), cv2.IMREAD_COLOR)
        rows[keep] = sheet.shape[1]
    assert 3 * 160 < rows[False] < 4 * 160 < rows[True] < 5 * 160, rows


@pytest.mark.parametrize("verb", [["validate", "seed-classifier"], ["ops"], ["schema"], ["show", "normalize"]])
def test_verbs_that_need_no_tensorflow_do_not_import_it(verb):
    code = ("import sys, contextlib, io; from augd.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()): rc = main({verb!r})\n"
            "print(rc, 'tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, cwd=ROOT,
                         check=True).stdout.split()
    assert out == ["0", "False"]


# -- augd run ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def job(tmp_path_factory):
    root = tmp_path_factory.mktemp("papercuts") / "job"
    for i in range(6):
        make_image(root / "cat" / f"c{i}.png", seed=i)
    make_image(root / "loose.png", seed=9)                     # unlabeled: at the job's root
    (root / "cat" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 10)
    (root / "cat" / "notes.jpg").write_text("not an image")
    (root / "cat" / "_READY").write_text("")                   # a marker is never read as an image, at any depth
    return root


def test_run_summary_states_unlabeled_images_and_rejects_by_reason_without_native_noise(job, tmp_path):
    r = _augd("run", str(job), "-p", "normalize", "-o", str(tmp_path), "-q", check=True)
    assert r.stdout.startswith("job: 7/9 images") and r.stdout.count("\n") == 1, "stdout: one summary line"
    assert "unlabeled (label -1: not in a class folder): 1 images" in r.stderr
    assert "rejected by reason: " in r.stderr and "unknown_format 1" in r.stderr
    for noise in ("absl::InitializeLog", "cudart_stub", "cuInit", "cpu_feature_guard"):
        assert noise not in r.stderr, r.stderr


def test_max_rejected_fails_a_job_that_is_too_bad_and_writes_nothing(job, tmp_path):
    r = _augd("run", str(job), "-p", "normalize", "-o", str(tmp_path), "-q", "--max-rejected", "0.1")
    assert r.returncode == 1
    assert "2 of 9 inputs were rejected (22.2%), more than max_rejected=0.1" in r.stderr
    assert not (tmp_path / "job").exists()
    ok = _augd("run", str(job), "-p", "normalize", "-o", str(tmp_path), "-q", "--max-rejected", "0.25")
    assert ok.returncode == 0 and (tmp_path / "job" / "_SUCCESS").is_file()
    assert _augd("run", str(job), "-p", "normalize", "-o", str(tmp_path), "--max-rejected", "5").returncode == 2


# -- the daemon: an invalid pipeline says why everywhere -----------------------------------------------------

def test_an_invalid_pipeline_says_why_in_failure_json_status_and_the_log(tmp_path):
    d = Daemon(write_config(tmp_path, settle_seconds=0.5)).start()
    try:
        d.wait_ready(timeout=120)
        src = drop_job(tmp_path / "staging", "typo", n=1)
        (src / "augd.yaml").write_text("pipeline:\n  name: typo\n  ops:\n    - random_hew: {}\n")
        os.rename(src, d.inbox / "typo")
        failed = d.wait_failed("typo", timeout=90)
        failure = json.loads((failed / "failure.json").read_text())
        assert failure["reason"] == "bad_pipeline"
        why = "augd.yaml:4: pipeline.ops[0].random_hew: unknown op 'random_hew'; did you mean random_hue"
        assert why in failure["message"], failure
        assert str(d.work) not in (failed / "error.txt").read_text(), "no stale work/ path"
        last = status(d)["last_jobs"][0]
        assert last["job"] == "typo" and why in last["message"]
        assert any(why in ln for ln in d.events("job typo failed (bad_pipeline)"))

        # A misspelt routing folder (the pipelines are tiny and tiny2) holding jobs with class folders is refused,
        # not run as one job whose only class is each job's name.
        (tmp_path / "staging2" / "tinny2" / "cats2" / "a").mkdir(parents=True)
        make_image(tmp_path / "staging2" / "tinny2" / "cats2" / "a" / "x.png")
        (tmp_path / "staging2" / "tinny2" / "cats2" / "_READY").write_text("")
        os.rename(tmp_path / "staging2" / "tinny2", d.inbox / "tinny2")
        failure = json.loads((d.wait_failed("tinny2", timeout=90) / "failure.json").read_text())
        assert failure["reason"] == "bad_pipeline", failure
        assert "tinny2/: not a pipeline name (did you mean tiny2?)" in failure["message"], failure
        assert "Pipelines: " in failure["message"] and "tiny, tiny2" in failure["message"]
        assert not (d.out / "tinny2").exists()
    finally:
        assert d.stop() == 0, d.log_tail()


# -- augd inspect without TensorFlow --------------------------------------------------------------------------

@pytest.mark.parametrize("output", ["{format: jpeg, compression: gzip}", "{format: raw}"])
def test_inspect_reads_records_without_tensorflow_exactly_as_tensorflow_does(job, tmp_path, output):
    from augd.io import parse_example, read_records
    from augd.io.lite import decode_example, iter_records
    from augd.job import run_job
    spec = parse_pipeline(f"name: x\nvariants: 1\noutput: {output}\nops:\n  - random_flip_left_right: {{}}\n")
    out = Path(run_job(str(job), spec, str(tmp_path)).out_dir)
    shards = sorted(str(p) for p in out.glob("*.tfrecord*"))
    ours = [decode_example(r) for s in shards for r in iter_records(s)]
    theirs = [parse_example(r) for s in shards for r in read_records(s)]
    assert ours == theirs and len(ours) == 14 and any(x["image/class/label"] == -1 for x in ours)
    code = ("import sys, contextlib, io; from augd.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()) as o: rc = main(['inspect', {str(out)!r}])\n"
            "print(rc, 'tensorflow' in sys.modules, '14 records' in o.getvalue())")
    res = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, cwd=ROOT, check=True)
    assert res.stdout.split() == ["0", "False", "True"], res.stderr
    truncated = tmp_path / "cut.tfrecord"
    raw = Path(shards[0]).read_bytes() if not shards[0].endswith(".gz") else None
    if raw:
        truncated.write_bytes(raw[:-10])
        with pytest.raises(ValueError, match="truncated|runs past the file"):
            list(iter_records(str(truncated)))


def test_inspect_refuses_corrupt_records_with_a_message_not_a_traceback(tmp_path):
    import struct
    from augd.io.lite import decode_example, iter_records
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(struct.pack("<Q", 1 << 40) + b"\0" * 20)  # a length far past the file: nothing allocated
    with pytest.raises(ValueError, match="runs past the file"):
        list(iter_records(str(bad)))
    for garbage in (b"\x0a\xff\xff\xff\xff\x0f", b"\x0a\x80", b"\x0a\x05\x0a"):
        with pytest.raises(ValueError):
            decode_example(garbage)
    r = _augd("inspect", str(bad))
    assert r.returncode == 1 and "runs past the file" in r.stderr and "Traceback" not in r.stderr
