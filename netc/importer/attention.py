"""Attention layers as RETURNN's attention setups use them (Zeyer et al. 2018): `split_dims`,
`merge_dims` (`except_batch`), `softmax_over_spatial`, `generic_attention`, `reduce_out` (maxout).

A dim a layer splits into or merges to is the dim of its size (dims of one size are one netc
dim), except where that dim is already one of the value's dims (a split of 64 into 1 x 64): then
the layer gets a dim of its own, named after it."""

from __future__ import annotations

import libcst as cst

from netc.importer.dims import BATCH
from netc.importer.syntax import Expr, binop, call, identifier, name, num
from netc.importer.values import Refused, Scope, Val, feature, sources
from netc.importer.writer import Assign


def _tuple(imp, keys: list[str]) -> Expr:
    return cst.Tuple([cst.Element(imp.dim(k)) for k in keys])


def new_dim(imp, size: int, hint: str, avoid: set[str]) -> str:
    """The dim of `size`, unless it is one of `avoid` (then one of `hint`'s own, the same each time)."""
    key = imp.dims.static(size, hint)
    if imp.dims.find(key) not in {imp.dims.find(a) for a in avoid}:
        return key
    own = getattr(imp, "_own_dims", None)
    if own is None:
        own = imp._own_dims = {}
    if (hint, size) not in own:
        own[(hint, size)] = imp.dims.fresh(hint, size)
    return own[(hint, size)]


def split_dims(imp, layer: str, d: dict, scope: Scope, var: str, full: str) -> Val:
    src = imp._source(d, scope, full)
    axis = imp._axis(src, d.get("axis", "F"))
    sizes = d.get("dims")
    if axis is None or not imp.dims.is_static(axis) or not isinstance(sizes, list | tuple):
        raise Refused(full, "split_dims", "only a static axis (F or a dim tag) split into `dims` is supported")
    keys: list[str] = []
    known = 1  # the product of the sizes given, for a -1 (the rest)
    for s in sizes:
        known *= imp.dims.size(imp.dims.tag(s["__dim__"])) if isinstance(s, dict) else s if s != -1 else 1
    for i, s in enumerate(sizes):
        if isinstance(s, dict):
            keys.append(imp.dims.tag(s["__dim__"]))
        elif isinstance(s, int) and (s > 0 or (s == -1 and list(sizes).count(-1) == 1)):
            s = s if s > 0 else imp.dims.size(axis) // max(known, 1)
            keys.append(new_dim(imp, s, f"{identifier(layer)}_{i}", set(src.dims) | set(keys)))
        else:
            raise Refused(
                full, "split_dims", f"dims {sizes!r}: sizes (positive, one may be -1) or dim tags are supported"
            )
    product = 1
    for k in keys:
        product *= imp.dims.size(k)
    if product != imp.dims.size(axis):
        raise Refused(full, "split_dims", f"dims {sizes!r} do not multiply to the axis' {imp.dims.size(axis)}")
    imp.imports.add("split_dims")
    imp._emit(scope, var, call("split_dims", src.tensor(), axis=imp.dim(axis), dims=_tuple(imp, keys)), layer)
    i = src.dims.index(axis)
    return Val(name(var), (*src.dims[:i], *keys, *src.dims[i + 1 :]))


def merge_out(imp, layer: str, dims: list[str]) -> str:
    product = 1
    for k in dims:
        product *= imp.dims.size(k)
    return new_dim(imp, product, identifier(layer), set(dims))


def merge_dims(imp, layer: str, d: dict, scope: Scope, var: str, full: str) -> Val:
    src = imp._source(d, scope, full)
    merged = [x for x in src.dims if imp.dims.is_static(x)]
    dynamic = [x for x in src.dims if imp.dims.is_dynamic(x)]
    # `static`: every static dim; `except_time` (a window's frames and features): every dim but batch
    # and the time dim (all but batch where there is none); `except_batch`: all but batch
    axes = d.get("axes")
    if isinstance(axes, list | tuple):  # axis descriptions: every static dim (`static`), in an order
        from netc.importer.layouts import batch_major_order

        order = batch_major_order(imp, sources(d)[0], src, scope) if len(sources(d)) == 1 else None
        given = [_merge_axis(imp, src, a, order) for a in axes]
        ok = None not in given and sorted(map(imp.dims.find, given)) == sorted(map(imp.dims.find, merged))
        keep_order = d.get("keep_order", imp.cfg.behavior_version >= 6)  # RETURNN's default
        merged = [next(x for x in src.dims if imp.dims.find(x) == imp.dims.find(g)) for g in given] if ok else merged
        if ok and not keep_order:  # the old default: the input's order
            merged = [x for x in src.dims if x in merged]
    else:
        ok = {"except_batch": not dynamic, "except_time": len(dynamic) <= 1, "static": True}.get(axes)
    if not ok or src.dims[0] != BATCH or src.sparse is not None or not merged:
        forms = (
            "`static`, `except_batch`, `except_time` or a list of all the static dims of [batch, time, ...] "
            "where the rest are static dims"
        )
        raise Refused(full, "merge_dims", f"axes {d.get('axes')!r} ({forms} are supported)")
    if len(merged) == 1:  # one dim: itself
        imp._emit(scope, var, src.tensor(), layer)
        return Val(name(var), src.dims)
    out = merge_out(imp, layer, merged)
    if d.get("n_out") is not None and d["n_out"] != imp.dims.size(out):
        raise Refused(full, "merge_dims", f"n_out {d['n_out']!r}: the merged dims have {imp.dims.size(out)}")
    imp.imports.add("merge_dims")
    imp._emit(scope, var, call("merge_dims", src.tensor(), dims=_tuple(imp, merged), out_dim=imp.dim(out)), layer)
    return Val(name(var), (*(x for x in src.dims if x not in merged), out))


def _merge_axis(imp, src: Val, ax, order: tuple[str, ...] | None) -> str | None:
    """An axis of `merge_dims`: a description, or a number of RETURNN's layout where netc knows it."""
    if isinstance(ax, int) and not isinstance(ax, bool):
        return order[ax] if order is not None and -len(order) <= ax < len(order) and order[ax] != BATCH else None
    return imp._axis(src, ax)


def softmax_over_spatial(imp, layer: str, d: dict, scope: Scope, var: str, full: str) -> Val:
    """`softmax(x * energy_factor, axis=time)` (padded frames get no weight); frames outside
    [`start`, ...) and [`window_start`, `window_start` + `window_size`) get -1e30 first (exp gives 0,
    as of RETURNN's -inf); `log_space`: `log_softmax`."""
    src = imp._source(d, scope, full)
    axis = imp._axis(src, d.get("axis", "T"))
    if axis is None or axis not in src.dims or axis == BATCH:
        raise Refused(full, "softmax_over_spatial", f"axis {d.get('axis')!r} (a dim of the input is supported)")
    windowed = any(d.get(k) is not None for k in ("start", "window_start", "window_size"))
    if windowed and not imp.dims.is_dynamic(axis):
        raise Refused(full, "softmax_over_spatial", "start or a window over a static axis (RETURNN rejects it)")
    if d.get("use_time_mask") is False:
        raise Refused(full, "softmax_over_spatial", "use_time_mask False (the padded frames weighted) not supported")
    x = src.tensor()
    factor = d.get("energy_factor")
    if factor is not None:
        if not isinstance(factor, int | float) or isinstance(factor, bool):
            raise Refused(full, "softmax_over_spatial", f"energy_factor {factor!r} (a number is supported)")
        x = binop("*", x, num(float(factor)))
    positions = call("range_over", imp.dim(axis))
    bounds = []  # (position >= lower) and (position < upper)
    if d.get("start") is not None:
        bounds.append((">=", *_int_or_layer(imp, d["start"], scope, full, src)))
    if d.get("window_start") is not None:
        if d.get("window_size") is None:
            raise Refused(full, "softmax_over_spatial", "window_start without window_size (RETURNN needs it)")
        if not isinstance(d["window_start"], str):
            raise Refused(full, "softmax_over_spatial", "window_start: a layer (RETURNN takes no number)")
        ws, ws_dims = _int_or_layer(imp, d["window_start"], scope, full, src)
        size, size_dims = _int_or_layer(imp, d["window_size"], scope, full, src)
        bounds += [
            (">=", ws, ws_dims),
            ("<", binop("+", ws, size), ws_dims + [x for x in size_dims if x not in ws_dims]),
        ]
    for op, bound, static in bounds:
        imp.imports |= {"where", "range_over"}
        cmp = {">=": cst.GreaterThanEqual, "<": cst.LessThan}[op]()
        at = positions
        if isinstance(bound, cst.BinaryOperation | cst.Name) and _whole_float(imp, bound):
            # a float of labels (whole numbers): the positions as floats too (TF compares one dtype)
            imp.imports.add("cast")
            at = call("cast", at, cst.SimpleString('"float32"'))
        for dim in static:  # a bound per a static dim: the positions over it too (netc broadcasts by name)
            imp.imports.add("expand")
            at = call("expand", at, imp.dim(dim))
        x = call("where", cst.Comparison(at, [cst.ComparisonTarget(cmp, bound)]), x, num(-1e30))
    fn = "log_softmax" if d.get("log_space") else "softmax"
    if imp.dims.is_static(axis) and sum(imp.dims.is_static(k) for k in src.dims) > 1:
        # netc's softmax over a static dim needs it to be the only one: exp(x - max) / sum, as TF computes it
        if not isinstance(x, cst.Name):
            scaled = imp.fresh(f"{var}_energy")
            scope.stmts.append(Assign([scaled], x))
            x = name(scaled)
        imp.imports |= {"exp", "reduce_max", "reduce_sum", "log"}
        shifted = binop("-", x, call("reduce_max", x, axis=imp.dim(axis)))
        total = call("reduce_sum", call("exp", shifted), axis=imp.dim(axis))
        if fn == "softmax":
            value = binop("/", call("exp", shifted), total)
        else:
            value = binop("-", shifted, call("log", total))
        imp._emit(scope, var, value, layer)
        return Val(name(var), src.dims)
    imp.imports.add(fn)
    imp._emit(scope, var, call(fn, x, axis=imp.dim(axis)), layer)
    return Val(name(var), src.dims)


def _whole_float(imp, bound: Expr) -> bool:
    """Whether a bound reads a float of labels (`start + size` too)."""
    if isinstance(bound, cst.BinaryOperation):
        return _whole_float(imp, bound.left) or _whole_float(imp, bound.right)
    return isinstance(bound, cst.Name) and bound.value in imp.whole_floats


def _int_or_layer(imp, v, scope: Scope, full: str, energy: Val) -> tuple[Expr, list[str]]:
    """A number, or a layer of one int per sequence (per a static dim of `energy` too: compared
    by name, as RETURNN's `copy_compatible_to` broadcasts it), and its static dims."""
    if isinstance(v, int) and not isinstance(v, bool):
        return num(v), []
    if isinstance(v, str):
        val = imp.get(v, scope)
        # labels over a time dim (an argmax over it) are positions: ints too
        labels = val.sparse is not None and not imp.dims.is_dynamic(val.sparse)
        own = {imp.dims.find(x) for x in energy.dims}
        if labels or any(imp.dims.is_static(x) and imp.dims.find(x) not in own for x in val.dims):
            raise Refused(
                full,
                "softmax_over_spatial",
                f"`{v}`: one int per sequence (per a static dim of the input too) is supported",
            )
        return val.tensor(), [x for x in val.dims if imp.dims.is_static(x)]
    raise Refused(full, "softmax_over_spatial", f"{v!r} (an int or a layer is supported)")


def generic_attention(imp, layer: str, d: dict, scope: Scope, var: str, full: str) -> Val:
    """`dot(weights, base, reduce=T)`: the weights' dims without T, then the base's others; a weights'
    dim of size 1 that the base lacks (one head) summed away first, as RETURNN squeezes it."""
    if d.get("from") not in (None, []) or not isinstance(d.get("weights"), str) or not isinstance(d.get("base"), str):
        raise Refused(full, "generic_attention", "`weights` and `base` layers (and no `from`) are supported")
    w, base = imp.get(d["weights"], scope), imp.get(d["base"], scope)
    time = [x for x in base.dims if imp.dims.is_dynamic(x)]
    find = imp.dims.find
    if len(time) != 1 or find(time[0]) not in {find(x) for x in w.dims}:
        raise Refused(full, "generic_attention", "the weights and the base need one time dim in common")
    wexpr = w.tensor()
    if d.get("auto_squeeze", True):  # RETURNN's default: a weights' dim of size 1 the base lacks goes
        ones = [x for x in w.dims if imp.dims.is_static(x) and imp.dims.size(x) == 1]
        for x in [x for x in ones if find(x) not in {find(y) for y in base.dims}]:
            imp.imports.add("reduce_sum")
            wexpr = call("reduce_sum", wexpr, axis=imp.dim(x))  # (the sum of its one value)
            w = Val(wexpr, tuple(y for y in w.dims if y != x))
    imp.imports.add("dot")
    imp._emit(scope, var, call("dot", wexpr, base.tensor(), reduce=imp.dim(time[0])), layer)
    wd = [x for x in w.dims if find(x) != find(time[0])]
    dims = wd + [x for x in base.dims if find(x) not in {find(y) for y in w.dims}]
    return Val(name(var), tuple(dims))


def reduce_out(imp, layer: str, d: dict, scope: Scope, var: str, full: str) -> Val:
    """Maxout: `reduce_max(split_dims(x, axis=F, dims=(F / n, n)), axis=n)`."""
    fns = {"max": "reduce_max", "sum": "reduce_sum"}
    src = imp._source(d, scope, full)
    n, mode = d.get("num_pieces"), d.get("mode")
    feat = feature(src, imp.dims)
    size = imp.dims.size(feat)
    if mode not in fns or not isinstance(n, int) or n < 1 or size % n:
        raise Refused(full, "reduce_out", f"mode {mode!r} with num_pieces {n!r} (max/sum, dividing F, are supported)")
    half = new_dim(imp, size // n, identifier(layer), set(src.dims))
    pieces = new_dim(imp, n, f"{identifier(layer)}_pieces", set(src.dims) | {half})
    imp.imports |= {"split_dims", fns[mode]}
    split = call("split_dims", src.tensor(), axis=imp.dim(feat), dims=_tuple(imp, [half, pieces]))
    imp._emit(scope, var, call(fns[mode], split, axis=imp.dim(pieces)), layer)
    return Val(name(var), tuple(half if x == feat else x for x in src.dims))


def static_out(imp, layer: str, d: dict, scope: Scope) -> str | None:
    """The feature dim of an attention layer, for its state, without building it."""
    cls = d.get("class")
    if cls == "merge_dims" and len(sources(d)) == 1:
        src = scope.layers.get(sources(d)[0])
        if isinstance(src, dict) and src.get("class") == "generic_attention" and isinstance(src.get("base"), str):
            base = imp.get(src["base"], scope)
            return merge_out(imp, layer, [x for x in base.dims if imp.dims.is_static(x)])
    return None


def pool(imp, layer: str, d: dict, scope: Scope, var: str, full: str) -> Val:
    """Max-pooling over time, `padding: "same"`, windows of `pool_size` frames, stride the same:
    `max_pool(x, axis=time, size=k, out_axis=<layer>_time)`; size 1 is `x` itself."""
    src = imp._source(d, scope, full)
    two = isinstance(d.get("pool_size"), list | tuple) and len(d["pool_size"]) == 2
    if "in_spatial_dims" in d:  # RETURNN's default said explicitly: time (then the feature axis)
        given = d["in_spatial_dims"]
        want = [x for x in src.dims if imp.dims.is_dynamic(x)][:1]
        want += [x for x in src.dims if imp.dims.is_static(x)][:1] if two else []
        axes = [imp._axis(src, a) for a in given] if isinstance(given, list | tuple) else None
        if axes is None or [imp.dims.find(a) if a else None for a in axes] != [imp.dims.find(w) for w in want]:
            what = "the time dim, then the feature axis" if two else "the time dim"
            raise Refused(full, "pool", f"in_spatial_dims {given!r} ({what} is supported)")
    if two:
        return _pool_feature(imp, layer, d, scope, var, full, src)
    size, strides = d.get("pool_size"), d.get("strides", d.get("pool_size"))
    size = size[0] if isinstance(size, list | tuple) and len(size) == 1 else size
    strides = strides[0] if isinstance(strides, list | tuple) and len(strides) == 1 else strides
    dyn = [x for x in src.dims if imp.dims.is_dynamic(x)]
    ok = d.get("mode") == "max" and d.get("padding", "valid") == "same" and isinstance(size, int) and size >= 1
    if not ok or strides != size or len(dyn) != 1 or d.get("dilation_rate", 1) not in (1, (1,), [1]):
        raise Refused(full, "pool", "only `mode: max`, `padding: same`, one `pool_size` k and strides k over time")
    if size == 1:
        imp._emit(scope, var, src.tensor(), layer)
        return Val(name(var), src.dims)
    out = imp.dims.fresh(f"{identifier(layer)}_time", None)
    imp.imports.add("max_pool")
    value = call("max_pool", src.tensor(), axis=imp.dim(dyn[0]), size=num(size), out_axis=imp.dim(out))
    imp._emit(scope, var, value, layer)
    _warn_pool_padding(imp, layer, d, scope, full, size)
    if scope.outer is None:  # RETURNN's name of the time tag it makes (what `stag:` reads)
        imp.layer_tags[f"{layer}:conv:s0"] = out
    return Val(name(var), tuple(out if x == dyn[0] else x for x in src.dims))


def _warn_pool_padding(imp, layer: str, d: dict, scope: Scope, full: str, size: int) -> None:
    """RETURNN's numbers at a shorter sequence's last window depend on the batch where netc's do not:
    a warning at the layer (as for a "same" conv), unless `use_time_mask: True` with k <= 2."""
    whys = []
    if not d.get("use_time_mask"):
        whys.append(
            "RETURNN's pool without `use_time_mask: True` lets the padded frame after a shorter sequence "
            f"whose length is not a multiple of {size} into its last window (after an LSTM a 0 there: "
            "max(last frame, 0)); netc's max_pool takes the sequence's own frames only"
        )
    if size >= 3:
        whys.append(
            "TensorFlow's 'same' padding starts RETURNN's windows one frame early where the batch's longest "
            f"length is one more than a multiple of {size}"
        )
    if whys:
        why = "; ".join(whys) + f", so the numbers differ there (they agree on lengths that are multiples of {size})"
        imp.warnings.append(Refused(full, "pool", why))
        scope.stmts[-1].note = f"warning: layer {layer!r}: {why}"


def _pool_feature(imp, layer: str, d: dict, scope: Scope, var: str, full: str, src: Val) -> Val:
    """A CNN front end's max or average pool of `pool_size: (1, k)` over the feature axis of [batch,
    time, feature, channel] (strides the same; of a size k divides, "same" and "valid" padding pad
    nothing): `reduce_max(split_dims(x, axis=f, dims=(f / k, k)), axis=k)` (`reduce_mean`)."""
    dyn = [x for x in src.dims if imp.dims.is_dynamic(x)]
    static = [x for x in src.dims if imp.dims.is_static(x)]
    size = list(d["pool_size"])
    strides = list(d.get("strides", size)) if isinstance(d.get("strides", size), list | tuple) else None
    k = size[1]
    mode = {"max": "reduce_max", "avg": "reduce_mean"}.get(d.get("mode"))
    ok = mode and str(d.get("padding", "valid")).lower() in ("same", "valid") and size[0] == 1 and strides == size
    if not ok or not isinstance(k, int) or k < 1 or len(dyn) != 1 or len(static) != 2 or src.sparse is not None:
        raise Refused(
            full,
            "pool",
            "of [batch, time, feature, channel]: `mode` max or avg, `pool_size` (1, k), strides the same",
        )
    feat = static[0]  # the channels are RETURNN's feature axis, the last
    if d.get("dilation_rate", 1) not in (1, (1, 1), [1, 1]) or imp.dims.size(feat) % k:
        raise Refused(full, "pool", f"pool_size {d['pool_size']!r}: k dividing the feature axis' {imp.dims.size(feat)}")
    if k == 1:
        imp._emit(scope, var, src.tensor(), layer)
        if scope.outer is None:
            imp.layer_tags |= {f"{layer}:conv:s0": dyn[0], f"{layer}:conv:s1": feat}
        return Val(name(var), src.dims)
    half = new_dim(imp, imp.dims.size(feat) // k, identifier(layer), set(src.dims))
    pieces = new_dim(imp, k, f"{identifier(layer)}_pieces", set(src.dims) | {half})
    imp.imports |= {"split_dims", mode}
    split = call("split_dims", src.tensor(), axis=imp.dim(feat), dims=_tuple(imp, [half, pieces]))
    imp._emit(scope, var, call(mode, split, axis=imp.dim(pieces)), layer)
    if scope.outer is None:  # RETURNN's names of its spatial tags (what `stag:` reads)
        imp.layer_tags |= {f"{layer}:conv:s0": dyn[0], f"{layer}:conv:s1": half}
    return Val(name(var), tuple(half if x == feat else x for x in src.dims))
