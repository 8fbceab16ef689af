"""Scan loops: which loops torch runs as torch's `scan` operator (`--loops scan`).

A Python `for` over a padded length is unrolled by `torch.export` and `torch.compile`, which
then fix that length (and compile a step per frame). torch's `scan` keeps the loop one
operator with any trip count. It runs a loop over a dim (a loop with `choice` trains over its
target's frames, so it counts); a top-level loop with `end` and a step limit runs as torch's
`while_loop`, its stacks preallocated to the limit. Neither kind holds a loop with `end` (its
length, known when it stops, would change from step to step), makes a dim in its body (a dim's
size is a Python int, which a step cannot return) or grows a state
(`OpDef.same_shape_each_step`: a step's results keep their shapes) but a beam search's state
`empty` started, which `cum_concat` writes into a buffer as long as the search's step limit
(`OpDef.preallocates`); and no loop over the dim a
`while_loop` made is either (the operator cannot trace a trip count known only at run time).

Records the loops in `TorchDecisions.scan`; changes nothing in the graph. Only torch reads it.
"""

from __future__ import annotations

from netc.emit_torch.decisions import decisions
from netc.ir.loopkinds import choice_op, growing_dims
from netc.ir.model import Graph, Loop, Op, Span
from netc.ir.search import search_plan
from netc.ir.walk import loop_key
from netc.ops import REGISTRY


def transform(g: Graph) -> tuple[Graph, bool]:
    scan: set[int] = set()
    made, empty = while_dims(g), empty_dims(g)
    for n in g.body:
        if isinstance(n, Loop):
            _mark(n, made, empty, scan)
    t = decisions(g)
    changed = scan != t.scan
    t.scan = scan
    return g, changed


def empty_dims(g: Graph) -> frozenset[str]:
    """The dims `empty` makes: a state grown along one starts with no frames."""
    return frozenset(growing_dims(g.body))


def grown_into_buffer(m: Op, n: Loop, empty: frozenset[str]) -> bool:
    """Whether `m`, in the beam loop `n`, grows a state of `n` that `empty` started (no frames)
    with an op that can write a step's frame into a buffer as long as the step limit."""
    return REGISTRY[m.op].preallocates and m.attrs["axis"] in empty and m.args[0] in {c.inner.id for c in n.carries}


def search_buffers(g: Graph) -> bool | Op:
    """Whether every state the beam search of `g` grows can be a buffer as long as its step limit
    (`grown_into_buffer`; `TorchDecisions.buffers`, which the exporter asks for); an op growing
    one in a search without a step limit (no length for a buffer) instead."""
    plan = search_plan(g)
    if plan is None:
        return False
    n = plan.loop
    grown = [m for m in n.body if isinstance(m, Op) and REGISTRY[m.op].preallocates]
    if grown and not n.has_step_limit:
        return grown[0]
    empty = empty_dims(g.search or g)
    return bool(grown) and all(grown_into_buffer(m, n, empty) for m in grown)


def while_dims(g: Graph) -> frozenset[str]:
    """The dims top-level loops with `end` make: their size is known only when they stop."""
    return frozenset(n.axis for n in g.body if isinstance(n, Loop) and n.end is not None and n.target is None)


def _mark(n: Loop, made: frozenset[str], empty: frozenset[str], scan: set[int]) -> None:
    for m in n.body:
        if isinstance(m, Loop):
            _mark(m, made, empty, scan)
    if blocker(n, made, empty=empty) is None:
        scan.add(loop_key(n))


def loop_blocker(g: Graph, n: Loop) -> tuple[Span, str] | None:
    """`blocker` of a top-level loop of `g`, knowing the dims `g`'s loops make and grow."""
    return blocker(n, while_dims(g), empty=empty_dims(g))


def blocker(
    n: Loop, made: frozenset[str] = frozenset(), nested: bool = False, empty: frozenset[str] = frozenset()
) -> tuple[Span, str] | None:
    """Why torch cannot run `n` as `scan` (or, with `end`, as `while_loop`), and where: None
    when it can. `made`: the dims of `while_dims`; `empty`: those of `empty_dims`."""
    if n.axis in made and n.end is None:  # the operator cannot trace a trip count of a value
        return n.span, "this loop runs over the steps of a loop with `end` (known only when the program runs)"
    if n.end is not None and n.target is None:
        if nested:  # its dim's size, known when it stops, would change from step to step
            return n.span, "this loop decides from values when to stop (`end`) inside another loop"
        if n.seqs:
            return n.span, "this loop decides from values when to stop (`end`) over the frames of a dim"
        if not n.has_step_limit:  # its stacks are preallocated to the limit
            return n.span, "this loop decides from values when to stop (`end`) without a step limit"
    # a beam search with a step limit (a `while_loop`) grows its states into buffers as long as
    # the limit (`grown_into_buffer`)
    beam = not nested and n.has_step_limit and choice_op(n) is not None
    for m in n.body:
        if isinstance(m, Loop):
            if (inner := blocker(m, made, nested=True, empty=empty)) is not None:
                return inner
            continue
        opdef = REGISTRY[m.op]
        if beam and grown_into_buffer(m, n, empty):
            continue
        if not opdef.same_shape_each_step:
            return m.span, f"`{m.op}` grows a state in a loop (its shape changes from step to step)"
        if opdef.makes_dims(m.attrs):
            return m.span, f"`{m.op}` makes a dim in a loop (its size would change from step to step)"
    return None
