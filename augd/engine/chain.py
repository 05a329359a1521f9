"""Trace an op chain into graph code, fusing work:

* consecutive geometric ops (including geometry-only composites) become one matrix and ONE warp;
* colour ops share one uint8 -> float32 -> uint8 round trip per run instead of one per op (on CPU hosts
  the whole run is one NumPy/OpenCV call);
* p < 1 becomes a tf.cond, so skipped ops cost nothing.

Called only while tracing the job's tf.function; nothing here runs per image in Python.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from augd.engine.kernels import KERNELS
from augd.ops import REGISTRY, Kind
from augd.ops._tf import tf
from augd.ops.sampling import coin, split
from augd.spec import OpNode

__all__ = ["finish", "first_geometry_run", "run_chain", "warp", "to_uint8"]


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
    kernel: str = "tf"       # which warp kernel (augd.engine.kernels.KERNELS)

    def size(self):
        if self.m is not None:
            return self.h, self.w
        shape = tf.cast(tf.shape(self.image), tf.float32)
        return shape[0], shape[1]


def warp(image, m, oh, ow, fill=0, interp="BILINEAR", kernel="tf"):
    """Resample `image` once through matrix m (output -> input) into an (oh, ow) uint8 image.
    Identity costs nothing, and pure flips are exact index reversals."""
    oh_i, ow_i = tf.cast(tf.round(oh), tf.int32), tf.cast(tf.round(ow), tf.int32)
    image = to_uint8(image)
    shape = tf.shape(image)
    same_size = tf.reduce_all(tf.stack([oh_i, ow_i]) == shape[:2])
    hf, wf = tf.cast(shape[0], tf.float32) - 1.0, tf.cast(shape[1], tf.float32) - 1.0

    def is_(target):
        return tf.logical_and(same_size, tf.reduce_all(tf.abs(m - target) < 1e-5))

    flip_x = tf.reshape(tf.stack([-1.0, 0.0, wf, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]), [3, 3])
    flip_y = tf.reshape(tf.stack([1.0, 0.0, 0.0, 0.0, -1.0, hf, 0.0, 0.0, 1.0]), [3, 3])
    case = tf.argmax(tf.stack([is_(tf.eye(3)), is_(flip_x), is_(flip_y), is_(flip_x @ flip_y), True]))
    out = tf.switch_case(tf.cast(case, tf.int32), [
        lambda: image,
        lambda: tf.reverse(image, [1]),
        lambda: tf.reverse(image, [0]),
        lambda: tf.reverse(image, [0, 1]),
        lambda: KERNELS[kernel](image, m, oh_i, ow_i, fill, interp),
    ])
    out.set_shape([None, None, 3])
    return out


def _flush(st: _State) -> _State:
    if st.m is None:
        return st
    return _State(image=warp(st.image, st.m, st.h, st.w, st.fill, st.interp, st.kernel), kernel=st.kernel)


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
    return _State(image=out, kernel=st.kernel)


def _cv_colour_capable(node: OpNode) -> bool:
    cls = REGISTRY[node.name]
    return cls.kind is Kind.COLOUR and not node.children and getattr(cls, "apply_np", None) is not None


def _apply_colour_group_cv(nodes, st: _State, seeds) -> _State:
    """A run of colour ops in ONE call into NumPy/OpenCV (CPU hosts): one uint8 -> float32 -> uint8
    round trip, OpenCV's SIMD colour conversions, and no TF op boundaries between the ops.
    Parameters and p-coins are drawn in the graph exactly as the TF path draws them."""
    import numpy as np
    st = _flush(st)
    ops = [REGISTRY[n.name](n.params) for n in nodes]
    vecs, sizes = [], []
    for op, node, seed in zip(ops, nodes, seeds):
        s_p, s_op = split(seed, 2)
        on = coin(s_p, node.params.p) if node.params.p < 1.0 else tf.constant(True)
        vec = tf.concat([[tf.cast(on, tf.float32)], tf.cast(op.draw(s_op), tf.float32)], 0)
        vecs.append(vec)
        sizes.append(int(vec.shape[0]))

    def run(img, flat):
        import cv2
        x = img.astype(np.float32)
        x *= np.float32(1.0 / 255.0)
        i = 0
        for op, k in zip(ops, sizes):
            if flat[i] > 0.5:
                x = op.apply_np(x, flat[i + 1:i + k])
            i += k
        return cv2.convertScaleAbs(x, alpha=255.0)  # rounds and saturates

    out = tf.numpy_function(run, [to_uint8(st.image), tf.concat(vecs, 0)], tf.uint8, stateful=False)
    out.set_shape([None, None, 3])
    return _State(image=out, kernel=st.kernel)


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
            return to_uint8(_flush(run_chain((child,), _State(image=img, kernel=st.kernel), kid_seed)).image)

        image = tf.cond(chosen[i], branch, lambda img=image: img)
        image.set_shape([None, None, 3])
    return _State(image=image, kernel=st.kernel)


def border_rule(node: OpNode):
    """(fill, interpolation) a geometric node's warp uses."""
    leaf = _first_leaf(node)
    return _fill(leaf), _interp(leaf)


def first_geometry_run(nodes) -> int:
    """How many leading nodes form one fusable geometric run (same fill and interpolation; p > 0)."""
    n, key = 0, None
    for node in nodes:
        if node.params.p <= 0.0 or not _geometric(node):
            break
        fill, interp = border_rule(node)
        k = (repr(fill), interp)
        if key is not None and k != key:
            break
        key, n = k, n + 1
    return n


def run_chain(nodes, st, seed, kernel: str = "tf", start: int = 0):
    """Apply `nodes` to a state (or an image) with per-op seeds folded from `seed` (node i of the whole
    chain uses fold_in(seed, i); `start` is the index of nodes[0]); `kernel` names the warp
    implementation (augd.engine.kernels)."""
    if not isinstance(st, _State):
        st = _State(image=st, kernel=kernel)
    nodes = list(nodes)
    i = 0
    while i < len(nodes):
        node = nodes[i]
        if node.params.p <= 0.0:
            i += 1
            continue  # p=0 is the identity: nothing is traced
        if st.kernel == "opencv" and _cv_colour_capable(node):
            j = i
            while j < len(nodes) and (_cv_colour_capable(nodes[j]) or nodes[j].params.p <= 0.0):
                j += 1
            group = [(k, n) for k, n in enumerate(nodes[i:j], start=i) if n.params.p > 0.0]
            st = _apply_colour_group_cv([n for _, n in group], st,
                                        [tf.random.experimental.stateless_fold_in(seed, k + start)
                                         for k, _ in group])
            i = j
            continue
        op_seed = tf.random.experimental.stateless_fold_in(seed, i + start)
        i += 1
        if _geometric(node):
            fill, interp = border_rule(node)
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
