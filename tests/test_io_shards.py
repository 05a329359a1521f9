"""augd.io.shards: counts, names, the portable shuffle, the writer and the reader."""
import os

import numpy as np
import pytest
import tensorflow as tf

from augd.io.shards import ShardWriter, read_records, shard_count, shard_name, shuffled_order

MiB = 1024 * 1024


@pytest.mark.parametrize("estimate,setting,target,expected", [
    (0, "auto", 128 * MiB, 1),
    (1, "auto", 128 * MiB, 1),
    (128 * MiB, "auto", 128 * MiB, 1),
    (128 * MiB + 1, "auto", 128 * MiB, 2),
    (1000, "auto", 100, 10),
    (10**12, 7, 100, 7),
    (0, 3, 100, 3),
])
def test_shard_count(estimate, setting, target, expected):
    assert shard_count(estimate, setting, target) == expected


@pytest.mark.parametrize("setting", [0, -1, "many", 2.5, True, None])
def test_shard_count_rejects_bad_settings(setting):
    with pytest.raises(ValueError, match="shards must be 'auto' or an integer >= 1"):
        shard_count(100, setting)


@pytest.mark.parametrize("index,count,compression,expected", [
    (0, 8, "none", "job-00000-of-00008.tfrecord"),
    (7, 8, "gzip", "job-00007-of-00008.tfrecord.gz"),
    (12345, 99999, "none", "job-12345-of-99999.tfrecord"),
])
def test_shard_name(index, count, compression, expected):
    assert shard_name("job", index, count, compression) == expected


def test_shard_name_rejects_unknown_compression():
    with pytest.raises(ValueError, match="compression must be one of"):
        shard_name("job", 0, 1, "zstd")


# sorted(range(10), key=lambda i: sha256(b"42\0img%d.jpg" % i).digest()), computed once and pinned.
GOLDEN_ORDER = [0, 5, 4, 9, 8, 2, 3, 1, 6, 7]


def test_shuffled_order_is_a_portable_deterministic_permutation():
    keys = [f"img{i}.jpg" for i in range(10)]
    order = shuffled_order(keys, 42)
    assert sorted(order) == list(range(10)) and order != list(range(10))
    assert shuffled_order(keys, 42) == order
    assert shuffled_order(keys, 43) != order
    # Pinned value: the order must be the same on every machine and Python version (sha256, not hash()).
    assert order == GOLDEN_ORDER
    # Duplicate and non-UTF-8 keys are fine.
    assert sorted(shuffled_order(["a", "a", "\udcff"], 1)) == [0, 1, 2]
    assert shuffled_order([], 1) == []


def records(n: int) -> list[bytes]:
    return [f"record-{i}".encode() * (i + 1) for i in range(n)]


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_writer_round_robin_empty_shards_and_reader(tmp_path, compression):
    recs = records(2)
    with ShardWriter(str(tmp_path), "job", 4, compression) as w:
        for i, r in enumerate(recs):
            assert w.write(i, r) == len(r) + 16
    assert w.records_per_shard == [1, 1, 0, 0]
    assert w.bytes_written == sum(len(r) + 16 for r in recs)
    ext = ".tfrecord.gz" if compression == "gzip" else ".tfrecord"
    names = sorted(os.listdir(tmp_path))
    assert names == [f"job-0000{i}-of-00004{ext}" for i in range(4)]
    for i, name in enumerate(names):  # every shard, empty ones too, is a valid file
        ds = tf.data.TFRecordDataset(str(tmp_path / name), compression_type="GZIP" if compression == "gzip" else "")
        assert list(ds.as_numpy_iterator()) == recs[i:i + 1]
    assert list(read_records(str(tmp_path))) == recs
    assert list(read_records(str(tmp_path / names[1]))) == [recs[1]]


def test_many_records_balance_across_shards(tmp_path):
    recs = records(23)
    with ShardWriter(str(tmp_path), "j", 5) as w:
        for i, r in enumerate(recs):
            w.write(i, r)
    assert w.records_per_shard == [5, 5, 5, 4, 4]
    assert sorted(read_records(str(tmp_path))) == sorted(recs)


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_same_records_give_identical_bytes(tmp_path, compression):
    outs = []
    for run in ("a", "b"):
        d = tmp_path / run
        d.mkdir()
        with ShardWriter(str(d), "job", 3, compression) as w:
            for i, r in enumerate(records(10)):
                w.write(i, r)
        outs.append({n: (d / n).read_bytes() for n in sorted(os.listdir(d))})
    assert outs[0] == outs[1]


def test_exception_in_block_closes_and_propagates(tmp_path):
    with pytest.raises(RuntimeError, match="boom"):
        with ShardWriter(str(tmp_path), "job", 2) as w:
            w.write(0, b"x")
            raise RuntimeError("boom")
    assert len(os.listdir(tmp_path)) == 2


def test_gfile_url_directory():
    d = "ram://shards-test/out"
    tf.io.gfile.makedirs(d)
    try:
        with ShardWriter(d, "job", 2, "gzip") as w:
            for i, r in enumerate(records(3)):
                w.write(i, r)
        assert sorted(read_records(d)) == sorted(records(3))
    finally:
        tf.io.gfile.rmtree("ram://shards-test")


def test_local_shards_are_byte_for_byte_what_tensorflows_writer_writes(tmp_path):
    """Local uncompressed shards are framed without TensorFlow (augd.io.shards.frame): the same bytes as
    tf.io.TFRecordWriter, for empty, small, odd-sized and multi-MB records, and a corrupted CRC is caught by
    TensorFlow's own reader (so the checksums are real, not zeros it ignores)."""
    rng = np.random.default_rng(0)
    recs = [b"", b"x", *records(7), rng.bytes(3 * MiB + 17), rng.bytes(65537)]
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    theirs.mkdir()
    with ShardWriter(str(ours), "job", 2) as w:
        for i, r in enumerate(recs):
            w.write(i, r)
    for k in range(2):
        name = shard_name("job", k, 2)
        with tf.io.TFRecordWriter(str(theirs / name)) as tw:
            for r in recs[k::2]:
                tw.write(r)
        assert (ours / name).read_bytes() == (theirs / name).read_bytes()
        assert list(tf.data.TFRecordDataset(str(ours / name)).as_numpy_iterator()) == recs[k::2]
    # flip one byte of the first record's data crc: TensorFlow's reader must refuse the file
    path = ours / shard_name("job", 0, 2)
    raw = bytearray(path.read_bytes())
    raw[12] ^= 0xFF   # the empty record's data crc follows its 12-byte header
    path.write_bytes(bytes(raw))
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset(str(path)).as_numpy_iterator())


def test_uncompressed_url_shards_go_through_tensorflow():
    d = "ram://shards-plain/out"
    tf.io.gfile.makedirs(d)
    try:
        with ShardWriter(d, "job", 2) as w:
            for i, r in enumerate(records(3)):
                w.write(i, r)
        assert sorted(read_records(d)) == sorted(records(3))
    finally:
        tf.io.gfile.rmtree("ram://shards-plain")
