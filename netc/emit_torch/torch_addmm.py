"""`a + x @ W` as one `torch.addmm(a, x, W)`: which adds torch computes with the bias-less
`Linear` giving one of their operands.

An add qualifies when that operand is made by a `Linear` without bias of a [batch, feature]
value, in the same block, read by nothing but this add, and both operands have the add's dims.
Records the Linear's result for each such add (`TorchDecisions.addmm`); changes nothing in the graph.
Part of torch's lowering (`netc.emit_torch.lowering`), on the final graph: the single read must still hold when the module is emitted.
"""

from __future__ import annotations

from collections import Counter

from netc.emit_torch.decisions import decisions
from netc.ir.model import Graph, Loop, Node, Op, Value
from netc.ir.uses import count_uses, values_by_id


def transform(g: Graph) -> tuple[Graph, bool]:
    chosen: dict[int, int] = {}
    _walk(g.body, count_uses(g), values_by_id(g), chosen)
    t = decisions(g)
    changed = chosen != t.addmm
    t.addmm = chosen
    return g, changed


def _walk(nodes: list[Node], uses: Counter, values: dict[int, Value], chosen: dict[int, int]) -> None:
    """Records the choice for each add of the block and of the loops in it. (A function, not a
    closure calling itself: that would be a reference cycle.)"""
    made: dict[int, Op] = {}
    for n in nodes:
        if isinstance(n, Loop):
            _walk(n.body, uses, values, chosen)
            continue
        made.update((o.id, n) for o in n.outs)
        operand = _linear_operand(n, made, uses, values)
        if operand is not None:
            chosen[n.outs[0].id] = operand


def _linear_operand(n: Op, made: dict[int, Op], uses, values) -> int | None:
    out = n.outs[0]
    if n.op != "add" or "scalar" in n.attrs or out.dtype != "float32" or len(n.args) != 2:
        return None
    for a, b in (n.args[::-1], n.args):  # the second operand first: `a + x @ W` reads best
        lin = made.get(b)
        if (
            lin is not None
            and lin.op == "linear"
            and not lin.attrs.get("with_bias", True)
            and uses[b] == 1
            and len(values[lin.args[0]].dims) == 2
            and values[a].dims == values[b].dims == out.dims
        ):
            return b
    return None
