"""EngineOptions: every knob of the engine in one frozen pydantic model, and the one place augd reads them from
the environment (AUGD_KERNELS, AUGD_CROP_DECODE, AUGD_GRAPPLER, AUGD_OPENCV_THREADS, AUGD_MALLOC, AUGD_DEVICE,
AUGD_GPU_MEMORY_MB, AUGD_TF_THREADS). The daemon config's `engine:` block *is* this model: the keys a config sets
(`model_fields_set`, so an explicit `null` counts) go over the environment's. Imports nothing of augd."""
from __future__ import annotations

import os
import typing
from typing import Annotated, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

__all__ = ["DEVICES", "ENV", "EngineOptions", "KERNELS", "TRI"]

Kernels = Literal["auto", "tf", "opencv"]
Devices = Literal["auto", "cpu", "gpu"]
Tri = Literal["auto", "on", "off"]
KERNELS, DEVICES, TRI = typing.get_args(Kernels), typing.get_args(Devices), typing.get_args(Tri)
_Count = Annotated[int, Field(ge=0, strict=True)]

#: field -> the environment variable that sets it
ENV = {"kernels": "AUGD_KERNELS", "crop_decode": "AUGD_CROP_DECODE", "grappler": "AUGD_GRAPPLER",
       "opencv_threads": "AUGD_OPENCV_THREADS", "tune_malloc": "AUGD_MALLOC", "device": "AUGD_DEVICE",
       "gpu_memory_mb": "AUGD_GPU_MEMORY_MB", "tf_threads": "AUGD_TF_THREADS"}

#: what each field allows, in the words of an error raised outside a YAML file (code, the environment)
_ALLOWED = {"kernels": f"one of {list(KERNELS)}", "grappler": f"one of {list(TRI)}",
            "device": f"one of {list(DEVICES)}",
            "crop_decode": "true or false", "tune_malloc": "true or false",
            "opencv_threads": "a whole number >= 0 (0: the library's default)",
            "tf_threads": "a whole number >= 0 (0: the library's default)",
            "gpu_memory_mb": "a whole number of MB >= 1, or null"}

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class EngineOptions(BaseModel):
    """How the engine runs. Per graph: `kernels`, `crop_decode`. Per process (fixed by the first engine a
    process builds, see Engine): the rest (`process_key`)."""
    model_config = ConfigDict(extra="forbid", frozen=True)

    kernels: Kernels = Field("auto", description="auto: TensorFlow's on a GPU, OpenCV's on the CPU")
    crop_decode: StrictBool = Field(True, description="decode only the window a leading crop keeps, at a reduced "
                                                      "DCT scale")
    grappler: Tri = Field("auto", description="TensorFlow's graph optimizer; auto: on for GPUs, off on CPUs, where "
                                              "it only slows the first call")
    opencv_threads: _Count = Field(1, description="OpenCV's threads per process (1: one image per worker already "
                                                  "fills the cores; 0: OpenCV's own default)")
    tune_malloc: StrictBool = Field(True, description="keep freed image buffers in glibc's heap (a user's own "
                                                      "MALLOC_* settings win)")
    device: Devices = Field("auto", description="auto: the first GPU, else the CPU")
    gpu_memory_mb: Annotated[int, Field(ge=1, strict=True)] | None = Field(
        None, description="GPU memory cap (null: grow as needed)")
    tf_threads: _Count = Field(0, description="TensorFlow's intra- and inter-op threads (0: one per core; worker "
                                              "processes get their share of the cores, so that N processes do not "
                                              "each spin N threads)")

    @property
    def process_key(self) -> tuple:
        """The options that configure the process rather than one graph: one process can hold only one set."""
        return (self.grappler, self.opencv_threads, self.tune_malloc, self.device, self.gpu_memory_mb, self.tf_threads)

    def replace(self, **changes) -> "EngineOptions":
        """A copy with `changes` (validated); None is a value here (gpu_memory_mb: null), not "unchanged"."""
        return _make({**self.model_dump(), **changes})

    def set_fields(self) -> dict:
        """The fields given when this value was made (a config's `engine:` keys, null included)."""
        return {k: getattr(self, k) for k in self.model_fields_set}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides) -> "EngineOptions":
        """Options from the environment (unset variables keep the defaults), then `overrides` over them (every
        key given counts, None included). Errors name the variable, the bad value and what is allowed."""
        env = os.environ if environ is None else environ
        values = {}
        for name, var in ENV.items():
            raw = env.get(var, "").strip()
            if raw:
                values[name] = _parse(name, var, raw)
        if "tune_malloc" not in values and any(k.startswith("MALLOC_") for k in env):
            values["tune_malloc"] = False  # the user tuned glibc's malloc themselves: their settings win
        try:
            base = _make(values)
        except ValueError as exc:
            raise ValueError(f"{exc} (from the environment: "
                             f"{', '.join(f'{ENV[k]}={env.get(ENV[k])}' for k in values if ENV[k] in env)})") from None
        return base.replace(**overrides) if overrides else base


def _make(values: dict) -> EngineOptions:
    """EngineOptions(**values), its errors in one plain sentence each (code and the environment get no pydantic
    table; a YAML file's `engine:` block gets the config's own errors, with file and line)."""
    try:
        return EngineOptions(**values)
    except ValidationError as exc:
        raise ValueError(_explain(exc, values)) from None


def _explain(exc: ValidationError, values: dict) -> str:
    parts = []
    for err in exc.errors():
        name = str(err["loc"][0]) if err["loc"] else "?"
        if name in _ALLOWED:
            parts.append(f"engine option {name} must be {_ALLOWED[name]}; got {values.get(name)!r}")
        else:
            parts.append(f"unknown engine option {name!r}; the options are {sorted(_ALLOWED)}")
    return "; ".join(parts)


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
