"""`augd check PATH`: what a job would meet in a dataset, before any job runs. TensorFlow-free.

From a job's plan (the folder read as `augd run` reads it: the same scan and annotation readers, class folders,
every registered format; annotations.repair standard; augd/checkcmd.py plans it for the verb, run_job for a job
with a check) it reports, per split: images and objects per class, box sizes (COCO's
small < 32², medium < 96², large), images with no object and EXIF-rotated images; then the near misses `repair`
would mend (by rule), the inputs a job would reject (by reason, each with its message), classes missing from a
fixed label map, and near-duplicate images within a split and across splits (augd.check.hashing: a perceptual hash
that survives re-encoding and resizing). A pair across splits is a leak: the same photo trains and validates.

`exit_code` is 1 when the dataset holds what would fail or silently harm a job: a leak, or an input a job would
reject; 0 otherwise.
"""
from __future__ import annotations

import collections
import json
from dataclasses import dataclass, field

from augd.annotations.repair import summary
from augd.check.hashing import MAX_DISTANCE, hash_files, near_pairs
from augd.errors import RejectReason, undecodable_pixels
from augd.files import one_line
from augd.io.limits import no_beat

__all__ = ["FAIL_ON", "CheckReport", "check_plan", "text"]

#: COCO's object sizes by box area in pixels: small under 32², medium under 96², large from there
SMALL, MEDIUM = 32 * 32, 96 * 96
FAIL_ON = ("leak", "rejected")


@dataclass
class SplitStats:
    images: int = 0          # the images a job would write (those it would reject counted in `rejected`)
    rejected: int = 0
    objects: collections.Counter = field(default_factory=collections.Counter)   # class -> objects (or images)
    sizes: collections.Counter = field(default_factory=collections.Counter)     # small, medium, large
    negatives: int = 0
    rotated: int = 0


@dataclass
class CheckReport:
    path: str
    kind: str                                       # the annotation format, or "classes" (class folders)
    splits: dict[str, SplitStats]
    repaired: dict[str, dict[str, int]]             # image -> repairs by reason
    rejected: list[tuple[str, str, str]]            # (path, reason, message)
    missing_classes: dict[str, int]                 # class -> objects, absent from a fixed label map
    duplicates: list[tuple[str, str, int, str, str]]   # (a, b, distance, a's split, b's split)
    hashed: int = 0
    max_distance: int = MAX_DISTANCE

    @property
    def leaks(self) -> list:
        return [d for d in self.duplicates if d[3] != d[4]]

    def problems(self) -> dict[str, int]:
        return {"leak": len(self.leaks), "rejected": len(self.rejected)}

    def exit_code(self, fail_on=FAIL_ON) -> int:
        return int(any(self.problems().get(k) for k in fail_on))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1) + "\n"

    def to_dict(self) -> dict:
        return {
            "path": self.path, "kind": self.kind,
            "splits": {s: {"images": v.images, "rejected": v.rejected, "objects": dict(sorted(v.objects.items())),
                           "box_sizes": {k: v.sizes.get(k, 0) for k in ("small", "medium", "large")},
                           "negatives": v.negatives, "exif_rotated": v.rotated} for s, v in self.splits.items()},
            "repairs": summary(self.repaired),
            "rejected": [{"path": p, "reason": r, "message": m} for p, r, m in self.rejected],
            "missing_classes": self.missing_classes,
            "duplicates": {"max_distance": self.max_distance, "images_hashed": self.hashed,
                           "pairs": [{"a": a, "b": b, "distance": d, "splits": [sa, sb]}
                                     for a, b, d, sa, sb in self.duplicates],
                           "within_split": len(self.duplicates) - len(self.leaks), "across_splits": len(self.leaks)},
            "problems": self.problems(),
        }


def check_plan(plan, *, known: set[str] | None = None, workers: int = 1, mapper=None,
               max_distance: int = MAX_DISTANCE, beat=no_beat) -> CheckReport:
    """The check of a job's plan (augd.job.units.JobPlan: what the job would run), its images hashed through
    `mapper` (hashing.hash_files) or on `workers` processes, `beat` called as they are. `known`: a fixed label
    map's class names, to list the classes it lacks (None: no such check)."""
    path, det, images = plan.input_dir, plan.detection, plan.images
    # what a job would reject: the scan's, an object of a class the fixed map lacks, pixels that do not decode
    rejected = [(r.relpath, str(r.reason), r.message, r.split) for r in plan.scan.rejected]
    missing: dict[str, int] = {}
    if known is not None and det is not None:
        for img in images:
            names = [o.name for o in det.annotations[img.relpath].objects] if img.relpath in det.annotations else []
            for name in names:
                if name not in known:
                    missing[name] = missing.get(name, 0) + 1
            if gone := sorted({n for n in names if n not in known}):
                rejected.append((img.relpath, str(RejectReason.BAD_ANNOTATION),
                                 f"{img.relpath}: class {', '.join(map(repr, gone))} is not in the label map",
                                 img.split))
    hashes = hash_files([(img.path, img.header.height, img.header.width, None if img.offset < 0 else
                          (img.offset, img.size)) for img in images], workers, mapper, beat)
    # an image whose header reads but whose pixels do not decode (a truncated JPEG): a job rejects it as well, in
    # the job's words
    rejected += [(img.relpath, str(RejectReason.UNDECODABLE), undecodable_pixels(img.header.format), img.split)
                 for img, h in zip(images, hashes) if h is None]
    refused = {r[0] for r in rejected}
    splits: dict[str, SplitStats] = {}
    for _, _, _, split in rejected:
        if split:
            splits.setdefault(split, SplitStats()).rejected += 1
    for img in images:
        if img.relpath in refused:   # counted as the job counts it: rejected, not among the split's images
            continue
        st = splits.setdefault(img.split or "all", SplitStats())
        st.images += 1
        st.rotated += img.header.orientation != 1
        if det is None:
            st.objects[img.label_text or "(no class)"] += 1
            continue
        ann = det.annotations.get(img.relpath)
        objects = ann.objects if ann is not None else ()
        st.negatives += not objects
        for o in objects:
            st.objects[o.name] += 1
            area = (o.box[2] - o.box[0]) * (o.box[3] - o.box[1])
            st.sizes["small" if area < SMALL else "medium" if area < MEDIUM else "large"] += 1
    pairs = [(images[i].relpath, images[j].relpath, d, images[i].split or "all", images[j].split or "all")
             for i, j, d in near_pairs(hashes, max_distance)]
    return CheckReport(path, det.format if det is not None else "classes", dict(sorted(splits.items())),
                       dict(det.layout.repaired) if det is not None else {}, sorted(r[:3] for r in rejected),
                       dict(sorted(missing.items())), pairs, sum(h is not None for h in hashes), max_distance)


def text(report: CheckReport, shown: int = 10) -> str:
    """The report for people."""
    out = [f"{report.path}: {report.kind}, {sum(s.images for s in report.splits.values())} images"]
    for name, s in report.splits.items():
        out.append(f"  {name}: {s.images} images" + (f" ({s.rejected} rejected)" if s.rejected else "") + ", "
                   + ", ".join(f"{c}={n}" for c, n in sorted(s.objects.items()))
                   + (f"; boxes small/medium/large {s.sizes['small']}/{s.sizes['medium']}/{s.sizes['large']}, "
                      f"{s.negatives} with no object" if report.kind != "classes" else "")
                   + (f"; {s.rotated} EXIF-rotated" if s.rotated else ""))
    if report.repaired:
        d = report.to_dict()["repairs"]
        out.append(f"  repairs (annotations.repair standard): {d['objects']} object(s) in {len(report.repaired)} "
                   "image(s): " + ", ".join(f"{k}={n}" for k, n in d["by_reason"].items()))
        out += [f"    {p}: " + ", ".join(f"{k}={n}" for k, n in r.items())
                for p, r in list(report.repaired.items())[:shown]]
        out += [f"    ... and {len(report.repaired) - shown} more"] if len(report.repaired) > shown else []
    if report.missing_classes:
        out.append("  classes missing from the label map: " + ", ".join(
            f"{c} ({n} objects)" for c, n in report.missing_classes.items()))
    if report.rejected:
        reasons = collections.Counter(r for _, r, _ in report.rejected)
        out.append(f"  a job would reject {len(report.rejected)} input(s): "
                   + ", ".join(f"{k}={n}" for k, n in sorted(reasons.items())))
        out += [f"    {m}" if m.startswith(p) else f"    {p}: {m}" for p, _, m in report.rejected[:shown]]
        out += [f"    ... and {len(report.rejected) - shown} more"] if len(report.rejected) > shown else []
    leaks = report.leaks
    out.append(f"  near-duplicates (perceptual hash within {report.max_distance} of 64 bits, {report.hashed} images "
               f"hashed): {len(report.duplicates) - len(leaks)} pair(s) within a split, {len(leaks)} across splits"
               + (" (a leak: the same image trains and validates)" if leaks else ""))
    for a, b, d, sa, sb in (leaks + [p for p in report.duplicates if p not in leaks])[:shown]:
        out.append(f"    {a} ({sa}) ~ {b} ({sb}): {d} bits apart")
    if len(report.duplicates) > shown:
        out.append(f"    ... and {len(report.duplicates) - shown} more")
    code = report.exit_code()
    out.append("  verdict: " + ("problems a job would meet: " + ", ".join(
        f"{k}={n}" for k, n in report.problems().items() if n) if code else "nothing a job would fail on"))
    return "\n".join(one_line(line) for line in out)
