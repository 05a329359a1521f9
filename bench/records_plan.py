"""The plan of a records job in process (read_records_job: frames, checksums, Examples, the images' offsets), with
protobuf's C parser (upb) and with augd.io.lite's own reader, alternated round by round; medians.

    python -m bench.records_plan RECORDS_DIR [--rounds 5]

RECORDS_DIR: a folder of augd's shards, e.g. the bench's VOC set written as records of its originals
(`augd run bench/.data/n600-s0-voc -p P -o OUT` with P = `{name: originals, variants: 0, keep_original: true,
ops: []}`). Figures only.
"""
from __future__ import annotations

import argparse
import statistics
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    from augd.annotations.tfrecords import read_records_job
    from augd.io import lite
    upb = lite._example_class
    times: dict[str, list[float]] = {"reader": [], "upb": []}
    for _ in range(args.rounds):
        for mode in times:
            lite._example_class = upb if mode == "upb" else (lambda: None)
            t = time.perf_counter()
            job = read_records_job(args.root, max_pixels=1 << 28)
            times[mode].append(time.perf_counter() - t)
    lite._example_class = upb
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{len(job.scan.images)} records: the reader's own {med['reader']:.3f} s, upb {med['upb']:.3f} s "
          f"({med['reader'] / med['upb']:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
