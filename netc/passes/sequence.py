"""What the hoisting passes share: an op of a loop body run over whole sequences, and the
walk that puts moved work before each loop.

Not a pass. Per-frame work moved before a loop (`hoist_frames`) and work moved after it
(`sink_stacks`) both apply a body op to whole sequences: each per-step operand gains the loop's
axis, and the op's dim rule must then give exactly the per-step results plus that axis.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from netc.ir.dims import DimError, DimTable
from netc.ir.model import Loop, Node, Op, Value
from netc.ops import REGISTRY


def before_loops(nodes: list[Node], move: Callable[[Loop], list[Op]]) -> None:
    """Walks a block, inner loops first (their moved work may move again from the outer loop);
    the ops `move(loop)` takes out of a loop go right before it."""
    out: list[Node] = []
    for n in nodes:
        if isinstance(n, Loop):
            before_loops(n.body, move)
            out += move(n)
        out.append(n)
    nodes[:] = out


def fresh_like(like: Value, vid: int, dims: tuple[str, ...] | None = None) -> Value:
    """A new value `vid` of the same kind as `like` (with other dims when given)."""
    return Value(
        id=vid, dims=like.dims if dims is None else dims, dtype=like.dtype, name=like.name, sparse_dim=like.sparse_dim
    )


def over_sequence(dt: DimTable, op: Op, loop: Loop, args: list[tuple[Value, bool]]) -> list[tuple[str, ...]] | None:
    """The dims of op `op`'s results applied to whole sequences, given its operands as
    (per-step value, whether it is per step). None when the op cannot run so: its dim rule
    does not give each per-step result plus the loop's axis, or a per-step operand or a result
    already has the axis (in the body that is the whole sequence, as in attention over all
    frames, which stacking over the axis cannot express), or it is not pure and does not draw
    each frame independently (`OpDef.frames_independent`: dropout may run over whole sequences), or
    it has a dim a state grows along (`dt.growing`: the frames so far, different at each step)."""
    if not REGISTRY[op.op].pure and not REGISTRY[op.op].frames_independent:
        return None
    if any(d in dt.growing for v in [*(a for a, _ in args), *op.outs] for d in v.dims):
        return None  # a dim a state grows along (`cum_concat`) exists step by step only
    per_step = [v for v, step in args if step] + list(op.outs)
    if any(loop.axis in v.dims for v in per_step):
        return None
    whole = [replace(v, dims=dt.canonical((*v.dims, loop.axis))) if step else v for v, step in args]
    try:
        outs = REGISTRY[op.op].infer(dt, whole, op.attrs)
    except DimError:
        return None
    want = [dt.canonical((*v.dims, loop.axis)) for v in op.outs]
    return want if [tuple(o.dims) for o in outs] == want else None
