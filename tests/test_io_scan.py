"""augd.io.scan: layout and labels, rejects with reasons, odd names, symlinks, special files, URL roots."""
import io
import os
import socket
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from augd.errors import JobFailed
from augd.io import REJECT_REASONS, read_bytes, scan_job
from augd.jobfolder import CONTROL_FILES, MARKERS
from augd.io.scan import HEADER_FIRST, HEADER_PREFIX, HEADER_RETRY_MAX


def jpeg(w=8, h=6, seed=0) -> bytes:
    arr = np.random.default_rng(seed).integers(0, 255, (h, w, 3), np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG")
    return buf.getvalue()


def png_header(w: int, h: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))


def put(root, rel: str, data: bytes) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)


def scan(root: str, **kw):
    """scan_job as run_job calls it: the job folder's own files (augd.jobfolder) are not data."""
    return scan_job(root, skip_names=CONTROL_FILES, skip_anywhere=MARKERS, **kw)


def by_rel(result):
    return {i.relpath: i for i in result.images}, {r.relpath: r for r in result.rejected}


def test_classes_labels_and_unlabeled_top_level(tmp_path):
    for rel in ["dog/a.jpg", "cat/x/deep/b.jpg", "cat/c.jpg", "top.jpg", "bird/.hidden.jpg"]:
        put(tmp_path, rel, jpeg())
    (tmp_path / "empty_class").mkdir()
    r = scan(str(tmp_path))
    assert r.classes == ("bird", "cat", "dog", "empty_class")  # empty folders still take a label
    images, rejected = by_rel(r)
    assert rejected == {}
    assert [i.relpath for i in r.images] == ["cat/c.jpg", "cat/x/deep/b.jpg", "dog/a.jpg", "top.jpg"]
    assert {k: (v.label, v.label_text) for k, v in images.items()} == {
        "cat/c.jpg": (1, "cat"), "cat/x/deep/b.jpg": (1, "cat"), "dog/a.jpg": (2, "dog"), "top.jpg": (-1, ""),
    }
    img = images["dog/a.jpg"]
    assert (img.header.format, img.header.width, img.header.height) == ("jpeg", 8, 6)
    assert img.size == len(jpeg()) and img.path == os.path.join(str(tmp_path), "dog/a.jpg")
    assert read_bytes(img) == jpeg()


def test_flat_job_is_unlabeled_and_order_is_deterministic(tmp_path):
    names = ["b.jpg", "a.jpg", "C.jpg", "a b.jpg", "ä.jpg"]
    for n in names:
        put(tmp_path, n, jpeg())
    first, second = scan(str(tmp_path)), scan(str(tmp_path))
    assert first == second
    assert [i.relpath for i in first.images] == sorted(names)
    assert first.classes == () and {i.label for i in first.images} == {-1}


def test_hidden_and_control_files_are_skipped_silently(tmp_path):
    for rel in ["augd.yaml", "_READY", "failure.json", "error.txt", ".DS_Store", ".git/x.jpg", "c/.thumbs/t.jpg"]:
        put(tmp_path, rel, b"not an image")
    put(tmp_path, "c/error.txt", b"only control files at the root are special")
    put(tmp_path, "c/d/_READY", b"")  # but a marker is never an image, at any depth
    r = scan(str(tmp_path))
    assert r.images == () and r.classes == ("c",)
    assert [(x.relpath, x.reason) for x in r.rejected] == [("c/error.txt", "unknown_format")]


def test_the_scan_itself_names_no_control_files(tmp_path):
    for rel in ["augd.yaml", "_READY", "c/_READY"]:
        put(tmp_path, rel, b"not an image")
    r = scan_job(str(tmp_path), skip_names=frozenset(), skip_anywhere=frozenset())
    assert [(x.relpath, x.reason) for x in r.rejected] == [(rel, "unknown_format") for rel in
                                                           ["_READY", "augd.yaml", "c/_READY"]]


def test_ignore_callable(tmp_path):
    put(tmp_path, "a/keep.jpg", jpeg())
    put(tmp_path, "a/skip.jpg", b"junk")
    put(tmp_path, "b/all.jpg", b"junk")
    r = scan(str(tmp_path), ignore=lambda rel: rel in ("a/skip.jpg", "b"))
    assert [i.relpath for i in r.images] == ["a/keep.jpg"] and r.rejected == ()
    assert r.classes == ("a",)


def test_reject_table(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.jpg").write_bytes(jpeg())
    job = tmp_path / "job"
    put(job, "c/ok.jpg", jpeg())
    put(job, "c/empty.jpg", b"")
    put(job, "c/doc.jpg", b"%PDF-1.7 blah")
    put(job, "c/trunc.png", png_header(5, 5)[:20])
    put(job, "c/bomb.png", png_header(40000, 40000))
    os.mkfifo(job / "c" / "pipe.jpg")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(job / "c" / "s.sock"))
    os.symlink(outside / "o.jpg", job / "c" / "abs_out.jpg")
    os.symlink("../../outside/o.jpg", job / "c" / "rel_out.jpg")
    os.symlink("../c/../c/ok.jpg", job / "c" / "link_in.jpg")  # '..' that stays inside is fine
    os.symlink("nowhere.jpg", job / "c" / "broken.jpg")
    os.symlink("../c", job / "c" / "loop")
    os.symlink(outside, job / "escape_dir")
    try:
        r = scan(str(job))
    finally:
        sock.close()
    images, rejected = by_rel(r)
    assert sorted(images) == ["c/link_in.jpg", "c/ok.jpg"]
    assert read_bytes(images["c/link_in.jpg"]) == jpeg()
    assert {k: v.reason for k, v in rejected.items()} == {
        "c/empty.jpg": "empty",
        "c/doc.jpg": "unknown_format",
        "c/trunc.png": "bad_header",
        "c/bomb.png": "too_many_pixels",
        "c/pipe.jpg": "not_regular_file",
        "c/s.sock": "not_regular_file",
        "c/abs_out.jpg": "outside_job",
        "c/rel_out.jpg": "outside_job",
        "c/broken.jpg": "unreadable",
        "c/loop": "not_regular_file",
        "escape_dir": "outside_job",
    }
    assert all(v.reason in REJECT_REASONS for v in r.rejected)
    assert rejected["c/bomb.png"].message == "40000×40000 = 1600000000 pixels exceeds max_pixels=89478485"
    assert rejected["c/doc.jpg"].message == "not an image (starts with b'%PDF-1.7')"
    assert "truncated or corrupt header" in rejected["c/trunc.png"].message
    assert "FIFO" in rejected["c/pipe.jpg"].message
    assert [x.relpath for x in r.rejected] == sorted(rejected)


def test_max_pixels_is_configurable(tmp_path):
    put(tmp_path, "a.jpg", jpeg(8, 6))
    assert scan(str(tmp_path), max_pixels=48).images
    r = scan(str(tmp_path), max_pixels=47)
    expected = [("too_many_pixels", "8×6 = 48 pixels exceeds max_pixels=47")]
    assert [(x.reason, x.message) for x in r.rejected] == expected


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files regardless of permissions")
def test_unreadable_file(tmp_path):
    put(tmp_path, "a.jpg", jpeg())
    (tmp_path / "a.jpg").chmod(0)
    assert [x.reason for x in scan(str(tmp_path)).rejected] == ["unreadable"]


def test_odd_names_round_trip(tmp_path):
    names = ["with space.jpg", "quote'\".jpg", "new\nline.jpg", "日本語.jpg", "tab\t.jpg"]
    for n in names:
        put(tmp_path, "cls/" + n, jpeg(seed=len(n)))
    raw = os.fsencode(str(tmp_path / "cls")) + b"/bad\xff\xfeutf8.jpg"  # not valid UTF-8
    with open(raw, "wb") as f:
        f.write(jpeg(seed=99))
    r = scan(str(tmp_path))
    assert r.rejected == ()
    rels = {i.relpath: i for i in r.images}
    assert set(rels) == {"cls/" + n for n in names} | {os.fsdecode(b"cls/bad\xff\xfeutf8.jpg")}
    for n in names:
        assert read_bytes(rels["cls/" + n]) == jpeg(seed=len(n))
    odd = rels[os.fsdecode(b"cls/bad\xff\xfeutf8.jpg")]
    assert os.fsencode(odd.relpath) == b"cls/bad\xff\xfeutf8.jpg" and read_bytes(odd) == jpeg(seed=99)


def test_only_a_prefix_is_read_to_reject_a_huge_file(tmp_path):
    with open(tmp_path / "huge.bin", "wb") as f:
        f.write(b"%PDF-1.7")
        f.truncate(8 * 1024**3)  # sparse: reading it whole would take far longer than this test's budget
    r = scan(str(tmp_path))
    assert [(x.relpath, x.reason) for x in r.rejected] == [("huge.bin", "unknown_format")]


def test_header_past_the_first_read_is_found_in_the_longer_prefix(tmp_path):
    """The scan reads HEADER_FIRST bytes, then HEADER_PREFIX: a SOF behind a 40 KB APP segment (a big EXIF
    thumbnail) is found, with the right size."""
    src = jpeg(8, 6)
    app = b"\xff\xe2" + (0x9C42).to_bytes(2, "big") + b"a" * (0x9C42 - 2)
    data = src[:2] + app + src[2:]
    assert HEADER_FIRST < len(app) < HEADER_PREFIX
    put(tmp_path, "late.jpg", data)
    images, rejected = by_rel(scan(str(tmp_path)))
    assert not rejected and (images["late.jpg"].header.width, images["late.jpg"].header.height) == (8, 6)


def test_header_past_the_prefix_is_found_up_to_the_retry_limit(tmp_path):
    src = jpeg(8, 6)
    com = b"".join(b"\xff\xfe\xff\xff" + b"c" * 0xFFFD for _ in range(HEADER_PREFIX // 0xFFFF + 1))
    data = src[:2] + com + src[2:]
    put(tmp_path, "late_sof.jpg", data)
    with open(tmp_path / "late_sof_huge.jpg", "wb") as f:
        f.write(data)
        f.truncate(HEADER_RETRY_MAX + 1)  # trailing zeros after EOI; only the size matters
    images, rejected = by_rel(scan(str(tmp_path)))
    assert (images["late_sof.jpg"].header.width, images["late_sof.jpg"].header.height) == (8, 6)
    assert rejected["late_sof_huge.jpg"].reason == "bad_header"
    assert "no image size in the first" in rejected["late_sof_huge.jpg"].message


def test_missing_root_fails_the_job(tmp_path):
    with pytest.raises(JobFailed, match="does not exist"):
        scan(str(tmp_path / "nope"))


def test_gfile_url_root():
    tf = pytest.importorskip("tensorflow")
    root = "ram://scanjob/job1"
    files = {"dog/a.jpg": jpeg(seed=1), "cat/sub/b.jpg": jpeg(seed=2), "top.jpg": jpeg(seed=3),
             "cat/bad.jpg": b"nope", "_READY": b"", ".hidden/x.jpg": b"junk"}
    for rel, data in files.items():
        tf.io.gfile.makedirs(os.path.dirname(f"{root}/{rel}"))
        with tf.io.gfile.GFile(f"{root}/{rel}", "wb") as f:
            f.write(data)
    try:
        r = scan(root + "/")
        assert r.classes == ("cat", "dog")
        assert [(i.relpath, i.label) for i in r.images] == [("cat/sub/b.jpg", 0), ("dog/a.jpg", 1), ("top.jpg", -1)]
        assert [(x.relpath, x.reason) for x in r.rejected] == [("cat/bad.jpg", "unknown_format")]
        for i in r.images:
            assert i.path == f"{root}/{i.relpath}" and read_bytes(i) == files[i.relpath]
    finally:
        tf.io.gfile.rmtree("ram://scanjob")


def test_a_file_far_bigger_than_its_image_is_refused_before_it_is_read_whole(tmp_path):
    """A valid 8x6 JPEG header followed by 64 MB (sparse) would be read whole by the engine: refused."""
    from augd.io.scan import MAX_METADATA_BYTES
    put(tmp_path, "ok.jpg", jpeg(8, 6))
    with open(tmp_path / "padded.jpg", "wb") as f:
        f.write(jpeg(8, 6))
        f.truncate(MAX_METADATA_BYTES + 8 * 8 * 6 + 1)
    images, rejected = by_rel(scan(str(tmp_path)))
    assert set(images) == {"ok.jpg"}
    assert rejected["padded.jpg"].reason == "bad_header"
    assert "more than a 8×6 jpeg can hold" in rejected["padded.jpg"].message
