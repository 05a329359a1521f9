"""compile(spec) -> one traced, finalized graph per job.

The graph takes (source bytes, seed, EXIF orientation, augment?) and returns the encoded record
payload plus its size and four timestamps (start, decoded, augmented, encoded) so the job can report
per-stage time without splitting the graph. Its input signature accepts any height and width, so it
is traced exactly once; finalizing it makes any later attempt to add an op raise.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from augd.engine.chain import finish, run_chain
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


def _orient(image, orientation):
    """Apply EXIF orientation (1-8) exactly, with no resampling."""
    t = lambda x: tf.transpose(x, [1, 0, 2])  # noqa: E731
    branches = [
        lambda: image,                                   # 0: invalid -> as is
        lambda: image,                                   # 1: normal
        lambda: tf.reverse(image, [1]),                  # 2: mirrored
        lambda: tf.reverse(image, [0, 1]),               # 3: rotated 180
        lambda: tf.reverse(image, [0]),                  # 4: mirrored vertically
        lambda: t(image),                                # 5: transposed
        lambda: tf.reverse(t(image), [1]),               # 6: rotated 90 CW to display
        lambda: tf.reverse(t(image), [0, 1]),            # 7: transversed
        lambda: tf.reverse(t(image), [0]),               # 8: rotated 90 CCW to display
    ]
    idx = tf.where((orientation >= 1) & (orientation <= 8), orientation, 0)
    out = tf.switch_case(idx, branches)
    out.set_shape([None, None, 3])
    return out


class Compiled:
    """One job's graph. Thread-safe: workers call process() concurrently."""

    def __init__(self, spec: PipelineSpec, *, gpu_memory_mb: int | None = None):
        global _builds
        self.spec = spec
        self.device = setup_device(gpu_memory_mb)
        self.traces = 0
        self.kernel = kernel = select_kernels(self.device.kind)
        out = spec.output
        nodes = spec.ops

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
            with tf.control_dependencies([t0]):
                img = tf.io.decode_image(data, channels=3, expand_animations=False)
            img.set_shape([None, None, 3])
            img = _orient(img, orientation)
            with tf.control_dependencies([img]):
                t1 = tf.timestamp()
            with tf.control_dependencies([t1]):
                img = tf.identity(img)
            aug = tf.cond(augment, lambda: finish(run_chain(nodes, img, seed, kernel)), lambda: img)
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
