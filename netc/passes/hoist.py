"""Loop-invariant hoisting.

- An op of a loop body whose operands are all loop invariants (or none) does not depend
  on the step: it runs once before the loop, and the body reads it as an invariant.
- An op whose operands are frames of the loop's sequences (and invariants) is a
  per-frame computation: it runs once over the whole sequence before the loop, and the
  body reads its frame as a new sequence (e.g. the input projection of an RNN).

Inner loops are hoisted first, so work can move out through several levels. The values
inside the body keep their ids (they become block arguments), so nothing else changes.
Ops that are not pure (random, e.g. dropout) stay where the user wrote them.
"""

from __future__ import annotations

from netc.ir.dims import DimError, DimTable
from netc.ir.model import Graph, Loop, LoopInvariant, LoopSeq, Node, Op, Value
from netc.ir.uses import values_by_id
from netc.ops import REGISTRY


def transform(g: Graph) -> tuple[Graph, bool]:
    g = g.model_copy(deep=True)
    h = _Hoister(g)
    h.block(g.body)
    return g, h.changed


class _Hoister:
    def __init__(self, g: Graph):
        self.dims = DimTable(g.dims)
        self.next_id = max(values_by_id(g)) + 1
        self.changed = False

    def fresh(self, dims, like: Value) -> Value:
        self.next_id += 1
        return Value(id=self.next_id, dims=tuple(dims), dtype=like.dtype, name=like.name, sparse_dim=like.sparse_dim)

    def block(self, nodes: list[Node]) -> None:
        i = 0
        while i < len(nodes):
            n = nodes[i]
            if isinstance(n, Loop):
                self.block(n.body)
                moved = self.hoist(n)
                nodes[i:i] = moved
                i += len(moved)
            i += 1

    def hoist(self, loop: Loop) -> list[Op]:
        """Move what can move out of `loop`; returns the moved ops, in order, for before it."""
        inv = {a.inner.id: a.outer for a in loop.invariants}
        seq = {s.inner.id: s.outer for s in loop.seqs}
        moved: list[Op] = []
        keep: list[Node] = []
        for n in loop.body:
            if not isinstance(n, Op) or not REGISTRY[n.op].pure or not all(a in inv or a in seq for a in n.args):
                keep.append(n)
                continue
            per_frame = any(a in seq for a in n.args)
            op = n.model_copy(deep=True)
            op.args = [inv.get(a, seq.get(a)) for a in n.args]
            if per_frame:
                outs = self._over_sequence(n, loop)
                if outs is None:
                    keep.append(n)
                    continue
            else:
                outs = [self.fresh(v.dims, v) for v in n.outs]
            op.outs = outs
            moved.append(op)
            for inner, outer in zip(n.outs, outs):
                if per_frame:
                    loop.seqs.append(LoopSeq(outer=outer.id, inner=inner))
                    seq[inner.id] = outer.id
                else:
                    loop.invariants.append(LoopInvariant(outer=outer.id, inner=inner))
                    inv[inner.id] = outer.id
            self.changed = True
        loop.body[:] = keep
        return moved

    def _over_sequence(self, n: Op, loop: Loop) -> list[Value] | None:
        """Results of op `n` applied to whole sequences: its per-step dims plus the loop axis.
        None when the op's dim rule does not give exactly that (then it stays in the loop), and
        when an operand or result already has the loop's axis: in the body that is the whole
        sequence (e.g. attention over all frames), which stacking over the axis cannot express."""
        step_values = [v for v in loop.block_args() if v.id in n.args] + list(n.outs)
        if any(loop.axis in v.dims for v in step_values):
            return None
        args = []
        for a in n.args:
            s = next((s for s in loop.seqs if s.inner.id == a), None)
            if s is not None:
                v = s.inner
                args.append(v.model_copy(update={"dims": self.dims.canonical((*v.dims, loop.axis))}))
            else:
                args.append(next(i.inner for i in loop.invariants if i.inner.id == a))
        try:
            outs = REGISTRY[n.op].infer(self.dims, args, n.attrs)
        except DimError:
            return None
        result = []
        for o, inner in zip(outs, n.outs):
            want = self.dims.canonical((*inner.dims, loop.axis))
            if tuple(o.dims) != want:
                return None
            result.append(self.fresh(want, inner))
        return result
