"""Where each stage of a job graph runs, read back from the traced graph.

The graph places its stages explicitly: decoding and encoding on the CPU (TensorFlow's image codecs
have no GPU kernels), the augmentation steps on the GPU when one is used with the TF kernels. An op
placed on a device with no kernel for it there runs on the CPU instead (soft placement), so the report
checks every op against TensorFlow's kernel registry: a GPU run that silently does part of its work on
the CPU says so (for example the host-side tf.numpy_function of `colour: fast`).
"""
from __future__ import annotations

import functools

from augd.ops._tf import tf

__all__ = ["CPU", "augment_device", "stage_devices"]

CPU = "/device:CPU:0"
GPU = "/device:GPU:0"
DECODE_OPS = frozenset({"DecodeImage", "DecodeJpeg", "DecodeAndCropJpeg", "DecodePng", "DecodeBmp", "DecodeGif",
                        "ExtractJpegShape"})
ENCODE_OPS = frozenset({"EncodeJpeg", "EncodePng", "SerializeTensor"})
# Graph plumbing that says nothing about where the pixels are processed.
_PLUMBING = frozenset({"Const", "Identity", "IdentityN", "NoOp", "Placeholder", "_Arg", "_Retval"})


def augment_device(device_kind: str, kernel: str) -> str:
    return GPU if device_kind == "GPU" and kernel == "tf" else CPU


@functools.lru_cache(maxsize=None)
def _kernel_devices(op_type: str) -> frozenset:
    from tensorflow.python.framework import kernels
    return frozenset(k.device_type for k in kernels.get_registered_kernels_for_op(op_type).kernel)


def _requested(device: str) -> str:
    return (tf.DeviceSpec.from_string(device).device_type if device else None) or "CPU"


def _runs_on(op_type: str, requested: str) -> str:
    """The device type a node runs on: the one it asks for, if a kernel for its op exists there."""
    kind = _requested(requested)
    return kind if kind == "CPU" or kind in _kernel_devices(op_type) else "CPU"


def _stage(kinds: dict, label_for: dict) -> str:
    """kinds: device type -> op types. The stage's device, and the op types that run elsewhere."""
    if not kinds:
        return "none"
    main = "GPU" if "GPU" in kinds else "CPU"
    others = sorted(kinds.get("CPU", ())) if main == "GPU" else []
    return label_for[main] + (f"; on the CPU: {', '.join(others)}" if others else "")


def stage_devices(graph_def, device_name: str, kernel: str, augment: str) -> dict:
    """{"decode": ..., "augment": ..., "encode": ...}: the device each stage runs on, e.g. "GPU:0 (NVIDIA
    H200)", with any op types of the stage that fall back to the CPU listed after it. `augment`: the
    device the graph placed its augmentation steps on (augment_device)."""
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    kinds: dict[str, dict[str, set]] = {"decode": {}, "augment": {}, "encode": {}}
    for n in nodes:
        if n.op in DECODE_OPS:
            stage = "decode"
        elif n.op in ENCODE_OPS:
            stage = "encode"
        elif augment != CPU and n.op not in _PLUMBING and _requested(n.device) == "GPU":
            stage = "augment"
        else:
            continue
        kinds[stage].setdefault(_runs_on(n.op, n.device), set()).add(n.op)
    out = {stage: _stage(k, {"GPU": device_name, "CPU": "CPU"}) for stage, k in kinds.items()}
    if augment == CPU:  # CPU hosts: no other device to fall back from
        out["augment"] = "CPU (OpenCV)" if kernel == "opencv" else "CPU"
    return out
