"""Training's view of a loop with a `choice`: the choice is the reference label.

In training a loop with `label = choice(scores, target=y, ...)` runs over y's frames and the
choice is y's frame at each step (teacher forcing); its `end` and step limit do not apply. This
pass makes that explicit: the choice's result is replaced by the target's frame, the choice and
the loop's end go (a value assigned after the `end`, read after the loop, becomes the previous
step's: state), and what only the search needed (the end condition, the log-probabilities
the choice read) is left for `dce`. The loop is then an ordinary loop over y, which the hoisting
passes treat like any other: the previous label's embedding becomes a shifted sequence, the
output projection runs after the loop, as RETURNN itself would do in training.

A search needs the loop as written: the pipeline keeps a copy of the graph from before this
pass for it (`Graph.search`).
"""

from __future__ import annotations

from netc.ir.loopkinds import loop_search
from netc.ir.model import Graph, Loop, LoopCarry, Op, Value
from netc.ir.uses import replace_uses, values_by_id


def transform(g: Graph) -> tuple[Graph, bool]:
    changed = False
    next_id = max(values_by_id(g), default=0) + 1
    for loop in g.body:
        search = loop_search(loop) if isinstance(loop, Loop) else None
        if search is None:
            continue
        assert search.choices, "a search's loop has its choices until this pass"
        for choice in search.choices:
            next_id = _teacher_force(loop, choice, next_id)
        loop.target = loop.end = loop.bound = loop.max_steps = None
        loop.include_eos = True
        changed = True
    return g, changed


def _teacher_force(loop: Loop, choice: Op, next_id: int) -> int:
    """`choice`'s label replaced by its target's frame; the next free value id."""
    label, frame = choice.outs[0].id, choice.args[1]
    loop.body.remove(choice)
    replace_uses(loop.body, {label: frame})
    for c in loop.carries:
        c.next = frame if c.next == label else c.next
    for s in loop.stacks:
        s.value = frame if s.value == label else s.value
    for ll in loop.lasts:
        ll.value = frame if ll.value == label else ll.value
        if ll.after_end:  # the target's last frame is the ending step: the value from the one before
            prev = Value(id=next_id, dims=ll.out.dims, dtype=ll.out.dtype, name=ll.name, sparse_dim=ll.out.sparse_dim)
            next_id += 1
            init = next(i.outer for i in loop.invariants if i.inner.id == ll.init)
            made = (n.span for n in loop.body if isinstance(n, Op) and any(o.id == ll.value for o in n.outs))
            span = next(made, None)  # the op assigning it, where one in the body does
            loop.carries.append(LoopCarry(name=ll.name, init=init, inner=prev, next=ll.value, span=span))
            ll.value, ll.after_end, ll.init = prev.id, False, None
    return next_id
