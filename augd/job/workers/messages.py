"""What the pool's parent and a worker process say to each other over their pipe: named, typed records (pickled by
multiprocessing's Connection). None from the parent: stop. Light on import: both sides load it first."""
from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["Batch", "Call", "Called", "Done", "Failed", "Forget", "Ready"]


# parent -> worker
class Batch(NamedTuple):
    """Run process_images on `batch` with the job's graph; `payload` (the pickled (spec, detection, partners)) only
    with a job's first batch to this worker, else None."""
    job_id: int
    payload: bytes | None
    batch: list
    variants: Any           # one list of variants for every image, or one list per image


class Call(NamedTuple):
    """Run fn(chunk) (the plan's TensorFlow-free work, ProcessPool.map): `payload` is the pickled (fn, chunk)."""
    payload: bytes


class Forget(NamedTuple):
    """The job ended: let its graph go (the worker keeps the last one for a next job of the same pipeline)."""
    job_id: int


# worker -> parent
class Ready(NamedTuple):
    """The worker's engine is up, on `device` (augd.engine.DeviceInfo): the parent need not load TensorFlow."""
    device: Any


class Done(NamedTuple):
    """A Batch's outcomes (ImageOutcome each), the seconds they took, and the graph's figures (builds, traces,
    stage_devices) for the report."""
    outcomes: list
    seconds: float
    stats: dict


class Called(NamedTuple):
    """A Call's result, pickled."""
    result: bytes


class Failed(NamedTuple):
    """A Batch or Call failed: the exception as text with the worker's traceback (not every exception unpickles
    in the parent)."""
    text: str
