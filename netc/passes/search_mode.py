"""`searching()` decided: a constant in each network of a model (True in its search network,
False in training's and in a model without `choice`).

A `where` (or an `if` on a tensor, which the parser makes `where`s) selecting with it becomes
the operand it selects, so the other branch is left for `dce`: a language model fused into a
beam search under `if searching():` is not computed in training, nor its parameters' gradients.
A `searching()` read otherwise stays, as the constant.
"""

from __future__ import annotations

from netc.ir.model import Graph, Loop, Node, Op, Value
from netc.ir.uses import replace_uses, values_by_id


def transform(g: Graph, searching: bool) -> tuple[Graph, bool]:
    renames: dict[int, int] = {}
    changed = _block(g.body, searching, renames, values_by_id(g), set())
    for o in [*g.outputs, *g.losses]:
        o.value = _new(o.value, renames)
    return g, changed


def _new(v: int, renames: dict[int, int]) -> int:
    while v in renames:
        v = renames[v]
    return v


def _block(
    nodes: list[Node], searching: bool, renames: dict[int, int], vals: dict[int, Value], decided: set[int]
) -> bool:
    """Decides the block's `searching()`s and folds its `where`s on them (or on one an outer
    block decided: `decided`); `renames` gets the block's values replaced (for the caller to
    rename what refers to them from outside)."""
    changed = False
    decided = set(decided)
    for n in nodes:
        if isinstance(n, Loop):
            inner: dict[int, int] = {}
            read = {i.inner.id for i in n.invariants if _new(i.outer, renames) in decided}
            changed |= _block(n.body, searching, inner, vals, read)
            for c in n.carries:
                c.next = _new(c.next, inner)
            for s in n.stacks:
                s.value = _new(s.value, inner)
            for ll in n.lasts:
                ll.value = _new(ll.value, inner)
            n.end = None if n.end is None else _new(n.end, inner)
        elif n.op == "searching":
            n.attrs["value"] = searching
            decided.add(n.outs[0].id)
            changed = True
        elif n.op == "where" and _new(n.args[0], renames) in decided:
            picked = _picked(n, searching, vals)
            if picked is not None:
                renames[n.outs[0].id] = picked
    replace_uses(nodes, renames)
    return changed


def _picked(n: Op, searching: bool, vals: dict[int, Value]) -> int | None:
    """The operand a `where` on `searching()` selects, where it can stand for the result (a
    tensor of its dims and type; a number or a broadcast operand keeps the `where`)."""
    taken = "a" if searching else "b"
    if f"{taken}_scalar" in n.attrs:
        return None
    tensors = iter(n.args[1:])
    operand = {k: None if f"{k}_scalar" in n.attrs else next(tensors) for k in ("a", "b")}[taken]
    v, out = vals[operand], n.outs[0]
    same = (v.dims, v.dtype, v.sparse_dim) == (out.dims, out.dtype, out.sparse_dim)
    return operand if same else None
