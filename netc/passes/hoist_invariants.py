"""Loop-invariant hoisting: work that does not depend on the step runs once before the loop.

An op of a loop body whose operands are all loop invariants (or that has none) gives the
same result at every step: it moves before the loop, and the body reads its result as a new
invariant. Inner loops go first, so work moves out through several levels. The body's values
keep their ids (they become block arguments), so nothing that reads them changes. Ops that are
not pure (dropout) stay where the user wrote them, and so do ops whose results are over a dim
with another length at each step (a grown state's, a chunk's: `full(batch, chunk, ...)` has no
operand, but its shape is the step's).
"""

from __future__ import annotations

from netc.ir.loopkinds import dim_table
from netc.ir.model import Graph, Loop, LoopInvariant, Node, Op, Value
from netc.ir.uses import next_value_id
from netc.ops import REGISTRY
from netc.passes.sequence import before_loops, fresh_like


def transform(g: Graph) -> tuple[Graph, bool]:
    h = _Hoister(next_value_id(g), frozenset(dim_table(g).growing))
    before_loops(g.body, h.hoist)
    return g, h.changed


class _Hoister:
    def __init__(self, next_id: int, per_step: frozenset[str]):
        self.next_id = next_id
        self.per_step = per_step  # dims with another length at each step of their loop
        self.changed = False

    def hoist(self, loop: Loop) -> list[Op]:
        """Move the invariant ops out of `loop`; returns them, in order, for before it."""
        outer = {a.inner.id: a.outer for a in loop.invariants}
        moved: list[Op] = []
        keep: list[Node] = []
        for n in loop.body:
            if (
                not isinstance(n, Op)
                or not REGISTRY[n.op].pure
                or not all(a in outer for a in n.args)
                or any(d in self.per_step for v in n.outs for d in v.dims)
            ):
                keep.append(n)
                continue
            inner = n.outs
            n.args = [outer[a] for a in n.args]
            n.outs = [self.fresh(v) for v in inner]
            for i, o in zip(inner, n.outs):
                loop.invariants.append(LoopInvariant(outer=o.id, inner=i))
                outer[i.id] = o.id
            moved.append(n)
        loop.body[:] = keep
        self.changed |= bool(moved)
        return moved

    def fresh(self, like: Value) -> Value:
        self.next_id += 1
        return fresh_like(like, self.next_id - 1)
