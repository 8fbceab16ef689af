"""Tracing `transducer_search(...)`: its `predict` and `joint` callables become the op's regions.

Each is traced once, in a block of its own whose arguments are fresh values (the label and the
state; the encoder frame and the prediction output): the modules they call are the training
network's (same module paths, same parameters), and they may read nothing else from outside.
"""

from __future__ import annotations

import ast
import inspect
from typing import TYPE_CHECKING, Any

from netc.errors import CompileError
from netc.ir.model import Loop, Region, Value
from netc.ops import REGISTRY
from netc.parser import values as V
from netc.parser.symbols import describe

if TYPE_CHECKING:
    from netc.parser.tracer import Tracer


def _api(
    enc,
    *,
    axis,
    predict,
    joint,
    state,
    label_dim,
    start,
    out_axis,
    blank=-1,
    beam=4,
    method="modified",
    max_sym_per_frame=1,
):
    pass


_CALLABLE = (V.ModuleInstance, V.FunctionRef, V.BoundMethod)


def trace_transducer_search(t: Tracer, node: ast.Call) -> tuple[V.TV, V.TV]:
    args, kwargs = t.call_args(node)
    try:
        bound = inspect.signature(_api).bind(*args, **kwargs)
    except TypeError as e:
        raise t.error(node, f"`transducer_search`: {e}") from None
    a = {**{k: p.default for k, p in inspect.signature(_api).parameters.items()}, **bound.arguments}
    if t.block is not t.root:
        raise t.error(node, "`transducer_search` runs a whole search: call it outside loops")
    for key in ("axis", "label_dim", "out_axis"):
        if not isinstance(a[key], V.DimRef):
            raise t.error(node, f"`transducer_search` needs `{key}` to be a Dim, got {describe(a[key])}")
    for key in ("predict", "joint"):
        if not isinstance(a[key], _CALLABLE):
            raise t.error(
                node, f"`transducer_search` needs `{key}` to be a Module or a function, got {describe(a[key])}"
            )
    enc = t.as_tensor(a["enc"], node, "transducer_search")
    state_is_tuple = isinstance(a["state"], (tuple, list))
    states = [t.as_tensor(s, node, "transducer_search") for s in (a["state"] if state_is_tuple else [a["state"]])]
    axis, label_dim = a["axis"].name, a["label_dim"].name
    if axis not in enc.dims or "batch" not in enc.dims:
        raise t.error(node, f"`transducer_search` needs enc [batch, {axis}, ...], got [{', '.join(enc.dims)}]")
    if label_dim not in t.dims.dims or t.dims[label_dim].kind != "static":
        raise t.error(node, f"`transducer_search` needs `label_dim` to be a static dim (the labels), got `{label_dim}`")

    label = t.new_value(("batch",), "int32", name="label", sparse_dim=label_dim)
    state_args = [
        t.new_value(s.dims, s.value.dtype, name=s.value.name or "state", sparse_dim=s.value.sparse_dim) for s in states
    ]
    predict, result = _region(t, "predict", a["predict"], [label, *state_args], node, state_is_tuple)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise t.error(node, "`transducer_search`: `predict(label, state)` must return (output, state)")
    out, new_state = result
    new_states = list(new_state) if state_is_tuple and isinstance(new_state, (tuple, list)) else [new_state]
    if not isinstance(out, V.TV) or len(new_states) != len(states) or not all(isinstance(s, V.TV) for s in new_states):
        raise t.error(node, "`transducer_search`: `predict(label, state)` must return (output, state), state as given")
    for old, new in zip(states, new_states):
        if (new.dims, new.value.dtype) != (old.dims, old.value.dtype):
            raise t.error(
                node,
                f"`transducer_search`: `predict` returns a state [{', '.join(new.dims)}] for one "
                f"[{', '.join(old.dims)}]: it must keep the state's dims",
            )
    predict.results = [_own(t, predict, v, node).id for v in [out, *new_states]]

    frame = t.new_value(t.dims.canonical([d for d in enc.dims if d != axis]), name="enc_frame")
    pred_out = t.new_value(out.dims, out.value.dtype, name="pred_out")
    joint, scores = _region(t, "joint", a["joint"], [frame, pred_out], node)
    classes = [d for d in scores.dims if d != "batch"] if isinstance(scores, V.TV) else []
    size = t.dims[label_dim].size
    if len(classes) != 1 or scores.value.dtype != "float32" or t.dims[classes[0]].size != size + 1:
        got = f"[{', '.join(scores.dims)}]" if isinstance(scores, V.TV) else describe(scores)
        raise t.error(
            node,
            f"`transducer_search`: `joint(enc_frame, out)` must return scores [batch, {label_dim} + blank] "
            f"({size + 1} classes), got {got}",
        )
    joint.results = [_own(t, joint, scores, node).id]

    attrs = {
        "axis": axis,
        "out_axis": a["out_axis"].name,
        "label_dim": label_dim,
        "classes": size + 1,
        **{k: t.attr_value(a[k], node, "transducer_search") for k in ("start", "blank", "beam", "method")},
        "max_sym_per_frame": t.attr_value(a["max_sym_per_frame"], node, "transducer_search"),
    }
    labels, best = t.emit(REGISTRY["transducer_search"], [enc, *states], attrs, node)
    t.block.nodes[-1].regions = [predict, joint]
    return labels, best


def _region(
    t: Tracer,
    what: str,
    fn: Any,
    args: list[Value],
    node: ast.Call,
    tuple_state: bool = False,
    op: str = "transducer_search",
) -> tuple[Region, Any]:
    """Traces `fn(*args)` into a region of op `op`'s call: the region and what the call returned
    (with `tuple_state`, `fn(args[0], tuple(args[1:]))`)."""
    block = V.Block(nodes=[], region=f"`{op}`'s `{what}`")
    saved = t.block
    t.block = block
    try:
        tvs = [V.TV(v, block) for v in args]
        result = t.call_value(fn, [tvs[0], tuple(tvs[1:])] if tuple_state else tvs, {}, node)
    finally:
        t.block = saved
    for n in block.nodes:
        if isinstance(n, Loop):
            raise CompileError(n.span, f"`{op}`'s `{what}` runs a loop: it must be one step")
        for v in n.outs:
            if t.dims.dynamic(v.dims):
                raise CompileError(n.span, f"`{op}`'s `{what}` makes a value over a dynamic dim")
        if not n.args and "batch" in n.outs[0].dims:
            raise CompileError(
                n.span,
                f"`{op}`'s `{what}` makes a [batch, ...] value from no argument "
                f"(`{n.op}`): its rows are hypotheses, not the batch; compute it from the arguments",
            )
    return Region(name=what, args=args, body=block.nodes), result


def _own(t: Tracer, region: Region, tv: Any, node: ast.Call, op: str = "transducer_search") -> Value:
    """A result of the region: a value it made or one of its arguments."""
    if not isinstance(tv, V.TV):
        raise t.error(node, f"`{op}`'s `{region.name}` must return tensors, got {describe(tv)}")
    ids = {v.id for v in region.args} | {o.id for n in region.body for o in n.outs}
    if tv.value.id not in ids:
        raise t.error(node, f"`{op}`'s `{region.name}` returns a value from outside it")
    return tv.value
