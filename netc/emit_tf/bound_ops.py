"""A search's step limit computed in its loop: which ops before a loop compute only its `bound`.

For a graph that only searches (`Graph.search`): the ops before a loop that compute its
per-sequence step limit and nothing else can run in the loop, once per step. The RETURNN config
makes them layers of the loop's rec unit (no top-level layers only the limit reads, as a config
written by hand has it); in a network built for training RETURNN would move them out of the loop
again, so RETURNN's lowering (`netc.emit_tf.lowering`) runs this pass on the search graph only.
Records them for each top-level loop (`ReturnnDecisions.bound_ops`); changes nothing in the graph.
"""

from __future__ import annotations

from netc.emit_tf.decisions import decisions
from netc.ir.model import Graph, Loop, Op
from netc.ir.uses import count_uses
from netc.ir.walk import loop_key


def transform(g: Graph) -> tuple[Graph, bool]:
    uses = count_uses(g)
    made = {v.id: n for n in g.body if isinstance(n, Op) for v in n.outs}
    found: dict[int, list[int]] = {}
    for n in g.body:
        if not isinstance(n, Loop):
            continue
        chain: set[int] = set()  # the ops' first results
        todo = [n.bound] if n.bound is not None else []
        while todo:
            op = made.get(todo.pop())
            if op is not None and op.outs[0].id not in chain and all(uses[v.id] == 1 for v in op.outs):
                chain.add(op.outs[0].id)
                todo.extend(op.args)
        ops = [op.outs[0].id for op in g.body if isinstance(op, Op) and op.outs[0].id in chain]
        if ops:
            found[loop_key(n)] = ops
    t = decisions(g)
    changed = found != t.bound_ops
    t.bound_ops = found
    return g, changed
