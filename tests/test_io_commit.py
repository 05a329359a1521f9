"""augd.io.commit: atomic output, crash debris, overwrite, stale temp cleanup; with real shards and SIGKILL."""
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from augd.io.commit import AtomicOutput, OutputExists, clean_stale_temps, is_complete, write_json, write_text
from augd.io.shards import ShardWriter

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDS = [f"rec{i}".encode() * 50 for i in range(9)]


def write_job(out_root: str, job="job", *, overwrite=False, compression="none", records=RECORDS, extra=None):
    with AtomicOutput(out_root, job, overwrite=overwrite) as o:
        with ShardWriter(o.tmp_dir, job, 3, compression) as w:
            for i, r in enumerate(records):
                w.write(i, r)
        write_json(f"{o.tmp_dir}/manifest.json", {"records": len(records), "extra": extra})
        write_text(f"{o.tmp_dir}/labels.txt", "0:cat\n1:dog\n")
        o.commit()
    return o.dest


def visible(root) -> list[str]:
    return sorted(n for n in os.listdir(root) if not n.startswith("."))


def test_commit_makes_a_complete_destination(tmp_path):
    dest = write_job(str(tmp_path), compression="gzip")
    assert os.listdir(tmp_path) == ["job"]  # no temp left behind
    assert is_complete(dest)
    assert sorted(os.listdir(dest)) == ["_SUCCESS", "job-00000-of-00003.tfrecord.gz", "job-00001-of-00003.tfrecord.gz",
                                        "job-00002-of-00003.tfrecord.gz", "labels.txt", "manifest.json"]
    ds = tf.data.TFRecordDataset(sorted(tf.io.gfile.glob(f"{dest}/*.gz")), compression_type="GZIP")
    assert sorted(ds.as_numpy_iterator()) == sorted(RECORDS)
    assert json.loads(open(f"{dest}/manifest.json").read()) == {"records": 9, "extra": None}


def test_same_inputs_give_identical_output_bytes(tmp_path):
    trees = []
    for run in ("a", "b"):
        dest = write_job(str(tmp_path / run), compression="gzip", extra={"z": 1, "a": [1, 2]})
        trees.append({n: open(os.path.join(dest, n), "rb").read() for n in sorted(os.listdir(dest))})
    assert trees[0] == trees[1]


def test_exception_inside_the_block_leaves_nothing_and_a_later_run_succeeds(tmp_path):
    with pytest.raises(RuntimeError, match="disk on fire"):
        with AtomicOutput(str(tmp_path), "job") as o:
            with ShardWriter(o.tmp_dir, "job", 2) as w:
                w.write(0, b"half")
                raise RuntimeError("disk on fire")
    assert os.listdir(tmp_path) == []
    assert is_complete(write_job(str(tmp_path)))


def test_leaving_without_commit_discards(tmp_path):
    with AtomicOutput(str(tmp_path), "job") as o:
        write_text(f"{o.tmp_dir}/x", "x")
    assert os.listdir(tmp_path) == []


def test_existing_output_needs_overwrite(tmp_path):
    dest = write_job(str(tmp_path), records=RECORDS[:2])
    with pytest.raises(OutputExists, match="--overwrite"):
        write_job(str(tmp_path))
    assert [n for n in os.listdir(tmp_path)] == ["job"]
    write_job(str(tmp_path), overwrite=True, records=RECORDS[:5])
    assert os.listdir(tmp_path) == ["job"]  # the old output moved aside is gone too
    assert json.loads(open(f"{dest}/manifest.json").read())["records"] == 5
    assert is_complete(dest)


def test_incomplete_destination_is_crash_debris_and_is_replaced(tmp_path):
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "job-00000-of-00003.tfrecord").write_bytes(b"partial")  # renamed in, no _SUCCESS yet
    assert not is_complete(str(tmp_path / "job"))
    dest = write_job(str(tmp_path))  # no overwrite needed
    assert is_complete(dest) and os.listdir(tmp_path) == ["job"]


@pytest.mark.parametrize("name", ["", ".hidden", "a/b"])
def test_job_name_must_be_a_plain_folder_name(tmp_path, name):
    with pytest.raises(ValueError, match="job name"):
        AtomicOutput(str(tmp_path), name)


CHILD = textwrap.dedent("""
    import sys
    from augd.io.commit import AtomicOutput
    from augd.io.shards import ShardWriter
    with AtomicOutput(sys.argv[1], "job", overwrite=sys.argv[2] == "1") as o:
        w = ShardWriter(o.tmp_dir, "job", 2)
        for i in range(100):
            w.write(i, b"x" * 1000)
        print(o.tmp_dir, flush=True)
        sys.stdin.read()  # hold here, mid-write with shards open, until killed
        w.close()
        o.commit()
""")


def run_and_kill(out_root: str, overwrite: bool) -> str:
    env = {**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "2"}
    child = subprocess.Popen([sys.executable, "-c", CHILD, out_root, "1" if overwrite else "0"], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        tmp_dir = child.stdout.readline().strip()  # returns "" if the child died early
        assert tmp_dir, "child exited before reaching the write"
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=60) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdin.close()
        child.stdout.close()
    return tmp_dir


def test_sigkill_mid_write_leaves_no_destination_and_a_later_run_succeeds(tmp_path):
    tmp_dir = run_and_kill(str(tmp_path), overwrite=False)
    assert visible(tmp_path) == []
    assert os.path.isdir(tmp_dir) and os.path.basename(tmp_dir).startswith(".job.tmp-")
    assert clean_stale_temps(str(tmp_path)) == [tmp_dir]
    assert os.listdir(tmp_path) == []
    assert is_complete(write_job(str(tmp_path)))


def test_sigkill_during_an_overwrite_keeps_the_old_complete_output(tmp_path):
    dest = write_job(str(tmp_path), records=RECORDS[:4])
    run_and_kill(str(tmp_path), overwrite=True)
    assert visible(tmp_path) == ["job"] and is_complete(dest)
    assert json.loads(open(f"{dest}/manifest.json").read())["records"] == 4
    assert len(clean_stale_temps(str(tmp_path))) == 1


def test_clean_stale_temps_keeps_live_runs(tmp_path):
    dead = tmp_path / ".other.tmp-999999999-abcd1234"  # beyond pid_max: no such process
    dead_old = tmp_path / ".other.tmp-999999999-abcd1234.old"
    for d in (dead, dead_old):
        d.mkdir()
    (tmp_path / ".not-ours").mkdir()
    with AtomicOutput(str(tmp_path), "job") as o:
        assert clean_stale_temps(str(tmp_path)) == [str(dead), str(dead_old)]
        assert os.path.isdir(o.tmp_dir)  # our own pid is alive
        o.commit()
    assert sorted(os.listdir(tmp_path)) == [".not-ours", "job"]
    assert clean_stale_temps(str(tmp_path / "missing")) == []


def test_gfile_url_out_root():
    root = "ram://commit-test/out"
    try:
        dest = write_job(root)
        assert is_complete(dest)
        assert tf.io.gfile.listdir(root) == ["job"]
        with pytest.raises(OutputExists):
            write_job(root)
        write_job(root, overwrite=True, records=RECORDS[:1])
        assert tf.io.gfile.exists(f"{dest}/_SUCCESS")
        with tf.io.gfile.GFile(f"{dest}/manifest.json") as f:
            assert json.load(f)["records"] == 1
        assert clean_stale_temps(root) == []
    finally:
        tf.io.gfile.rmtree("ram://commit-test")
