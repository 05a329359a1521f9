"""What one job may spend reading its inputs, decided once per job (from its memory limit) and handed to the
readers: the largest record read into memory, the scratch its compressed shards may inflate into, and a beat the
readers call as they go (the daemon's heartbeat and the job's cancel: a scan of millions of records must neither
look hung nor outlive job_timeout_seconds). TensorFlow-free."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from augd import defaults

__all__ = ["ReadLimits", "no_beat"]

_MB = 1024 * 1024


def no_beat() -> None:
    """The default beat: nothing follows the reading."""


@dataclass(frozen=True)
class ReadLimits:
    """`record_bytes`: the largest record read (a longer one is rejected unread); `record_limit`: where that bound
    comes from, for the rejection's message; `beat`: called after each record, file or inflated MiB, may raise
    (JobCancelled) to stop the job there."""
    record_bytes: int = defaults.MAX_RECORD_BYTES
    record_limit: str = f"MAX_RECORD_BYTES, {defaults.MAX_RECORD_BYTES // _MB} MiB"
    beat: Callable[[], None] = no_beat

    @classmethod
    def for_job(cls, memory_limit: int | None, beat: Callable[[], None] = no_beat) -> "ReadLimits":
        """The limits of a job whose memory limit is `memory_limit` bytes (None: none)."""
        share = defaults.RECORD_MEMORY_SHARE
        if memory_limit is None or memory_limit // share >= defaults.MAX_RECORD_BYTES:
            return cls(beat=beat)
        return cls(memory_limit // share, f"1/{share} of the job's memory limit of {memory_limit / _MB:.0f} MB: "
                                          f"--max-memory-mb for augd run and augd check, job_memory_mb for the "
                                          f"daemon", beat)

    @staticmethod
    def scratch_bytes(compressed: int) -> int:
        """The scratch budget of a job whose compressed shards hold `compressed` bytes together."""
        return max(defaults.SCRATCH_MIN_BYTES, defaults.SCRATCH_RATIO * compressed)

    @staticmethod
    def scratch_why(compressed: int) -> str:
        return (f"the job's scratch budget: {defaults.SCRATCH_RATIO}x its compressed shards' {compressed} bytes, at "
                f"least {defaults.SCRATCH_MIN_BYTES // _MB} MiB")
