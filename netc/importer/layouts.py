"""RETURNN's layout of a layer (its axes in order, batch included) where netc can tell it: what an
axis number (`red1: 2` of a `dot`) names. netc's dims are named and unordered; RETURNN's axis
numbers count the axes of the layer's output as it is laid out, which depends on the layers before
(a `rec` layer's output is time-major, a `conv`'s batch-major). So only layouts traced back to a
batch-major origin through layers that keep the order of their input's axes are known:

- an input of `extern_data` whose batch axis comes first,
- a `conv` or `pool` (RETURNN's output is batch-major: time, the spatial axes, the channels last,
  unless `use_channel_first`, RETURNN's default from behavior version 9 on a GPU, or after such a
  layer),
- a batch-major `reinterpret_data` of [B, T] and at most one static dim (`arith._layout`),
- then layers that keep the order: elementwise ones and `eval` (the first source's layout), a
  `linear` (the feature axis, last, replaced in its place), a `slice` of the feature axis, a
  `reduce` with `keep_dims` (the axis of size 1 in its place), a `merge_dims` of the last axes, a
  `split_dims` of the feature axis, a
  `window` over time before behavior version 18 (its axis right after time's).

Anything else: None (the axis number is refused)."""

from __future__ import annotations

from netc.importer.dims import BATCH
from netc.importer.values import Refused, Val, feature, sources

# layers whose output keeps the axes of their (first) source in order (their feature axis, last, may change size)
_KEEPS_ORDER = {"linear", "copy", "dropout", "activation", "eval", "layer_norm", "slice", "combine", "scale_gradient"}


def batch_major_order(imp, ref, val: Val, scope, depth: int = 0) -> tuple[str, ...] | None:
    """`val`'s dims in RETURNN's axis order of layer `ref` (batch first), or None: not known."""
    if not isinstance(ref, str) or depth > 50 or val.sparse is not None or not val.dims or val.dims[0] != BATCH:
        return None
    known = imp._layout(ref, val, scope, False)
    if known is not None:
        return known if known[:1] == (BATCH,) else None
    top = scope.rec is None and not scope.sub
    if top and (ref == "data" or ref.startswith("data:")):
        spec = imp.cfg.inputs.get(ref.partition(":")[2] or "data")
        first = imp.dims.tags.get(spec.dims[0]) if spec is not None and spec.dims else None
        return val.dims if first is not None and first.kind == "batch" else None
    d = scope.layers.get(ref) if top else None
    if not isinstance(d, dict):
        return None
    cls, srcs = d.get("class"), sources(d)
    if not srcs or not isinstance(srcs[0], str):
        return None
    if cls in ("conv", "pool"):
        # [B, spatial..., channels] (RETURNN's conv makes its input batch-major) as netc's dims replace
        # the input's; the channels first instead with `use_channel_first` (RETURNN's default from
        # behavior version 9, on a GPU) or after a layer that puts them first (such a conv or pool)
        if _channel_first(imp, d) or any(_channel_first(imp, scope.layers.get(s)) for s in srcs):
            return None
        return val.dims if _ends_static(imp, val) else None
    src_val = imp.get(srcs[0], scope)
    inner = batch_major_order(imp, srcs[0], src_val, scope, depth + 1)
    if inner is None:
        return None
    if inner != src_val.dims:  # RETURNN's order not netc's (an `expand_dims`' new axis before the features)
        return _kept_other_order(imp, d, val, src_val, inner)
    if cls == "split_dims" and val.dims[: len(inner) - 1] == inner[:-1] and d.get("axis", "F") in ("F", "f"):
        return val.dims  # the last (feature) axis split in its place
    if val.dims == inner and cls in _KEEPS_ORDER:
        return val.dims
    if cls in ("linear", "slice") and len(val.dims) == len(inner) and val.dims[:-1] == inner[:-1]:
        try:
            feat = feature(src_val, imp.dims)
        except Refused:
            return None
        return val.dims if inner[-1] == feat else None  # the feature axis, last, changed
    if cls == "reduce" and d.get("keep_dims") and len(val.dims) == len(inner):
        return val.dims  # netc keeps the axis of size 1 in the reduced one's place, as RETURNN
    if cls == "window" and imp.cfg.behavior_version < 18 and d.get("axis", "T") in ("T", "t"):
        return val.dims  # [B, T, window, F]: the window axis right after time (later versions move time first)
    if cls == "merge_dims" and val.dims[: len(val.dims) - 1] == inner[: len(val.dims) - 1]:
        return val.dims  # the merged axes were the last ones: the merged one last
    return None


def _kept_other_order(imp, d: dict, val: Val, src_val: Val, inner: tuple[str, ...]) -> tuple[str, ...] | None:
    """The order of a layer of one source whose RETURNN order `inner` is not netc's: an elementwise
    layer's is its input's; a `linear`'s its input's with the last (feature) axis replaced."""
    cls = d.get("class")
    if len(sources(d)) != 1 or d.get("out_type"):
        return None
    if cls in _KEEPS_ORDER - {"linear", "slice"} and set(val.dims) == set(inner) and len(val.dims) == len(inner):
        return inner
    if cls == "linear" and len(val.dims) == len(inner):
        try:
            feat = feature(src_val, imp.dims)
        except Refused:
            return None
        new = [x for x in val.dims if x not in inner]
        if inner[-1] == feat and not new and set(val.dims) == set(inner):
            return inner  # its output dim the input's (of one size netc's one dim)
        if inner[-1] == feat and len(new) == 1 and set(val.dims) - set(new) == set(inner) - {feat}:
            return (*inner[:-1], new[0])
    return None


def _channel_first(imp, d) -> bool:
    """Whether a layer is a conv or pool that puts its channels first (RETURNN's `use_channel_first`)."""
    if not isinstance(d, dict) or d.get("class") not in ("conv", "pool"):
        return False
    return bool(d.get("use_channel_first", d.get("auto_use_channel_first", imp.cfg.behavior_version >= 9)))


def _ends_static(imp, val: Val) -> bool:
    static = [x for x in val.dims if imp.dims.is_static(x)]
    return bool(static) and val.dims[-1] == static[-1]
