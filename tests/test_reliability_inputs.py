"""Issue 8, item 1: the input catalogue. Every file below is generated here (no blobs), dropped into one job
folder beside good control images, and run through run_job (in process) and once through the real `augd run`.
Each case has one expected outcome: "written" (its records are in the shards), "skipped" (hidden: neither
written nor listed), or the reject reason in the manifest; and every other image of the job is written.

Already proven elsewhere (not repeated here):
  header parsing of every format/colour mode, truncation at every byte, garbled EXIF  tests/test_formats.py
  fifo, socket, symlinks out/in/broken/to a folder, unicode/newline/non-UTF-8 names  tests/test_io_scan.py
  an 8 GB sparse non-image rejected after reading a prefix; SOF past the prefix       tests/test_io_scan.py
  a job with no decodable image fails with no output                                  tests/test_run.py
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from augd.io import parse_example
from augd.job import JobOptions, JobReport, run_job
from augd.schema import parse_pipeline
from tests.jobfiles import augd, image_bytes, picture, records
from tests.test_formats import bmp_header, png_chunk

PIPELINE = """\
name: catalogue
seed: 5
variants: 1
keep_original: true
output: {format: jpeg, quality: 85, shards: 2}
ops:
  - random_rotation: {degrees: 15, fill: reflect}
  - random_flip_left_right: {}
  - random_brightness: {max_delta: 0.1}
"""
N_VARIANTS = 2


def _save(im: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def rgb(h=24, w=36, seed=0) -> Image.Image:
    return Image.fromarray(picture(h, w, seed))


def png16(channels: int) -> bytes:
    import cv2
    arr = picture(18, 26, 5).astype(np.uint16) * 257
    ok, buf = cv2.imencode(".png", arr[:, :, 0] if channels == 1 else arr)
    assert ok
    return buf.tobytes()


def interlaced_png(h=21, w=27) -> bytes:
    """An Adam7-interlaced RGB PNG (Pillow cannot write one): seven passes of filter-0 rows."""
    arr = picture(h, w, 3)
    raw = b""
    for x0, y0, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
                           (0, 1, 1, 2)):
        sub = arr[y0::dy, x0::dx]
        if sub.size:
            raw += b"".join(b"\0" + row.tobytes() for row in sub)
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 1)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(raw))
            + png_chunk(b"IEND", b""))


def bmp_indexed(bpp: int, h=12, w=18) -> bytes:
    """A 1/4/8-bit BMP with a colourful palette (TensorFlow would read the indices as grey)."""
    rng = np.random.default_rng(bpp)
    n = 1 << bpp
    pal = rng.integers(0, 256, (n, 3), np.uint8)
    idx = rng.integers(0, n, (h, w))
    rows = []
    for y in range(h - 1, -1, -1):
        bits = "".join(format(int(i), f"0{bpp}b") for i in idx[y])
        bits += "0" * (-len(bits) % 8)
        row = int(bits, 2).to_bytes(len(bits) // 8, "big") if bits else b""
        rows.append(row + b"\0" * (-len(row) % 4))
    palette = b"".join(bytes([b, g, r, 0]) for r, g, b in pal)
    data = b"".join(rows)
    off = 14 + 40 + len(palette)
    info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, bpp, 0, len(data), 2835, 2835, n, 0)
    return b"BM" + struct.pack("<IHHI", off + len(data), 0, 0, off) + info + palette + data


def bmp_top_down(h=14, w=22) -> bytes:
    arr = picture(h, w, 4)
    rows = b"".join(arr[y, :, ::-1].tobytes() + b"\0" * (-3 * w % 4) for y in range(h))
    return bmp_header(w, -h) + rows


def animated_gif() -> bytes:
    frames = [rgb(20, 30, s).convert("P", palette=Image.Palette.ADAPTIVE) for s in range(3)]
    return _save(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=50, loop=0)


def exif_jpeg(orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return _save(rgb(20, 32, orientation), "JPEG", quality=90, exif=exif.tobytes())


def jpeg_sof(w: int, h: int) -> bytes:
    """SOI + a baseline SOF0 claiming w x h + EOI: a header-only 'bomb'."""
    return b"\xff\xd8" + b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, h, w, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01" \
        + b"\xff\xd9"


def webp_vp8x(w: int, h: int) -> bytes:
    body = b"VP8X" + struct.pack("<I", 10) + b"\0\0\0\0" + (w - 1).to_bytes(3, "little") + (h - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


def gif_bigger_frame() -> bytes:
    """A GIF whose logical screen says 8x8 but whose frame is 10000x10000 (TensorFlow decodes the frame)."""
    full = _save(Image.new("P", (10000, 10000)), "GIF")
    return full[:6] + struct.pack("<HH", 8, 8) + full[10:]


def gif_frames(n: int, side: int) -> bytes:
    """n blank side x side frames: a few KB on disk, n * side^2 pixels for the decoder."""
    frames = [Image.new("P", (side, side), i % 2) for i in range(n)]
    return _save(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=10, disposal=1)


def half(data: bytes) -> bytes:
    return data[: len(data) // 2]


FULL = {
    "jpeg": lambda: _save(rgb(), "JPEG", quality=90), "png": lambda: _save(rgb(), "PNG"),
    "bmp": lambda: _save(rgb(), "BMP"), "gif": lambda: _save(rgb().convert("P"), "GIF"),
    "webp": lambda: _save(rgb(), "WEBP", quality=80),
}

# relpath -> (make bytes, expected outcome, expected stored (h, w) of variant 0 or None)
CATALOGUE: dict[str, tuple] = {
    # -- empty, truncated, random, not images --
    "bad/empty.jpg": (lambda: b"", "empty", None),
    **{f"bad/truncated_half.{f}": (lambda f=f: half(FULL[f]()), "undecodable", None) for f in FULL if f != "gif"},
    "bad/truncated_half.gif": (lambda: half(FULL["gif"]()), "bad_header", None),  # the frame walk runs out
    "bad/truncated_in_header.jpg": (lambda: FULL["jpeg"]()[:10], "bad_header", None),
    "bad/truncated_in_header.png": (lambda: FULL["png"]()[:20], "bad_header", None),
    "bad/truncated_in_header.bmp": (lambda: FULL["bmp"]()[:20], "bad_header", None),
    "bad/truncated_in_header.gif": (lambda: FULL["gif"]()[:10], "bad_header", None),
    "bad/truncated_in_header.webp": (lambda: FULL["webp"]()[:10], "unknown_format", None),  # no "WEBP" yet
    "bad/header_only.png": (lambda: FULL["png"]()[:33], "undecodable", None),
    "bad/random.jpg": (lambda: np.random.default_rng(1).bytes(4096), "unknown_format", None),
    "bad/random_after_png_magic.png": (lambda: b"\x89PNG\r\n\x1a\n" + np.random.default_rng(2).bytes(500),
                                       "bad_header", None),
    "bad/jpeg_magic_then_zeros.jpg": (lambda: b"\xff\xd8\xff" + bytes(4000), "bad_header", None),
    "bad/zeros.png": (lambda: bytes(4096), "unknown_format", None),
    "bad/doc.pdf": (lambda: b"%PDF-1.7\n" + bytes(100), "unknown_format", None),
    "bad/archive.zip": (lambda: b"PK\x03\x04" + bytes(100), "unknown_format", None),
    "bad/program.elf": (lambda: b"\x7fELF\x02\x01\x01" + bytes(100), "unknown_format", None),
    "bad/page.html": (lambda: b"<!doctype html><img src=x>", "unknown_format", None),
    "bad/vector.svg": (lambda: b'<svg xmlns="http://www.w3.org/2000/svg"/>', "unknown_format", None),
    "bad/scan.tiff": (lambda: _save(rgb(), "TIFF"), "unknown_format", None),
    "bad/phone.heic": (lambda: b"\0\0\0\x18ftypheic" + bytes(100), "unknown_format", None),
    "bad/icon.ico": (lambda: _save(rgb(16, 16), "ICO"), "unknown_format", None),
    "bad/labels.json": (lambda: b'{"F603": 0}', "unknown_format", None),
    "bad/corrupt_png_body.png": (lambda: image_bytes("corrupt_png", 20, 30, 0), "undecodable", None),
    # -- every accepted format and colour mode, odd variants --
    "modes/png_16bit_rgb.png": (lambda: png16(3), "written", (18, 26)),
    "modes/png_16bit_gray.png": (lambda: png16(1), "written", (18, 26)),
    "modes/png_interlaced.png": (interlaced_png, "written", (21, 27)),
    "modes/png_palette_transparency.png": (lambda: _save(rgb().convert("P", palette=Image.Palette.ADAPTIVE),
                                                         "PNG", transparency=0), "written", (24, 36)),
    "modes/png_gray_alpha.png": (lambda: _save(rgb().convert("LA"), "PNG"), "written", (24, 36)),
    "modes/png_1bit.png": (lambda: _save(rgb().convert("1"), "PNG"), "written", (24, 36)),
    "modes/png_rgba.png": (lambda: _save(rgb().convert("RGBA"), "PNG"), "written", (24, 36)),
    "modes/jpeg_cmyk.jpg": (lambda: _save(rgb().convert("CMYK"), "JPEG"), "written", (24, 36)),
    "modes/jpeg_progressive.jpg": (lambda: _save(rgb(), "JPEG", progressive=True), "written", (24, 36)),
    "modes/jpeg_gray.jpg": (lambda: _save(rgb().convert("L"), "JPEG"), "written", (24, 36)),
    "modes/bmp_24.bmp": (lambda: _save(rgb(), "BMP"), "written", (24, 36)),
    "modes/bmp_32_alpha.bmp": (lambda: _save(rgb().convert("RGBA"), "BMP"), "written", (24, 36)),
    "modes/bmp_top_down.bmp": (bmp_top_down, "written", (14, 22)),
    "modes/bmp_8bit_gray.bmp": (lambda: _save(rgb().convert("L"), "BMP"), "written", (24, 36)),
    "modes/bmp_8bit_palette.bmp": (lambda: bmp_indexed(8), "undecodable", None),  # TF would read it as grey
    "modes/bmp_4bit.bmp": (lambda: bmp_indexed(4), "undecodable", None),
    "modes/bmp_1bit.bmp": (lambda: bmp_indexed(1), "undecodable", None),
    "modes/bmp_rle8.bmp": (lambda: bmp_indexed(8)[:30] + struct.pack("<I", 1) + bmp_indexed(8)[34:],
                           "undecodable", None),
    "modes/gif.gif": (lambda: _save(rgb().convert("P"), "GIF"), "written", (24, 36)),
    "modes/gif_animated.gif": (animated_gif, "written", (20, 30)),
    "modes/gif_transparent.gif": (lambda: _save(rgb().convert("P"), "GIF", transparency=3), "written", (24, 36)),
    "modes/webp_lossy.webp": (lambda: _save(rgb(), "WEBP", quality=80), "written", (24, 36)),
    "modes/webp_lossless.webp": (lambda: _save(rgb(), "WEBP", lossless=True), "written", (24, 36)),
    "modes/webp_alpha.webp": (lambda: _save(rgb().convert("RGBA"), "WEBP", quality=80), "written", (24, 36)),
    "modes/webp_animated.webp": (lambda: _save(rgb(), "WEBP", save_all=True, append_images=[rgb(seed=1)],
                                               duration=50), "undecodable", None),
    "modes/png_named.jpg": (lambda: _save(rgb(), "PNG"), "written", (24, 36)),  # magic bytes win over names
    **{f"exif/orientation_{o}.jpg": (lambda o=o: exif_jpeg(o), "written", (20, 32) if o < 5 else (32, 20))
       for o in range(1, 9)},
    "exif/png_exif_6.png": (lambda: _save(rgb(20, 32), "PNG", exif=_exif(6)), "written", (32, 20)),
    "exif/webp_exif_8.webp": (lambda: _save(rgb(20, 32), "WEBP", exif=_exif(8)), "written", (32, 20)),
    # -- decompression bombs: tiny files, huge headers --
    "bomb/png_40000.png": (lambda: image_bytes("bomb", 1, 1, 0), "too_many_pixels", None),
    "bomb/jpeg_65500.jpg": (lambda: jpeg_sof(65500, 65500), "too_many_pixels", None),
    "bomb/gif_65535.gif": (lambda: _save(Image.new("P", (2, 2)), "GIF")[:6] + struct.pack("<HH", 65535, 65535)
                           + _save(Image.new("P", (2, 2)), "GIF")[10:], "too_many_pixels", None),
    "bomb/bmp_100000.bmp": (lambda: bmp_header(100000, 100000), "too_many_pixels", None),
    "bomb/webp_16384.webp": (lambda: webp_vp8x(16384, 16384), "too_many_pixels", None),
    "bomb/gif_frame_bigger_than_screen.gif": (gif_bigger_frame, "too_many_pixels", None),  # TF decodes the frame
    "bomb/gif_many_frames.gif": (lambda: gif_frames(120, 1000), "too_many_pixels", None),   # all frames decoded
    # -- extreme sizes and aspect ratios --
    "size/1x1.png": (lambda: _save(Image.new("RGB", (1, 1), (200, 10, 10)), "PNG"), "written", (1, 1)),
    "size/1x1.jpg": (lambda: _save(Image.new("RGB", (1, 1), (200, 10, 10)), "JPEG"), "written", (1, 1)),
    "size/1x5000.png": (lambda: _save(rgb(1, 5000), "PNG"), "written", (1, 5000)),
    "size/5000x1.png": (lambda: _save(rgb(5000, 1), "PNG"), "written", (5000, 1)),
    "size/1x5000.jpg": (lambda: _save(rgb(1, 5000), "JPEG"), "written", (1, 5000)),
    "size/2x3.gif": (lambda: _save(rgb(2, 3).convert("P"), "GIF"), "written", (2, 3)),
    # -- names --
    "names/quote'\"`$(x).png": (lambda: _save(rgb(seed=11), "PNG"), "written", (24, 36)),
    "names/new\nline\rcr.png": (lambda: _save(rgb(seed=12), "PNG"), "written", (24, 36)),
    "names/日本語 ü\u200b.png": (lambda: _save(rgb(seed=13), "PNG"), "written", (24, 36)),
    "names/\x1b[31mred\x07.png": (lambda: _save(rgb(seed=14), "PNG"), "written", (24, 36)),
    "names/-rf --help.png": (lambda: _save(rgb(seed=15), "PNG"), "written", (24, 36)),
    "names/%s%n%x{0}.png": (lambda: _save(rgb(seed=16), "PNG"), "written", (24, 36)),
    "names/a..b.png": (lambda: _save(rgb(seed=17), "PNG"), "written", (24, 36)),
    "names/x\\..\\..\\etc.png": (lambda: _save(rgb(seed=18), "PNG"), "written", (24, 36)),
    "names/%2e%2e%2fescape.png": (lambda: _save(rgb(seed=19), "PNG"), "written", (24, 36)),
    "names/" + "L" * 251 + ".png": (lambda: _save(rgb(seed=20), "PNG"), "written", (24, 36)),
    "names/..png": (lambda: _save(rgb(seed=21), "PNG"), "skipped", None),  # hidden (starts with ".")
    "names/...png": (lambda: _save(rgb(seed=22), "PNG"), "skipped", None),
    "names/..%2F..%2Fetc%2Fpasswd": (lambda: b"root:x:0:0", "skipped", None),
    "augd.yaml.png": (lambda: _save(rgb(seed=23), "PNG"), "written", (24, 36)),
}
NON_UTF8 = os.fsdecode(b"names/bad\xff\xfe.png")


def _exif(o: int) -> bytes:
    e = Image.Exif()
    e[0x0112] = o
    return e.tobytes()


CONTROLS = [f"ok/control_{i}.jpg" for i in range(3)]


def _special(job, outside) -> dict[str, str]:
    """Entries that are not plain files: relpath -> expected outcome."""
    sp = job / "special"
    sp.mkdir()
    os.symlink(outside / "secret.png", sp / "abs_out.png")
    os.symlink("../../outside/secret.png", sp / "rel_out.png")
    os.symlink("/dev/zero", sp / "dev_zero.png")
    os.symlink("loop_b.png", sp / "loop_a.png")
    os.symlink("loop_a.png", sp / "loop_b.png")
    os.symlink("self.png", sp / "self.png")
    os.symlink(outside, sp / "dir_out")
    os.symlink("../ok/control_0.jpg", sp / "link_in.jpg")
    os.mkfifo(sp / "fifo.png")
    os.mknod(sp / "null_dev.png", 0o600 | 0o020000, os.makedev(1, 3)) if os.geteuid() == 0 else None
    with open(os.fsencode(str(job)) + b"/names/bad\xff\xfe.png", "wb") as f:
        f.write(_save(rgb(seed=30), "PNG"))
    out = {"special/abs_out.png": "outside_job", "special/rel_out.png": "outside_job",
           "special/dev_zero.png": "outside_job", "special/loop_a.png": "unreadable",
           "special/loop_b.png": "unreadable", "special/self.png": "unreadable", "special/dir_out": "outside_job",
           "special/link_in.jpg": "written", "special/fifo.png": "not_regular_file", NON_UTF8: "written"}
    if os.geteuid() == 0:
        out["special/null_dev.png"] = "not_regular_file"
    return out


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory):
    base = tmp_path_factory.mktemp("cat")
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.png").write_bytes(_save(rgb(30, 30, 99), "PNG"))
    job = base / "hostile"
    expected = {}
    for rel, (make, outcome, _dims) in CATALOGUE.items():
        p = job / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(make())
        expected[rel] = outcome
    for i, rel in enumerate(CONTROLS):
        (job / rel).parent.mkdir(parents=True, exist_ok=True)
        (job / rel).write_bytes(image_bytes("jpeg", 30 + i, 40 + i, seed=i))
        expected[rel] = "written"
    expected.update(_special(job, outside))
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(job / "special" / "sock.png"))
    expected["special/sock.png"] = "not_regular_file"
    try:
        spec = parse_pipeline(PIPELINE, "catalogue.yaml")
        result = run_job(str(job), spec, str(base / "out"), JobOptions(workers=2))
        cli = augd("run", job, "--pipeline", _write(base / "p.yaml", PIPELINE), "--out", base / "cli",
                   "--workers", 2, timeout=300)
    finally:
        sock.close()
    secret_sha = hashlib.sha256((outside / "secret.png").read_bytes()).hexdigest()
    return {"job": job, "result": result, "expected": expected, "cli": cli, "base": base, "secret": secret_sha}


def _write(path, text):
    path.write_text(text)
    return path


def rejections(report: JobReport) -> list[tuple[str, str]]:
    return [(r.relpath, r.reason) for r in report.inputs.rejected_files]


def outcomes(rejected: list[tuple[str, str]], recs: list[bytes]) -> tuple[dict, dict]:
    """({relpath: reason or "written"}, {relpath: {variant: parsed record}}) from an output's (path, reason) of
    each rejected file and its records."""
    parsed: dict = {}
    for r in recs:
        ex = parse_example(r)
        name = ex["image/filename"]
        name = name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else name
        assert ex["augd/variant"] not in parsed.get(name, {}), f"{name!r} variant written twice"
        parsed.setdefault(name, {})[ex["augd/variant"]] = ex
    got = {rel: "written" for rel in parsed}
    for path, reason in rejected:
        assert path not in got, f"{path!r} both written and rejected"
        got[path] = reason
    return got, parsed


@pytest.fixture(scope="module")
def got(catalogue):
    return outcomes(rejections(catalogue["result"].report), records(catalogue["result"].out_dir))


def test_every_case_has_its_expected_outcome(catalogue, got):
    outcome, _ = got
    want = {rel: o for rel, o in catalogue["expected"].items() if o != "skipped"}
    wrong = {rel: (want.get(rel, "skipped"), outcome.get(rel, "skipped"))
             for rel in set(want) | set(outcome) if want.get(rel) != outcome.get(rel)}
    assert not wrong, "relpath: (expected, got)\n" + "\n".join(f"{k!r}: {v}" for k, v in sorted(wrong.items()))


def test_every_written_image_has_all_its_variants_and_controls_are_written(catalogue, got):
    outcome, parsed = got
    m = catalogue["result"].report
    written = [rel for rel, o in outcome.items() if o == "written"]
    assert set(CONTROLS) <= set(written)
    for rel in written:
        assert sorted(parsed[rel]) == list(range(N_VARIANTS)), rel
    assert m.inputs.written == len(written)
    assert m.inputs.seen == m.inputs.written + m.inputs.rejected == len(outcome)
    assert m.records.written == N_VARIANTS * len(written)


@pytest.mark.parametrize("rel", [r for r, c in CATALOGUE.items() if c[2] is not None])
def test_written_cases_are_stored_upright_at_their_size(got, rel):
    _, parsed = got
    import tensorflow as tf
    ex = parsed[rel][0]
    img = tf.io.decode_image(ex["image/encoded"], channels=3).numpy()
    assert (ex["image/height"], ex["image/width"]) == CATALOGUE[rel][2] == img.shape[:2]
    assert ex["image/channels"] == 3


def test_rejections_have_messages_for_people(catalogue):
    for r in catalogue["result"].report.inputs.rejected_files:
        assert len(r.message) > 8 and not any(s in r.message for s in ("{{", "[[", "Op:")), r


def test_nothing_outside_the_job_is_read(catalogue, got):
    _, parsed = got
    ids = {ex["image/source_id"] for v in parsed.values() for ex in v.values()}
    ids = {i.decode() if isinstance(i, bytes) else i for i in ids}
    assert catalogue["secret"] not in ids


def test_the_cli_gives_the_same_outcome_per_file(catalogue, got):
    cli = catalogue["cli"]
    assert cli.returncode == 0, cli.stderr
    out_dir = catalogue["base"] / "cli" / "hostile"
    m = json.loads((out_dir / "manifest.json").read_text())
    cli_outcome, _ = outcomes([(r["path"], r["reason"]) for r in m["inputs"]["rejected_files"]], records(str(out_dir)))
    assert cli_outcome == got[0]
    assert sorted(os.listdir(out_dir))[-1] == "manifest.json" and (out_dir / "_SUCCESS").is_file()


# -- a job folder that changes while it is scanned, and between the scan and the read ----------------------


def test_job_changing_during_and_after_the_scan(tmp_path, monkeypatch):
    """The scan lists the folder, then reads headers; the engine reads whole files later. Change the folder at
    both moments: swapped for a symlink out, for a FIFO, for a bomb, truncated, added. Nothing outside is read,
    nothing blocks, nothing is decoded on a stale header's word, every other image is written. (A file deleted
    fails the job: test_an_input_that_vanishes_fails_the_job_and_commits_nothing.)"""
    import augd.job.units as units
    from augd.io import scan_job as real_scan

    outside = tmp_path / "outside"
    outside.mkdir()
    secret = _save(rgb(30, 30, 77), "PNG")
    (outside / "secret.png").write_bytes(secret)
    job = tmp_path / "moving"
    names = [f"img{i}.png" for i in range(10)]
    for i, n in enumerate(names):
        (job / "c").mkdir(parents=True, exist_ok=True)
        (job / "c" / n).write_bytes(_save(rgb(20 + i, 30, i), "PNG"))
    c = job / "c"

    def during(rel):  # called for every entry while the folder is listed, before any header is read
        if rel == "c/img9.png" and not (c / "new.png").exists():
            (c / "img1.png").unlink()
            os.symlink(outside / "secret.png", c / "img1.png")           # symlink swapped in before the read
            (c / "new.png").write_bytes(_save(rgb(seed=5), "PNG"))       # added after the listing
        return False

    def scan(root, ignore=None, **kw):
        res = real_scan(root, ignore=lambda rel: during(rel) or bool(ignore and ignore(rel)), **kw)
        os.symlink(outside / "secret.png", c / "img3.png.tmp")
        os.replace(c / "img3.png.tmp", c / "img3.png")                   # swapped for a symlink out
        (c / "img4.png").unlink()
        os.mkfifo(c / "img4.png")                                        # swapped for a FIFO
        (c / "img5.png").write_bytes(image_bytes("bomb", 1, 1, 0))       # swapped for a bomb
        data = (c / "img6.png").read_bytes()
        (c / "img6.png").write_bytes(data[: len(data) // 2])             # truncated
        os.symlink("img7.png", c / "img8.png.tmp")
        os.replace(c / "img8.png.tmp", c / "img8.png")                   # a symlink that stays inside
        return res

    monkeypatch.setattr(units, "scan_job", scan)
    res = run_job(str(job), parse_pipeline(PIPELINE, "p.yaml"), str(tmp_path / "out"), JobOptions(workers=2))
    outcome, parsed = outcomes(rejections(res.report), records(res.out_dir))
    assert outcome == {
        "c/img0.png": "written", "c/img1.png": "outside_job", "c/img2.png": "written",
        "c/img3.png": "unreadable", "c/img4.png": "unreadable", "c/img5.png": "unreadable",
        "c/img6.png": "unreadable", "c/img7.png": "written", "c/img8.png": "unreadable", "c/img9.png": "written",
    }, outcome
    secret_sha = hashlib.sha256(secret).hexdigest()
    for v in parsed.values():
        for ex in v.values():
            sid = ex["image/source_id"]
            assert (sid.decode() if isinstance(sid, bytes) else sid) != secret_sha
    msgs = {r.relpath: r.message for r in res.report.inputs.rejected_files}
    assert "changed after the job was scanned" in msgs["c/img5.png"]
    assert "outside the job folder" in msgs["c/img3.png"]


def test_path_longer_than_path_max_is_rejected_not_fatal(tmp_path):
    """A class folder nested past PATH_MAX cannot be listed by path: that folder is rejected, the rest runs."""
    job = tmp_path / "deep"
    (job / "ok").mkdir(parents=True)
    (job / "ok" / "a.png").write_bytes(_save(rgb(), "PNG"))
    fd = os.open(job, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(22):  # 22 x 200 chars > 4096
            os.mkdir("d" * 200, dir_fd=fd)
            sub = os.open("d" * 200, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        leaf = os.open("x.png", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, _save(rgb(), "PNG"))
        os.close(leaf)
    finally:
        os.close(fd)
    res = run_job(str(job), parse_pipeline(PIPELINE, "p.yaml"), str(tmp_path / "out"), JobOptions(workers=1))
    rej = res.report.inputs.rejected_files
    assert len(rej) == 1 and rej[0].reason == "unreadable" and rej[0].relpath.startswith("dddd"), rej
    assert res.report.inputs.written == 1
    from augd.daemon.watcher import tree_signature
    assert tree_signature(str(job)) == tree_signature(str(job))  # the watcher settles on it instead of crashing
