"""Rec-state analysis: which carried values are really state.

The parser makes a carry of every name that is bound before a loop and assigned in it.
A carry whose previous value is never read is no state: it becomes a plain per-step value
(its final value a last-frame output). A carry the body never changes is the initial
value throughout. What remains is exactly RETURNN's `prev:` state.
"""

from __future__ import annotations

from netc.ir.model import Graph, Loop, LoopInvariant, LoopLast, Node
from netc.ir.uses import count_uses_in_loop, replace_uses


def transform(g: Graph) -> tuple[Graph, bool]:
    outputs_fix: dict[int, int] = {}
    changed = _block(g.body, outputs_fix)
    for o in [*g.outputs, *g.losses]:
        while o.value in outputs_fix:  # renames may chain (a loop's start is an earlier loop's result)
            o.value = outputs_fix[o.value]
    return g, changed


def _block(nodes: list[Node], outputs_fix: dict[int, int]) -> bool:
    # a function of its own, not a closure calling itself (a reference cycle, freed only by
    # the cyclic collector)
    changed = False
    renames: dict[int, int] = {}  # loop results -> the values that take their place after it
    for n in nodes:
        if not isinstance(n, Loop):
            continue
        changed |= _block(n.body, outputs_fix)
        uses = count_uses_in_loop(n)
        keep = []
        for c in n.carries:
            if c.next == c.inner.id:
                # never reassigned: the carried value is the initial value at every step
                n.invariants.append(LoopInvariant(outer=c.init, inner=c.inner))
                if c.out is not None:
                    renames[c.out.id] = c.init
                    outputs_fix[c.out.id] = c.init
                changed = True
            elif uses[c.inner.id] == 0:
                if c.out is not None:
                    n.lasts.append(LoopLast(name=c.name, value=c.next, out=c.out))
                changed = True
            else:
                keep.append(c)
        n.carries = keep
    replace_uses(nodes, renames)  # once for the block: a loop's results are read only after it
    return changed
