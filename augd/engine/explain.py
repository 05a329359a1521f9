"""What a Program's plan decided for one image, op by op, for people (`augd preview`, Compiled.explain): the plan's
walk replayed over the same generator and checked against the plan's own arrays, so it can describe nothing but what
the graph receives. Read-only: the per-image plan (augd.engine.plan) never calls it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from augd.engine.plan import Colour, ColourSlot, Geo, Program, _moved, _region, _sample
from augd.ops.sampling import coin, generator, tf_seed

__all__ = ["Decision", "explain"]


@dataclass(frozen=True)
class Decision:
    """One node of the chain as the plan decided it for one image (explain(); read-only, for people:
    `augd preview` writes it under each tile). Ops with p=0 are not planned, so they have none."""
    name: str                          # op name
    params: object                     # its validated parameters (p included)
    depth: int                         # 0 at the top level; a composite's children one deeper
    reached: bool                      # its composites (if any) applied and chose it
    applied: bool                      # reached, and its own p coin came up
    values: tuple = ()                 # colour ops: the drawn parameters, as the graph receives them
    matrix: np.ndarray | None = None   # geometry: its matrix (output -> input pixels of its own input)
    in_size: tuple = ()                # geometry: the (h, w) it was drawn for
    out_size: tuple = ()               # geometry: the (h, w) it gives when applied
    chosen: tuple = ()                 # composites: the names of the children chosen, in order
    picked: tuple = ()                 # composites: their indices among its children
    mix: object = None                 # partner ops: the augd.ops.base.Mix drawn
    partners: tuple = ()               # partner ops: the partners' relative paths, in placement order


def explain(program: Program, seed, h, w, boxes=None) -> list[Decision]:
    """What plan(seed, h, w, boxes=boxes) decided, op by op (for people: `augd preview`). It replays the
    plan's walk over the same generator and checks every value against the plan's own arrays (colour values
    are read from them), so it cannot describe anything but what the graph receives; RuntimeError if the
    two ever disagree. A JPEG's decode window (plan's crop) changes no op's parameters."""
    floats, ints = program.plan(seed, h, w, False, boxes)
    out: list[Decision] = []
    geo = {k: np.eye(3) for k, s in enumerate(program.steps) if isinstance(s, Geo)}
    _explain(program, program.tree, 0, True, generator(seed), floats, ints, geo, [float(h), float(w)] * 2, out,
             program._tracked(boxes, h, w))
    for k, m in geo.items():
        planned = floats[program.steps[k].matrix].reshape(3, 3)
        if not np.allclose(m, planned, rtol=0.0, atol=1e-9):
            raise RuntimeError(f"explain disagrees with Program.plan on step {k}'s matrix")
    return out


def _explain(program: Program, leaves, depth, active, rng, floats, ints, geo, size, out, boxes=None,
             skipped: bool = False) -> None:
    """_walk's draws in _walk's order, recorded instead of written. `skipped`: the plan took the numbers of an op
    above at once (Program._skips) and wrote none of its values."""
    for leaf in leaves:
        if leaf is None:
            continue
        on = coin(rng, leaf.p) and active
        skip = skipped or (not on and leaf.off is not None)
        name, params = leaf.node.name, leaf.node.params
        if leaf.children:
            picks = leaf.op.choose(rng, len(leaf.children))
            chosen = tuple(c.name for c, k in zip(leaf.node.children, picks) if k)
            out.append(Decision(name, params, depth, active, on, chosen=chosen,
                                picked=tuple(k for k, pick in enumerate(picks) if pick)))
            for child, pick in zip(leaf.children, picks):
                _explain(program, (child,), depth + 1, on and pick, rng, floats, ints, geo, size, out, boxes, skip)
            continue
        step = program.steps[leaf.step]
        if isinstance(step, Geo):
            ih, iw = size[:2]
            m, oh, ow = _sample(leaf.op, rng, size, boxes[0] if on and boxes is not None else None)
            if on:
                geo[leaf.step] = geo[leaf.step] @ m
                size[0], size[1] = float(oh), float(ow)
                if boxes is not None:
                    boxes[0] = _moved(boxes[0], m, size[0], size[1])
            out.append(Decision(name, params, depth, active, on, matrix=m, in_size=(ih, iw),
                                out_size=(float(oh), float(ow))))
            continue
        slot = leaf.slot
        written = not skip   # the plan writes no values for an op off that it skipped
        if isinstance(slot, ColourSlot):
            drawn = tuple(float(v) for v in leaf.op.draw(rng))
            values = tuple(float(v) for v in floats[slot.params]) if written else drawn
        else:
            drawn = tuple(tf_seed(rng))   # the stateless seed of a graph-side draw
            values = tuple(int(v) for v in ints[slot.seed]) if written else drawn
            if slot.region is not None:
                region = tuple(float(v) for v in _region(leaf.op, rng, size, boxes, on))
                if written and region != tuple(float(v) for v in floats[slot.region]):
                    raise RuntimeError(f"explain disagrees with Program.plan at {name}")
        if drawn != values or bool(ints[slot.on]) != on:
            raise RuntimeError(f"explain disagrees with Program.plan at {name}")
        shown = values if isinstance(step, Colour) else region if getattr(slot, "region", None) else ()
        out.append(Decision(name, params, depth, active, on, values=shown))
