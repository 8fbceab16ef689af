"""Per-frame work runs over whole sequences before the loop.

An op of a loop body whose operands are frames of the loop's sequences (and invariants) does
at each step what one op over the whole sequences would do for all steps at once (e.g. the
input projection of an RNN): it moves before the loop, applied to the sequences, and the body
reads its result's frame as a new sequence. Ops that read state, or whose dim rule over the
sequence differs (see `sequence.over_sequence`), stay. Inner loops go first, so per-frame work
of an inner loop may become per-frame or invariant work of the outer one (which the pipeline's
next round of hoisting moves). This kind keeps whole sequences of intermediate results in
memory; `PassOptions.whole_sequence` turns it off.
"""

from __future__ import annotations

from netc.ir.dims import DimTable
from netc.ir.loopkinds import dim_table
from netc.ir.model import Graph, Loop, LoopSeq, Node, Op
from netc.ir.uses import next_value_id
from netc.passes.sequence import before_loops, fresh_like, over_sequence


def transform(g: Graph) -> tuple[Graph, bool]:
    h = _Hoister(dim_table(g), next_value_id(g))
    before_loops(g.body, h.hoist)
    return g, h.changed


class _Hoister:
    def __init__(self, dims: DimTable, next_id: int):
        self.dims = dims
        self.next_id = next_id
        self.changed = False

    def hoist(self, loop: Loop) -> list[Op]:
        """Move the per-frame ops out of `loop`; returns them, in order, for before it."""
        inv = {a.inner.id: a for a in loop.invariants}
        seq = {s.inner.id: s for s in loop.seqs}
        moved: list[Op] = []
        keep: list[Node] = []
        for n in loop.body:
            dims = None
            if isinstance(n, Op) and any(a in seq for a in n.args) and all(a in seq or a in inv for a in n.args):
                args = [(seq[a].inner, True) if a in seq else (inv[a].inner, False) for a in n.args]
                dims = over_sequence(self.dims, n, loop, args)
            if dims is None:
                keep.append(n)
                continue
            inner = n.outs
            n.args = [seq[a].outer if a in seq else inv[a].outer for a in n.args]
            n.outs = [fresh_like(v, self.new_id(), d) for v, d in zip(inner, dims)]
            for i, o in zip(inner, n.outs):
                s = LoopSeq(outer=o.id, inner=i)
                loop.seqs.append(s)
                seq[i.id] = s
            moved.append(n)
        loop.body[:] = keep
        self.changed |= bool(moved)
        return moved

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1
