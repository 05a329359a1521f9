"""What a job folder holds besides its images: the files of the drop-folder protocol. A leaf module, so the scan's
caller, the daemon (which writes and reads them) and routing agree on one list."""
from __future__ import annotations

from augd.defaults import JOB_CONFIG, READY_MARKER

__all__ = ["CONTROL_FILES", "ERROR_FILE", "FAILURE_FILE", "MARKERS"]

#: Written into a failed job by the daemon: the failure for machines, and for people.
FAILURE_FILE = "failure.json"
ERROR_FILE = "error.txt"
#: Files at a job's root (and at a split folder's) that belong to the protocol, not to the data; labels.txt is
#: a label map the job's augd.yaml may name.
CONTROL_FILES = frozenset({JOB_CONFIG, READY_MARKER, FAILURE_FILE, ERROR_FILE, "labels.txt"})
#: Of those, the ones never read as an image at any depth: a `_READY` touched in a class folder is no input.
MARKERS = frozenset({READY_MARKER})
