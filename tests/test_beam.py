"""The Beam executor (augd/job/executors/beam.py) against the local one: the same job through run_job on threads
and on Beam gives the same shards, labels.txt and label_map.pbtxt byte for byte, and the same manifest but for its
timing, created and graph blocks. Runs on Beam's local runners only (Dataflow, Flink and Spark are never run here):

* the DirectRunner in multi-processing mode with 2 worker processes, for a split classification job and a VOC
  detection job, each with inputs rejected on the launcher (the scan) and on the workers (the decoder);
* the BundleBasedDirectRunner for retries: of Beam's Python runners it is the only one that retries a failed
  bundle (runners/direct/executor.py: up to 4 attempts, a failed attempt's outputs dropped); the FnApiRunner
  behind the DirectRunner fails the pipeline at a bundle's first failure (fn_runner.py raises the bundle's error),
  which the last test shows;
* the DirectRunner in-process (no --runner) for the failures that must reach the caller with their reason.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("apache_beam")

from augd.errors import FailureReason, JobFailed  # noqa: E402
from augd.io import read_records  # noqa: E402
from augd.job import JobOptions, run_job  # noqa: E402
from augd.job.executors import beam_pipeline as augd_beam  # noqa: E402
from augd.schema import parse_pipeline  # noqa: E402
from tests.annotated import Img, voc_job, voc_xml  # noqa: E402
from tests.jobfiles import make_job, pipeline_yaml  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MULTI = ["--runner=DirectRunner", "--direct_running_mode=multi_processing", "--direct_num_workers=2"]
#: manifest.json's blocks that may differ between executors; every other key must be equal
MAY_DIFFER = {"timing", "created", "graph"}
FLAKY = "AUGD_TEST_BEAM_FLAKY"


def run_beam_job(input_dir, spec, out_root, options=None, pipeline_args=()):
    """run_job on the Beam executor, with Beam's pipeline options."""
    return run_job(input_dir, spec, out_root, dataclasses.replace(options or JobOptions(), executor="beam",
                                                                  executor_args=tuple(pipeline_args)))


def _compare(local: Path, beam: Path) -> dict:
    """Every file but manifest.json byte for byte, the manifest but for MAY_DIFFER; the Beam manifest."""
    names = sorted(os.listdir(local))
    assert sorted(os.listdir(beam)) == names
    for name in names:
        if name != "manifest.json":
            assert (local / name).read_bytes() == (beam / name).read_bytes(), name
    ml, mb = (json.loads((d / "manifest.json").read_text()) for d in (local, beam))
    assert {k: v for k, v in mb.items() if k not in MAY_DIFFER} == {k: v for k, v in ml.items() if k not in MAY_DIFFER}
    return mb


@pytest.fixture(scope="module")
def split_job(tmp_path_factory):
    """(job folder, spec, run_job's output folder): train/ and validation/ class folders, 10 good JPEGs and PNGs,
    one truncated JPEG (rejected by the decoder, on a worker) and one file that is no image (rejected by the scan);
    gzip shards, 3 a split: validation keeps only its 2 originals, so one of its shards is empty."""
    root = tmp_path_factory.mktemp("split")
    layout = {f"train/{c}/{c}{i}.{'jpg' if i % 2 else 'png'}": "jpeg" if i % 2 else "png"
              for c in ("cat", "dog") for i in range(4)}
    layout.update({"validation/cat/v0.png": "png", "validation/dog/v1.jpg": "jpeg",
                   "train/dog/broken.jpg": "truncated", "train/cat/junk.png": "random"})
    make_job(root / "job", layout)
    spec = parse_pipeline(pipeline_yaml(shards=3, compression="gzip") + "augment_splits: [train]\n")
    run_job(str(root / "job"), spec, str(root / "local"))
    return root / "job", spec, root / "local" / "job"


def test_a_split_classification_job_on_two_worker_processes_writes_run_jobs_bytes(split_job, tmp_path):
    job, spec, local = split_job
    result = run_beam_job(str(job), spec, str(tmp_path), pipeline_args=MULTI)
    assert result.out_dir == str(tmp_path / "job") and (tmp_path / "job" / "_SUCCESS").exists()
    m = _compare(local, tmp_path / "job")
    assert {r["path"]: r["reason"] for r in m["inputs"]["rejected_files"]} == {
        "train/cat/junk.png": "unknown_format", "train/dog/broken.jpg": "undecodable"}
    empty = [s["file"] for s in m["shards"] if s["records"] == 0]
    assert empty == ["job-validation-00002-of-00003.tfrecord.gz"]
    assert list(read_records(str(tmp_path / "job" / empty[0]))) == []
    graph = m["graph"]
    assert graph["executor"] == "beam" and graph["builds"] >= 1 and graph["stage_devices"]
    assert sum(w["images"] for w in graph["workers"]) == 11   # every image the workers saw, the broken one too
    assert sorted(os.listdir(tmp_path)) == ["job"]             # no temp folder left beside it
    with pytest.raises(JobFailed) as e:                        # the output is claimed before any pipeline runs
        run_beam_job(str(job), spec, str(tmp_path), pipeline_args=MULTI)
    assert e.value.reason is FailureReason.OUTPUT_EXISTS


DETECTION = """name: det-beam
seed: 7
variants: 2
output: {format: png, shards: 2}
ops:
  - random_crop: {size: [40, 48], area: [0.5, 1.0], aspect: [0.8, 1.25]}
  - random_rotation: {degrees: 10}
  - random_flip_left_right: {}
"""


def test_a_voc_detection_job_on_two_worker_processes_writes_run_jobs_bytes(tmp_path):
    red, green, blue = (230, 30, 30), (30, 220, 30), (30, 30, 230)
    images = [Img(f"im{i}.{'jpg' if i % 3 == 0 else 'png'}", 48 + 2 * i, 64, [
        ("cat", (4 + i, 6, 24 + i, 30), red), ("dog", (34, 10 + i, 58, 40), green if i % 2 else blue)][:1 + i % 2],
        split="train" if i < 6 else "val") for i in range(8)]
    images.append(Img("empty.png", 40, 40, split="train"))            # a negative: kept
    voc_job(str(tmp_path / "job"), images, annotate={i.name for i in images} - {"empty.png"})
    bad = images[2]                                                    # its XML states another size: rejected
    (tmp_path / "job" / "Annotations" / "im2.xml").write_text(voc_xml(bad, size=(bad.w + 10, bad.h)))
    spec = parse_pipeline(DETECTION)
    run_job(str(tmp_path / "job"), spec, str(tmp_path / "local"))
    run_beam_job(str(tmp_path / "job"), spec, str(tmp_path / "beam"), pipeline_args=MULTI)
    m = _compare(tmp_path / "local" / "job", tmp_path / "beam" / "job")
    assert (tmp_path / "beam" / "job" / "label_map.pbtxt").exists() and m["annotations"]["negatives"]["kept"] == 1
    rejected = [(r["path"], r["reason"]) for r in m["inputs"]["rejected_files"]]
    assert rejected == [("JPEGImages/im2.png", "bad_annotation")]
    assert set(m["splits"]) == {"train", "validation"} and m["inputs"]["written"] == 8


# --- retries and failures ----------------------------------------------------------------------------------------

class Injected(RuntimeError):
    """A failure the tests inject."""


def _first_attempt(key: str) -> bool:
    """True the first time `key` is seen, across attempts, DoFn instances and processes (a marker file)."""
    try:
        os.close(os.open(os.path.join(os.environ[FLAKY], key), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


class FlakyProcess(augd_beam._ProcessImage):
    """Two images (a bundle may hold them both: the runner gives up after 4 failed attempts of one bundle): the
    first attempt emits the image's records and summary, then its bundle fails."""

    def process(self, unit):
        yield from super().process(unit)
        if unit in ((0, 4), (1, 0)) and _first_attempt(f"process-{unit[0]}-{unit[1]}"):
            raise Injected(f"after emitting image {unit}")


class FlakyPlace(augd_beam._Place):
    """The second image of each group: its records placed and emitted, then the bundle fails."""

    def process(self, item):
        yield from super().process(item)
        g, pos = item[0]
        if pos == 1 and _first_attempt(f"place-{g}"):
            raise Injected(f"after placing image {pos} of group {g}")


class FlakyWrite(augd_beam._WriteShard):
    """Shard 0 of each group: written, renamed into place and reported, then the bundle fails. Shard 1 of group 0:
    the attempt dies half way, leaving its folder with a partial file behind (as a killed worker would)."""

    def process(self, item):
        (g, s), _ = item
        if (g, s) == (0, 1) and _first_attempt("write-0-1"):
            stray = Path(self.out_dir) / f".{self.names[(0, 1)]}.attempt-dead"
            stray.mkdir()
            (stray / "shard-00000-of-00001.tfrecord.gz").write_bytes(b"\x1f\x8b partial")
            raise Injected("half way through shard 1 of group 0")
        yield from super().process(item)
        if s == 0 and _first_attempt(f"write-{g}-0"):
            raise Injected(f"after writing shard 0 of group {g}")


_gather = augd_beam._gather   # the real one, which the test replaces with flaky_gather


def flaky_gather(item, out_dir):
    """The first attempt leaves an outcomes file that says nothing, then fails."""
    if _first_attempt("gather"):
        Path(out_dir, augd_beam.OUTCOMES).write_text('{"images": [], "shards": [], "repeated": {}}')
        raise Injected("after writing an empty outcomes file")
    _gather(item, out_dir)


class FailingProcess(augd_beam._ProcessImage):
    """Image 3 of group 0 fails, every time."""

    def process(self, unit):
        yield from super().process(unit)
        if unit == (0, 3):
            raise Injected("image 3 of group 0 fails")


def test_retried_bundles_lose_and_duplicate_nothing(split_job, tmp_path, monkeypatch):
    """Each step fails the first attempt of some of its bundles after its side effects and outputs (a shard renamed
    into place, records emitted, an outcomes file written) or half way (a partial shard attempt left behind); the
    BundleBasedDirectRunner drops those attempts' outputs and runs the bundles again, and the output is run_job's.

    What this proves: retried attempts of every step, on a runner that retries as Beam's model says (outputs of a
    failed attempt dropped, its side effects kept), leave no trace in the output: shards are renamed over with the
    same bytes, debris is removed, the outcomes file is rewritten, and the shard writer's check would fail the job
    rather than write a record twice or lose one. What it does not prove: anything about worker processes killed
    from outside, a runner that commits a failed attempt's outputs (none should), Dataflow's, Flink's or Spark's
    own retry machinery, or speculative attempts running at the same time (each writes its own attempt folder and
    renames the same bytes, by design, but nothing here runs two attempts at once)."""
    job, spec, local = split_job
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv(FLAKY, str(markers))
    for name, fake in (("_ProcessImage", FlakyProcess), ("_Place", FlakyPlace), ("_WriteShard", FlakyWrite),
                       ("_gather", flaky_gather)):
        monkeypatch.setattr(augd_beam, name, fake)
    run_beam_job(str(job), spec, str(tmp_path / "out"), pipeline_args=["--runner=BundleBasedDirectRunner"])
    _compare(local, tmp_path / "out" / "job")
    injected = {"process-0-4", "process-1-0", "place-0", "place-1", "write-0-0",
                "write-0-1", "write-1-0", "gather"}
    assert set(os.listdir(markers)) == injected           # every failure above happened once, and was retried
    assert not [n for n in os.listdir(tmp_path / "out" / "job") if n.startswith(".")]


def test_a_failed_bundle_fails_the_job_on_the_direct_runner_and_keeps_the_old_output(split_job, tmp_path,
                                                                                     monkeypatch):
    """The FnApiRunner (the DirectRunner's engine) does not retry: the first failure fails the pipeline, the job
    fails `crashed`, and an output it was asked to overwrite is left as it was, with no temp folder beside it."""
    job, spec, local = split_job
    out = tmp_path / "out"
    shutil.copytree(local, out / "job")
    before = {n: (out / "job" / n).read_bytes() for n in os.listdir(out / "job")}
    monkeypatch.setattr(augd_beam, "_ProcessImage", FailingProcess)
    with pytest.raises(JobFailed, match="image 3 of group 0 fails") as e:
        run_beam_job(str(job), spec, str(out), JobOptions(overwrite=True))
    assert e.value.reason is FailureReason.CRASHED
    assert os.listdir(out) == ["job"] and {n: (out / "job" / n).read_bytes() for n in before} == before


def test_a_lost_or_differing_record_fails_the_step_and_a_repeated_one_is_kept_once(split_job, tmp_path):
    """The checks behind "nothing lost, nothing twice" when a runner misbehaves: a shard's positions must be
    exactly 0..n-1 for its record count; an element seen twice is kept once, and only when both copies are the
    same (the per-image work is a pure function of the image): two different records at one position or two
    different counts for one image fail the step rather than write a wrong shard."""
    from augd.job.units import plan_job, record_slots
    job, spec, _ = split_job
    plan = plan_job(str(job), spec, None, JobOptions().max_pixels)
    size = len(plan.groups[0].order)
    counts = [(pos, 3) for pos in range(size)]                      # group 0: 3 records an image, 3 shards
    count = augd_beam._Count(plan)
    out = list(count.process((0, counts)))
    assert out == list(count.process((0, counts + counts[::-1])))  # repeated counts are kept once
    slots = record_slots([3] * size, 3)
    assert [v for k, v in out if v[0] == "slots"] == [("slots", sl) for sl in slots]
    assert [(k, v) for k, v in out if v[0] == "expect"] == [((0, s), ("expect", size)) for s in range(3)]
    with pytest.raises(RuntimeError, match="counted twice with different record counts"):
        list(count.process((0, counts + [(1, 2)])))
    with pytest.raises(RuntimeError, match="no record count"):
        list(count.process((0, counts[1:])))

    write = augd_beam._WriteShard(plan, str(tmp_path))
    expect = ("expect", 3)
    for values, error in (([expect, ("record", 0, b"a"), ("record", 0, b"b")], "two different records at position 0"),
                          ([expect, ("record", 0, b"a"), ("record", 2, b"c")], "the runner lost records"),
                          ([("record", 0, b"a")], "no record count arrived"),
                          ([expect, ("expect", 4)], "record count arrived twice, differently")):
        with pytest.raises(RuntimeError, match=error):
            list(write.process(((0, 0), values)))
    assert os.listdir(tmp_path) == []
    three = [("record", i, bytes([i])) for i in range(3)]
    [row] = write.process(((0, 0), [expect, *three, expect, *three[::-1]]))
    assert row["records"] == 3
    assert list(read_records(str(tmp_path / write.names[(0, 0)]))) == [bytes([i]) for i in range(3)]

    place = augd_beam._Place()
    two = (("slots", [(0, 0), (1, 0)]), ("records", (b"x", b"y")))
    assert list(place.process(((0, 5), [*two, *two]))) == [((0, 0), ("record", 0, b"x")), ((0, 1), ("record", 0, b"y"))]
    with pytest.raises(RuntimeError, match="records of image 5 of group 0 arrived twice, differently"):
        list(place.process(((0, 5), [*two, ("records", (b"x", b"z"))])))
    with pytest.raises(RuntimeError, match="no records arrived"):
        list(place.process(((0, 5), [two[0]])))

    rows = [{"g": 0, "pos": 1, "records": 2, "worker": "a"}, {"g": 0, "pos": 0, "records": 2, "worker": "b"},
            {"g": 0, "pos": 1, "records": 2, "worker": "c"}]
    assert augd_beam._once(rows, lambda r: (r["g"], r["pos"]), ("records",)) == [rows[1], rows[0]]
    with pytest.raises(RuntimeError, match="reported twice, differently"):
        augd_beam._once(rows + [{"g": 0, "pos": 0, "records": 3, "worker": "d"}], lambda r: (r["g"], r["pos"]),
                        ("records",))


class RepeatingProcess(augd_beam._ProcessImage):
    """Every image's outcome emitted twice, as a runner that re-runs a step and keeps both outputs would."""

    def process(self, unit):
        for out in super().process(unit):
            yield out
            yield out


class RepeatingPlace(augd_beam._Place):
    """Every placed record emitted twice."""

    def process(self, item):
        for out in super().process(item):
            yield out
            yield out


class RepeatingCount(augd_beam._Count):
    """Every image's slots and every shard's count emitted twice."""

    def process(self, item):
        for out in super().process(item):
            yield out
            yield out


class RepeatingWrite(augd_beam._WriteShard):
    """Every shard written twice, and reported twice."""

    def process(self, item):
        [row] = super().process(item)
        [again] = super().process(item)
        yield row
        yield again


def test_repeated_elements_in_every_step_write_run_jobs_bytes(split_job, tmp_path, monkeypatch):
    """A runner that repeats elements (Dataflow and Spark may re-run a bundle or a speculative task and, in a
    faulty runner, keep both outputs; the DaskRunner did, through side inputs, when augd's pipeline had them):
    each image's outcome, each image's slots and shard's count, each placed record and each shard come twice, on
    the DirectRunner, and the output is still run_job's, its manifest counting every image and record once."""
    job, spec, local = split_job
    for name, fake in (("_ProcessImage", RepeatingProcess), ("_Count", RepeatingCount), ("_Place", RepeatingPlace),
                       ("_WriteShard", RepeatingWrite)):
        monkeypatch.setattr(augd_beam, name, fake)
    run_beam_job(str(job), spec, str(tmp_path / "out"))
    m = _compare(local, tmp_path / "out" / "job")
    assert sum(w["images"] for w in m["graph"]["workers"]) == 11   # the repeats are not counted as work done


def test_an_unknown_runner_fails_the_job_naming_it_and_what_augd_adds(split_job, tmp_path):
    job, spec, _ = split_job
    with pytest.raises(JobFailed, match="Beam cannot make the runner 'NoSuchRunner': Unexpected pipeline runner: "
                                        "NoSuchRunner.*; augd also knows DaskRunner") as e:
        run_beam_job(str(job), spec, str(tmp_path), pipeline_args=["--runner=NoSuchRunner"])
    assert e.value.reason is FailureReason.CRASHED and os.listdir(tmp_path) == []


def test_too_many_rejected_inputs_fail_on_the_launcher_with_their_reason(split_job, tmp_path):
    job, spec, _ = split_job
    with pytest.raises(JobFailed, match="2 of 12 inputs were rejected") as e:
        run_beam_job(str(job), spec, str(tmp_path), JobOptions(max_rejected=0.1))
    assert e.value.reason is FailureReason.TOO_MANY_REJECTED and os.listdir(tmp_path) == []


def test_augd_imports_and_runs_without_apache_beam(tmp_path):
    """Beam is an extra: augd, its CLI and the local executor never import it, and asking for the Beam executor
    without it says how to install it."""
    code = ("import sys; sys.modules['apache_beam'] = None\n"
            "import augd.cli, augd.job, augd.job.run, augd.daemon\n"
            "assert 'apache_beam' not in [m.split('.')[0] for m in sys.modules if sys.modules[m] is not None]\n"
            "from augd.job.executors import traits\nprint(traits('beam').missing('beam'))\n"
            "try:\n    import augd.job.executors.beam_pipeline\nexcept ImportError as e:\n    print(e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert p.returncode == 0, p.stderr[-2000:]
    said = p.stdout.splitlines()
    assert len(said) == 2 and all("pip install 'augd[beam]'" in line for line in said), said
    assert said[0].startswith("the beam executor needs apache_beam, which is not installed")


def test_the_cli_runs_beam_as_an_executor_and_still_takes_the_old_runner_flag(tmp_path):
    """`--executor beam` is the flag; `--runner beam` still works, saying it is deprecated; the two together with
    another executor contradict each other (usage error, nothing written)."""
    def augd(*args):
        return subprocess.run([sys.executable, "-m", "augd", "run", str(REPO / "augd/samples/demo"), "-p",
                               "normalize", "-o", str(tmp_path), "-q", *args], capture_output=True, text=True,
                              cwd=REPO, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=600)
    old = augd("--name", "old", "--runner", "beam")
    assert old.returncode == 0, old.stderr[-2000:]
    assert "--runner is deprecated and will go: use --executor beam" in old.stderr
    assert json.loads((tmp_path / "old" / "manifest.json").read_text())["graph"]["executor"] == "beam"
    bad = augd("--name", "bad", "--runner", "beam", "--executor", "threads")
    assert bad.returncode == 2 and "contradict" in bad.stderr and not (tmp_path / "bad").exists()
    stray = augd("--name", "stray", "--", "--direct_num_workers=2")
    assert stray.returncode == 2 and "--executor auto takes no options after --" in stray.stderr
    assert "`augd run --executor beam -- OPTIONS` (Beam pipeline options)" in stray.stderr
