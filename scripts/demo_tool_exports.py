#!/usr/bin/env python3
"""One small synthetic export per annotation tool's format (DOTA as downloaded, YOLO-OBB, LabelMe, CVAT for images
1.1, Label Studio JSON), each written as the tool writes it (tests/exports.py) with a rectangle, a rotated
rectangle and a polygon per image, keypoints where the tool has them (tests/test_tool_keypoints.py's car and
face), and planted faults; each run for real
(`augd run JOB -p detection-ssd --annotations FMT`, a subprocess) and summed up from its manifest and records:
images written of those seen, records, objects in and out (kept, ignored, dropped), oriented boxes and keypoints in
the records, and every rejection with the reason augd gives.

    .venv/bin/python scripts/demo_tool_exports.py [WORK_DIR]
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from augd.io.lite import OBB_KEYS, decode_example, iter_records  # noqa: E402
from tests.annotated import Img, Shape  # noqa: E402
from tests.exports import Rot, cvat_job, dota_job, label_studio_job, labelme_job, yolo_obb_job  # noqa: E402
from tests.test_tool_exports import scenes  # noqa: E402
from tests.test_tool_keypoints import _car, _face  # noqa: E402


def _more(fmt: str) -> list:
    """The format's test scenes and three more images of a box and a rotated rectangle (train); for CVAT and Label
    Studio one more of a car whose lights are its keypoints (and for CVAT a face skeleton framed by a head box)."""
    imgs = scenes(fmt)
    for i in range(3, 6):
        imgs.append(Img(f"s{i}.png", 80, 100, (Shape("car", (6, 6 + i, 30, 24), (230, 20, 20)),
                                               Rot("plane", 50, 50, 30, 10, 20 * i, (20, 20, 230))), split="train"))
    if fmt in ("cvat", "label_studio"):
        imgs.append(Img("k0.png", 80, 100, (_car(0),) + ((_face(True),) if fmt == "cvat" else ()), split="train",
                        background=(0, 0, 0)))
    return imgs


def _edit(path: Path, fn) -> None:
    path.write_text(fn(path.read_text()))


def _dota(root: Path) -> None:
    dota_job(str(root / "tmp"), _more("dota"))
    for split in ("train", "validation"):   # DOTA as downloaded: <split>/images and <split>/labelTxt
        for kind in ("images", "labelTxt"):
            if (root / "tmp" / kind / split).is_dir():
                (root / ("val" if split == "validation" else split)).mkdir(exist_ok=True)
                (root / "tmp" / kind / split).rename(root / ("val" if split == "validation" else split) / kind)
    _edit(root / "train" / "labelTxt" / "s3.txt", lambda t: t.replace("car 0", "car 2"))      # difficult 2
    _edit(root / "train" / "labelTxt" / "s4.txt", lambda t: t + "\n1 2 3 4 5 6 car\n")        # 7 fields
    for d in sorted((root / "tmp").rglob("*"), reverse=True):
        d.rmdir() if d.is_dir() else d.unlink()
    (root / "tmp").rmdir()


def _yolo_obb(root: Path) -> None:
    yolo_obb_job(str(root), _more("yolo_obb"))
    _edit(root / "labels" / "train" / "s3.txt", lambda t: "0 0.5 0.5 0.2 0.2\n" + t)           # a YOLO box line


def _labelme(root: Path) -> None:
    labelme_job(str(root), _more("labelme"))
    d = json.loads((root / "train" / "s3.json").read_text())
    d["shapes"].append({"label": "car", "shape_type": "point", "points": [[3, 3]]})          # a point of no group
    (root / "train" / "s3.json").write_text(json.dumps(d))
    d = json.loads((root / "train" / "s4.json").read_text())
    d["imageHeight"] = 81                                                                      # not the image's
    (root / "train" / "s4.json").write_text(json.dumps(d))


def _cvat(root: Path) -> None:
    cvat_job(str(root), _more("cvat"))
    xml = root / "annotations.xml"
    _edit(xml, lambda t: t.replace('name="train/s3.png"', 'name="../../etc/s3.png"'))         # out of the job
    _edit(xml, lambda t: t.replace('name="train/s4.png" subset="Train" width="100" height="80"><box label="car"',
                                   'name="train/s4.png" subset="Train" width="100" height="80"><box label="bus"'))


def _label_studio(root: Path) -> None:
    label_studio_job(str(root), _more("label_studio"))
    d = json.loads((root / "export.json").read_text())
    d[3]["annotations"].append(d[3]["annotations"][0])                                        # two annotators
    d[4]["annotations"][0]["result"].append({"type": "keypointlabels", "id": "k9", "value": {
        "x": 1, "y": 2, "width": 1, "keypointlabels": ["car"]}})                               # related to nothing
    (root / "export.json").write_text(json.dumps(d))


JOBS = {"dota": _dota, "yolo_obb": _yolo_obb, "labelme": _labelme, "cvat": _cvat, "label_studio": _label_studio}


def summary(fmt: str, out: Path) -> str:
    m = json.loads((out / "manifest.json").read_text())
    ins, obj = m["inputs"], m["annotations"]["objects"]
    recs = [decode_example(r) for s in sorted(out.glob("*.tfrecord*")) for r in iter_records(str(s))]
    obb = sum(len(r.get(OBB_KEYS[0], [])) for r in recs)
    points = sum(sum(v > 0 for v in r.get("image/object/keypoint/visibility", [])) for r in recs)
    lines = [f"{fmt}: images {ins['written']} written of {ins['seen']}, {len(recs)} records; objects "
             f"{obj['in']} -> {obj['out']} ({obj['kept']} kept, {obj['ignored']} ignored, {obj['dropped']} dropped); "
             f"oriented boxes {obb} in {sum(bool(r.get(OBB_KEYS[0])) for r in recs)} records; labelled keypoints "
             f"{points}"]
    lines += [f"  rejected {r['path']} ({r['reason']}): {r['message']}" for r in ins["rejected_files"]]
    return "\n".join(lines)


def main() -> int:
    work = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="augd-exports-"))
    for fmt, make in JOBS.items():
        job = work / "jobs" / fmt
        job.mkdir(parents=True, exist_ok=False)
        make(job)
        run = subprocess.run([sys.executable, "-m", "augd", "run", str(job), "-p", "detection-ssd", "--annotations",
                              fmt, "-o", str(work / "out"), "--workers", "1", "--max-rejected", "0.5", "--quiet"],
                             capture_output=True, text=True, timeout=900, cwd=REPO)
        if run.returncode:
            print(f"{fmt}: augd run failed ({run.returncode}):\n{run.stdout}{run.stderr}", file=sys.stderr)
            return run.returncode
        print(summary(fmt, work / "out" / fmt))
    print(f"(jobs and outputs in {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
