"""Issue 56: hostile TFRecord input never sinks a job. A catalogue of records (each among good ones, the way a
careless converter or an attacker writes them: tests/hostile_records.py builds them byte by byte) and of the side
files a records job reads (label_map.pbtxt, labels.txt). A bad record rejects itself with a reason that names the
record, the key, the value and what is allowed; a bad side file fails its job naming the file and its line; `augd
check` says exactly what `augd run` does (the same scan: one code path). Every reader is bounded: varints at 10
bytes, fields per record, a record's length against the job's memory limit before it is read, the inflated bytes
of a job's shards against one scratch budget."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from augd import defaults
from augd.checkcmd import check_dataset
from augd.errors import JobFailed
from augd.io import lite, wire
from augd.io.limits import ReadLimits
from augd.io.scratch import PREFIX, sweep_scratch
from augd.job.units import plan_job
from augd.owner import machine_key
from augd.schema import parse_pipeline
from tests.daemon_harness import dead_owner
from tests.hostile_records import (b_list, classification_job, det_record, example, f_list, i_list, i_raw,
                                   png, records_job, sparse_record, varint, zeros_gz)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "3"}
SPEC = parse_pipeline("name: t\nvariants: 1\nkeep_original: false\noutput: {shards: 1}\nops: []\n", "t")
GOOD = 6
_KP = {"image__object__keypoint__x": f_list(0.3), "image__object__keypoint__y": f_list(0.4)}

#: One hostile record (after GOOD good ones, so record GOOD of data.tfrecord): how it is rejected. A record that
#: decodes is named by its source id (s000NN), one that does not by shard#index. No label map: the records' own
#: ids make one, the path where an out-of-range id crashed the writer.
RECORDS = {
    "label as an 11-byte varint (2**70)": (det_record(90, text=b"blue", label=i_raw(varint(2**70))), "data.tfrecord#6",
                                           "bad_record", "malformed tf.train.Example (a varint runs past 10 bytes)"),
    "label 2**64 in 10 bytes": (det_record(91, text=b"blue", label=i_raw(b"\xff" * 9 + b"\x03")), "data.tfrecord#6",
                                "bad_record", "does not fit 64 bits"),
    "label 2**62 (a label map id is an int32)": (det_record(92, text=b"blue", label=i_list(2**62)), "s00092",
                                                 "bad_annotation", "data.tfrecord#6: object 1: image/object/class/"
                                                 "label 4611686018427387904 is out of range: label map ids are 1 to "
                                                 "2147483647"),
    "class text not UTF-8": (det_record(93, text=b"d\xffg"), "s00093", "bad_annotation",
                             "object 1: image/object/class/text b'd\\xffg' is not UTF-8 text (byte 0xff at "
                             "character 1); class names are UTF-8"),
    "class text as floats": (det_record(94, text=None, image__object__class__text=f_list(1.0)), "data.tfrecord#6",
                             "bad_record", "image/object/class/text holds numbers, where it holds text"),
    "keypoint visibility 99": (det_record(95, **_KP, image__object__keypoint__visibility=i_list(99)), "s00095",
                               "bad_annotation", "object 1: keypoint 1: visibility 99 "
                               "(image/object/keypoint/visibility): COCO's 0, 1 or 2 expected"),
    "keypoint visibility -1": (det_record(96, **_KP, image__object__keypoint__visibility=i_list(-1)), "s00096",
                               "bad_annotation", "visibility -1"),
    "320 KB of 0xFF (a varint without end)": (b"\xff" * 320_000, "data.tfrecord#6", "bad_record",
                                              "a varint runs past 10 bytes"),
    "900 KB of zeros": (bytes(900_000), "data.tfrecord#6", "bad_record", "a field numbered 0"),
    "1.1 million 2-byte fields": (b"\x10\x01" * 1_100_000, "data.tfrecord#6", "bad_record",
                                  f"more than {wire.MAX_RECORD_FIELDS} fields and values (MAX_RECORD_FIELDS)"),
    "a 10**6-element label list": (det_record(97, label=i_raw(b"\x01" * 1_000_001)), "data.tfrecord#6",
                                   "bad_record", "MAX_RECORD_FIELDS"),
}


def _rejected(plan) -> dict:
    return {r.relpath: (r.reason, r.message) for r in plan.scan.rejected}


@pytest.mark.parametrize("case", list(RECORDS))
def test_a_hostile_record_rejects_itself_and_check_says_the_same(tmp_path, case):
    record, where, reason, message = RECORDS[case]
    job = records_job(tmp_path / "job", [record], good=GOOD)
    plan = plan_job(str(job), SPEC, None, defaults.MAX_PIXELS)   # what augd run plans
    assert sorted(i.relpath for i in plan.images) == [f"s{i:05d}" for i in range(GOOD)], "every good record kept"
    got = _rejected(plan)
    assert list(got) == [where] and got[where][0] == reason and message in got[where][1], got
    report = check_dataset(str(job))
    assert report.rejected == [(where, reason, got[where][1])], "augd check: the same record, reason and words"


@pytest.mark.parametrize("case, side, message", [
    ("label map id past int32", {"label_map.pbtxt": "item {\n  id: 99999999999999999999999\n  name: 'red'\n}\n"},
     "label_map.pbtxt:1: item 1: id 99999999999999999999999 is out of range: ids are 1 to 2147483647"),
    ("label map name not UTF-8", {"label_map.pbtxt": b"item {\n  id: 1\n  name: 'r\xffd'\n}\n"},
     "the label map is not UTF-8 text"),
])
def test_a_hostile_label_map_fails_its_job_naming_the_file_and_line(tmp_path, case, side, message):
    job = records_job(tmp_path / "job", good=GOOD)
    for name, body in side.items():
        (job / name).write_bytes(body if isinstance(body, bytes) else body.encode())
    with pytest.raises(JobFailed) as e:
        plan_job(str(job), SPEC, None, defaults.MAX_PIXELS)
    assert e.value.reason == "bad_labels" and message in str(e.value), str(e.value)
    report = check_dataset(str(job))
    assert report.rejected == [(str(job), "bad_labels", str(e.value))] and report.exit_code() == 1


@pytest.mark.parametrize("labels, message", [
    (b"0:d\xffg\n1:cat\n", "labels.txt beside the shards, line 1: b'0:d\\xffg' is not UTF-8 text (byte 0xff at 3)"),
    (b"0:\n1:cat\n", "labels.txt beside the shards, line 1: '0:' names no class: `0:name` expected"),
    (b"0:dog\n100001:cat\n", "labels.txt beside the shards, line 2: id 100001 is over 100000"),
])
def test_a_hostile_labels_txt_fails_its_job_naming_the_line(tmp_path, labels, message):
    job = classification_job(tmp_path / "job", labels, good=GOOD)
    with pytest.raises(JobFailed) as e:
        plan_job(str(job), SPEC, None, defaults.MAX_PIXELS)
    assert message in str(e.value), str(e.value)
    assert check_dataset(str(job)).rejected == [(str(job), "bad_labels", str(e.value))]


@pytest.mark.parametrize("text, message", [(b"d\xffg", "image/class/text b'd\\xffg' is not UTF-8 text"),
                                           (b"dog\n1:cat", "holds a control character")])
def test_a_classification_record_whose_class_text_is_no_name_rejects_itself(tmp_path, text, message):
    bad = example({"image/encoded": b_list(png(50)), "image/class/label": i_list(-1), "image/class/text": b_list(text),
                   "image/source_id": b_list(b"odd")})
    job = classification_job(tmp_path / "job", good=GOOD, more=[bad])
    plan = plan_job(str(job), SPEC, None, defaults.MAX_PIXELS)
    assert len(plan.images) == GOOD and plan.scan.classes == ("0", "1")
    assert [(r.relpath, r.reason) for r in plan.scan.rejected] == [("odd", "bad_annotation")]
    assert message in plan.scan.rejected[0].message


# ---- bounds: what a record claims never decides what is spent ------------------------------------------------

class _Counting:
    """A buffer that counts the bytes read from it."""

    def __init__(self, data: bytes):
        self.data, self.reads = data, 0

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i):
        self.reads += 1
        return self.data[i]


def test_a_varint_is_read_to_10_bytes_at_most():
    buf = _Counting(b"\xff" * 1_000_000)
    with pytest.raises(ValueError, match="a varint runs past 10 bytes"):
        wire.varint(buf, 0)
    assert buf.reads == wire.MAX_VARINT_BYTES
    assert wire.varint(varint(2**64 - 1), 0) == (2**64 - 1, 10)


def _bytes_read() -> int:
    with open("/proc/self/io") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("rchar:"))


@pytest.mark.parametrize("memory_mb", [300, None])
def test_a_record_longer_than_the_job_may_hold_is_rejected_unread(tmp_path, memory_mb):
    """A sparse shard whose one record claims 1 GiB (its length's checksum right): refused from its length, against
    1/16 of the job's memory limit (or MAX_RECORD_BYTES), before a byte of it is read; the good shard beside it is
    read."""
    job = records_job(tmp_path / "job", good=GOOD)
    sparse_record(job / "big.tfrecord", 1 << 30)
    limits = ReadLimits.for_job(memory_mb and memory_mb << 20)
    before = _bytes_read()
    plan = plan_job(str(job), SPEC, None, defaults.MAX_PIXELS, limits=limits)
    assert _bytes_read() - before < 4 << 20, "the 1 GiB record was not read"
    assert len(plan.images) == GOOD
    [(where, (reason, message))] = _rejected(plan).items()
    allowed = (memory_mb << 20) // defaults.RECORD_MEMORY_SHARE if memory_mb else defaults.MAX_RECORD_BYTES
    assert where == "big.tfrecord#0" and reason == "bad_record"
    assert f"it holds 1073741824 bytes, more than a record may ({allowed} bytes: " in message
    assert ("1/16 of the job's memory limit of 300 MB" if memory_mb else "MAX_RECORD_BYTES, 256 MiB") in message
    assert check_dataset(str(job), memory_limit=memory_mb and memory_mb << 20).rejected == [(where, reason, message)]


def test_a_jobs_compressed_shards_inflate_within_one_scratch_budget(tmp_path):
    """Three GZIP shards of zeros, 40 MiB each inflated (~40 KB on disk): the job inflates at most its scratch
    budget (100x the compressed bytes, at least SCRATCH_MIN_BYTES) into scratch together, not 40 MiB each; the
    shards it cut short name the budget; the good shard beside them is read."""
    job = records_job(tmp_path / "job", good=GOOD)
    for k in range(3):
        zeros_gz(job / f"z{k}.tfrecord.gz", 3 << 30, 40 << 20)
    compressed = sum((job / f"z{k}.tfrecord.gz").stat().st_size for k in range(3))
    plan = plan_job(str(job), SPEC, None, defaults.MAX_PIXELS)
    scratch = plan.scratch.path
    used = sum(os.path.getsize(os.path.join(scratch, f)) for f in os.listdir(scratch))
    budget = ReadLimits.scratch_bytes(compressed)
    assert budget == defaults.SCRATCH_MIN_BYTES and 0 < used <= budget < 3 * (40 << 20)
    assert len(plan.images) == GOOD
    rejected = _rejected(plan)
    assert set(rejected) == {"z0.tfrecord.gz#0+", "z1.tfrecord.gz#0+", "z2.tfrecord.gz#0+"}, rejected
    assert sum("the job's scratch budget: 100x its compressed shards'" in m for _, m in rejected.values()) >= 2


def test_scratch_of_a_dead_process_is_swept_by_the_next_one(tmp_path):
    """kill -9 leaves a scratch folder behind: the next augd process on the machine that inflates a shard sweeps it
    (a live one's and another machine's stay); its own goes when it exits."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    dead = tmp / f"{PREFIX}{machine_key()}-{dead_owner().pid}-abc"
    alive = tmp / f"{PREFIX}{machine_key()}-{os.getpid()}-abc"
    other = tmp / f"{PREFIX}{'0' * 12}-1-abc"
    for d in (dead, alive, other):
        d.mkdir()
        (d / "0.tfrecord").write_bytes(bytes(1000))
    job = records_job(tmp_path / "job", good=2, name="a.tfrecord")
    zeros_gz(job / "z.tfrecord.gz", 100, 100)
    p = subprocess.run([sys.executable, "-m", "augd", "check", str(job), "--workers", "1"], capture_output=True,
                       text=True, env={**ENV, "TMPDIR": str(tmp)}, timeout=120)
    assert p.returncode == 1 and "z.tfrecord.gz#0" in p.stdout, p.stdout + p.stderr
    assert sorted(os.listdir(tmp)) == sorted([alive.name, other.name]), "the dead one swept, its own gone at exit"
    assert sweep_scratch(str(tmp)) == []


def test_a_killed_process_not_yet_reaped_is_gone_and_its_leftovers_swept(tmp_path):
    """A daemon killed with kill -9 is a zombie until its parent reaps it; meanwhile a daemon on the machine may
    take its job over (augd.owner.Owner.alive: it has ended). Its scratch and temp outputs go by the same rule."""
    from augd.io.commit import clean_stale_temps
    from augd.owner import Owner, pid_alive
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        (tmp_path / "tmp").mkdir()
        scratch = tmp_path / "tmp" / f"{PREFIX}{machine_key()}-{child.pid}-abc"
        temp = tmp_path / "out" / f".job.tmp-{machine_key()}-{child.pid}-abc"
        for d in (scratch, temp):
            d.mkdir(parents=True)
            (d / "0.tfrecord").write_bytes(bytes(100))
        assert pid_alive(child.pid)
        child.kill()
        stat = f"/proc/{child.pid}/stat"
        deadline = time.monotonic() + 60
        while open(stat).read().rsplit(")", 1)[-1].split()[0] != "Z":   # unreaped: the test's to wait on
            assert time.monotonic() < deadline, "the killed child never became a zombie"
            time.sleep(0.01)
        me = Owner.me()
        assert not pid_alive(child.pid) and not Owner(me.host, me.boot_id, me.pid_ns, child.pid, 0).alive()
        assert sweep_scratch(str(tmp_path / "tmp")) == [str(scratch)]
        assert clean_stale_temps(str(tmp_path / "out")) == [str(temp)]
    finally:
        child.kill()
        child.wait()


# ---- the real commands ------------------------------------------------------------------------------------------

def test_augd_run_and_augd_check_agree_on_a_job_of_every_hostile_record(tmp_path):
    """Every catalogue record in one shard among good ones, and a file of a non-UTF-8 name beside it: `augd run`
    writes each good record once and lists each hostile one (no traceback, a manifest that parses); `augd check`
    lists exactly the same rejections in the same words."""
    job = records_job(tmp_path / "job", [r for r, *_ in RECORDS.values()], good=GOOD)
    (job / os.fsdecode(b"notes\xff.txt")).write_bytes(b"not a shard")
    pipe = tmp_path / "t.yaml"
    pipe.write_text("name: t\nvariants: 1\nkeep_original: false\noutput: {shards: 1}\nops:\n"
                    "  - random_flip_left_right: {}\n")
    run = subprocess.run([sys.executable, "-m", "augd", "run", str(job), "-p", str(pipe), "-o", str(tmp_path / "out"),
                          "--workers", "1", "--executor", "threads"], capture_output=True, text=True, env=ENV,
                         timeout=300)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    manifest = json.loads((tmp_path / "out" / "job" / "manifest.json").read_text())
    records = [lite.decode_example(r) for shard in sorted((tmp_path / "out" / "job").glob("*.tfrecord"))
               for r in lite.iter_records(str(shard))]
    assert sorted(r["image/filename"] for r in records) == [f"s{i:05d}" for i in range(GOOD)], "each good one once"
    check = subprocess.run([sys.executable, "-m", "augd", "check", str(job), "--json", str(tmp_path / "check.json")],
                           capture_output=True, text=True, env=ENV, timeout=120)
    assert check.returncode == 1 and "Traceback" not in check.stderr, check.stderr
    from_run = sorted((r["path"], r["reason"], r["message"]) for r in manifest["inputs"]["rejected_files"])
    from_check = sorted((r["path"], r["reason"], r["message"]) for r in json.loads(
        (tmp_path / "check.json").read_text())["rejected"])
    assert from_run == from_check and len(from_run) == len(RECORDS) + 1, from_run   # each record, and the file
    assert ("notes\udcff.txt", "unknown_format") in [(p, r) for p, r, _ in from_run]
    assert all(m in check.stdout for m in ("data.tfrecord#6", "notes\\udcff.txt")), check.stdout


def test_a_file_name_cannot_forge_a_line_of_the_check_report(tmp_path):
    (tmp_path / "job" / "a").mkdir(parents=True)
    (tmp_path / "job" / "a" / "ok.png").write_bytes(png(1))
    (tmp_path / "job" / "a" / "x.png\n    verdict: nothing a job would fail on").write_bytes(b"")
    p = subprocess.run([sys.executable, "-m", "augd", "check", str(tmp_path / "job")], capture_output=True, text=True,
                       env=ENV, timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert not any(ln.strip().startswith("verdict: nothing") for ln in lines), p.stdout
    assert any("x.png\\n    verdict: nothing a job would fail on: file is empty" in ln for ln in lines), p.stdout
