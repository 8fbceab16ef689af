"""RETURNN's decisions on one graph: the table its lowering (`netc.emit_tf.lowering`) fills and
its emitter reads; no other target sees it.

Kept beside the graph (`Graph.lowerings["returnn"]`), not on its nodes, keyed by value ids
(which survive copies of the graph); a loop by `netc.ir.walk.loop_key`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from netc.ir.model import Graph, Loop, Op
from netc.ir.verify import IRError
from netc.ir.walk import loop_key

TARGET = "returnn"


@dataclass(slots=True)
class ReturnnDecisions:
    # `bound_ops`, in a graph that only searches: a top-level loop (`loop_key`) -> the first
    # results of the ops before it, in order, that compute only its `bound`; they run in the
    # loop, as layers of its rec unit
    bound_ops: dict[int, list[int]] = field(default_factory=dict)

    def bound_ops_of(self, n: Loop) -> list[int]:
        return self.bound_ops.get(loop_key(n), [])

    def note(self, where: str, obj) -> str:
        """The decisions as `netc explain` prints them (`netc.ir.printer`)."""
        if where == "loop" and (ops := self.bound_ops_of(obj)):  # a search's step limit, computed in the loop
            return f"bound computed in the loop by {', '.join(f'%{i}' for i in ops)}"
        return ""


def decisions(g: Graph) -> ReturnnDecisions:
    """`g`'s table (empty until RETURNN's lowering fills it)."""
    table = g.lowerings.get(TARGET)
    if not isinstance(table, ReturnnDecisions):
        table = g.lowerings[TARGET] = ReturnnDecisions()
    return table


def check(g: Graph) -> None:
    """Each recorded decision refers to what it names (a failure is a compiler bug): a loop's
    bound ops to ops of its block, of a loop with a `bound`."""
    t = decisions(g)
    made: dict[int, Op] = {}
    for n in g.body:
        if isinstance(n, Op):
            made.update((o.id, n) for o in n.outs)
            continue
        ops = t.bound_ops_of(n)
        if ops and (n.bound is None or any(i not in made or made[i].outs[0].id != i for i in ops)):
            raise IRError(f"loop at line {n.span.line}: its bound ops are not ops of its block")
