"""Tracing `ctc_prefix_search(...)`: with an LM function (`lm=step`, `lm_state=`, `bos=`) the
function becomes the op's region, as `transducer_search`'s `predict` does (traced once, in a block
of its own whose arguments are fresh values: the label and the LM's state; the modules it calls are
the network's, and it may read nothing else from outside). A bigram table `lm` (or none) is the
op's plain form.
"""

from __future__ import annotations

import ast
import inspect
from typing import TYPE_CHECKING, Any

from netc.ops import REGISTRY
from netc.parser import values as V
from netc.parser.symbols import describe
from netc.parser.transducer import _own, _region

if TYPE_CHECKING:
    from netc.parser.tracer import Tracer

OP = "ctc_prefix_search"


def _api(
    logits,
    axis,
    beam,
    out_axis,
    lm=None,
    lm_weight=0.0,
    method="prefix",
    beam_size_token=None,
    beam_threshold=None,
    log_add=True,
    *,
    lm_state=None,
    bos=None,
):
    pass


_CALLABLE = (V.ModuleInstance, V.FunctionRef, V.BoundMethod)


def trace_ctc_prefix_search(t: Tracer, node: ast.Call) -> Any:
    args, kwargs = t.call_args(node)
    try:
        bound = inspect.signature(_api).bind(*args, **kwargs)
    except TypeError as e:
        raise t.error(node, f"bad arguments to `{OP}`: {e}") from None
    a = {**{k: p.default for k, p in inspect.signature(_api).parameters.items()}, **bound.arguments}
    if not isinstance(a["lm"], _CALLABLE):
        if a["lm_state"] is not None or a["bos"] is not None:
            raise t.error(
                node,
                f"`{OP}`: `lm_state` and `bos` go with an LM function (`lm=step`, `step(label, state) -> "
                f"(log_probs, state)`), got `lm` {describe(a['lm'])}",
            )
        kwargs = {k: v for k, v in kwargs.items() if k not in ("lm_state", "bos")}
        return t.call_netc(OP, args, kwargs, node)  # no LM, or a bigram table
    if a["lm_state"] is None or a["bos"] is None:
        raise t.error(node, f"`{OP}` with an LM function needs `lm_state` (its state before `bos`) and `bos`")
    if not isinstance(a["axis"], V.DimRef):
        raise t.error(node, f"`{OP}` needs `axis` to be a dim (`vocab + blank`), got {describe(a['axis'])}")
    vocab = a["axis"].name.rpartition("+")[0]
    if vocab not in t.dims.dims or t.dims[vocab].kind != "static":
        raise t.error(node, f"`{OP}` needs `axis` to be the labels' class dim plus the blank: `vocab + blank`")
    logits = t.as_tensor(a["logits"], node, OP)
    state_is_tuple = isinstance(a["lm_state"], (tuple, list))
    states = [t.as_tensor(s, node, OP) for s in (a["lm_state"] if state_is_tuple else [a["lm_state"]])]
    for s in states:
        if "batch" not in s.dims or t.dims.dynamic(s.dims):
            raise t.error(node, f"`{OP}`'s `lm_state` must be [batch, static dims...], got [{', '.join(s.dims)}]")

    label = t.new_value(("batch",), "int32", name="label", sparse_dim=vocab)
    state_args = [
        t.new_value(s.dims, s.value.dtype, name=s.value.name or "lm_state", sparse_dim=s.value.sparse_dim)
        for s in states
    ]
    lm, result = _region(t, "lm", a["lm"], [label, *state_args], node, state_is_tuple, op=OP)
    if not (isinstance(result, tuple) and len(result) == 2):
        raise t.error(node, f"`{OP}`: `lm(label, state)` must return (log_probs, state)")
    out, new_state = result
    new_states = list(new_state) if state_is_tuple and isinstance(new_state, (tuple, list)) else [new_state]
    if not isinstance(out, V.TV) or len(new_states) != len(states) or not all(isinstance(s, V.TV) for s in new_states):
        raise t.error(node, f"`{OP}`: `lm(label, state)` must return (log_probs, state), the state as given")
    if set(out.dims) != {"batch", vocab} or out.value.dtype != "float32":
        raise t.error(
            node,
            f"`{OP}`: `lm(label, state)` must return log probabilities [batch, {vocab}] of the next label, "
            f"got {out.value.dtype}[{', '.join(out.dims)}]",
        )
    for old, new in zip(states, new_states):
        if (new.dims, new.value.dtype) != (old.dims, old.value.dtype):
            raise t.error(
                node,
                f"`{OP}`: `lm` returns a state [{', '.join(new.dims)}] for one [{', '.join(old.dims)}]: "
                "it must keep the state's dims",
            )
    lm.results = [_own(t, lm, v, node, op=OP).id for v in [out, *new_states]]
    keys = ("axis", "beam", "out_axis", "lm_weight", "bos", "method", "beam_size_token", "beam_threshold", "log_add")
    attrs = {k: t.attr_value(a[k], node, OP) for k in keys}
    labels, score = t.emit(REGISTRY[OP], [logits, *states], attrs, node)
    t.block.nodes[-1].regions = [lm]
    return labels, score
