"""Issue 56's probes: hostile inputs through real `augd run`, `augd check` and `augd import-config` processes,
each case's exit code, message, peak memory (GNU time's maximum resident set) and wall time.

    python -m bench.hostile                       # every case (~3 min once fixed; a before can take far longer)
    python -m bench.hostile --only varint,import  # the cases whose name holds one of these words
    python -m bench.hostile --timeout 120 --json bench/results/hostile.json
    python -m bench.hostile --daemon              # the mixed inbox through augd serve (~30 s once fixed)

A case still running at --timeout is killed and says so. The message is the line that names the hostile part
(the case's needle), else the last line of a traceback, else the first line of stderr. Figures only: nothing is
asserted here (tests/test_hostile_records.py, tests/test_hostile_import_config.py assert the behaviour).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.common import REPO, header, write_json

TIME = shutil.which("time") or "/usr/bin/time"
PIPELINE = "name: t\nvariants: 1\nkeep_original: false\noutput: {shards: 1}\nops:\n  - random_flip_left_right: {}\n"
LABEL_MAP = "item {\n  id: 1\n  name: 'red'\n}\n"   # tests.hostile_records.LABEL_MAP
GOOD = 20   # good records beside each hostile one: what a crash of the job loses


def _augd() -> list[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "augd")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "augd"]


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return out


def _du(path: str) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_blocks * 512
            except OSError:
                pass
    return total


def measure(cmd: list[str], timeout: float, env: dict | None = None, scratch: str | None = None) -> dict:
    """Run `cmd` under GNU time; kill what it runs at `timeout`. `scratch`: a folder whose disk use is sampled."""
    out = tempfile.NamedTemporaryFile("r", suffix=".time", delete=False)
    p = subprocess.Popen([TIME, "-v", "-o", out.name, *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env={**os.environ, **(env or {})})
    peak_scratch = [0]
    stop = threading.Event()

    def sample():
        while not stop.wait(0.2):
            peak_scratch[0] = max(peak_scratch[0], _du(scratch))
    sampler = threading.Thread(target=sample, daemon=True)
    if scratch:
        sampler.start()
    killed = False
    try:
        stdout, stderr = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        killed = True
        for child in _children(p.pid):   # the command, not GNU time: time still reports on it
            os.kill(child, signal.SIGKILL)
        stdout, stderr = p.communicate()
    stop.set()
    stats = Path(out.name).read_text()
    os.unlink(out.name)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stats)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", stats)
    seconds = (int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3))) if wall else None
    return {"exit": "killed" if killed else p.returncode, "peak_mb": round(int(rss.group(1)) / 1024) if rss else None,
            "seconds": round(seconds, 1) if seconds is not None else None, "stdout": stdout.decode(errors="replace"),
            "stderr": stderr.decode(errors="replace"), "scratch_peak_mb": round(peak_scratch[0] / 2**20)
            if scratch else None}


def message(r: dict, needle: str) -> str:
    """The line that names the hostile part (`needle`), else a traceback's last line, else the summary."""
    lines = [ln.strip() for ln in (r["stderr"] + "\n" + r["stdout"]).splitlines()
             if ln.strip() and " INFO " not in ln and " WARNING " not in ln]
    if needle:
        hit = [ln for ln in lines if needle in ln and not ln.startswith(("File ", "Traceback"))]
        if hit:
            return hit[0][:240]
    if "Traceback" in r["stderr"]:
        return [ln for ln in r["stderr"].splitlines() if ln.strip()][-1][:240]
    return lines[-1][:240] if lines else ""


# ---- the inputs (tests/hostile_records.py builds them, for the tests too) ------------------------------------

def _records_job(root: Path, bad: list[bytes], *, label_map: str | None = LABEL_MAP) -> Path:
    from tests.hostile_records import records_job
    return records_job(root, bad, good=GOOD, label_map=label_map)


def _classification_job(root: Path, labels_txt: bytes) -> Path:
    from tests.hostile_records import classification_job
    return classification_job(root, labels_txt, good=GOOD)


def build(case: str, d: Path) -> tuple[list[list[str]], str, dict]:
    """(the commands of a case, each measured, the needle of its message, env)"""
    from tests.hostile_records import det_record, f_list, frame, i_list, i_raw, sparse_record, varint, zeros_gz
    pipe = d / "t.yaml"
    pipe.write_text(PIPELINE)
    out = d / "out"
    job = d / "job"

    def run_check(*extra):
        return [[*_augd(), "run", str(job), "-p", str(pipe), "-o", str(out), *extra], [*_augd(), "check", str(job)]]

    if case == "label_2^70":
        _records_job(job, [det_record(99, text=b"blue", label=i_raw(varint(2**70)))], label_map=None)
        return run_check(), "#20", {}
    if case == "label_2^62":
        _records_job(job, [det_record(99, text=b"blue", label=i_list(2**62))], label_map=None)
        return run_check(), "#20", {}
    if case == "labelmap_huge_id":
        _records_job(job, [], label_map="item {\n  id: 99999999999999999999999\n  name: 'red'\n}\n")
        return run_check(), "label_map", {}
    if case == "class_text_not_utf8":
        _records_job(job, [det_record(99, text=b"d\xffg")], label_map=None)
        return run_check(), "#20", {}
    if case == "labels_txt_not_utf8":
        _classification_job(job, b"0:d\xffg\n1:cat\n")
        return run_check(), "labels.txt", {}
    if case == "varint_gz":
        job.mkdir()
        recs = [det_record(i) for i in range(GOOD)] + [b"\xff" * 500_000]
        (job / "data.tfrecord.gz").write_bytes(gzip.compress(b"".join(frame(r) for r in recs)))
        (job / "label_map.pbtxt").write_text(LABEL_MAP)
        return [[*_augd(), "check", str(job)]], "#20", {"size": (job / "data.tfrecord.gz").stat().st_size}
    if case.startswith("varint_"):
        n = int(case.split("_")[1].rstrip("k")) * 1000
        _records_job(job, [b"\xff" * n])
        return run_check(), "#20", {}
    if case == "zero_record_900MB_gz":
        job.mkdir()
        zeros_gz(job / "data.tfrecord.gz", 900 << 20, 900 << 20)
        return [[*_augd(), "check", str(job)]], "#0", {"size": (job / "data.tfrecord.gz").stat().st_size}
    if case == "sparse_1GiB_record":
        _records_job(job, [])
        sparse_record(job / "big.tfrecord", 1 << 30)
        return [[*_augd(), "check", str(job)], [*_augd(), "run", str(job), "-p", str(pipe), "-o", str(out),
                                                "--max-memory-mb", "300"]], "big.tfrecord", {}
    if case == "three_gz_scratch":
        _records_job(job, [])
        for k in range(3):
            zeros_gz(job / f"z{k}.tfrecord.gz", 3 << 30, 1 << 30)
        sizes = sorted({(job / f"z{k}.tfrecord.gz").stat().st_size for k in range(3)})
        return run_check(), "z0.tfrecord", {"scratch": True, "size": sizes}
    if case == "keypoint_visibility_99":
        kp = {"image__object__keypoint__x": f_list(0.3), "image__object__keypoint__y": f_list(0.4),
              "image__object__keypoint__visibility": i_list(99)}
        _records_job(job, [det_record(99, **kp)])
        return run_check(), "#20", {}
    if case == "labels_txt_empty_name":
        _classification_job(job, b"0:\n1:cat\n")
        return run_check(), "labels.txt", {}
    if case == "class_text_floats":
        _records_job(job, [det_record(99, text=None, image__object__class__text=f_list(1.0))])
        return run_check(), "#20", {}
    if case == "newline_file_name":
        from tests.hostile_records import png
        (job / "a").mkdir(parents=True)
        (job / "a" / "ok.png").write_bytes(png(1))
        (job / "a" / "x.png\n    ok.png: forged line").write_bytes(b"")
        return [[*_augd(), "check", str(job)]], "forged", {}
    if case.startswith("import_"):
        return _import_case(case, d), "", {}
    raise SystemExit(f"unknown case {case}")


def _config(options: str, wrap: bool = True) -> str:
    return f"train_config {{\n  batch_size: 2\n{options}}}\n" if wrap else options


def _option(body: str) -> str:
    return f"  data_augmentation_options {{\n    {body}\n  }}\n"


IMPORT_CASES = {
    "import_probability_abc": _config(_option('random_horizontal_flip { probability: "abc" }')),
    "import_patches_1e999": _config(_option("random_black_patches { max_black_patches: 1e999 }")),
    "import_patches_nan": _config(_option("random_black_patches { max_black_patches: nan }")),
    "import_pad_color_nan": _config(_option("random_pad_image { pad_color: nan pad_color: 0 pad_color: 0 }")),
    "import_target_height_1e999": _config(_option("random_resize_method { target_height: 1e999 target_width: 9 }")),
    "import_string_for_number": _config(_option('random_adjust_brightness { max_delta: "0.2" }')),
    "import_probability_nan": _config(_option("random_horizontal_flip { probability: nan }")),
    "import_probability_negative": _config(_option("random_horizontal_flip { probability: -0.5 }")),
}


def _import_case(case: str, d: Path) -> list[list[str]]:
    cfg = d / "pipeline.config"
    if case in IMPORT_CASES:
        cfg.write_text(IMPORT_CASES[case])
    elif case == "import_nesting_1000":
        cfg.write_text("train_config { " + "a { " * 1000 + "}" * 1000 + " }\n")
    elif case.startswith("import_fields_"):
        n = int(case.split("_")[2].rstrip("k")) * 1000
        cfg.write_text(_config(_option("random_horizontal_flip { }") + "  b: 1\n" * n))
    elif case.startswith("import_string_"):
        n = int(case.split("_")[2].rstrip("KB")) << 10
        cfg.write_text(_config(_option("random_horizontal_flip { }")) + 'x: "' + "a" * n + '"\n')
    elif case.startswith("import_size_"):
        n = int(case.split("_")[2].rstrip("MB")) << 20
        cfg.write_text(_config(_option("random_horizontal_flip { }")) + ("# " + "c" * 98 + "\n") * (n // 100))
    return [[*_augd(), "import-config", str(cfg), "-o", str(d / "out.yaml"), "--approximate"]]


CASES = ["label_2^70", "label_2^62", "labelmap_huge_id", "class_text_not_utf8", "labels_txt_not_utf8", "varint_80k",
         "varint_320k", "varint_gz", "zero_record_900MB_gz", "sparse_1GiB_record", "three_gz_scratch", "keypoint_visibility_99",
         "labels_txt_empty_name", "class_text_floats", "newline_file_name", *IMPORT_CASES, "import_nesting_1000",
         "import_fields_20k", "import_fields_80k", "import_string_900KB", "import_string_5000KB", "import_size_100MB"]


def mixed_daemon(timeout: float) -> dict:
    """tests.hostile_records.drop_mixed_inbox through a real `augd serve` (job_timeout_seconds 5,
    health_stale_seconds 2, job_memory_mb 400): each job's outcome, /healthz's answers polled every 0.2 s, the
    daemon's resident memory (idle, peak), the time until every job had an outcome."""
    import collections

    from augd.io import lite
    from tests.daemon_harness import Daemon, RssSampler, write_config
    from tests.hostile_records import drop_mixed_inbox
    with tempfile.TemporaryDirectory(prefix="augd-hostile-daemon-") as tmp:
        root = Path(tmp)
        d = Daemon(write_config(root, settle_seconds=0.5, rescan_seconds=1, job_timeout_seconds=5,
                                health_stale_seconds=2, job_memory_mb=400, executor="threads")).start()
        codes: list = []
        stop = threading.Event()

        def poll():
            while not stop.wait(0.2):
                got = d.try_get("/healthz")
                codes.append((round(time.monotonic() - t0, 1), got[0] if got else None))
        try:
            d.wait_ready()
            with RssSampler(d.proc.pid) as rss:
                stop.wait(1.0)
                idle, t0 = max(rss.samples), time.monotonic()
                poller = threading.Thread(target=poll, daemon=True)
                poller.start()
                holds = drop_mixed_inbox(d.inbox)
                jobs = [*holds, "h-slowscan"]
                while time.monotonic() - t0 < timeout and not all(
                        (d.done / j).is_dir() or (d.failed / j / "failure.json").is_file() for j in jobs):
                    stop.wait(0.2)
                seconds = round(time.monotonic() - t0, 1)
                stop.set()
                poller.join()
            out = {}
            for j in jobs:
                if (d.done / j).is_dir():
                    n = sum(1 for s in (d.out / j).glob("*.tfrecord") for _ in lite.iter_records(str(s)))
                    out[j] = f"done: {n} of its {holds.get(j, 0)} good records written"
                elif (d.failed / j / "failure.json").is_file():
                    f = json.loads((d.failed / j / "failure.json").read_text())
                    out[j] = f"failed ({f['reason']}): {f['message'][:200]}" + (
                        f" [its {holds[j]} good records not written]" if holds.get(j) else "")
                else:
                    out[j] = f"no outcome after {timeout:g} s"
            bad = [t for t, c in codes if c != 200]
            return {"seconds": seconds, "jobs": out, "healthz": dict(collections.Counter(str(c) for _, c in codes)),
                    "healthz_not_200": [bad[0], bad[-1]] if bad else None, "rss_idle_mb": idle >> 20,
                    "rss_peak_mb": rss.peak >> 20, "crashed": "Traceback" in d.log()}
        finally:
            stop.set()
            d.stop()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated words: the cases whose name holds one")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds before a command is killed (default 300)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--daemon", action="store_true", help="the mixed inbox through a real augd serve instead")
    args = ap.parse_args(argv)
    words = [w for w in args.only.split(",") if w]
    rows = []
    sys.path.insert(0, str(REPO))
    if args.daemon:
        got = mixed_daemon(args.timeout)
        for job, outcome in got.pop("jobs").items():
            print(f"{job:<13} {outcome}")
        print(json.dumps(got))
        if args.json:
            write_json(args.json, {**header("bench.hostile", argv), "daemon": got})
        return 0
    for case in CASES:
        if words and not any(w in case for w in words):
            continue
        with tempfile.TemporaryDirectory(prefix="augd-hostile-") as tmp:
            d = Path(tmp)
            cmds, needle, info = build(case, d)
            scratch = None
            env = {"PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3"}
            if info.pop("scratch", False):
                scratch = str(d / "tmp")
                os.mkdir(scratch)
                env["TMPDIR"] = scratch
            for cmd in cmds:
                r = measure(cmd, args.timeout, env, scratch)
                verb = cmd[len(_augd())]
                row = {"case": case, "verb": verb, "exit": r["exit"], "peak_mb": r["peak_mb"], "seconds": r["seconds"],
                       "message": message(r, needle), **info}
                if scratch:
                    row["scratch_peak_mb"] = r["scratch_peak_mb"]
                    row["scratch_left_mb"] = round(_du(scratch) / 2**20)
                rows.append(row)
                print(f"{case:<28} {verb:<13} exit {str(r['exit']):<6} {r['peak_mb']!s:>6} MB {r['seconds']!s:>7} s  "
                      f"{row['message']}" + (f"  [scratch peak {row['scratch_peak_mb']} MB, left "
                                             f"{row['scratch_left_mb']} MB]" if scratch else ""), flush=True)
    if args.json:
        write_json(args.json, {**header("bench.hostile", argv), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
