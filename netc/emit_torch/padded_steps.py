"""Padded steps: which states a loop keeps through them, and which values read after it are
taken from a stack instead.

A target may run every sequence of a batch over the padded length (torch does; RETURNN runs
each sequence for its own steps and reads none of this). A forward loop's valid steps are each
sequence's first ones (with `end` too: a sequence that ended stays ended), so a state may run on
through the padded steps: what those steps compute lands only in padded frames. A backward loop
runs the padded steps first and must freeze its states there. A float state read after a forward
loop without `end` whose next value is also stacked is taken from that stack at each sequence's
last step (no `where` in every step); so is a last value that is stacked. Other states read after
the loop, and int and bool states (they may count or index), stay frozen.

Records `TorchDecisions.frozen` and `TorchDecisions.from_stack` (`netc.emit_torch.decisions`);
changes nothing in the graph. Part of torch's lowering (`netc.emit_torch.lowering`), after the common passes: any pass
after it that changed a loop would have to run it again.
"""

from __future__ import annotations

from netc.emit_torch.decisions import TorchDecisions, decisions
from netc.ir.model import Graph, Loop
from netc.ir.walk import loops


def transform(g: Graph) -> tuple[Graph, bool]:
    t = decisions(g)
    before = (set(t.frozen), dict(t.from_stack))
    t.frozen.clear()
    t.from_stack.clear()
    for n in loops(g.body, unfused=True):  # nested ones and those a fused op keeps (`Op.unfused`)
        _plan(n, t)
    return g, (t.frozen, t.from_stack) != before


def _plan(n: Loop, t: TorchDecisions) -> None:
    # a loop with `choice` runs over its target's frames here (its `end` is the search's)
    ends = n.end is not None and n.target is None
    forward = not n.reverse and not ends
    # stacks indexed by (batch, step) at once: batch first, the loop's dim second
    stacked = {s.value: s.out.id for s in n.stacks if s.out.dims[:2] == ("batch", n.axis)} if forward else {}
    for ll in n.lasts:
        if ll.value in stacked:
            t.from_stack[ll.out.id] = stacked[ll.value]
    for c in n.carries:
        stack = stacked.get(c.next) if c.out is not None else None
        if stack is not None:
            t.from_stack[c.out.id] = stack
        if n.reverse or c.inner.dtype != "float32" or (c.out is not None and stack is None):
            t.frozen.add(c.inner.id)
