"""augd.io: input scan, record schema, shard writer/reader, atomic commit.

Importing this package does not import TensorFlow: the scan names are loaded eagerly (pure Python for local
roots); the record, shard and commit names load their modules, and TensorFlow, on first use.
"""
from __future__ import annotations

import importlib

from augd.io.jobfs import is_url, local_path, read_bytes
from augd.io.scan import (
    REJECT_REASONS, SPLIT_FOLDERS, SPLITS, InputImage, RejectedInput, ScanResult, check_header, scan_job, split_of,
)

_LAZY = {
    "FEATURES": "records", "make_example": "records", "parse_example": "records",
    "DETECTION_FEATURES": "records", "RecordObjects": "objects",
    "ShardWriter": "shards", "read_records": "shards", "shard_count": "shards", "shard_name": "shards",
    "shuffled_order": "shards",
    "AtomicOutput": "commit", "OutputExists": "commit", "clean_stale_temps": "commit", "is_complete": "commit",
    "write_json": "commit", "write_text": "commit",
}

__all__ = [
    "REJECT_REASONS", "SPLIT_FOLDERS", "SPLITS", "InputImage", "RejectedInput", "ScanResult", "check_header", "is_url",
    "local_path", "read_bytes", "scan_job", "split_of", *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f"augd.io.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'augd.io' has no attribute {name!r}")
