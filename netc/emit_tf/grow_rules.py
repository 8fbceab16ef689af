"""RETURNN's `cum_concat` moved out of its loop (training): what it cannot express.

RETURNN runs a unit's layers that no state needs after the loop, over all steps at once. A
`cum_concat` layer run so gives the frames of the whole sequence over its new dim, without the
loop's axis: that axis comes back only through another operand that has it (a frame, a state,
the step's values computed from them). A layer reading a grown value and nothing with the loop's
axis would have lost it, and RETURNN's mask of the grown dim (whose lengths are per step) fails
there. Such a layer is a located error; a layer a state needs stays in the loop and is fine.
"""

from __future__ import annotations

from netc.emit_tf.loop_rules import feeding_state
from netc.errors import CompileError
from netc.ir.loopkinds import chooses, grows, loop_grows
from netc.ir.model import Loop, Op, Value


def check_grown_reads(n: Loop, grown_inits: set[int], values: dict[int, Value]) -> None:
    grown_dims = {g.axis for g in loop_grows(n)}
    if not grown_dims:
        return
    per_step = {s.inner.id for s in n.seqs} | {c.inner.id for c in n.carries if c.init not in grown_inits}
    kept = feeding_state(n)
    for nd in n.body:
        if isinstance(nd, Loop):
            crossing = [*(s.outer for s in nd.seqs), *(i.outer for i in nd.invariants), *(c.init for c in nd.carries)]
            if any(v in per_step for v in crossing):
                per_step |= {r.id for r in nd.results()}
            continue
        if grows(nd):
            continue
        if chooses(nd) or any(a in per_step for a in nd.args):
            per_step |= {o.id for o in nd.outs}
            continue
        over = next((d for a in nd.args for d in values[a].dims if d in grown_dims), None)
        if over is not None and not any(o.id in kept for o in nd.outs):
            raise CompileError(
                nd.span,
                f"RETURNN target: this reads a value over `{over}` (grown by `cum_concat`) and nothing that "
                "changes per step (a frame, a state or a value computed from them): RETURNN computes it after "
                "the loop for all steps at once and loses the step axis; combine it with the step's own "
                "values (e.g. a query computed from the frame)",
            )


def kept_cum_concats(n: Loop) -> list[Op]:
    """The `cum_concat`s a state needs: RETURNN may move such a layer out of the loop as an input
    (when what its frame is computed from can move: frames, or a state that is a shifted
    sequence, as teacher-forced labels are), while the layers reading it stay in the loop and then
    see every frame at every step. Their frame is read through a layer kept in the loop
    (`loop_rules.per_step`), which keeps them there too."""
    kept = feeding_state(n)
    return [g.op for g in loop_grows(n) if g.op.outs[0].id in kept]
