"""The importer's values and scopes: what a layer gives (`Val`), the layers of the network or of
a rec unit (`Scope`), a refusal (`Refused`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from netc.importer.dims import DimTable
from netc.importer.syntax import Expr, call

PREV = "__prev__"  # placeholder names, resolved when the model is written
DIM = "__dim__"
CLASS_ALIASES = {"hidden": "linear", "forward": "linear"}  # returnn.tf.layers.basic's aliases


class Refused(Exception):
    """A layer the importer cannot express: `layer` (its full name) of `cls`, and why."""

    def __init__(self, layer: str, cls: str, why: str):
        super().__init__(f"layer `{layer}` ({cls}): {why}")
        self.layer, self.cls, self.why = layer, cls, why


@dataclass
class Val:
    """A layer's value: its expression and dims (batch first, then dynamic, then static)."""

    expr: Expr
    dims: tuple[str, ...]
    sparse: str | None = None  # labels: their class dim
    is_list: bool = False  # a list stacked by a loop
    logits: Val | None = None  # a `softmax` layer's logits, for its loss
    log_probs: bool = False  # log-probabilities over the feature dim (a log_softmax): a CTC loss reads them
    training: bool = False  # the step's frame of a `choice`'s target (`data:<target>` in its unit): a search has none

    def tensor(self) -> Expr:
        """The value where an operator needs a tensor (a stacked list: `stack(...)`)."""
        return call("stack", self.expr) if self.is_list else self.expr


@dataclass
class Scope:
    """Layers of the network (`rec` None) or of a rec unit, and where their statements go."""

    layers: dict
    names: dict[str, str]  # layer -> variable
    stmts: list
    prefix: str  # of the TF variables: "" or "<rec>/rec/"
    outer: Scope | None = None
    rec: str | None = None  # the rec layer's name
    frame: Val | None = None  # `data:source`
    time: str | None = None  # the loop's dim
    vals: dict[str, Val] = field(default_factory=dict)
    states: dict[str, Val] = field(default_factory=dict)  # layer -> its value before the loop
    busy: set[str] = field(default_factory=set)
    failed: dict[str, Refused] = field(default_factory=dict)
    stacked: dict[str, str] = field(default_factory=dict)  # list -> the value appended per step
    losses: list = field(default_factory=list)  # (layer, kind, logits list, target, axis) of the unit
    sub: bool = False  # a subnetwork's (or a masked computation's unit's) layers, inlined into `outer`'s
    path: str | None = None  # the full name of the layer whose layers these are (`sub`)
    masked: bool = False  # a masked computation's unit's: `base:` in a subnetwork unit reads past it
    step_targets: frozenset[str] = frozenset()  # a decoder unit's: its choices' targets (`data:<key>` by the step)
    step_var: str | None = None  # its loop's step variable, once a layer reads a target's frame by it
    lattice: bool = False  # a transducer unit's layers on the (frame, label) lattice (lattice.py): sources broadcast


def tf_scope(layer: str) -> str:
    """A layer's TF variable scope, as RETURNN's `get_valid_scope_name_from_str` makes it."""
    s = "".join(c for c in layer if ord(c) < 128)
    s = re.sub("[:(){}&+\\-*'\" ,]", "__", s)
    return f".{ord(s[0])}.{s[1:]}" if s[:1] in "_-\\/" else s


def sources(d: dict) -> list[str]:
    src = d.get("from", "data")
    return [src] if isinstance(src, str) else list(src) if isinstance(src, list | tuple) else [src]


def step_read_refused(what: str) -> str:
    """Why a layer reading the step's frame of a `choice`'s target (`data:<target>` in its unit) is refused."""
    return (
        f"{what} reads the step's frame of a `choice`'s target (`data:<target>` in its unit), which a search "
        "does not have: an `eval` of the `tf.minimum` or `tf.maximum` of it and one other source is supported "
        "(the other source in a search, as the config's search network computes it without the target)"
    )


def registered_layer(net: dict, key: str) -> str | None:
    """The layer whose output RETURNN adds to the inputs as `key` (`register_as_extern_data`), if any."""
    return next((n for n, d in net.items() if isinstance(d, dict) and d.get("register_as_extern_data") == key), None)


def python_object(value) -> str | None:
    """The `repr` of the first Python object (not data: a function, a placeholder of a module only the
    config's cluster has) in an option's value, as `_child` passes them (`{"__object__": repr}`)."""
    if isinstance(value, dict):
        if set(value) == {"__object__"}:
            return str(value["__object__"])
        value = list(value.values())
    if isinstance(value, list):
        return next((r for v in value if (r := python_object(v)) is not None), None)
    return None


def value_sources(d: dict) -> list[str]:
    """The layers whose values a layer's value is made of (a `switch`: its branches, a
    `generic_attention`: its `base`; not `from`)."""
    if d.get("class") == "switch":
        return [d[k] for k in ("true_from", "false_from") if isinstance(d.get(k), str)]
    if d.get("class") == "generic_attention":  # a weighted sum of `base`'s frames
        return [d["base"]] if isinstance(d.get("base"), str) else []
    return sources(d)


def feature(val: Val, dims: DimTable) -> str:
    feats = [x for x in val.dims if dims.is_static(x)]
    if len(feats) > 1:  # a time axis kept by a `reduce` is not RETURNN's feature axis
        feats = [x for x in feats if dims.find(x) not in dims.not_feature] or feats
    if val.sparse is not None or len(feats) != 1:
        why = "needs one feature dim"
        if val.sparse is None and feats:  # which of them is RETURNN's feature axis netc does not track
            shown = ", ".join(f"`{dims.dims[dims.find(x)].name}` ({dims.size(x)})" for x in feats)
            why += f" (it has {len(feats)} static dims: {shown})"
        raise Refused(str(val.expr.value if isinstance(val.expr, cst.Name) else "?"), "?", why)
    return feats[0]
