"""Dead-code removal: ops and loop results nobody reads, and loops left with no results."""

from __future__ import annotations

from collections import Counter

from netc.ir.model import Graph, Loop, LoopCarry, Node, Op
from netc.ir.uses import count_uses, node_uses
from netc.ir.walk import param_paths
from netc.ops import REGISTRY


def transform(g: Graph) -> tuple[Graph, bool]:
    changed_any = False
    while True:
        uses = count_uses(g)
        changed = _sweep(g.body, uses, _dim_uses(g.body, Counter()))
        if not changed:
            break
        changed_any = True
    live = param_paths(g.body)  # the parameterised ops still in the graph: the parameters to keep
    params = [p for p in g.params if p.path in live]
    changed_any |= len(params) != len(g.params)
    g.params = params
    return g, changed_any


def _interface(n: Loop) -> tuple[int, ...]:
    """How many results and block arguments a loop has: a change means the sweep did something."""
    return len(n.stacks), len(n.lasts), sum(c.out is not None for c in n.carries), len(n.invariants), len(n.seqs)


def _dim_uses(nodes: list[Node], out: Counter) -> Counter:
    """How many values made in these nodes (loop bodies and results included) have each dim."""
    for n in nodes:
        if isinstance(n, Loop):
            _dim_uses(n.body, out)
        for v in n.outs if isinstance(n, Op) else n.results():
            out.update(v.dims)
    return out


def _makes_used_dims(n: Op, dim_uses: Counter) -> bool:
    """An op that gives a dim its lengths (`max_pool`) stays while other values have that dim
    (`zeros(batch, half_time)`, `expand(x, half_time)`): they take their lengths from it."""
    return any(dim_uses[d] > sum(d in v.dims for v in n.outs) for d in REGISTRY[n.op].makes_dims(n.attrs))


def _dead_carries(n: Loop) -> list[LoopCarry]:
    """States of loop `n` that nothing but their own updates reads: no result after the loop, and
    no stack, last value, end condition, choice or live state computed from them (a fixpoint of
    what is live, from the loop's results and choices back through its body). RETURNN builds no
    layer for such a state (nor its parameters), so the other targets must not compute it either."""
    live = {s.value for s in n.stacks} | {ll.value for ll in n.lasts}
    live |= {ll.init for ll in n.lasts if ll.init is not None} | {c.next for c in n.carries if c.out is not None}
    if n.end is not None:
        live.add(n.end)
    # a `choice` stays whoever reads its label (`OpDef.shapes_loop`): what its scores read is live
    live |= {o.id for nd in n.body if isinstance(nd, Op) and REGISTRY[nd.op].shapes_loop for o in nd.outs}
    changed = True
    while changed:
        changed = False
        for nd in reversed(n.body):
            outs = nd.outs if isinstance(nd, Op) else nd.results()
            if any(o.id in live for o in outs):
                new = set(node_uses(nd)) - live
                live |= new
                changed |= bool(new)
        for c in n.carries:
            if c.inner.id in live and c.next not in live:
                live.add(c.next)
                changed = True
    return [c for c in n.carries if c.out is None and c.inner.id not in live]


def _sweep(nodes: list[Node], uses, dim_uses: Counter) -> bool:
    changed = False
    keep: list[Node] = []
    for n in nodes:
        if isinstance(n, Loop):
            before = _interface(n)
            n.stacks = [s for s in n.stacks if uses[s.out.id]]
            n.lasts = [ll for ll in n.lasts if uses[ll.out.id]]
            for c in n.carries:
                if c.out is not None and not uses[c.out.id]:
                    c.out = None
            dead = _dead_carries(n)
            if dead:  # their updates become unread: the next round's sweep removes them
                n.carries = [c for c in n.carries if c not in dead]
                changed = True
            if not n.stacks and not n.lasts and all(c.out is None for c in n.carries):
                changed = True
                continue
            changed |= _sweep(n.body, uses, dim_uses)
            n.invariants = [i for i in n.invariants if uses[i.inner.id]]
            # a loop whose body reads no sequence keeps its first: it still defines the steps
            used = [s for s in n.seqs if uses[s.inner.id]]
            n.seqs = used or n.seqs[:1]
            changed |= before != _interface(n)
            keep.append(n)
        elif any(uses[o.id] for o in n.outs) or _makes_used_dims(n, dim_uses) or REGISTRY[n.op].shapes_loop:
            keep.append(n)
        else:
            changed = True
    nodes[:] = keep
    return changed
