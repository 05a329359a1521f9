"""EngineOptions: every knob of the engine in one frozen value, and the one place augd reads them from the
environment (AUGD_KERNELS, AUGD_CROP_DECODE, AUGD_GRAPPLER, AUGD_OPENCV_THREADS, AUGD_MALLOC, AUGD_DEVICE,
AUGD_GPU_MEMORY_MB). The daemon config's `engine:` block sets the same fields; code and tests build options
directly. A leaf: importing it loads nothing."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Mapping

__all__ = ["DEVICES", "ENV", "EngineOptions", "KERNELS", "TRI"]

KERNELS = ("auto", "tf", "opencv")
DEVICES = ("auto", "cpu", "gpu")
TRI = ("auto", "on", "off")

#: field -> the environment variable that sets it
ENV = {"kernels": "AUGD_KERNELS", "crop_decode": "AUGD_CROP_DECODE", "grappler": "AUGD_GRAPPLER",
       "opencv_threads": "AUGD_OPENCV_THREADS", "tune_malloc": "AUGD_MALLOC", "device": "AUGD_DEVICE",
       "gpu_memory_mb": "AUGD_GPU_MEMORY_MB", "tf_threads": "AUGD_TF_THREADS"}

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class EngineOptions:
    """How the engine runs. Per graph: `kernels` (auto: TensorFlow's on a GPU, OpenCV's on the CPU),
    `crop_decode` (decode only the window a leading crop keeps, at a reduced DCT scale). Per process (fixed by
    the first engine a process builds, see Engine): `grappler` (auto: on for GPUs, off on CPUs, where it only
    slows the first call), `opencv_threads` (1: one image per worker already fills the cores; 0: OpenCV's
    default), `tune_malloc` (keep freed image buffers in glibc's heap; a user's own MALLOC_* settings win),
    `device` (auto: the first GPU, else the CPU), `gpu_memory_mb` (a cap; None: grow as needed), `tf_threads`
    (TensorFlow's intra- and inter-op threads; 0: its default, one per core; worker processes get their share of
    the cores, so that N processes do not each spin N threads)."""
    kernels: str = "auto"
    crop_decode: bool = True
    grappler: str = "auto"
    opencv_threads: int = 1
    tune_malloc: bool = True
    device: str = "auto"
    gpu_memory_mb: int | None = None
    tf_threads: int = 0

    def __post_init__(self):
        for name, allowed in (("kernels", KERNELS), ("grappler", TRI), ("device", DEVICES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"engine option {name} must be one of {list(allowed)}; got {getattr(self, name)!r}")
        for name in ("crop_decode", "tune_malloc"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"engine option {name} must be true or false; got {getattr(self, name)!r}")
        for name in ("opencv_threads", "tf_threads"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"engine option {name} must be a whole number >= 0 (0: the library's default); "
                                 f"got {v!r}")
        mb = self.gpu_memory_mb
        if mb is not None and (isinstance(mb, bool) or not isinstance(mb, int) or mb < 1):
            raise ValueError(f"engine option gpu_memory_mb must be a whole number of MB >= 1, or null; got {mb!r}")

    @property
    def process_key(self) -> tuple:
        """The options that configure the process rather than one graph: one process can hold only one set."""
        return (self.grappler, self.opencv_threads, self.tune_malloc, self.device, self.gpu_memory_mb, self.tf_threads)

    def replace(self, **changes) -> "EngineOptions":
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides) -> "EngineOptions":
        """Options from the environment (unset variables keep the defaults), then `overrides` that are not None.
        Errors name the variable, the bad value and what is allowed."""
        env = os.environ if environ is None else environ
        values = {}
        for name, var in ENV.items():
            raw = env.get(var, "").strip()
            if raw:
                values[name] = _parse(name, var, raw)
        if "tune_malloc" not in values and any(k.startswith("MALLOC_") for k in env):
            values["tune_malloc"] = False  # the user tuned glibc's malloc themselves: their settings win
        try:
            return cls(**values).replace(**overrides)
        except ValueError as exc:
            raise ValueError(f"{exc} (from the environment: "
                             f"{', '.join(f'{ENV[k]}={env.get(ENV[k])}' for k in values if ENV[k] in env)})") from None


def _parse(name: str, var: str, raw: str):
    low = raw.lower()
    if name in ("crop_decode", "tune_malloc"):
        if low in _TRUE or low in _FALSE:
            return low in _TRUE
        raise ValueError(f"{var} must be 1 or 0 (true/false); got {raw!r}")
    if name == "grappler":  # 1/0 as well as auto/on/off
        return "on" if low in _TRUE else "off" if low in _FALSE else low
    if name in ("opencv_threads", "gpu_memory_mb", "tf_threads"):
        if not low.isdigit():
            raise ValueError(f"{var} must be a whole number; got {raw!r}")
        return int(low)
    return low
