"""`augd run` and `augd inspect` as a user runs them: real subprocesses, exit codes, messages, output folders;
byte-identical reruns whatever the worker count; --overwrite; SIGKILL mid-write; usage errors."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import cv2
import numpy as np
import pytest

from tests.jobfiles import (augd, augd_cmd, augd_env, make_job, picture, pipeline_yaml, records, shard_files,
                            tree)

LAYOUT = {
    "F603/a.jpg": "jpeg", "F603/b.png": "png", "F603/c.jpg": "jpeg", "F603/d.jpg": "gray",
    "F663N/a.jpg": "jpeg", "F663N/b.jpg": "exif6", "F663N/c.png": "png", "F663N/d.jpg": "jpeg",
    "F663N/readme.txt": "text",
}
N_GOOD, N_VARIANTS = 8, 3
SCHEMA = ["augd/pipeline", "augd/pipeline_sha256", "augd/variant", "image/channels", "image/class/label",
          "image/class/text", "image/colorspace", "image/encoded", "image/filename", "image/format",
          "image/height", "image/key/sha256", "image/source_id", "image/width"]


def start(*args) -> subprocess.Popen:
    return subprocess.Popen(augd_cmd(*args), env=augd_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def finish(proc: subprocess.Popen, timeout=120) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def shard_bytes(out_dir) -> dict[str, bytes]:
    out = {}
    for p in shard_files(str(out_dir)) + [os.path.join(str(out_dir), "labels.txt")]:
        with open(p, "rb") as f:
            out[os.path.basename(p)] = f.read()
    return out


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    """A job folder, a pipeline file, and four finished runs of it, started together:
    --workers 1, --workers 2, --workers 2 --executor processes, and --workers 2 --seed 99."""
    base = tmp_path_factory.mktemp("cli")
    make_job(base / "train", LAYOUT)
    pipeline = base / "pipe.yaml"
    pipeline.write_text(pipeline_yaml(shards=2))
    common = (base / "train", "--pipeline", pipeline)
    procs = {
        "w1": start("run", *common, "--out", base / "w1", "--workers", 1),
        "w2": start("run", *common, "--out", base / "w2", "--workers", 2),
        "p2": start("run", *common, "--out", base / "p2", "--workers", 2, "--executor", "processes"),
        "s99": start("run", *common, "--out", base / "s99", "--workers", 2, "--seed", 99),
    }
    done = {k: finish(p) for k, p in procs.items()}
    for k, r in done.items():
        assert r.returncode == 0, f"{k}: {r.stderr}"
    return {"base": base, "job": base / "train", "pipeline": pipeline, "runs": done}


def test_run_writes_a_complete_output_and_one_summary_line(cli):
    r, out = cli["runs"]["w1"], cli["base"] / "w1"
    dest = out / "train"
    assert sorted(os.listdir(out)) == ["train"], "no temp folder may be left behind"
    assert sorted(os.listdir(dest)) == ["_SUCCESS", "labels.txt", "manifest.json", "train-00000-of-00002.tfrecord",
                                        "train-00001-of-00002.tfrecord"]
    assert (dest / "labels.txt").read_text() == "0:F603\n1:F663N\n"
    lines = r.stdout.splitlines()
    assert len(lines) == 1, r.stdout
    assert re.fullmatch(rf"train: {N_GOOD}/{N_GOOD + 1} images -> {N_GOOD * N_VARIANTS} records in 2 shard\(s\), "
                        rf"1 rejected, .* -> {re.escape(str(dest))}", lines[0]), lines[0]
    assert "rejected F663N/readme.txt: not an image" in r.stderr
    m = json.loads((dest / "manifest.json").read_text())
    assert m["seed"] == 11 and m["records"]["written"] == len(records(str(dest))) == N_GOOD * N_VARIANTS


def test_rerun_with_the_same_seed_gives_identical_bytes_whatever_the_workers(cli):
    w1, w2, p2 = (cli["base"] / k / "train" for k in ("w1", "w2", "p2"))
    assert shard_bytes(w1) == shard_bytes(w2) == shard_bytes(p2)
    m1, m2, mp = (json.loads((d / "manifest.json").read_text()) for d in (w1, w2, p2))
    for m in (m1, m2, mp):
        del m["timing"], m["created"]
    graphs = [m.pop("graph") for m in (m1, m2, mp)]
    assert m1 == m2 == mp
    assert [g["executor"] for g in graphs] == ["threads", "threads", "processes"]
    assert [[w["threads"] for w in g["workers"]] for g in graphs[:2]] == [[1], [2]]
    assert all(w["builds"] == 1 for w in graphs[2]["workers"]) and graphs[2]["builds"] == len(graphs[2]["workers"])


def test_a_different_seed_gives_different_bytes(cli):
    a, b = shard_bytes(cli["base"] / "w2" / "train"), shard_bytes(cli["base"] / "s99" / "train")
    assert a.keys() == b.keys()
    assert all(a[k] != b[k] for k in a if k.endswith(".tfrecord"))
    assert json.loads((cli["base"] / "s99" / "train" / "manifest.json").read_text())["seed"] == 99


def test_overwrite_semantics(cli, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(cli["base"] / "w1", out)
    before = tree(out)
    r = augd("run", cli["job"], "--pipeline", cli["pipeline"], "--out", out, "--seed", 99)
    assert r.returncode == 1, r.stderr
    assert "already holds a complete output" in r.stderr and "--overwrite" in r.stderr
    assert tree(out) == before, "the old output must be left untouched (bytes and mtimes)"
    r = augd("run", cli["job"], "--pipeline", cli["pipeline"], "--out", out, "--seed", 99, "--overwrite")
    assert r.returncode == 0, r.stderr
    assert os.listdir(out) == ["train"], "the replaced output must not linger"
    assert (out / "train" / "_SUCCESS").exists()
    assert shard_bytes(out / "train") == shard_bytes(cli["base"] / "s99" / "train")


def test_a_job_with_no_valid_image_fails_with_exit_1_and_no_output(tmp_path, cli):
    make_job(tmp_path / "junk", {"notes.txt": "text", "empty.jpg": "empty", "x.jpg": "random"})
    r = augd("run", tmp_path / "junk", "--pipeline", cli["pipeline"], "--out", tmp_path / "out")
    assert r.returncode == 1, r.stderr
    assert "job failed" in r.stderr and "no valid image" in r.stderr and "notes.txt" in r.stderr, r.stderr
    assert r.stdout == ""
    assert not (tmp_path / "out" / "junk").exists()


BAD_PIPELINE = "name: t\nops:\n  - random_brightness: {max_delta: 0.1}\n  - random_hue: {max_delta: 0.9}\n"


@pytest.mark.parametrize("case", ["missing --pipeline", "invalid pipeline", "no such pipeline", "input not a folder"])
def test_usage_errors_exit_2(tmp_path, cli, case):
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_PIPELINE)
    out = tmp_path / "out"
    args = {
        "missing --pipeline": (cli["job"], "--out", out),
        "invalid pipeline": (cli["job"], "--pipeline", bad, "--out", out),
        "no such pipeline": (cli["job"], "--pipeline", tmp_path / "nope.yaml", "--out", out),
        "input not a folder": (tmp_path / "nothing-here", "--pipeline", cli["pipeline"], "--out", out),
    }[case]
    r = augd("run", *args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    want = {"missing --pipeline": ["--pipeline"],
            "invalid pipeline": [str(bad), "ops[1].random_hue.max_delta", "0.9"],
            "no such pipeline": [str(tmp_path / "nope.yaml")],
            "input not a folder": [str(tmp_path / "nothing-here"), "not a folder"]}[case]
    for text in want:
        assert text in r.stderr, (text, r.stderr)
    assert not out.exists()


def _wait_for(cond, proc, deadline_s=90.0, what="condition"):
    """Poll cond() until it is truthy; fail if the process exits first or the deadline passes."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        if proc.poll() is not None:
            raise AssertionError(f"augd exited ({proc.returncode}) before {what}: {proc.stderr.read()}")
        time.sleep(0.01)  # a poll interval, not a synchronisation
    raise AssertionError(f"timed out waiting for {what}")


def test_sigkill_mid_write_leaves_no_visible_output_and_a_rerun_succeeds(tmp_path):
    job, out = tmp_path / "many", tmp_path / "out"
    base = picture(48, 64, 0)
    for i in range(300):
        (job / f"c{i % 2}").mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(job / f"c{i % 2}" / f"{i:03d}.jpg"), np.roll(base, i, axis=1)[:, :, ::-1])
    pipe = tmp_path / "p.yaml"
    pipe.write_text(pipeline_yaml(shards=1, variants=3))
    cmd = ("run", job, "--pipeline", pipe, "--out", out, "--workers", 1)
    proc = start(*cmd)

    def temp_with_data():
        if not out.is_dir():
            return None
        for name in os.listdir(out):
            if name.startswith(".many.tmp-"):
                shards = [p for p in shard_files(str(out / name)) if os.path.getsize(p) > 0]
                if shards:
                    return name
        return None

    try:
        tmp_name = _wait_for(temp_with_data, proc, what="a non-empty shard in the temp folder")
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "augd must still have been writing when it was killed"
    left = os.listdir(out)
    assert "many" not in left, left
    assert all(name.startswith(".many.tmp-") for name in left), left
    assert tmp_name in left  # hidden debris may stay; nothing that looks like output

    r = augd(*cmd[:-1], 2)  # the same job again (with both cores, to be quick)
    assert r.returncode == 0, r.stderr
    dest = out / "many"
    assert (dest / "_SUCCESS").exists()
    m = json.loads((dest / "manifest.json").read_text())
    assert (m["inputs"]["written"], m["records"]["written"]) == (300, 1200)
    assert len(records(str(dest))) == 1200


def test_inspect_prints_counts_keys_labels_and_dumps_images(cli, tmp_path):
    dest = cli["base"] / "w1" / "train"
    m = json.loads((dest / "manifest.json").read_text())
    one_shard = dest / m["shards"][1]["file"]
    r = augd("inspect", "--dump", 3, tmp_path / "dump", dest, one_shard)
    assert r.returncode == 0, r.stderr
    folder, single = r.stdout.split(f"{one_shard}: ")
    assert f"{dest}: {N_GOOD * N_VARIANTS} records in 2 shard(s)" in folder, folder
    assert single.startswith(f"{m['shards'][1]['records']} records in 1 shard(s)"), single
    for s in m["shards"]:
        assert f"{s['file']}: {s['records']}" in folder
    lines = [ln.strip() for ln in folder.splitlines()]
    (keys,) = [ln for ln in lines if ln.startswith("keys:")]
    assert keys.split(":", 1)[1].strip().split(", ") == SCHEMA
    (labels,) = [ln for ln in lines if ln.startswith("records per label:")]   # records, said so (issue 57)
    assert labels.split(":", 1)[1].strip() == ", ".join(f"{c['label']}:{c['name']}={c['records']}"
                                                         for c in m["classes"])
    from augd.io import parse_example
    examples = [parse_example(rec) for rec in records(str(dest))]
    heights = sorted(ex["image/height"] for ex in examples)
    assert any(ln.startswith(f"height min/median/max: {heights[0]}/") and f"/{heights[-1]};" in ln
               for ln in lines), folder
    dumped = sorted(os.listdir(tmp_path / "dump"))
    assert len(dumped) == 3, dumped
    for name, ex in zip(dumped, examples[:3]):
        img = cv2.imread(str(tmp_path / "dump" / name))
        assert img is not None and img.shape == (ex["image/height"], ex["image/width"], 3), name


def _graphs_elsewhere() -> list[str]:
    """The executors whose graphs run in other processes (their traits: not here, not even on a DirectRunner)."""
    from augd.defaults import ExecutorKind
    from augd.job.executors import traits
    return [k.value for k in ExecutorKind if k is not ExecutorKind.AUTO and not traits(k).engine_here
            and not traits(k).graph_here]


@pytest.mark.parametrize("executor", _graphs_elsewhere())
def test_where_the_workers_run_the_graph_the_parent_never_loads_tensorflow(cli, tmp_path, executor):
    """`augd run` on its early pool (or on Dask's workers): the workers run the graph and build the records, the
    parent only plans, orders and writes, so it never imports TensorFlow (whose import, seconds of CPU, competed
    with the workers' own on a small host). Its manifest names the workers' device and TensorFlow version, and its
    bytes are the threads run's."""
    import tensorflow as tf

    from augd.job.executors import traits
    if traits(executor).missing(executor):
        pytest.skip(traits(executor).missing(executor))
    code = ("import sys\nfrom augd.cli import main\n"
            f"rc = main(['run', {str(cli['job'])!r}, '--pipeline', {str(cli['pipeline'])!r}, '--out', "
            f"{str(tmp_path)!r}, '--workers', '2', '--executor', {executor!r}])\n"
            "print('tensorflow in parent:', 'tensorflow' in sys.modules)\nsys.exit(rc)\n")
    r = subprocess.run([sys.executable, "-c", code], env=augd_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "tensorflow in parent: False" in r.stdout, r.stdout
    m = json.loads((tmp_path / "train" / "manifest.json").read_text())
    # workers that ran a batch: one may be ready first and take all 8 images before the other is up
    assert m["graph"]["executor"] == executor and 1 <= len(m["graph"]["workers"]) <= 2
    assert (m["device"], m["tensorflow_version"]) == ("CPU", tf.__version__)
    assert shard_bytes(tmp_path / "train") == shard_bytes(cli["base"] / "w1" / "train")
