"""Use counts of values, recomputed on demand (never kept in sync by hand)."""

from __future__ import annotations

from collections import Counter

from netc.ir.model import Graph, Loop, Node, Value
from netc.ir.walk import walk


def node_uses(n: Node) -> list[int]:
    """Values a node reads from its own block (for a loop: its outer operands)."""
    if isinstance(n, Loop):
        bound = [n.bound] if n.bound is not None else []
        return [s.outer for s in n.seqs] + [i.outer for i in n.invariants] + [c.init for c in n.carries] + bound
    return list(n.args)


def loop_inner_uses(n: Loop) -> list[int]:
    """Values of a loop's body read by the loop itself (state updates and results)."""
    end = [n.end] if n.end is not None else []
    inits = [ll.init for ll in n.lasts if ll.init is not None]
    return [c.next for c in n.carries] + [s.value for s in n.stacks] + [ll.value for ll in n.lasts] + inits + end


def _count(nodes: list[Node], uses: Counter) -> Counter:
    """Add the reads of these nodes and of everything nested in them to `uses`."""
    for n in walk(nodes):
        uses.update(node_uses(n))
        if isinstance(n, Loop):
            uses.update(loop_inner_uses(n))
    return uses


def count_uses(g: Graph) -> Counter:
    uses = _count(g.body, Counter())
    uses.update(o.value for o in [*g.outputs, *g.losses])
    return uses


def count_uses_in_loop(n: Loop) -> Counter:
    """Reads of values of a loop's body: by its ops, nested loops, state updates and results."""
    return _count(n.body, Counter(loop_inner_uses(n)))


def replace_uses(nodes: list[Node], renames: dict[int, int]) -> None:
    """Rename every read of a value `old` to `renames[old]` within these nodes of one block (a
    loop's reads from this block, not its body's). Renames may chain (a -> b, b -> c): all of
    them are applied at once, so a pass collects a block's renames and calls this once rather
    than once per rename (which would scan the block each time)."""
    if not renames:
        return

    def new(v: int) -> int:
        while v in renames:
            v = renames[v]
        return v

    for n in nodes:
        if isinstance(n, Loop):
            for s in n.seqs:
                s.outer = new(s.outer)
            for i in n.invariants:
                i.outer = new(i.outer)
            for c in n.carries:
                c.init = new(c.init)
            n.bound = None if n.bound is None else new(n.bound)
        else:
            n.args = [new(a) for a in n.args]


def values_by_id(g: Graph) -> dict[int, Value]:
    """Every value the graph defines (inputs, op results, block arguments, loop results)."""
    out = {i.value.id: i.value for i in g.inputs}
    for n in walk(g.body):
        for v in n.block_args() + n.results() if isinstance(n, Loop) else n.outs:
            out[v.id] = v
    return out


def next_value_id(g: Graph) -> int:
    """An id no value of the graph has (a pass numbers its new values from here)."""
    return max([i.value.id for i in g.inputs] + [_max_id(g.body)], default=0) + 1


def _max_id(nodes: list[Node]) -> int:
    # the largest id without building `values_by_id`'s table: passes ask once per run, and a
    # table of every value is the costliest part of that on a large graph
    top = 0
    for n in nodes:
        if isinstance(n, Loop):
            top = max(top, _max_id(n.body), *(v.id for v in n.block_args() + n.results()))
        elif n.outs:
            top = max(top, *(v.id for v in n.outs))
    return top
