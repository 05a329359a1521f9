"""TFRecord shards: how many, their names, a portable shuffle, a writer and a reader.

Record i (in shuffled order) goes to shard i % count, so shards come out balanced and their bytes depend only
on the records and their order, never on timing or worker count.

Local uncompressed shards (the default) are framed here, without TensorFlow: the parent of a job on worker
processes then never imports it (~4 CPU-s that competed with the workers' own imports on a small host). The
framing is TFRecord's (uint64 length, masked CRC-32C of it, data, masked CRC-32C of the data), byte for byte
what tf.io.TFRecordWriter writes (tested). GZIP shards and gfile URLs go through TensorFlow's writer.
"""
from __future__ import annotations

import os
import struct

import hashlib
import math
from typing import Iterator, Sequence

from augd.defaults import TARGET_SHARD_BYTES
from augd.files import fsync_file
from augd.io.jobfs import is_url, local_path
from augd.io.lite import masked_crc

__all__ = ["COMPRESSIONS", "ShardWriter", "frame", "read_records", "shard_count", "shard_name", "shuffled_order"]

COMPRESSIONS = ("none", "gzip")
# TFRecord framing per record: uint64 length, uint32 length CRC, data, uint32 data CRC.
_FRAMING = 16


def shard_count(
    total_records_estimate_bytes: int, setting: str | int = "auto", target: int = TARGET_SHARD_BYTES
) -> int:
    """Shards for about `total_records_estimate_bytes` of records: `setting` itself when an int, else enough
    shards of about `target` bytes each (at least 1)."""
    if setting == "auto":
        return max(1, math.ceil(max(0, total_records_estimate_bytes) / target))
    if isinstance(setting, bool) or not isinstance(setting, int) or setting < 1:
        raise ValueError(f"shards must be 'auto' or an integer >= 1; got {setting!r}")
    return setting


def shard_name(job: str, index: int, count: int, compression: str = "none") -> str:
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression must be one of {COMPRESSIONS}; got {compression!r}")
    return f"{job}-{index:05d}-of-{count:05d}.tfrecord" + (".gz" if compression == "gzip" else "")


def shuffled_order(keys: Sequence[str], seed: int) -> list[int]:
    """A permutation of range(len(keys)) keyed by (seed, key): sha256 ranks, so it is the same on every machine
    and Python version, and adding one key does not reshuffle the others relative to each other."""
    def rank(i: int) -> tuple[bytes, int]:
        digest = hashlib.sha256(f"{seed}\0".encode() + keys[i].encode("utf-8", "surrogateescape")).digest()
        return digest, i  # the index breaks ties between duplicate keys

    return sorted(range(len(keys)), key=rank)


def frame(record: bytes) -> bytes:
    """One record as TFRecord files hold it."""
    head = struct.pack("<Q", len(record))
    return b"".join((head, masked_crc(head), record, masked_crc(record)))


class _LocalWriter:
    """tf.io.TFRecordWriter's bytes for a local file without compression."""

    def __init__(self, path: str):
        self._fh = open(local_path(path), "wb", buffering=1 << 20)

    def write(self, record: bytes) -> None:
        self._fh.write(frame(record))

    def close(self) -> None:
        self._fh.close()


def _open_writer(path: str, compression: str):
    if compression == "none" and not is_url(path):
        return _LocalWriter(path)
    import tensorflow as tf  # GZIP or a gfile URL
    return tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type="GZIP" if compression == "gzip" else ""))


class ShardWriter:
    """Writes `count` shards into `directory`. Every shard file is created up front, so empty shards are valid
    (zero-record) files. bytes_written counts framed, uncompressed record bytes."""

    def __init__(self, directory: str, job: str, count: int, compression: str = "none"):
        if count < 1:
            raise ValueError(f"shard count must be >= 1; got {count}")
        self.paths = [f"{directory.rstrip('/')}/{shard_name(job, i, count, compression)}" for i in range(count)]
        self.records_per_shard = [0] * count
        self.bytes_written = 0
        self._writers: list = []
        try:
            for p in self.paths:
                self._writers.append(_open_writer(p, compression))
        except BaseException:
            self._abort()
            raise

    def write(self, index_in_order: int, record: bytes) -> int:
        shard = index_in_order % len(self.paths)
        self._writers[shard].write(record)
        self.records_per_shard[shard] += 1
        self.bytes_written += len(record) + _FRAMING
        return len(record) + _FRAMING

    def close(self) -> None:
        """Flush and close every shard; fsync local ones so a commit after this survives a power cut."""
        writers, self._writers = self._writers, []
        for w in writers:
            w.close()
        for p in self.paths:
            if not is_url(p):
                fsync_file(local_path(p))

    def _abort(self) -> None:
        writers, self._writers = self._writers, []
        for w in writers:
            try:
                w.close()
            except Exception:  # already failing; the temp dir holding these files gets removed
                pass

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self._abort()


def read_records(path_or_dir: str) -> Iterator[bytes]:
    """Every record of one shard file, or of all shards (*.tfrecord, *.tfrecord.gz) in a folder, sorted."""
    import tensorflow as tf
    path_or_dir = os.fspath(path_or_dir)
    if tf.io.gfile.isdir(path_or_dir):
        base = path_or_dir.rstrip("/")
        names = sorted(n for n in tf.io.gfile.listdir(base) if n.endswith((".tfrecord", ".tfrecord.gz")))
        paths = [f"{base}/{n}" for n in names]
    else:
        paths = [path_or_dir]
    for p in paths:
        ds = tf.data.TFRecordDataset(p, compression_type="GZIP" if p.endswith(".gz") else "")
        for rec in ds.as_numpy_iterator():
            yield rec
