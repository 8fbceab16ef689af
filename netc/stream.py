"""Streaming: a network's recurrent loop as a step graph whose caches are explicit.

`step_graph(g)` turns a network whose recurrent computation is a loop over a dynamic dim (the
streamed axis) into a graph that computes one step: the loop body inlined at the top level,
the loop's seqs read from the step's input frames, its carried states as inputs (caches) and
their next values as outputs (new caches). Work before and after the loop that is per frame
(values over the axis made by ops that do not name it) runs in the step too, on the step's
frame; a result of the loop read after it (a last value, a final state) is a result of each
step whose value after a sequence's last step is the network's. What reads a sequence as a
whole (an op naming the axis: a reduction, a convolution, attention over it) or depends on
the future (a final value combined with per-frame ones) cannot stream: a located error names
it where an output needs it. The step of a loop is its body, whatever the loop kind: a seq's
inner value is the step's input (one frame here; a chunk of frames where the loop steps over
chunks). Compile without hoisting and fusing (`stream_options`): hoisting moves per-frame work
out of the loop and fusing turns a loop into one op over the whole sequence.

`region_graph(g, op, name)` makes a graph of a function an op calls (`transducer_search`'s
`predict` and `joint`): its arguments in, its results out, for the decoder's step modules.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Literal

from netc.errors import CompileError, Span
from netc.ir.loopkinds import loop_grows
from netc.ir.model import Graph, Input, Loop, Node, Op, Output, Value
from netc.ir.uses import count_uses, node_uses, replace_uses, values_by_id
from netc.ir.walk import param_paths
from netc.ops.iterables import ITERABLES, BlockStep
from netc.passes import dce

Kind = Literal["frame", "final", "const"]
CACHE_IN, CACHE_OUT = "cache_", "new_cache_"
FILLS = ("zeros", "ones", "full")


def stream_options():
    """The pass options a streamed network compiles with: as written, no fused loops."""
    from netc.passes.pipeline import PassOptions

    return PassOptions(hoist=False, whole_sequence=False, fuse=False)


@dataclass(frozen=True)
class Cache:
    name: str  # the loop's state (the user's variable)
    input: str  # the step's input: the state before the step
    output: str  # the step's output: the state after it
    value: Value  # its dims and dtype
    init: float | str  # the state before the first step: every element's value, or the input that gives it
    next: int  # the step graph's value of the state after the step


@dataclass
class StepPlan:
    graph: Graph  # inputs: the step's frames, other inputs, caches; outputs: results and new caches
    axis: str  # the streamed dim
    span: Span | None  # the loop streamed
    inputs: dict[str, Kind] = field(default_factory=dict)  # graph input -> frame (per step) / const
    input_axis: dict[str, int] = field(default_factory=dict)  # a frame input: where the axis is in the whole input
    outputs: dict[str, Kind] = field(default_factory=dict)  # network output -> frame / final / const
    output_axis: dict[str, int] = field(default_factory=dict)  # a frame output: where the axis goes
    caches: list[Cache] = field(default_factory=list)
    block: BlockStep | None = None  # a loop whose step takes a block of frames (a loop kind's)


class _Whole:
    """A value that needs the whole sequence: where, and why."""

    def __init__(self, span: Span | None, why: str):
        self.span, self.why = span, why


def _mentions(attrs, axis: str) -> bool:
    if isinstance(attrs, str):
        return attrs == axis
    if isinstance(attrs, dict):
        return any(_mentions(v, axis) for v in attrs.values())
    if isinstance(attrs, list | tuple):
        return any(_mentions(v, axis) for v in attrs)
    return False


def _strip(v: Value, axis: str) -> Value:
    return replace(v, dims=tuple(d for d in v.dims if d != axis))


def _named(v: Value) -> str:
    return f"`{v.name}`" if v.name else "a value"


def streamed_axis(g: Graph, axis: str | None = None) -> tuple[str, Span | None]:
    """The dim a step advances over: `axis`, else the dim of the network's top-level loops (one)."""
    loops = [n for n in g.body if isinstance(n, Loop)]
    if axis is not None:
        if axis not in {d.name for d in g.dims if d.kind == "dynamic"}:
            raise CompileError(None, f"--axis {axis}: not a dynamic dim of `{g.network}`", file=g.source_file)
        return axis, next((n.span for n in loops if n.axis == axis), None)
    if not loops:
        raise CompileError(
            None,
            f"`{g.network}` has no loop over frames to stream (name the streamed dim with --axis)",
            file=g.source_file,
        )
    other = next((n for n in loops if n.axis != loops[0].axis), None)
    if other is not None:
        raise CompileError(
            other.span,
            f"this loop steps over `{other.axis}`, an earlier one over `{loops[0].axis}`: "
            "a streamed network's loops step over one dim (name it with --axis)",
        )
    return loops[0].axis, loops[0].span


def _refuse_loop(n: Loop) -> None:
    why = None
    if n.target is not None:
        why = "this loop searches (`choice`): its steps depend on what it chooses, not on input frames"
    elif n.end is not None or n.bound is not None:
        why = "this loop decides when to stop (`end`): it makes its own steps instead of taking input frames"
    elif n.reverse:
        why = "this loop runs backwards over the sequence: its first step needs the last frame"
    if why:
        raise CompileError(n.span, f"cannot stream: {why}")


def step_graph(g: Graph, axis: str | None = None, outputs: list[str] | None = None) -> StepPlan:
    """The step graph of `g` (an inference graph compiled with `stream_options`). `outputs`:
    the network outputs to keep (all by default); the others are left out, also where they
    cannot stream."""
    kinds = list(ITERABLES.values())  # a loop kind's loop may step over blocks of the input's frames
    if axis is not None:
        axis = next((a for d in kinds if (a := d.stream_axis(g, axis)) is not None), axis)
    axis, span = streamed_axis(g, axis)
    blocked = next((r for d in kinds if (r := d.stream_steps(g, axis)) is not None), None)
    if blocked is not None:
        g, block = blocked
    if not any(axis in i.value.dims for i in g.inputs):
        maker = next((n for n in g.body if isinstance(n, Op) and _makes(n, axis)), None)
        why = f"no input has `{axis}`, so the host has no frames of it to feed"
        if maker is not None:
            raise CompileError(
                maker.span, f"cannot stream over `{axis}`: {why}; `{maker.op}` makes it from whole sequences"
            )
        raise CompileError(span, f"cannot stream over `{axis}`: {why}", file=g.source_file)
    plan = StepPlan(graph=g, axis=axis, span=span, block=block if blocked is not None else None)
    cut = (axis,) if plan.block is None else (axis, plan.block.axis)  # an op naming one needs them whole
    whole: dict[int, _Whole] = {}  # values that need the whole sequence
    kind: dict[int, Kind] = {}
    alias: dict[int, int] = {}  # a loop's result -> the body value it is at each step
    made: dict[int, Op] = {}  # top-level value -> the op that makes it (a cache's start)
    inputs, body = [], []
    for i in g.inputs:
        framed = axis in i.value.dims
        kind[i.value.id] = plan.inputs[i.name] = "frame" if framed else "const"
        if framed:
            plan.input_axis[i.name] = list(i.annotated_dims).index(axis)
        annotated = tuple(d for d in i.annotated_dims if d != axis)
        inputs.append(Input(name=i.name, value=_strip(i.value, axis), annotated_dims=annotated, span=i.span))

    def need(v: int, user: str) -> None:
        w = whole.get(v)
        if w is not None:
            raise CompileError(w.span, f"cannot stream {user}: {w.why}")

    def combine(args: list[int], span: Span | None, what: str) -> Kind | _Whole:
        for a in args:
            if a in whole:
                return whole[a]
        kinds = {kind[a] for a in args}
        if {"frame", "final"} <= kinds:
            why = f"{what} combines a value after the last frame with per-frame values (it needs the future)"
            return _Whole(span, why)
        return "frame" if "frame" in kinds else "final" if "final" in kinds else "const"

    def settle(values: list[Value], res: Kind | _Whole) -> bool:
        for v in values:
            if isinstance(res, _Whole):
                whole[v.id] = res
            else:
                kind[v.id] = res
        return not isinstance(res, _Whole)

    for n in g.body:
        if isinstance(n, Op):
            res = combine(n.args, n.span, f"`{n.op}`")
            over = next((d for d in cut if _mentions(n.attrs, d)), None)
            if not isinstance(res, _Whole) and over is not None:
                res = _Whole(n.span, f"`{n.op}` works over the whole `{over}` sequence, making {_named(n.outs[0])}")
            if settle(n.outs, res):
                m = copy.deepcopy(n)
                m.outs = [_strip(v, axis) for v in m.outs]
                made.update({v.id: m for v in m.outs})
                body.append(m)
            continue
        if n.axis != axis:  # a loop over another dim: it runs in each step if it reads no frame
            res = combine(node_uses(n), n.span, "this loop")
            if not isinstance(res, _Whole) and res != "const":
                res = _Whole(n.span, f"this loop over `{n.axis}` reads values of each `{axis}` frame")
            if settle(n.results(), res):
                body.append(copy.deepcopy(n))
            continue
        _refuse_loop(n)
        body.extend(_inline(copy.deepcopy(n), axis, plan, kind, alias, made, need, inputs))
    replace_uses(body, alias)
    step_outputs = []
    for o in g.outputs:
        if outputs is not None and o.name not in outputs:
            continue
        need(o.value, f"the output `{o.name}`")
        plan.outputs[o.name] = kind[o.value]
        if kind[o.value] == "frame":
            plan.output_axis[o.name] = list(values_by_id(g)[o.value].dims).index(axis)
        step_outputs.append(Output(name=o.name, value=alias.get(o.value, o.value), span=o.span))
    step_outputs += [Output(name=c.output, value=c.next) for c in plan.caches]
    dims = [d for d in g.dims if d.name != axis]
    step = Graph(
        source_file=g.source_file,
        network=g.network,
        dims=dims,
        inputs=inputs,
        params=list(g.params),
        body=body,
        outputs=step_outputs,
    )
    step, _ = dce.transform(step)
    uses = count_uses(step)
    caches = {c.input for c in plan.caches}
    step.inputs = [i for i in step.inputs if i.name in caches or uses[i.value.id]]
    plan.inputs = {k: v for k, v in plan.inputs.items() if k in {i.name for i in step.inputs}}
    plan.graph = step
    return plan


def _inline(n: Loop, axis: str, plan: StepPlan, kind, alias, made, need, inputs) -> list[Node]:
    """The body of a loop over the streamed axis, as top-level nodes of the step: seqs read the
    step's frames, invariants the values before the loop, states the caches (new inputs)."""
    renames: dict[int, int] = {}
    for s in n.seqs:
        need(s.outer, f"the frames of {_named(s.inner)}")
        if kind[s.outer] != "frame":
            raise CompileError(n.span, f"cannot stream: {_named(s.inner)} is not a frame of an input")
        renames[s.inner.id] = s.outer
    for inv in n.invariants:
        need(inv.outer, f"{_named(inv.inner)}, which the loop reads")
        if kind[inv.outer] == "frame":
            why = f"the loop reads {_named(inv.inner)} over all its `{axis}` frames at each step"
            raise CompileError(_reader(n, inv.inner.id), f"cannot stream: {why}")
        if kind[inv.outer] == "final":
            why = f"the loop reads {_named(inv.inner)}, a value after an earlier loop's last step"
            raise CompileError(_reader(n, inv.inner.id), f"cannot stream: {why}")
        renames[inv.inner.id] = inv.outer
    taken = {c.name for c in plan.caches}
    inputs_by_value = {i.value.id: i.name for i in inputs if plan.inputs.get(i.name) == "const"}
    grown = {lg.carry.inner.id: lg for lg in loop_grows(n) if lg.carry is not None}
    for c in n.carries:
        need(c.init, f"the state `{c.name}`")
        if c.inner.id in grown:  # its cache would be a frame longer at each step
            why = (
                f"the state `{c.name}` grows by a frame at each step (`{grown[c.inner.id].op.op}`); "
                "a step module's caches keep their shape (carry a fixed number of past frames)"
            )
            raise CompileError(grown[c.inner.id].op.span, f"cannot stream: {why}")
        init = made.get(c.init)
        given = inputs_by_value.get(c.init)
        if given is None and not (isinstance(init, Op) and init.op in FILLS and not init.args):
            why = (
                f"the state `{c.name}` starts from a computed value; a cache starts from a constant "
                "(`zeros`, `ones`, `full`) or an input"
            )
            raise CompileError(c.span or n.span, f"cannot stream: {why}")
        name, k = c.name, 2
        while name in taken:
            name, k = f"{c.name}_{k}", k + 1
        taken.add(name)
        if given is not None:
            fill: float | str = given
        else:
            fill = float({"zeros": 0.0, "ones": 1.0}.get(init.op, init.attrs.get("value", 0.0)))
        nxt = renames.get(c.next, c.next)
        plan.caches.append(Cache(name, CACHE_IN + name, CACHE_OUT + name, c.inner, fill, nxt))
        inputs.append(Input(name=CACHE_IN + name, value=c.inner, annotated_dims=c.inner.dims))
        if c.out is not None:
            alias[c.out.id], kind[c.out.id] = nxt, "final"
    for s in n.stacks:
        alias[s.out.id], kind[s.out.id] = renames.get(s.value, s.value), "frame"
    for last in n.lasts:
        alias[last.out.id], kind[last.out.id] = renames.get(last.value, last.value), "final"
    replace_uses(n.body, renames)
    return n.body


def _makes(n: Op, axis: str) -> bool:
    return _mentions(n.attrs, axis) and any(axis in v.dims for v in n.outs)


def _reader(n: Loop, v: int) -> Span:
    """Where the loop's body first reads `v` (the loop, where no op of its own block does)."""
    return next((m.span for m in n.body if isinstance(m, Op) and v in m.args), n.span)


def region_graph(g: Graph, op: Op, name: str, results: list[str]) -> Graph:
    """A graph of the function `name` that `op` calls: its arguments as inputs (by their names),
    its results as outputs named `results`."""
    region = copy.deepcopy(next(r for r in op.regions if r.name == name))
    names = [a.name or f"arg{k}" for k, a in enumerate(region.args)]
    inputs = [Input(name=n, value=a, annotated_dims=a.dims) for n, a in zip(names, region.args)]
    live = param_paths(region.body)
    return Graph(
        source_file=g.source_file,
        network=f"{g.network}_{name}",
        dims=list(g.dims),
        inputs=inputs,
        params=[p for p in g.params if p.path in live],
        body=region.body,
        outputs=[Output(name=r, value=v) for r, v in zip(results, region.results)],
    )
