"""What a job folder holds besides its images: the files of the drop-folder protocol. A leaf module, so the scan's
caller, the daemon (which writes and reads them) and routing agree on one list."""
from __future__ import annotations

from augd.defaults import JOB_CONFIG, READY_MARKER

__all__ = ["CLAIM_FILE", "CONTROL_FILES", "ERROR_FILE", "FAILURE_FILE", "LABEL_MAP_FILE", "MARKERS"]

#: Written into a job by its claim (augd/daemon/claims; hidden: the job scan skips it, the watcher's signature too).
CLAIM_FILE = ".augd-claim.json"
#: Written into a failed job by the daemon: the failure for machines, and for people.
FAILURE_FILE = "failure.json"
ERROR_FILE = "error.txt"
#: A detection job's label map (the TF Object Detection API's format): the output holds one, a job may bring one.
LABEL_MAP_FILE = "label_map.pbtxt"
#: Files at a job's root (and at a split folder's) that belong to the protocol, not to the data; labels.txt and
#: label_map.pbtxt are label maps the job's augd.yaml may name.
CONTROL_FILES = frozenset({JOB_CONFIG, READY_MARKER, FAILURE_FILE, ERROR_FILE, "labels.txt", LABEL_MAP_FILE})
#: Of those, the ones never read as an image at any depth: a `_READY` touched in a class folder is no input.
MARKERS = frozenset({READY_MARKER})
