"""Where each stage of a job graph runs, read back from the traced graph.

The graph places its stages explicitly: decoding and encoding on the CPU (TensorFlow's image codecs
have no GPU kernels), the augmentation steps on the GPU when one is used with the TF kernels. An op
placed on a device with no kernel for it there runs on the CPU instead (soft placement), so the report
checks every node against TensorFlow's kernel registry, by its dtypes: a GPU run that silently does part
of its work on the CPU says so. Every node counts: those of the function bodies too (cond and while branches,
called functions, at any depth), where a node that names no device runs where its caller does. Three kinds of
node in the GPU stage are not such fallbacks:
- device-agnostic kernels (`DEFAULT`: If, Case, ...), which run where their inputs are;
- planned host steps: graph code that must run on the CPU by nature (a JPEG re-encode), pinned there with
  `host_step(name)` and listed by that name.
A check (Assert, Print) has a DEFAULT kernel too, but it reads its inputs in host memory: on a GPU each one copies
its condition off the device and waits for it, once per image, so it counts as a fallback.
The Linux TensorFlow wheel is the CUDA build, so all of this can be read on a CPU host too.
"""
from __future__ import annotations

import contextlib
import functools
import re

from augd.ops._tf import tf

__all__ = ["AUGMENT_SCOPE", "CPU", "GPU", "augment_device", "gpu_stage", "host_step", "placed", "stage_devices"]

CPU = "/device:CPU:0"
GPU = "/device:GPU:0"
DECODE_OPS = frozenset({"DecodeImage", "DecodeJpeg", "DecodeAndCropJpeg", "DecodePng", "DecodeBmp", "DecodeGif",
                        "ExtractJpegShape", "DecodeRaw"})   # DecodeRaw: a tile's or a canvas's raw pixels
ENCODE_OPS = frozenset({"EncodeJpeg", "EncodePng", "SerializeTensor"})
# Graph plumbing that says nothing about where the pixels are processed.
_PLUMBING = frozenset({"Const", "Identity", "IdentityN", "NoOp", "Placeholder", "_Arg", "_Retval"})
AUGMENT_SCOPE = "augment"   # the name scope of the augment stage (compile.py)
_HOST = "host."          # the name scope of a planned host step: host.<name>
_HOST_SCOPE = re.compile(r"(?:^|/)host\.([A-Za-z0-9_.-]+?)(?:_\d+)?(?:/|$)")
#: Ops whose only kernel off the CPU is a DEFAULT one holding every input in host memory: a device-to-host copy
#: and a wait wherever they are placed (see the module docstring).
_HOST_READS = frozenset({"Assert", "Print", "PrintV2"})


def augment_device(device_kind: str, kernel: str) -> str:
    return GPU if device_kind == "GPU" and kernel == "tf" else CPU


@contextlib.contextmanager
def host_step(name: str):
    """Graph code that runs on the CPU by design (TensorFlow's JPEG codec, a few numbers computed in NumPy):
    pinned there, and named in the report as a planned host step, never counted as a fallback."""
    with tf.name_scope(_HOST + name), tf.device(CPU):
        yield


@functools.lru_cache(maxsize=None)
def _kernels(op_type: str) -> tuple:
    from tensorflow.python.framework import kernels
    return tuple(kernels.get_registered_kernels_for_op(op_type).kernel)


def _matches(kernel, node) -> bool:
    """Whether a registered kernel accepts the node's dtypes (its type constraints against the node's attrs)."""
    for c in kernel.constraint:
        attr = node.attr.get(c.name)
        if attr is None:
            continue
        allowed = set(c.allowed_values.list.type)
        types = list(attr.list.type) if attr.HasField("list") else [attr.type]
        if any(t and t not in allowed for t in types):
            return False
    return True


def _kind(node) -> str:
    """A node asked to run on the GPU: "GPU" (a GPU kernel for its dtypes), "any" (a device-agnostic kernel) or
    "CPU" (neither: soft placement moves it to the CPU)."""
    ks = [k for k in _kernels(node.op) if _matches(k, node)]
    if any(k.device_type == "GPU" for k in ks):
        return "GPU"
    if node.op not in _HOST_READS and any(k.device_type == "DEFAULT" for k in ks):
        return "any"
    return "CPU"


def _requested(device: str) -> str:
    return (tf.DeviceSpec.from_string(device).device_type if device else None) or "CPU"


def _called(node) -> list[str]:
    """The functions a node calls: a cond's or case's branches, a while's cond and body, a call's f, ..."""
    out = []
    for value in node.attr.values():
        if value.HasField("func"):
            out.append(value.func.name)
        elif value.HasField("list"):
            out += [f.name for f in value.list.func]
    return out


def _nodes(graph_def) -> list:
    """[(node, the device it asks for)] for every node the graph runs: its own, and those of every function body
    it calls, at any depth (each body once per device it is called from); a node that names no device runs where
    the node calling its body does."""
    library = {f.signature.name: f for f in graph_def.library.function}
    out, seen = [], set()
    todo = [(graph_def.node, "")]
    while todo:
        nodes, inherited = todo.pop()
        for n in nodes:
            device = n.device or inherited
            out.append((n, device))
            for name in _called(n):
                if name in library and (name, device) not in seen:
                    seen.add((name, device))
                    todo.append((library[name].node_def, device))
    return out


def gpu_stage(graph_def) -> dict:
    """The nodes the graph asks to run on the GPU, and its planned host steps, by op type:
    {"gpu": {...}, "agnostic": {...}, "fallback": {...}, "host": {step name: {op types}}}."""
    out: dict = {"gpu": set(), "agnostic": set(), "fallback": set(), "host": {}}
    for n, device in _nodes(graph_def):
        host = _HOST_SCOPE.search(n.name)
        if host:
            if n.op not in _PLUMBING:
                out["host"].setdefault(host.group(1), set()).add(n.op)
        elif n.op not in _PLUMBING and _requested(device) == "GPU":
            out[{"GPU": "gpu", "any": "agnostic", "CPU": "fallback"}[_kind(n)]].add(n.op)
    return out


def stage_devices(graph_def, device_name: str, kernel: str, augment: str) -> dict:
    """{"decode": ..., "augment": ..., "encode": ...}: the device each stage runs on, e.g. "GPU:0 (NVIDIA
    H200)", with the augment stage's planned host steps and any op types that fall back to the CPU after it:
    "GPU:0 (X); host steps: random_jpeg_quality; on the CPU: PyFunc". `augment`: the device the graph placed
    its augmentation steps on (augment_device)."""
    kinds: dict[str, set] = {"decode": set(), "encode": set()}
    for n, device in _nodes(graph_def):
        stage = "decode" if n.op in DECODE_OPS else "encode" if n.op in ENCODE_OPS else None
        if stage and not _HOST_SCOPE.search(n.name):
            kinds[stage].add("GPU" if _requested(device) == "GPU" and _kind(n) == "GPU" else "CPU")
    out = {s: (device_name if "GPU" in k else "CPU") if k else "none" for s, k in kinds.items()}
    if augment == CPU:  # CPU hosts: no other device to fall back from
        out["augment"] = "CPU (OpenCV)" if kernel == "opencv" else "CPU"
        return {s: out[s] for s in ("decode", "augment", "encode")}
    g = gpu_stage(graph_def)
    if not g["gpu"]:
        text = "CPU"    # a build without GPU kernels: everything ran on the CPU
    else:
        text = device_name
        if g["host"]:
            text += "; host steps: " + ", ".join(sorted(g["host"]))
        if g["fallback"]:
            text += "; on the CPU: " + ", ".join(sorted(g["fallback"]))
    out["augment"] = text
    return {s: out[s] for s in ("decode", "augment", "encode")}


_PLACED = re.compile(r"(?:placer\.cc:\d+\] )?(\S+): \((\w+)\): (/job:\S+)$")
_IN_AUGMENT = re.compile(rf"(?:^|/){AUGMENT_SCOPE}(?:_\d+)?/")


def placed(log_lines) -> dict:
    """What TensorFlow's placement log (tf.debugging.set_log_device_placement) says ran in the augment stage:
    {"gpu": {op types}, "host": {step: {op types}}, "unplanned": {op types}} where unplanned are its nodes that
    ran on the CPU outside any host step (graph plumbing aside)."""
    out: dict = {"gpu": set(), "host": {}, "unplanned": set()}
    for line in log_lines:
        m = _PLACED.search(line.strip())
        if not m or not _IN_AUGMENT.search(m[1]) or m[2] in _PLUMBING:
            continue
        host = _HOST_SCOPE.search(m[1])
        if host:
            out["host"].setdefault(host.group(1), set()).add(m[2])
        elif tf.DeviceSpec.from_string(m[3]).device_type == "GPU":
            out["gpu"].add(m[2])
        else:
            out["unplanned"].add(m[2])
    return out
