"""Trace an op chain into graph code, fusing work:

* consecutive geometric ops (including geometry-only composites) become one matrix and ONE warp;
* colour ops share one uint8 -> float32 -> uint8 round trip per run instead of one per op;
* p < 1 becomes a tf.cond, so skipped ops cost nothing.

Called only while tracing the job's tf.function; nothing here runs per image in Python.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from augd.ops import REGISTRY, Kind
from augd.ops._tf import tf
from augd.ops.sampling import coin, split
from augd.spec import OpNode

__all__ = ["run_chain", "warp", "to_uint8"]

_FILL_MODES = {"reflect": "REFLECT", "nearest": "NEAREST", "wrap": "WRAP"}


def _fill(node: OpNode):
    return getattr(node.params, "fill", 0)


def _interp(node: OpNode) -> str:
    return "NEAREST" if getattr(node.params, "method", "bilinear") == "nearest" else "BILINEAR"


def _geometric(node: OpNode) -> bool:
    kind = REGISTRY[node.name].kind
    if kind is Kind.COMPOSITE:
        return all(_geometric(c) for c in node.children) and \
            len({(repr(_fill(c)), _interp(c)) for c in _leaves(node)}) <= 1
    return kind is Kind.GEOMETRY


def _leaves(node: OpNode):
    if not node.children:
        yield node
    for c in node.children:
        yield from _leaves(c)


def _first_leaf(node: OpNode) -> OpNode:
    return next(_leaves(node))


def to_float(image):
    return image if image.dtype == tf.float32 else tf.cast(image, tf.float32) * (1.0 / 255.0)


def to_uint8(image):
    if image.dtype == tf.uint8:
        return image
    return tf.cast(tf.clip_by_value(tf.round(image * 255.0), 0.0, 255.0), tf.uint8)


@dataclass(frozen=True)
class _State:
    image: object            # [H, W, 3] uint8 or float32 in [0, 1]
    m: object = None         # pending warp: 3x3 matrix, pending output -> current image coordinates
    h: object = None         # pending output size (float32 scalars)
    w: object = None
    fill: object = 0
    interp: str = "BILINEAR"

    def size(self):
        if self.m is not None:
            return self.h, self.w
        shape = tf.cast(tf.shape(self.image), tf.float32)
        return shape[0], shape[1]


def warp(image, m, oh, ow, fill=0, interp="BILINEAR"):
    """Resample `image` once through matrix m (output -> input) into an (oh, ow) image.

    When an output pixel spans k >= 2 source pixels the source is first box-filtered by k, so
    strong downscaling does not alias (what tf.image.resize(antialias=True) would give)."""
    oh_i, ow_i = tf.cast(tf.round(oh), tf.int32), tf.cast(tf.round(ow), tf.int32)
    shape = tf.shape(image)
    identity = tf.logical_and(tf.reduce_all(tf.abs(m - tf.eye(3)) < 1e-6),
                              tf.reduce_all(tf.stack([oh_i, ow_i]) == shape[:2]))

    def resample():
        scale = tf.minimum(tf.norm(m[:2, 0]), tf.norm(m[:2, 1]))
        k = tf.cast(tf.floor(scale), tf.int32)
        # The kernel truncates when it writes uint8 (10.5 -> 10): resample in float, round once.
        src = tf.cast(image, tf.float32)
        src, mm = tf.cond(k >= 2, lambda: _box_shrink(src, m, k), lambda: (src, m))
        flat = tf.reshape(mm / mm[2, 2], [9])[:8][tf.newaxis]
        mode = "CONSTANT" if isinstance(fill, int) else _FILL_MODES[fill]
        value = float(fill) if isinstance(fill, int) else 0.0
        if isinstance(fill, int) and image.dtype == tf.float32:
            value /= 255.0
        out = tf.raw_ops.ImageProjectiveTransformV3(
            images=src[tf.newaxis], transforms=flat,
            output_shape=tf.stack([oh_i, ow_i]), fill_value=value, interpolation=interp, fill_mode=mode)[0]
        if image.dtype == tf.uint8:
            return tf.cast(tf.clip_by_value(tf.round(out), 0.0, 255.0), tf.uint8)
        return out

    out = tf.cond(identity, lambda: image, resample)
    out.set_shape([None, None, 3])
    return out


def _box_shrink(image, m, k):
    """Average k x k blocks of a float image; return the smaller image and the matrix re-expressed in its coordinates."""
    kf = tf.cast(k, tf.float32)
    shape = tf.shape(image)
    # Area resize by an integer factor is an exact k x k box average (the tail rows/cols are dropped).
    small = tf.image.resize(image, tf.maximum(shape[:2] // k, 1), method="area")
    # source pixel centre x maps to (x + 0.5) / k - 0.5 in the shrunk image.
    s = tf.reshape(tf.stack([1 / kf, 0.0, 0.5 / kf - 0.5, 0.0, 1 / kf, 0.5 / kf - 0.5, 0.0, 0.0, 1.0]), [3, 3])
    return small, s @ m


def _flush(st: _State) -> _State:
    if st.m is None:
        return st
    return _State(image=warp(st.image, st.m, st.h, st.w, st.fill, st.interp))


def _sample_geometry(node: OpNode, seed, h, w):
    """(matrix, out_h, out_w) of a geometric op or geometry-only composite, p applied."""
    s_p, s_op = split(seed, 2)
    p = node.params.p
    if node.children:
        m, oh, ow = _sample_composite_geometry(node, s_op, h, w)
    else:
        m, oh, ow = REGISTRY[node.name](node.params).sample(s_op, h, w)
    if p < 1.0:
        on = coin(s_p, p)
        m, oh, ow = tf.where(on, m, tf.eye(3)), tf.where(on, oh, h), tf.where(on, ow, w)
    return m, oh, ow


def _choose(node: OpNode, seed):
    """Boolean mask of the children a composite applies to this image."""
    n = len(node.children)
    if node.name == "one_of":
        weights = node.params.weights or (1.0,) * n
        logits = tf.math.log(tf.constant(weights, tf.float32))[tf.newaxis]
        idx = tf.random.stateless_categorical(logits, 1, seed, dtype=tf.int32)[0, 0]
        return tf.one_hot(idx, n, on_value=True, off_value=False, dtype=tf.bool)
    if node.name == "some_of":
        ranks = tf.argsort(tf.argsort(tf.random.stateless_uniform([n], seed)))
        return ranks < node.params.n
    return tf.fill([n], True)  # sequence


def _sample_composite_geometry(node: OpNode, seed, h, w):
    s_choose, s_kids = split(seed, 2)
    chosen = _choose(node, s_choose)
    m = tf.eye(3)
    for i, child in enumerate(node.children):
        cm, ch, cw = _sample_geometry(child, tf.random.experimental.stateless_fold_in(s_kids, i), h, w)
        on = chosen[i]
        m = tf.where(on, m @ cm, m)
        h, w = tf.where(on, ch, h), tf.where(on, cw, w)
    return m, h, w


def _apply_pixel(node: OpNode, st: _State, seed) -> _State:
    st = _flush(st)
    s_p, s_op = split(seed, 2)
    cls = REGISTRY[node.name]
    if node.children:
        return _apply_composite(node, st, s_op, s_p)
    image = to_float(st.image) if cls.kind is Kind.COLOUR else to_uint8(st.image)
    op = cls(node.params)
    if node.params.p >= 1.0:
        out = op.apply(image, s_op)
    else:
        out = tf.cond(coin(s_p, node.params.p), lambda: op.apply(image, s_op), lambda: image)
    out.set_shape([None, None, 3])
    return _State(image=out)


def _apply_composite(node: OpNode, st: _State, seed, s_p) -> _State:
    """A composite mixing kinds: each child runs as its own sub-chain behind a tf.cond."""
    s_choose, s_kids = split(seed, 2)
    chosen = _choose(node, s_choose)
    if node.params.p < 1.0:
        chosen = tf.logical_and(chosen, coin(s_p, node.params.p))
    image = to_uint8(st.image)  # one dtype for every branch
    for i, child in enumerate(node.children):
        kid_seed = tf.random.experimental.stateless_fold_in(s_kids, i)

        def branch(img=image, child=child, kid_seed=kid_seed):
            return to_uint8(_flush(run_chain((child,), _State(image=img), kid_seed)).image)

        image = tf.cond(chosen[i], branch, lambda img=image: img)
        image.set_shape([None, None, 3])
    return _State(image=image)


def run_chain(nodes, st, seed):
    """Apply `nodes` to a state (or an image) with per-op seeds folded from `seed`."""
    if not isinstance(st, _State):
        st = _State(image=st)
    for i, node in enumerate(nodes):
        if node.params.p <= 0.0:
            continue  # p=0 is the identity: nothing is traced
        op_seed = tf.random.experimental.stateless_fold_in(seed, i)
        if _geometric(node):
            leaf = _first_leaf(node)
            fill, interp = _fill(leaf), _interp(leaf)
            if st.m is not None and (repr(fill) != repr(st.fill) or interp != st.interp):
                st = _flush(st)  # a different border rule or interpolation needs its own warp
            h, w = st.size()
            m, oh, ow = _sample_geometry(node, op_seed, h, w)
            pending = m if st.m is None else st.m @ m
            st = replace(st, m=pending, h=oh, w=ow, fill=fill, interp=interp)
        else:
            st = _apply_pixel(node, st, op_seed)
    return st


def finish(st) -> object:
    """Flush pending geometry and return a uint8 image."""
    return to_uint8(_flush(st).image)
