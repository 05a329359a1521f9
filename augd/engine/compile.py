"""compile(spec) -> one traced, finalized graph per job.

The graph takes a batch of (source bytes, seed, EXIF orientation, augment?, plan) and returns, per image,
the encoded record payload plus its size and four timestamps (start, decoded, augmented, encoded) so
the job can report per-stage time without splitting the graph. The plan (augd.engine.plan) holds every
random decision, drawn in Python from the image's seed and header before the call. The input signature
accepts any batch size, height and width, so the graph is traced exactly once; finalizing it makes any
later attempt to add an op raise.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from augd.engine.chain import apply_program
from augd.engine.decode import decode_planned
from augd.engine.explain import explain
from augd.engine.placement import AUGMENT_SCOPE, CPU, GPU, augment_device, stage_devices
from augd.engine.plan import Program
from augd.errors import Rejected
from augd.formats import ImageHeader, read_header
from augd.ops._tf import tf
from augd.ops.sampling import image_seed
from augd.schema import PipelineSpec

__all__ = ["Compiled", "Result"]

@dataclass(frozen=True)
class Result:
    payload: bytes       # encoded JPEG/PNG bytes, or raw HxWx3 uint8 bytes
    height: int
    width: int
    stage_seconds: tuple[float, float, float]   # decode, augment, encode
    #: the graph re-planned the image from its decoded size (a header that disagrees with the pixels): its
    #: geometry is not the plan made from the header (nor from the boxes: the graph has none)
    replanned: bool = False
    #: with process_many(..., geometry=True): the Geo steps its plan used, as Program.geometry gives them (in the
    #: source's coordinates; () for an original), so annotations move without drawing the plan again; else None
    geometry: tuple | None = None
    #: with geometry=True: the rectangles its cutouts covered, as Program.covers gives them; else None
    covers: tuple | None = None
    #: with geometry=True: its plan's own least visibility and keypoint events, as Program.annotation_plan gives
    min_visibility: float = 0.0
    events: tuple = ()
    #: with geometry=True: its moves inside boxes, as Program.annotation_plan gives them
    moves: tuple = ()


class Compiled:
    """One job's graph, built by Engine.compile(spec). Thread-safe: workers call process() / process_many()
    concurrently."""

    def __init__(self, spec: PipelineSpec, engine, *, as_gpu_host: bool = False):
        self.spec = spec
        self.device = engine.device
        self.traces = 0
        self.kernel = kernel = "tf" if as_gpu_host else engine.kernel
        crop = engine.options.crop_decode
        out = spec.output
        self.program = program = Program(spec.ops)
        self._augment_on = on = GPU if as_gpu_host else augment_device(self.device.kind, kernel)
        self._device_label = self.device.name if self.device.kind == "GPU" or not as_gpu_host else "GPU (as placed)"

        def encode(img):
            if out.format == "jpeg":
                return tf.io.encode_jpeg(img, quality=out.quality)
            if out.format == "png":
                return tf.io.encode_png(img)
            return tf.io.serialize_tensor(img)  # raw: the pixels as one TensorProto string

        def one(data, args, floats, ints):  # args: seed word 0, seed word 1, EXIF orientation, augment?
            # floats, ints: the image's plan (augd.engine.plan), made from its header before the call
            seed, orientation, augment = args[:2], tf.cast(args[2], tf.int32), args[3] > 0
            t0 = tf.timestamp()

            # One decode for both kinds of variant (the original has an empty plan: the whole image),
            # then the chain for augmented variants only.
            with tf.control_dependencies([t0]), tf.device(CPU):
                img, f, i = decode_planned(data, seed, orientation, program, floats, ints, augment, crop)
            with tf.control_dependencies([img]):
                t1 = tf.timestamp()
            with tf.control_dependencies([t1]):
                img = tf.identity(img)
            with tf.device(on), tf.name_scope(AUGMENT_SCOPE):   # the scope: placement logs can tell the stage
                aug = tf.cond(augment, lambda: apply_program(program, img, f, i, kernel, spec.colour), lambda: img)
            aug.set_shape([None, None, 3])
            with tf.control_dependencies([aug]):
                t2 = tf.timestamp()
            with tf.control_dependencies([t2]), tf.device(CPU):
                enc = encode(aug)
            with tf.control_dependencies([enc]):
                t3 = tf.timestamp()
            shape = tf.cast(tf.shape(aug), tf.float64)
            replanned = tf.cast(tf.reduce_any(tf.not_equal(i, ints)), tf.float64)
            return enc, tf.stack([shape[0], shape[1], t0, t1, t2, t3, replanned])

        # The graph takes a batch of images and runs them one after another (map_fn). A call from Python
        # costs ~0.2 ms and contends for the GIL and TF's eager context; measured on 2 cores, one call per
        # 16 images doubled throughput on the heavy chain against one call per image.
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([None, 4], tf.int64),
                                      tf.TensorSpec([None, program.n_floats], tf.float64),
                                      tf.TensorSpec([None, program.n_ints], tf.int64)], autograph=False)
        def process(datas, args, floats, ints):
            self.traces += 1  # Python side effect: runs once per trace, never per image
            engine._traced()
            return tf.map_fn(lambda x: one(*x), (datas, args, floats, ints), parallel_iterations=1,
                             fn_output_signature=(tf.TensorSpec([], tf.string), tf.TensorSpec([7], tf.float64)))

        self._fn = process.get_concrete_function()
        self.graph = self._fn.graph
        self.graph.finalize()
        self.builds = 1
        self._empty_plan = (np.zeros(program.n_floats), np.zeros(program.n_ints, np.int64))
        self._crop = program.leads_with_geometry and crop  # as traced
        from tensorflow.core.framework import tensor_pb2
        self._raw_proto = tensor_pb2.TensorProto if out.format == "raw" else None

    def process(self, data: bytes, relpath: str, variant: int, *, orientation: int | None = None,
                header: ImageHeader | None = None, boxes=None) -> Result:
        """The engine seam: (source bytes, relative path, variant) -> encoded image. Variant 0 is the
        original (decoded, EXIF-oriented, re-encoded); variants >= 1 run the augmentation chain.
        `header` (from the scan) saves parsing it again; the plan is made from its size. `boxes`: the image's
        boxes, (xmin, ymin, xmax, ymax) in upright source pixel edges, for box-aware ops (None: none). Raises
        the graph's error for bad data."""
        return self._run([self._item(data, relpath, variant, orientation, header, boxes)])[0]

    def process_many(self, items, *, geometry: bool = False) -> list:
        """process() for many (data, relpath, variant, header) or (data, relpath, variant, header, boxes) at
        once, in one graph call: a Result per item, or the exception that item raised (a bad image does not
        fail the others). geometry: each Result also carries its plan's Geo steps (Result.geometry), for
        detection jobs; classification jobs leave it off and pay nothing for it."""
        prepared = []
        for d, r, v, h, *b in items:
            try:
                prepared.append(self._item(d, r, v, None, h, b[0] if b else None, geometry))
            except Exception as exc:  # noqa: BLE001 - a plan that cannot be made rejects that image only
                prepared.append(exc)
        ok = [it for it in prepared if not isinstance(it, Exception)]
        if not ok:
            return prepared
        try:
            results = iter(self._run(ok))
            return [it if isinstance(it, Exception) else next(results) for it in prepared]
        except Exception:  # noqa: BLE001 - one bad image fails the whole call: find it, item by item
            out = []
            for it in prepared:
                try:
                    out.append(it if isinstance(it, Exception) else self._run([it])[0])
                except Exception as exc:  # noqa: BLE001 - TF raises many types for bad data
                    out.append(exc)
            return out

    def _item(self, data, relpath, variant, orientation, header, boxes=None, geometry=False):
        if header is None:
            try:
                header = read_header(data)
            except Rejected:
                header = None  # the graph's decoder says what is wrong with it
        if orientation is None:  # an explicit orientation overrides the header's
            orientation = header.orientation if header is not None else 1
        seed = image_seed(self.spec.seed, relpath, variant)
        geo, cov, least = ([], [], []) if geometry else (None, None, None)
        floats, ints = self._plan(seed, header, orientation, variant > 0, boxes, geo, cov, least)
        return data, (*seed, orientation, int(variant > 0)), floats, ints, None if geo is None else (
            tuple(geo), tuple(cov), *(least or (0.0, (), ())))

    def _run(self, items) -> list[Result]:
        datas, args, floats, ints, geos = zip(*items)
        enc, info = self._fn(tf.constant(datas), tf.constant(args, tf.int64), tf.constant(np.stack(floats)),
                             tf.constant(np.stack(ints)))
        out = []
        for payload, (h, w, *t, replanned), geo in zip(enc.numpy().tolist(), info.numpy().tolist(), geos):
            if self._raw_proto is not None:
                payload = self._raw_proto.FromString(payload).tensor_content
            out.append(Result(payload, int(h), int(w), (t[1] - t[0], t[2] - t[1], t[3] - t[2]), replanned > 0,
                              *(geo or (None, None, 0.0, ()))))
        return out

    def _plan(self, seed, header: ImageHeader | None, orientation: int, augment: bool, boxes=None, geometry=None,
              covers=None, floor=None):
        """The image's plan from its header (upright size) and its boxes. Without a header, a plan for 1 x 1
        (right for a 1 x 1 image, and no op divides by it) makes the graph re-plan from the decoded size. The
        graph's re-plan has no boxes: Result.replanned says it happened (detection jobs reject that image).
        geometry, covers, floor: lists to extend with the plan's Geo steps in source coordinates, its cutouts'
        rectangles and its own least visibility (Program.plan), or None."""
        program = self.program
        if not augment:
            return self._empty_plan
        if header is None or not header.width or not header.height:
            return program.plan(seed, 1, 1, False, None, geometry, covers, floor)
        h, w = header.height, header.width
        if orientation in (5, 6, 7, 8):
            h, w = w, h
        return program.plan(seed, h, w, self._crop and header.format == "jpeg" and orientation == 1, boxes,
                            geometry, covers, floor)

    def explain(self, relpath: str, variant: int, height: int, width: int, boxes=None) -> list:
        """What the plan decided for (relpath, variant) of an upright height x width image: one
        augd.engine.explain.Decision per planned op, from the seed and plan process() uses (read-only; `augd
        preview` writes it under each tile). Pass the decoded upright size: the graph re-plans from it when a
        header disagrees; and the image's boxes where it has some (box-aware crops draw from them). Variant 0,
        the original, runs no op: []."""
        if variant <= 0:
            return []
        return explain(self.program, image_seed(self.spec.seed, relpath, variant), height, width, boxes)

    @functools.cached_property
    def stage_devices(self) -> dict:
        """Where decode, augment and encode run, read back from the graph (augd.engine.placement)."""
        return stage_devices(self.graph.as_graph_def(), self._device_label, self.kernel, self._augment_on)

    def close(self) -> None:
        """Drop the graph so its memory goes back at the job's end."""
        self._fn = None
        self.graph = None

