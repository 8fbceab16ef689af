"""torch's decisions on one graph: the table its lowering (`netc.emit_torch.lowering`) fills and
its emitter reads; no other target sees it.

Kept beside the graph (`Graph.lowerings["torch"]`), not on its nodes, and keyed by value ids,
which survive copies of the graph (`netc export` copies it to change a decision); a loop by
`netc.ir.walk.loop_key`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from netc.ir.model import Graph, Loop, LoopCarry, LoopLast, Node, Op
from netc.ir.verify import IRError
from netc.ir.walk import loop_key

TARGET = "torch"


@dataclass(slots=True)
class TorchDecisions:
    # `padded_steps`: the states (their `inner` ids) kept through a sequence's padded steps
    frozen: set[int] = field(default_factory=set)
    # `padded_steps`: a state's or last value's `out` id -> the loop's stack (its `out` id) of the
    # same value, whose frame at each sequence's last step it is
    from_stack: dict[int, int] = field(default_factory=dict)
    # `torch_addmm`: an `add`'s result id -> its operand made by a bias-less `Linear`, computed
    # with it as one `torch.addmm`
    addmm: dict[int, int] = field(default_factory=dict)
    # `scan_loops` (`--loops scan`): the loops (`loop_key`) run as torch's `scan` or `while_loop`
    scan: set[int] = field(default_factory=set)
    # what the decisions were made with, kept when the graph is lowered again after a change
    # (`netc.passes.pipeline.lower_targets`): `--loops`; and the exporter's request, for ONNX,
    # that the beam search's grown states are buffers as long as its step limit
    # (`scan_loops.search_buffers`)
    loops: str = "python"
    buffers: bool = False

    def frozen_state(self, c: LoopCarry) -> bool:
        return c.inner.id in self.frozen

    def stack_of(self, r: LoopCarry | LoopLast) -> int | None:
        return self.from_stack.get(r.out.id) if r.out is not None else None

    def addmm_operand(self, op: Op) -> int | None:
        return self.addmm.get(op.outs[0].id) if op.outs else None

    def scanned(self, n: Loop) -> bool:
        return loop_key(n) in self.scan

    def note(self, where: str, obj) -> str:
        """The decisions as `netc explain` prints them (`netc.ir.printer`)."""
        if where == "carry" and self.frozen_state(obj):
            return " (frozen on padded steps)"
        if where in ("final", "last") and (stack := self.stack_of(obj)) is not None:
            return f" (from stack %{stack} at each sequence's last step)"
        if where == "op" and (operand := self.addmm_operand(obj)) is not None:
            return f" torch_addmm=%{operand}"
        return ""


def decisions(g: Graph) -> TorchDecisions:
    """`g`'s table (empty until torch's lowering fills it)."""
    table = g.lowerings.get(TARGET)
    if not isinstance(table, TorchDecisions):
        table = g.lowerings[TARGET] = TorchDecisions()
    return table


def check(g: Graph) -> None:
    """Each recorded decision refers to what it names (a failure is a compiler bug): a value taken
    from a stack to a stack of its loop of the same value, an addmm's operand to an operand of
    the `add` made by a `linear` of its block."""
    _check_block(g.body, decisions(g))


def _check_block(nodes: list[Node], t: TorchDecisions) -> None:
    made: dict[int, Op] = {}
    for n in nodes:
        if isinstance(n, Loop):
            _check_block(n.body, t)
            for r, value in [(c, c.next) for c in n.carries] + [(ll, ll.value) for ll in n.lasts]:
                stack = t.stack_of(r)
                if stack is not None and not any(s.out.id == stack and s.value == value for s in n.stacks):
                    raise IRError(f"loop at line {n.span.line}: {r.name} is not taken from a stack of its value")
            continue
        if n.unfused:  # the nodes a fused op stands for (a target without its native op emits them)
            _check_block(n.unfused, t)
        made.update((o.id, n) for o in n.outs)
        operand = t.addmm_operand(n)
        if operand is not None:
            lin = made.get(operand)
            if n.op != "add" or operand not in n.args or lin is None or lin.op != "linear":
                raise IRError(f"{n.op} at line {n.span.line}: torch_addmm is no linear of its block it reads")
