"""Dead-code removal: ops and loop results nobody reads, and loops left with no results."""

from __future__ import annotations

from netc.ir.model import Graph, Loop, Node
from netc.ir.uses import count_uses


def transform(g: Graph) -> tuple[Graph, bool]:
    changed_any = False
    while True:
        uses = count_uses(g)
        changed = _sweep(g.body, uses)
        if not changed:
            break
        changed_any = True
    live = _param_paths(g.body)
    params = [p for p in g.params if p.path in live]
    changed_any |= len(params) != len(g.params)
    g.params = params
    return g, changed_any


def _param_paths(nodes: list[Node]) -> set[str]:
    """Module paths of the parameterised ops still in the graph: the parameters to keep."""
    out: set[str] = set()
    for n in nodes:
        if isinstance(n, Loop):
            out |= _param_paths(n.body)
        else:
            out |= n.param_paths()
    return out


def _interface(n: Loop) -> tuple[int, ...]:
    """How many results and block arguments a loop has: a change means the sweep did something."""
    return len(n.stacks), len(n.lasts), sum(c.out is not None for c in n.carries), len(n.invariants), len(n.seqs)


def _sweep(nodes: list[Node], uses) -> bool:
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
            if not n.stacks and not n.lasts and all(c.out is None for c in n.carries):
                changed = True
                continue
            changed |= _sweep(n.body, uses)
            n.invariants = [i for i in n.invariants if uses[i.inner.id]]
            # a loop whose body reads no sequence keeps its first: it still defines the steps
            used = [s for s in n.seqs if uses[s.inner.id]]
            n.seqs = used or n.seqs[:1]
            changed |= before != _interface(n)
            keep.append(n)
        elif any(uses[o.id] for o in n.outs):
            keep.append(n)
        else:
            changed = True
    nodes[:] = keep
    return changed
