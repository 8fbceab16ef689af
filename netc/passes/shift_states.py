"""A state that is only the previous frame of a sequence becomes that sequence, shifted.

A carried value whose next value is a frame of one of the loop's sequences (after per-frame
hoisting: `prev_emb = Embedding(emb)(y_t)` in teacher forcing, with `prev_emb` read before it is
assigned) holds, at step t, frame t-1 of that sequence and the initial value at step 0. When the
initial value is zeros (RETURNN's default initial state), that is the sequence shifted by one
frame (`shift_frames`, before the loop): the state becomes a sequence of the loop, and its value
after the loop the last frame of the original sequence. Per-frame work reading it can then move
out too (the pipeline runs the hoisting passes again).

Only forward loops over an input's frames: a backward loop's previous step is the next frame,
which ends at each sequence's own last frame; a loop with `end` has no sequences but a target.
"""

from __future__ import annotations

from netc.ir.model import Graph, Loop, LoopLast, LoopSeq, Node, Op, Value
from netc.ir.uses import values_by_id
from netc.passes.sequence import before_loops


def transform(g: Graph) -> tuple[Graph, bool]:
    s = _Shifter(values_by_id(g), _zeros(g.body, set()))
    before_loops(g.body, s.shift)
    return g, s.changed


def _zeros(nodes: list[Node], out: set[int], filled: set[int] | None = None) -> set[int]:
    """Values that are all zeros: `zeros(...)`, `full(..., value=0)`, the `argmax` of a tensor
    filled with one value (the first index: label 0, a decoder's usual start), and loop
    invariants of those. `filled`: tensors filled with one value."""
    filled = set() if filled is None else filled
    for n in nodes:
        if isinstance(n, Loop):
            out |= {i.inner.id for i in n.invariants if i.outer in out}
            filled |= {i.inner.id for i in n.invariants if i.outer in filled}
            _zeros(n.body, out, filled)
        elif n.op in ("zeros", "ones", "full"):
            filled.add(n.outs[0].id)
            if n.op == "zeros" or n.attrs.get("value") == 0:
                out.add(n.outs[0].id)
        elif n.op == "argmax" and n.args[0] in filled:
            out.add(n.outs[0].id)
    return out


class _Shifter:
    def __init__(self, values: dict[int, Value], zeros: set[int]):
        self.values = values
        self.next_id = max(values, default=0) + 1
        self.zeros = zeros
        self.changed = False

    def shift(self, loop: Loop) -> list[Op]:
        if loop.reverse or loop.end is not None:
            return []
        seq = {s.inner.id: s for s in loop.seqs}
        moved: list[Op] = []
        keep = []
        for c in loop.carries:
            s = seq.get(c.next)
            if s is None or c.init not in self.zeros or s.outer == loop.target:
                keep.append(c)
                continue
            outer = self.values[s.outer]
            whole = Value(id=self.next_id, dims=outer.dims, dtype=outer.dtype, name=c.name, sparse_dim=outer.sparse_dim)
            self.next_id += 1
            span = c.span or loop.span  # the state's own place: where the body assigns it
            moved.append(Op(op="shift_frames", args=[s.outer], attrs={"axis": loop.axis}, outs=[whole], span=span))
            loop.seqs.append(LoopSeq(outer=whole.id, inner=c.inner))
            if c.out is not None:
                loop.lasts.append(LoopLast(name=c.name, value=c.next, out=c.out))
        self.changed |= len(keep) != len(loop.carries)
        loop.carries = keep
        return moved
