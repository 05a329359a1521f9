"""compile(spec) -> one traced, finalized graph per job.

The graph takes (source bytes, seed, EXIF orientation, augment?) and returns the encoded record
payload plus its size and four timestamps (start, decoded, augmented, encoded) so the job can report
per-stage time without splitting the graph. Its input signature accepts any height and width, so it
is traced exactly once; finalizing it makes any later attempt to add an op raise.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, replace

import numpy as np

from augd.engine.chain import finish, run_chain
from augd.engine.decode import decode_for_chain, decode_full
from augd.engine.device import setup_device
from augd.engine.kernels import select_kernels
from augd.engine.seeds import image_seed
from augd.formats import read_header
from augd.ops._tf import tf
from augd.spec import PipelineSpec

__all__ = ["Compiled", "Result", "compile_pipeline", "graph_builds"]

_builds = 0
_builds_lock = threading.Lock()


def graph_builds() -> int:
    """Graphs built by this process so far (metrics read this)."""
    return _builds


@dataclass(frozen=True)
class Result:
    payload: bytes       # encoded JPEG/PNG bytes, or raw HxWx3 uint8 bytes
    height: int
    width: int
    stage_seconds: tuple[float, float, float]   # decode, augment, encode


class Compiled:
    """One job's graph. Thread-safe: workers call process() concurrently."""

    def __init__(self, spec: PipelineSpec, *, gpu_memory_mb: int | None = None):
        global _builds
        self.spec = spec
        self.device = setup_device(gpu_memory_mb)
        self.traces = 0
        self.kernel = kernel = select_kernels(self.device.kind)
        out = spec.output
        nodes = list(spec.ops)

        def encode(img):
            if out.format == "jpeg":
                return tf.io.encode_jpeg(img, quality=out.quality)
            if out.format == "png":
                return tf.io.encode_png(img)
            return tf.zeros([0], tf.uint8)  # raw: the caller takes the pixels

        @tf.function(input_signature=[
            tf.TensorSpec([], tf.string), tf.TensorSpec([2], tf.int64),
            tf.TensorSpec([], tf.int32), tf.TensorSpec([], tf.bool)], autograph=False)
        def process(data, seed, orientation, augment):
            self.traces += 1  # Python side effect: runs once per trace, never per image
            t0 = tf.timestamp()

            def decoded(img):
                with tf.control_dependencies([img]):
                    t1 = tf.timestamp()
                with tf.control_dependencies([t1]):
                    return tf.identity(img), t1

            def augmented():
                with tf.control_dependencies([t0]):
                    st, n = decode_for_chain(data, seed, orientation, nodes, kernel)
                img, t1 = decoded(st.image)
                return finish(run_chain(nodes[n:], replace(st, image=img), seed, kernel, start=n)), t1

            def original():
                with tf.control_dependencies([t0]):
                    return decoded(decode_full(data, orientation))

            aug, t1 = tf.cond(augment, augmented, original)
            aug.set_shape([None, None, 3])
            with tf.control_dependencies([aug]):
                t2 = tf.timestamp()
            with tf.control_dependencies([t2]):
                enc = encode(aug)
            with tf.control_dependencies([enc]):
                t3 = tf.timestamp()
            shape = tf.shape(aug)
            pixels = aug if out.format == "raw" else tf.zeros([0, 0, 3], tf.uint8)
            return enc, shape[0], shape[1], tf.stack([t0, t1, t2, t3]), pixels

        self._fn = process.get_concrete_function()
        self.graph = self._fn.graph
        self.graph.finalize()
        with _builds_lock:
            _builds += 1
        self.builds = 1

    def process(self, data: bytes, relpath: str, variant: int, *, orientation: int | None = None) -> Result:
        """The engine seam: (source bytes, relative path, variant) -> encoded image. Variant 0 is the
        original (decoded, EXIF-oriented, re-encoded); variants >= 1 run the augmentation chain."""
        if orientation is None:
            orientation = read_header(data).orientation
        seed = image_seed(self.spec.seed, relpath, variant)
        enc, h, w, ts, pixels = self._fn(
            tf.constant(data), tf.constant(seed, tf.int64), tf.constant(orientation, tf.int32),
            tf.constant(variant > 0))
        t = ts.numpy()
        payload = pixels.numpy().tobytes() if self.spec.output.format == "raw" else enc.numpy()
        return Result(payload, int(h), int(w), tuple(float(x) for x in np.diff(t)))

    def close(self) -> None:
        """Drop the graph so its memory goes back at the job's end."""
        self._fn = None
        self.graph = None


def compile_pipeline(spec: PipelineSpec, *, gpu_memory_mb: int | None = None) -> Compiled:
    return Compiled(spec, gpu_memory_mb=gpu_memory_mb)
